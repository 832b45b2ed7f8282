"""The offline backend: deterministic, embedding- and rule-based answers for every role.

It needs no key and no network, so it is the default everywhere. It reads the
request's structured payload (not the rendered prompt), computes its answer
with explicit rules and returns JSON text, which then goes through the same
parsing and schema checks as a real model's reply. Confidences are the scores
the rules computed, never constants, so the 0.9 gate means something.
"""
from __future__ import annotations

import functools
import json
import math
from collections import Counter

from engine.core.text import (
    content_tokens,
    has_negation,
    human_date,
    jaccard,
    keywords_of,
    numbers,
    sentence_spans,
    strip_speaker,
    words,
)
from engine.llm import offline_answer, offline_events
from engine.llm.base import BackendError, BackendReply, LLMBackend, LLMRequest, estimate_tokens
from engine.llm.embedder import Embedder

# Words that make a sentence lean on the one before it (also as "it's", "they're"): splitting there would
# cut a narrative.
_CONTINUATIONS = frozenset("it that this these those he she they him her them his their its so because but "
                           "and which then there after afterwards".split())
# Discourse markers with which a speaker announces a change of topic (cue phrases, Hirschberg & Litman
# 1993), possibly after "oh" or "and" ("Oh, and BTW, ..."): the one signal that a low cosine is a new
# topic rather than a new detail of the same situation.
_SHIFT_CUES = tuple(tuple(cue.split()) for cue in (
    "also", "by the way", "btw", "fyi", "anyway", "anyways", "speaking of", "on another note",
    "on a different note", "on a side note", "side note", "in other news", "besides that", "apart from that",
    "aside from that", "other than that", "changing the subject", "unrelated"))
_CUE_LEAD_INS = frozenset({"oh", "ah", "and"})
_MIN_CONTENT = 4          # tokens a statement or segment needs before Merge/Update/Split rules apply
# MiniLM cosines of unrelated sentence pairs cluster below ~0.15 and of same-topic pairs above ~0.3;
# the split's separation is a logistic around this midpoint rather than a linear 1 - cosine.
_UNRELATED_MID, _UNRELATED_SCALE = 0.2, 0.035
# Each side must be a statement of its own, not a remark on the other ("Rude but accurate.", "Thanks,
# Caroline."): a logistic in the content words of the shorter side, one half at 4.5 (about 0.27 at 4
# words, 0.73 at 5, 0.95 at 6, 0.99 at 7).
_SUBSTANCE_MID, _SUBSTANCE_SCALE = 4.5, 0.5
# How the second side opens. MiniLM gives a new detail of the same situation ("There's a train, but it's
# slow. We're viewing two places next week.") as low a cosine as a new topic, so a cut the speaker does not
# mark stays below the 0.9 gate, for a reviewer to judge; one that points back (a pronoun, "so") counts half.
_UNMARKED, _LEANS = 0.85, 0.5
# Below this score a rule does not consider the pair a candidate at all (an LLM diagnoser would not
# propose it either); between it and the gate, proposals are shown to a reviewer as gated out.
_PROPOSE_FLOOR = 0.5
_MAX_CUTS = 32            # candidate Split points per text
_SIDE_CHARS = 2000        # characters of each side of a cut that are compared (MiniLM reads ~256 tokens)
_PREFETCH_TEXTS = 256     # cut sides per embedder call when a whole buffer is prefetched


def summary_of(text: str, speaker: str = "", time: str = "", max_words: int = 60) -> str:
    """Extractive summary: the statement itself (trimmed), attributed and dated."""
    spk, body = strip_speaker(text)
    speaker = speaker or spk
    tokens = body.split()
    clipped = " ".join(tokens[:max_words]) + (" …" if len(tokens) > max_words else "")
    date = human_date(time)
    head = f"{speaker} ({date})" if speaker and date else speaker or date
    return f"{head}: {clipped}" if head else clipped


@functools.lru_cache(maxsize=8192)
def _terms(text: str) -> frozenset[str]:
    """The content tokens of a text as a set; cached, because diagnosis compares the same turns again and again
    (a turn is a neighbour of many targets, and its cuts are scored when prefetched and when diagnosed)."""
    return frozenset(content_tokens(text))


@functools.lru_cache(maxsize=8192)
def _statement_terms(raw: str) -> frozenset[str]:
    """A statement's content tokens without numbers (what Merge/Update compare), speaker stripped; cached."""
    return frozenset(t for t in _terms(strip_speaker(raw)[1]) if not t.isdigit())


class OfflineBackend(LLMBackend):
    name = "offline"
    model = "offline-rules-v1"

    def __init__(self, embedder: Embedder):
        self.embedder = embedder

    def generate(self, request: LLMRequest) -> BackendReply:
        handler = getattr(self, f"_{request.role}", None)
        if handler is None:
            raise BackendError("UNSUPPORTED_ROLE", f"offline backend has no rule for role {request.role!r}")
        data = handler(request.payload)
        text = json.dumps(data, ensure_ascii=False)
        prompt_text = " ".join(m["content"] for m in request.messages)
        return BackendReply(text=text, prompt_tokens=estimate_tokens(prompt_text),
                            completion_tokens=estimate_tokens(text), model=self.model)

    # -- roles -----------------------------------------------------------------
    def _descriptor(self, p: dict) -> dict:
        return {"summary": summary_of(p["text"], p.get("speaker", ""), p.get("time", "")),
                "keywords": keywords_of(p["text"])}

    def _diagnosis(self, p: dict) -> dict:
        target = p["target"]
        tasks: dict[str, list] = {"split_tasks": [], "merge_tasks": [], "update_tasks": []}
        split = self.best_split(target["raw"], floor=_PROPOSE_FLOOR)
        if split is not None and split[0] >= _PROPOSE_FLOOR:
            conf, _, reason = split
            tasks["split_tasks"].append({"node_id": target["id"], "reason": reason, "confidence": round(conf, 4)})
        _, t_body = strip_speaker(target["raw"])
        neighbours = [n for n in p.get("context", []) if n["id"] != target["id"]]
        if not neighbours:
            return tasks
        vecs = self.embedder.embed([t_body] + [strip_speaker(n["raw"])[1] for n in neighbours])
        for n, vec in zip(neighbours, vecs[1:]):
            verdict = self.compare(target, n, float(vecs[0] @ vec))
            if verdict is None or verdict[1] < _PROPOSE_FLOOR:
                continue
            op, conf, reason = verdict
            if op == "merge":
                tasks["merge_tasks"].append({"node_ids": sorted([target["id"], n["id"]], key=int), "reason": reason,
                                             "confidence": round(conf, 4)})
            else:
                newer, older = (target, n) if _is_newer(target, n) else (n, target)
                tasks["update_tasks"].append({"old_node_id": older["id"], "new_node_id": newer["id"],
                                              "reason": reason, "confidence": round(conf, 4)})
        return tasks

    def _split_plan(self, p: dict) -> dict:
        raw = p["original_text"]
        split = self.best_split(raw)
        if split is None:
            return {"do_split": False, "split_rationale": "one coherent topic",
                    "segments": [self._segment(raw, "whole")]}
        conf, cut, reason = split
        parts = [raw[:cut].rstrip(), raw[cut:].lstrip()]
        return {"do_split": True, "split_rationale": reason,
                "segments": [self._segment(part, f"topic {i + 1}") for i, part in enumerate(parts)]}

    def _merge_plan(self, p: dict) -> dict:
        sources = p["sources"]
        bodies = [strip_speaker(s["raw"])[1] for s in sources]
        vecs = self.embedder.embed(bodies)
        centroid = vecs.mean(axis=0)
        medoid = max(range(len(sources)), key=lambda i: (float(vecs[i] @ centroid), sources[i]["time"], i))
        counts = Counter(k.lower() for s in sources for k in s.get("keywords", []))
        first_seen = {k: i for i, k in reversed(list(enumerate(k.lower() for s in sources for k in s["keywords"])))}
        keywords = sorted(counts, key=lambda k: (-counts[k], first_seen[k]))[:10]
        points = list(dict.fromkeys(b.strip() for b in bodies))[:3]
        return {"summary": sources[medoid]["summary"], "keywords": keywords, "salient_points": points}

    def _update_plan(self, p: dict) -> dict:
        cur, old = p["current"], p["superseded"]
        gone = sorted(numbers(old["raw"]) - numbers(cur["raw"]))
        deprecations = [f"earlier value {g}" for g in gone]
        if has_negation(cur["raw"]) != has_negation(old["raw"]):
            deprecations.append("earlier statement with the opposite polarity")
        note = (f"statement of {human_date(cur['time'])} replaces the one of {human_date(old['time'])}; "
                "the older evidence stays archived behind a version link")
        return {"updated_summary": cur["summary"], "updated_keywords": list(cur["keywords"]),
                "deprecations": deprecations, "alignment_note": note}

    def _router(self, p: dict) -> dict:
        return offline_events.rewrite(p["utterance"], p.get("speaker", ""), p.get("time", ""), p.get("window", []))

    def _relation_synthesis(self, p: dict) -> dict:
        return offline_events.synthesize(p)

    def _event_merge(self, p: dict) -> dict:
        return offline_events.judge_merge(p)

    def _answer(self, p: dict) -> dict:
        return offline_answer.answer(p["question"], p.get("passages", []), self.embedder)

    def _boundary_detection(self, p: dict) -> dict:
        from engine.llm import offline_topics

        return offline_topics.detect_boundaries(p, self.embedder)

    def _topic_summary(self, p: dict) -> dict:
        from engine.llm import offline_topics

        return offline_topics.summarize(p, self.embedder)

    def _topic_relation(self, p: dict) -> dict:
        from engine.llm import offline_topics

        return offline_topics.relate(p)

    # -- rules -----------------------------------------------------------------
    def compare(self, a: dict, b: dict, cosine: float) -> tuple[str, float, str] | None:
        """Merge (same static fact) or Update (same subject, changed value) between two statements."""
        if (a.get("speaker") or "") != (b.get("speaker") or ""):
            return None
        ta, tb = _statement_terms(a["raw"]), _statement_terms(b["raw"])
        if len(ta) < _MIN_CONTENT or len(tb) < _MIN_CONTENT:
            return None
        overlap = jaccard(ta, tb)
        score = (max(cosine, 0.0) + overlap) / 2
        na, nb = numbers(a["raw"]), numbers(b["raw"])
        changed = []
        if na != nb and (na or nb):
            changed.append(f"numbers {sorted(nb if _is_newer(a, b) else na)} -> {sorted(na if _is_newer(a, b) else nb)}")
        if has_negation(a["raw"]) != has_negation(b["raw"]):
            changed.append("negation flips")
        figures = f"same speaker; cosine {cosine:.2f}, content overlap {overlap:.2f}"
        if changed:
            return "update", score, f"{figures}; {', '.join(changed)}; the newer statement supersedes"
        return "merge", score, f"{figures}; no changed numbers or negation: redundant statement"

    def split_cuts(self, raw: str) -> list[tuple[int, int, str, str]]:
        """Candidate two-way cuts between sentences: (sentences on the left, char offset, left text, right text).

        At most `_MAX_CUTS` cut points, evenly spread over the sentence boundaries, and each side clipped to the
        `_SIDE_CHARS` nearest the cut (the embedder reads no more), so a long turn costs time and memory linear
        in its length rather than one prefix and one suffix per sentence.
        """
        spans = sentence_spans(raw)
        n = len(spans)
        picks = (range(1, n) if n - 1 <= _MAX_CUTS
                 else sorted({1 + round(k * (n - 2) / (_MAX_CUTS - 1)) for k in range(_MAX_CUTS)}))
        cuts = []
        for i in picks:
            start = max(spans[0][0], spans[i - 1][1] - _SIDE_CHARS)
            left = raw[start:spans[i - 1][1]]
            right = raw[spans[i][0]:min(spans[-1][1], spans[i][0] + _SIDE_CHARS)]
            cuts.append((i, spans[i][0], strip_speaker(left)[1] if start == spans[0][0] else left, right))
        return cuts

    def prefetch(self, raws: list[str]) -> None:
        """Embed the candidate cuts diagnosis will score, of many texts, in large batches (the per-target calls
        then hit the cache): those that could reach the proposal floor.

        The distinct cut sides (at most 64 a text, each at most `_SIDE_CHARS` characters) are sorted by length and
        go to the embedder `_PREFETCH_TEXTS` at a time, so a batch pads little and one batch of vectors is in
        flight at once.
        """
        texts = sorted({t for raw in raws for _, _, left, right, _, _ in self._scored_cuts(raw, floor=_PROPOSE_FLOOR)
                        for t in (left, right)},
                       key=lambda t: (len(t), t))          # like lengths together: little padding in a model batch
        for start in range(0, len(texts), _PREFETCH_TEXTS):
            self.embedder.embed(texts[start:start + _PREFETCH_TEXTS])

    def _scored_cuts(self, raw: str, all_cuts: list[tuple[int, int, str, str]] | None = None, floor: float = 0.0
                     ) -> list[tuple[int, int, str, str, float, int]]:
        """The cuts whose sides both have substance, with their shared-word share and the shorter side's
        content words: the only cuts Split embeds. With a `floor`, also only the cuts that could reach it:
        a confidence is at most (1 - shared) x substance x opening (the cosine factor is below 1), so a cut
        whose bound is under the floor needs no embedding to be ruled out."""
        cuts = []
        for n_left, cut, left, right in self.split_cuts(raw) if all_cuts is None else all_cuts:
            tl, tr = _terms(left), _terms(right)
            if len(tl) < _MIN_CONTENT or len(tr) < _MIN_CONTENT:
                continue
            shared, content = jaccard(tl, tr), min(len(tl), len(tr))
            if floor and (1.0 - shared) * _substance(content) * _MARKER[_opening(right)[0]] < floor:
                continue
            cuts.append((n_left, cut, left, right, shared, content))
        return cuts

    def best_split(self, raw: str, floor: float = 0.0) -> tuple[float, int, str] | None:
        """The most confident two-way cut between sentences, as (confidence, char offset, reason).

        The confidence is that of two topics, a product of three parts: how separate the sides are (no
        shared words, a low cosine), whether each is substantive enough to be a memory of its own, and
        whether the speaker marks the change of topic; two sentences about one situation miss the last
        two however low their cosine.
        """
        all_cuts = self.split_cuts(raw)
        cuts = self._scored_cuts(raw, all_cuts, floor)
        if not cuts:
            return None
        n_sentences = all_cuts[-1][0] + 1          # the last sentence boundary is always a candidate
        vecs = self.embedder.embed([t for _, _, left, right, _, _ in cuts for t in (left, right)])
        best: tuple[float, int, str] | None = None
        for i, (n_left, cut, _, right, shared, content) in enumerate(cuts):
            cosine = float(vecs[2 * i] @ vecs[2 * i + 1])
            separation = (1.0 - shared) / (1.0 + math.exp((cosine - _UNRELATED_MID) / _UNRELATED_SCALE))
            opening, word = _opening(right)
            conf = separation * _substance(content) * _MARKER[opening]
            reason = (f"sentences 1-{n_left} and {n_left + 1}-{n_sentences} share {shared:.2f} of their words, "
                      f"cosine {cosine:.2f}; the shorter side has {content} content words; " + {
                          "shift": f"the second part opens with '{word}', a change of topic",
                          "leans": f"the second part leans on the first ('{word}')",
                          "plain": "no marker of a change of topic"}[opening])
            if best is None or conf > best[0]:
                best = (conf, cut, reason)
        return best

    def _segment(self, text: str, label: str) -> dict:
        return {"segment_text": text, "segment_summary": summary_of(text),
                "segment_keywords": keywords_of(text) or words(text)[:3], "topic_label": label}


_MARKER = {"shift": 1.0, "leans": _LEANS, "plain": _UNMARKED}      # how a cut's second side opens -> factor


def _substance(content: int) -> float:
    """Whether the shorter side is a memory of its own: logistic in its content words."""
    return 1.0 / (1.0 + math.exp((_SUBSTANCE_MID - content) / _SUBSTANCE_SCALE))


def _points_back(word: str) -> bool:
    return word.split("'")[0] in _CONTINUATIONS


def _opening(text: str) -> tuple[str, str]:
    """How a cut's second side opens: ("shift", cue) when a cue phrase announces a new topic, ("leans",
    word) when it points back to the first side (also right after a cue: "Also, it's lopsided"), else
    ("plain", "")."""
    ws = words(text)[:8]
    start = 0
    while start < len(ws) and ws[start] in _CUE_LEAD_INS:
        start += 1
    for cue in _SHIFT_CUES:
        if tuple(ws[start:start + len(cue)]) == cue:
            after = ws[start + len(cue)] if len(ws) > start + len(cue) else ""
            return ("leans", after) if _points_back(after) else ("shift", " ".join(cue))
    if ws and _points_back(ws[0]):
        return "leans", ws[0]
    return "plain", ""


def _is_newer(a: dict, b: dict) -> bool:
    return (a.get("time") or "", int(a["id"])) > (b.get("time") or "", int(b["id"]))


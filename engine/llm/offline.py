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
import re
from collections import Counter

from engine.core.text import (
    content_tokens,
    has_negation,
    human_date,
    jaccard,
    keywords_of,
    number_change,
    numbers,
    sentence_spans,
    strip_speaker,
    words,
)
from engine.llm import offline_answer, offline_events, offline_recmem
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
# Who a side is about. In conversation the commonest change of topic is unannounced: a speaker answers the
# partner ("Glad you have support, Caroline!") and then opens news of their own ("Here's a pic of my family
# camping at the beach"): the side before the cut is about the addressee (second person), the side after
# about the speaker (first person, or showing something: "here's", "check out", a shared image).
_SECOND_PERSON = frozenset("you your you're you've you'll you'd yours yourself ya y'all".split())
_FIRST_PERSON = frozenset("i i'm i've i'll i'd my me mine myself we we're we've we'll our ours us".split())
_SHOWING = tuple(tuple(p.split()) for p in ("here's", "here is", "check out", "take a look", "look at this"))
_OPENING_WORDS = 12       # words of the second side read for who it is about
_MIN_CONTENT = 4          # tokens a statement or segment needs before Merge/Update/Split rules apply
# MiniLM cosines of unrelated sentence pairs cluster below ~0.15 and of same-topic pairs above ~0.3;
# the split's separation is a logistic around this midpoint rather than a linear 1 - cosine. When the
# speaker marks the change (a cue phrase, or turning from the partner to their own news), the marker is the
# evidence of a new topic and the cosine only has to rule out the same subject, so the midpoint moves up to
# where same-topic pairs begin: two sides of one chat share its register ("support", "family") and sit at
# 0.15-0.3 without being one topic.
_UNRELATED_MID, _MARKED_MID, _UNRELATED_SCALE = 0.2, 0.3, 0.035
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
# Update and Merge compare statements sentence by sentence (sentences with at least this many content words,
# at most this many per statement). A pair of sentences about one subject sits above ~0.6 in MiniLM cosine
# (a plan and its outcome, a figure restated with a new value); the Update's confidence is a logistic in that
# cosine. A restatement of the same thing sits above ~0.8 (paraphrases, the same news told again); the
# Merge's confidence is a logistic in the better of the statements' cosine and their sentences' mean cosine.
_SENTENCE_CONTENT, _MAX_SENTENCES = 4, 12
_SAME_SUBJECT_MID, _SAME_SUBJECT_SCALE = 0.55, 0.04
_RETOLD_MID = 0.65        # a later statement on one subject with new details: only the subject's cosine to go by
_RESTATED_MID, _RESTATED_SCALE = 0.72, 0.035
_SAME_PROPOSITION = 0.4   # share of other content words two sentences need to be one proposition with a new value
# A plan ("we're thinking about going camping next month") and a report of what happened ("we went camping
# last week"): the cues of each, as a reader of English tense and time phrases would take them.
_PLAN = re.compile(r"\b(going to|gonna|plan(?:ning)? (?:to|on)|thinking (?:about|of)|want to|wanna|hope to|"
                   r"hoping to|will|\w+'ll|next (?:week|month|year|weekend|time|summer)|soon|looking forward|"
                   r"this (?:month|weekend|summer|fall|winter|spring)|upcoming|about to|considering)\b", re.I)
_DONE = re.compile(r"\b(yesterday|last (?:week|month|year|weekend|night|time|summer|fall|winter|spring|"
                   r"monday|tuesday|wednesday|thursday|friday|saturday|sunday|tues|fri|sat)|\w+ ago|recently|"
                   r"finally|went|did|finished|joined|started|took|made|had|got|signed up|won|attended|visited|"
                   r"ran|moved|adopted|bought|passed|completed|opened|launched|tried)\b", re.I)
_IDIOMS = re.compile(r"can'?t wait|no worries|no problem|no doubt|don'?t forget|never give up|not bad|"
                     r"can'?t believe|no way")
_VALUE_WORDS = frozenset(content_tokens(" ".join(
    "not no never don't doesn't didn't isn't aren't wasn't weren't won't can't cannot anymore longer "
    "yesterday last next week month year weekend ago recently finally soon".split())))
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
        # The refreshed descriptor keeps the superseded statement's keywords beside the current ones, so a
        # question about the earlier state still anchors on the current unit and walks its version link back.
        keywords = list(dict.fromkeys([*cur["keywords"], *old["keywords"]]))
        return {"updated_summary": cur["summary"], "updated_keywords": keywords,
                "deprecations": deprecations, "alignment_note": note}

    def _router(self, p: dict) -> dict:
        return offline_events.rewrite(p["utterance"], p.get("speaker", ""), p.get("time", ""), p.get("window", []))

    def _relation_synthesis(self, p: dict) -> dict:
        return offline_events.synthesize(p)

    def _event_merge(self, p: dict) -> dict:
        return offline_events.judge_merge(p)

    def _episode_extraction(self, p: dict) -> dict:
        return offline_recmem.extract_episodes(p, self.embedder)

    def _episode_merge(self, p: dict) -> dict:
        return offline_recmem.merge_episode(p, self.embedder)

    def _fact_refinement(self, p: dict) -> dict:
        return offline_recmem.refine_facts(p, self.embedder)

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
        """Update (the newer statement gives the same subject a changed value) or Merge (the two say the same
        thing) between two statements of one speaker, or None.

        Statements are compared sentence by sentence (statements only: a question states no value). The
        subject is what the best-matching pair of sentences is about; its value changed when that pair is one
        proposition with a number replaced or its polarity flipped (the sentences share most of their other
        words), or when the older one is the speaker's plan and the newer one reports it done ("we're thinking
        about going camping next month" -> "I just took my fam camping last week"). An Update's confidence is
        how surely the pair is about one subject: a logistic in its cosine. Two statements are redundant when
        every sentence of the shorter is restated in the other: a Merge's confidence is a logistic in the
        better of the statements' cosine and the weakest of those sentences' best cosines."""
        if (a.get("speaker") or "") != (b.get("speaker") or ""):
            return None
        ta, tb = _statement_terms(a["raw"]), _statement_terms(b["raw"])
        if len(ta) < _MIN_CONTENT or len(tb) < _MIN_CONTENT:
            return None
        new, old = (a, b) if _is_newer(a, b) else (b, a)
        match = self.align(strip_speaker(old["raw"])[1], strip_speaker(new["raw"])[1])
        if match is None:
            return None
        subject, was, now, restated = match
        changed = _value_change(was, now)
        if changed:
            conf = _logistic(subject, _SAME_SUBJECT_MID, _SAME_SUBJECT_SCALE)
            return "update", conf, (f"same speaker; sentences '{_clip(was)}' and '{_clip(now)}' match at cosine "
                                    f"{subject:.2f}; {changed}; the newer statement supersedes")
        redundancy = max(cosine, restated)
        if (new.get("time") or "") > (old.get("time") or "") and redundancy < _RESTATED_MID:
            conf = _logistic(subject, _RETOLD_MID, _SAME_SUBJECT_SCALE)
            return "update", conf, (f"same speaker, a later conversation; sentences '{_clip(was)}' and "
                                    f"'{_clip(now)}' match at cosine {subject:.2f}, the rest is new (restated at "
                                    f"{restated:.2f}): the newer statement is the subject's current state")
        conf = _logistic(redundancy, _RESTATED_MID, _RESTATED_SCALE)
        return "merge", conf, (f"same speaker; cosine {cosine:.2f}; every sentence of the shorter statement is "
                               f"restated in the other at cosine {restated:.2f} or more; no changed number, "
                               "polarity or plan: redundant statement")

    def align(self, old: str, new: str) -> tuple[float, str, str, float] | None:
        """The best-matching statement sentences of two statements (cosine, old sentence, new sentence) and how
        well the shorter statement is restated in the other (the weakest of its sentences' best cosines)."""
        so, sn = _content_sentences(old), _content_sentences(new)
        if not so or not sn:
            return None
        vecs = self.embedder.embed(so + sn)
        sims = vecs[:len(so)] @ vecs[len(so):].T
        i, j = divmod(int(sims.argmax()), len(sn))
        restated = float(sims.max(axis=1).min() if len(so) <= len(sn) else sims.max(axis=0).min())
        return float(sims[i, j]), so[i], sn[j], restated

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
            if floor and (1.0 - shared) * _substance(content) * _MARKER[_opening(left, right)[0]] < floor:
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
        for i, (n_left, cut, left, right, shared, content) in enumerate(cuts):
            cosine = float(vecs[2 * i] @ vecs[2 * i + 1])
            opening, word = _opening(left, right)
            mid = _MARKED_MID if _MARKER[opening] == 1.0 else _UNRELATED_MID
            separation = (1.0 - shared) / (1.0 + math.exp((cosine - mid) / _UNRELATED_SCALE))
            conf = separation * _substance(content) * _MARKER[opening]
            reason = (f"sentences 1-{n_left} and {n_left + 1}-{n_sentences} share {shared:.2f} of their words, "
                      f"cosine {cosine:.2f}; the shorter side has {content} content words; " + {
                          "shift": f"the second part opens with '{word}', a change of topic",
                          "turn": f"the first part answers the partner, the second opens the speaker's own news "
                                  f"('{word}')",
                          "leans": f"the second part leans on the first ('{word}')",
                          "plain": "no marker of a change of topic"}[opening])
            if best is None or conf > best[0]:
                best = (conf, cut, reason)
        return best

    def _segment(self, text: str, label: str) -> dict:
        return {"segment_text": text, "segment_summary": summary_of(text),
                "segment_keywords": keywords_of(text) or words(text)[:3], "topic_label": label}


_MARKER = {"shift": 1.0, "turn": 1.0, "leans": _LEANS, "plain": _UNMARKED}   # how a cut's second side opens


def _substance(content: int) -> float:
    """Whether the shorter side is a memory of its own: logistic in its content words."""
    return 1.0 / (1.0 + math.exp((_SUBSTANCE_MID - content) / _SUBSTANCE_SCALE))


def _points_back(word: str) -> bool:
    return word.split("'")[0] in _CONTINUATIONS


def _opening(left: str, text: str) -> tuple[str, str]:
    """How a cut's second side opens: ("shift", cue) when a cue phrase announces a new topic, ("leans",
    word) when it points back to the first side (also right after a cue: "Also, it's lopsided"), ("turn",
    words) when the first side is about the partner and the second opens the speaker's own news, else
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
    turn = _turns_to_own_news(left, text)
    if turn:
        return "turn", turn
    return "plain", ""


def _turns_to_own_news(left: str, right: str) -> str:
    """The words that show the speaker turning from the partner to their own news, or "" (see _SECOND_PERSON):
    the first side speaks of "you" more than of "I", the second's opening of "I" (or shows something) and
    not of "you"."""
    lw, rw = words(left), words(right)[:_OPENING_WORDS]
    if sum(w in _SECOND_PERSON for w in lw) <= sum(w in _FIRST_PERSON for w in lw):
        return ""
    if any(w in _SECOND_PERSON for w in rw):
        return ""
    shows = next((" ".join(p) for p in _SHOWING if tuple(rw[:len(p)]) == p), "")
    if shows or "[shares an image" in right[:200]:
        return shows or "a shared image"
    mine = [w for w in rw if w in _FIRST_PERSON]
    return mine[0] if mine else ""


def _logistic(x: float, mid: float, scale: float) -> float:
    return 1.0 / (1.0 + math.exp((mid - x) / scale))


def _clip(text: str, n: int = 60) -> str:
    return text if len(text) <= n else text[:n - 1] + "…"


@functools.lru_cache(maxsize=8192)
def _content_sentences_cached(body: str) -> tuple[str, ...]:
    spans = sentence_spans(body)
    out = [body[a:b] for a, b in spans
           if len(_terms(body[a:b])) >= _SENTENCE_CONTENT and not body[a:b].rstrip("!. ").endswith("?")]
    return tuple(t[:_SIDE_CHARS] for t in out[:_MAX_SENTENCES])


def _content_sentences(body: str) -> list[str]:
    """The sentences of a statement that state something (at least `_SENTENCE_CONTENT` content words, not a
    question), at most `_MAX_SENTENCES`, each clipped as a cut side is."""
    return list(_content_sentences_cached(body))


def _plan(sentence: str) -> bool:
    """A sentence in which the speaker states an intention or a plan of their own, not yet done."""
    ws = words(sentence)
    return (any(w in _FIRST_PERSON for w in ws) and not any(w in _SECOND_PERSON for w in ws)
            and bool(_PLAN.search(sentence)) and not _DONE.search(sentence))


def _done(sentence: str) -> bool:
    """A sentence in which the speaker reports something of their own that happened."""
    ws = words(sentence)
    return any(w in _FIRST_PERSON for w in ws) and bool(_DONE.search(sentence)) and not _PLAN.search(sentence)


def _value_change(was: str, now: str) -> str:
    """How the newer of two matching sentences changes the older one's value, or "": one proposition (the
    sentences share at least `_SAME_PROPOSITION` of their other content words) with a number replaced or its
    polarity flipped, or the speaker's plan, then its report sharing the plan's object."""
    tw, tn = _proposition_terms(was), _proposition_terms(now)
    same = jaccard(tw, tn) >= _SAME_PROPOSITION
    nw, nn = numbers(was), numbers(now)
    if same and nw and nn and nw != nn:
        return number_change(nw, nn)
    if same and _negated(was) != _negated(now):
        return "polarity flips"
    if _plan(was) and _done(now) and tw & tn:
        return f"a plan, then its outcome ({', '.join(sorted(tw & tn)[:3])})"
    return ""


def _proposition_terms(sentence: str) -> frozenset[str]:
    """What a sentence is about, without its value: content words, no numbers, negations or time cues."""
    return frozenset(t for t in _terms(_IDIOMS.sub(" ", sentence.lower()))
                     if not t.isdigit() and t not in _VALUE_WORDS)


def _negated(sentence: str) -> bool:
    """Negation of what the sentence states, not of a set phrase ("can't wait", "no worries")."""
    return has_negation(_IDIOMS.sub(" ", sentence.lower()))


def _is_newer(a: dict, b: dict) -> bool:
    return (a.get("time") or "", int(a["id"])) > (b.get("time") or "", int(b["id"]))


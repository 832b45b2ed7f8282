"""Offline rules for All-Mem's diagnosis: which units to split, merge or update, and how sure that is.

Its own module because comparing two statements is a concept apart from the backend's dispatch of roles: a
pair of statements of one speaker either gives a fact a new value (an Update, judged by the calibrated update
model over the statements' clauses: `engine.llm.decision_models`) or restates the same thing (a Merge, matched
sentence by sentence). Split candidates come from `engine.llm.offline_split`; `prefetch` embeds a whole
buffer's cuts ahead of the per-target calls.
"""
from __future__ import annotations

import functools
import math
import re

from engine.core.text import (
    sentence_spans,
    strip_speaker,
)
from engine.llm.decision_models import judge_update
from engine.llm.statements import Statement, analyse, update_texts
from engine.llm.offline_split import (
    MIN_CONTENT,
    SIDE_CHARS,
    best_split,
    scored_cuts,
    terms,
)

# Below this probability the update model's pair is no Update candidate; between it and the gate θ, the
# proposal is shown to a reviewer as gated out.
UPDATE_FLOOR = 0.3
# The update model's features that say a value changed in the clauses about one thing: an Update needs one
# (two long turns on one subject read alike without giving anything a new value); without it, two statements
# alike enough to restate each other are a Merge candidate.
VALUE_CHANGES = ("number_change", "entity_change", "polarity_flip", "change_word", "plan_then_outcome",
                 "restated_new_value")
# Below this score a rule does not consider the pair a candidate at all (an LLM diagnoser would not
# propose it either); between it and the gate, proposals are shown to a reviewer as gated out.
PROPOSE_FLOOR = 0.5
# Merge compares statements sentence by sentence (sentences with at least this many content words, at most
# this many per statement). A restatement of the same thing sits above ~0.8 in MiniLM cosine (paraphrases,
# the same news told again); the Merge's confidence is a logistic in the better of the statements' cosine and
# their sentences' weakest best cosine.
_SENTENCE_CONTENT, MAX_SENTENCES = 4, 12
_RESTATED_MID, _RESTATED_SCALE = 0.72, 0.035
_DATED = re.compile(r"\b(yesterday|today|tonight|this (?:morning|afternoon|evening)|last (?:week|month|year|weekend|"
                    r"night|summer|fall|winter|spring|monday|tuesday|wednesday|thursday|friday|saturday|sunday)|"
                    r"\w+ (?:days?|weeks?|months?|years?) ago|the other day)\b", re.I)


@functools.lru_cache(maxsize=8192)
def _statement_terms(raw: str) -> frozenset[str]:
    """A statement's content tokens without numbers (what Merge/Update compare), speaker stripped; cached."""
    return frozenset(t for t in terms(strip_speaker(raw)[1]) if not t.isdigit())


def diagnose(p: dict, embedder) -> dict:
    """The `diagnosis` role: Split, Merge and Update tasks for the target among its context."""
    target = p["target"]
    tasks: dict[str, list] = {"split_tasks": [], "merge_tasks": [], "update_tasks": []}
    split = best_split(target["raw"], embedder, floor=PROPOSE_FLOOR)
    if split is not None and split[0] >= PROPOSE_FLOOR:
        conf, _, reason = split
        tasks["split_tasks"].append({"node_id": target["id"], "reason": reason, "confidence": round(conf, 4)})
    _, t_body = strip_speaker(target["raw"])
    neighbours = _neighbours(p)
    if not neighbours:
        return tasks
    vecs = embedder.embed([t_body] + [strip_speaker(n["raw"])[1] for n in neighbours])
    for n, vec in zip(neighbours, vecs[1:]):
        verdict = compare(target, n, float(vecs[0] @ vec), embedder)
        if verdict is None or verdict[1] < PROPOSE_FLOOR:
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


# -- rules -----------------------------------------------------------------
def compare(a: dict, b: dict, cosine: float, embedder) -> tuple[str, float, str] | None:
    """Update (the newer statement gives a fact of the older one a new value) or Merge (the two say the same
    thing) between two statements of one speaker, or None.

    The Update is the calibrated update model's judgement over the two statements' clauses
    (`engine.llm.decision_models.judge_update`: who the fact is about, what is said, its value, polarity and
    mood), so its confidence reads as a probability; below `UPDATE_FLOOR` the pair is no candidate. Otherwise
    two statements are redundant when every sentence of the shorter is restated in the other: a Merge's
    confidence is a logistic in the better of the statements' cosine and the weakest of those sentences' best
    cosines."""
    if (a.get("speaker") or "") != (b.get("speaker") or ""):
        return None
    new, old = (a, b) if _is_newer(a, b) else (b, a)
    old_st, new_st = _statement(old), _statement(new)
    if _dated(old_st.text) and _dated(new_st.text) and _day(old) != _day(new):
        return None         # two occasions told on different days ("won a tournament last week"): both stand
    judged = judge_update(old_st.text, old_st.speaker, new_st.text, new_st.speaker, embedder.embed,
                          strip_speaker(new.get("asked") or "")[1], strip_speaker(old.get("asked") or "")[1])
    if judged.probability >= UPDATE_FLOOR and any(judged.features[f] for f in VALUE_CHANGES):
        return "update", judged.probability, f"same speaker; {judged.reason}; the newer statement supersedes"
    if not comparable(a, b):
        return None
    match = align(old_st.text, new_st.text, embedder)
    if match is None:
        return None
    _, was, now, restated = match
    redundancy = max(cosine, restated)
    conf = _logistic(redundancy, _RESTATED_MID, _RESTATED_SCALE)
    return "merge", conf, (f"same speaker; cosine {cosine:.2f}; every sentence of the shorter statement is "
                           f"restated in the other at cosine {restated:.2f} or more; no new value (a number, name, "
                           f"polarity or plan's outcome): redundant statement")


def align(old: str, new: str, embedder) -> tuple[float, str, str, float] | None:
    """The best-matching statement sentences of two statements (cosine, old sentence, new sentence) and how
    well the shorter statement is restated in the other (the weakest of its sentences' best cosines)."""
    so, sn = _content_sentences(old), _content_sentences(new)
    if not so or not sn:
        return None
    vecs = embedder.embed(so + sn)
    sims = vecs[:len(so)] @ vecs[len(so):].T
    i, j = divmod(int(sims.argmax()), len(sn))
    restated = float(sims.max(axis=1).min() if len(so) <= len(sn) else sims.max(axis=0).min())
    return float(sims[i, j]), so[i], sn[j], restated


def _statement(unit: dict) -> Statement:
    """A payload unit's statement as `engine.llm.statements` reads it (its text without the speaker)."""
    speaker, body = strip_speaker(unit["raw"])
    return analyse(body, speaker or unit.get("speaker", ""))


def _neighbours(p: dict) -> list[dict]:
    """The statements of a diagnosis payload's context the target is compared with (not the target itself)."""
    return [n for n in p.get("context", []) if n["id"] != p["target"]["id"]]


def comparable(a: dict, b: dict) -> bool:
    """Whether diagnosis compares two statements sentence by sentence: one speaker's, each with at least
    `MIN_CONTENT` content words."""
    return ((a.get("speaker") or "") == (b.get("speaker") or "") and len(_statement_terms(a["raw"])) >= MIN_CONTENT
            and len(_statement_terms(b["raw"])) >= MIN_CONTENT)


def prefetch(payloads: list[dict], embedder) -> None:
    """Embed what diagnosing these payloads (target and context) will score, in large batches, ahead of it
    (the per-target calls then hit the cache): each target's candidate cuts that could reach the proposal floor
    and the sentences of every pair of statements `compare` aligns.

    The distinct texts (cut sides at most 64 a text, sentences at most `MAX_SENTENCES` a statement, each at most
    `SIDE_CHARS` characters) are sorted by length and go to the embedder's `embed_ahead`, so a batch
    pads little and one batch of vectors is in flight at once. Aligning sentences two or three at a time, as the
    targets came, a cold conv-26 All-Mem benchmark made 278 encoder calls for its 1,823 texts; with this, 43.
    """
    wanted: set[str] = set()
    for p in payloads:
        target = p["target"]
        wanted.update(t for _, _, left, right, _, _ in scored_cuts(target["raw"], floor=PROPOSE_FLOOR)
                      for t in (left, right))
        for n in _neighbours(p):
            if (n.get("speaker") or "") == (target.get("speaker") or ""):
                new, old = (target, n) if _is_newer(target, n) else (n, target)
                wanted.update(update_texts(_statement(old), _statement(new), strip_speaker(new.get("asked") or "")[1],
                                           strip_speaker(old.get("asked") or "")[1]))
            if comparable(target, n):
                for raw in (target["raw"], n["raw"]):
                    wanted.update(_content_sentences(strip_speaker(raw)[1]))
    embedder.embed_ahead(sorted(wanted, key=lambda t: (len(t), t)))     # like lengths together: little padding


def _logistic(x: float, mid: float, scale: float) -> float:
    return 1.0 / (1.0 + math.exp((mid - x) / scale))


def _clip(text: str, n: int = 60) -> str:
    return text if len(text) <= n else text[:n - 1] + "…"


@functools.lru_cache(maxsize=8192)
def _content_sentences_cached(body: str) -> tuple[str, ...]:
    spans = sentence_spans(body)
    out = [body[a:b] for a, b in spans
           if len(terms(body[a:b])) >= _SENTENCE_CONTENT and not body[a:b].rstrip("!. ").endswith("?")]
    return tuple(t[:SIDE_CHARS] for t in out[:MAX_SENTENCES])


def _content_sentences(body: str) -> list[str]:
    """The sentences of a statement that state something (at least `_SENTENCE_CONTENT` content words, not a
    question), at most `MAX_SENTENCES`, each clipped as a cut side is."""
    return list(_content_sentences_cached(body))


def _dated(sentence: str) -> bool:
    """A report of one occasion, dated from when it is told ("last week", "yesterday", "two days ago"): told
    again on another day, it is another occasion, neither a restatement nor a new value of the first."""
    return bool(_DATED.search(sentence))


def _day(statement: dict) -> str:
    return (statement.get("time") or "")[:10]


def _is_newer(a: dict, b: dict) -> bool:
    return (a.get("time") or "", int(a["id"])) > (b.get("time") or "", int(b["id"]))


"""Offline rules for All-Mem's diagnosis: which units to split, merge or update, and how sure that is.

Its own module because comparing two statements is a concept apart from the backend's dispatch of roles: a
pair of statements of one speaker either gives a fact a new value (an Update) or says it again with nothing new
(a Merge), each judged by its calibrated model over the statements' clauses (`engine.llm.decision_models`).
Split candidates come from `engine.llm.offline_split`; `prefetch` embeds a whole buffer's cuts and compared
clauses ahead of the per-target calls.
"""
from __future__ import annotations

import re

from engine.core.text import strip_speaker
from engine.llm.decision_models import judge_statements, supersedes
from engine.llm.offline_split import SPLIT_FLOOR, best_split, scored_cuts
from engine.llm.statements import Statement, analyse, analyse_ahead, update_texts

# Below this probability a pair is no Update (or Merge) candidate; between it and the gate θ, the proposal is
# shown to a reviewer as gated out, never dropped.
UPDATE_FLOOR = MERGE_FLOOR = 0.3
_DATED = re.compile(r"\b(yesterday|today|tonight|this (?:morning|afternoon|evening)|last (?:week|month|year|weekend|"
                    r"night|summer|fall|winter|spring|monday|tuesday|wednesday|thursday|friday|saturday|sunday)|"
                    r"\w+ (?:days?|weeks?|months?|years?) ago|the other day)\b", re.I)


def diagnose(p: dict, embedder) -> dict:
    """The `diagnosis` role: Split, Merge and Update tasks for the target among its context."""
    target = p["target"]
    tasks: dict[str, list] = {"split_tasks": [], "merge_tasks": [], "update_tasks": []}
    split = best_split(target["raw"], embedder, floor=SPLIT_FLOOR)
    if split is not None:
        conf, _, reason = split
        tasks["split_tasks"].append({"node_id": target["id"], "reason": reason, "confidence": round(conf, 4)})
    _, t_body = strip_speaker(target["raw"])
    neighbours = _neighbours(p)
    if not neighbours:
        return tasks
    vecs = embedder.embed([t_body] + [strip_speaker(n["raw"])[1] for n in neighbours])
    for n, vec in zip(neighbours, vecs[1:]):
        verdict = compare(target, n, float(vecs[0] @ vec), embedder)
        if verdict is None:
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
    """Update (the newer statement gives a fact of the older one a new value) or Merge (the newer says the
    older again, with nothing new) between two statements of one speaker, or None.

    Both are the calibrated models' judgements of the two statements' clauses
    (`engine.llm.decision_models.judge_statements`: who the fact is about, what is said, its value, polarity
    and mood), so a confidence reads as a probability. An Update needs a value that changed in the clauses
    about one thing; the likelier of the two is proposed, and neither below its floor. `cosine` (the two
    statements' likeness) is what the diagnosis ranked the pair by; the models read their own."""
    if not _one_speaker(a, b):
        return None
    new, old = (a, b) if _is_newer(a, b) else (b, a)
    old_st, new_st = _statement(old), _statement(new)
    if _dated(old_st.text) and _dated(new_st.text) and _day(old) != _day(new):
        return None         # two occasions told on different days ("won a tournament last week"): both stand
    judged = judge_statements(old_st.text, old_st.speaker, new_st.text, new_st.speaker, embedder.embed,
                              strip_speaker(new.get("asked") or "")[1], strip_speaker(old.get("asked") or "")[1])
    update, merge = judged["update"], judged["merge"]
    if supersedes(judged, UPDATE_FLOOR):
        return "update", update.probability, f"same speaker; {update.reason}; the newer statement supersedes"
    if merge.probability >= MERGE_FLOOR:
        return "merge", merge.probability, (f"same speaker; cosine {cosine:.2f}; {merge.reason}; the newer "
                                            f"statement restates the older: redundant")
    return None


def _one_speaker(a: dict, b: dict) -> bool:
    """Whether two payload units are said by one speaker: the only pairs `compare` judges (and `prefetch` reads)."""
    return (a.get("speaker") or "") == (b.get("speaker") or "")


def _statement(unit: dict) -> Statement:
    """A payload unit's statement as `engine.llm.statements` reads it (its text without the speaker)."""
    return analyse(*_said(unit))


def _said(unit: dict) -> tuple[str, str]:
    """A payload unit's text without the speaker, and its speaker."""
    speaker, body = strip_speaker(unit["raw"])
    return body, speaker or unit.get("speaker", "")


def _neighbours(p: dict) -> list[dict]:
    """The statements of a diagnosis payload's context the target is compared with (not the target itself)."""
    return [n for n in p.get("context", []) if n["id"] != p["target"]["id"]]


def prefetch(payloads: list[dict], embedder) -> None:
    """Embed what diagnosing these payloads (target and context) will score, in large batches, ahead of it
    (the per-target calls then hit the cache): each target's candidate cuts that could reach the proposal floor
    and the texts the statement models read of every pair of one speaker's statements `compare` judges.

    The distinct texts (cut sides at most 64 a text, each at most `SIDE_CHARS` characters; both turns and at
    most `MAX_CLAUSES` clauses of each) are sorted by length and go to the embedder's `embed_ahead`, so a batch
    pads little and one batch of vectors is in flight at once. Embedding them two or three at a time, as the
    targets came, a cold conv-26 All-Mem benchmark made 278 encoder calls for its 1,823 texts; with this, 43.
    The statements of those pairs are parsed ahead the same way (`statements.analyse_ahead`).
    """
    wanted = {t for p in payloads for _, _, left, right, _, _ in scored_cuts(p["target"]["raw"], floor=SPLIT_FLOOR)
              for t in (left, right)}
    pairs = [(p["target"], n) for p in payloads for n in _neighbours(p)
             if _one_speaker(p["target"], n)]
    analyse_ahead([_said(unit) for pair in pairs for unit in pair])        # parsed in batches
    for target, n in pairs:
        new, old = (target, n) if _is_newer(target, n) else (n, target)
        wanted.update(update_texts(_statement(old), _statement(new), strip_speaker(new.get("asked") or "")[1],
                                   strip_speaker(old.get("asked") or "")[1]))
    embedder.embed_ahead(sorted(wanted, key=lambda t: (len(t), t)))     # like lengths together: little padding


def _dated(sentence: str) -> bool:
    """A report of one occasion, dated from when it is told ("last week", "yesterday", "two days ago"): told
    again on another day, it is another occasion, neither a restatement nor a new value of the first."""
    return bool(_DATED.search(sentence))


def _day(statement: dict) -> str:
    return (statement.get("time") or "")[:10]


def _is_newer(a: dict, b: dict) -> bool:
    return (a.get("time") or "", int(a["id"])) > (b.get("time") or "", int(b["id"]))


"""Offline rules for All-Mem's diagnosis: which units to split, merge or update, and how sure that is.

Its own module because comparing two statements is a concept apart from the backend's dispatch of roles: a
pair of statements of one speaker is matched sentence by sentence, and the best-matching sentences either
give one subject a changed value (an Update: a number replaced, a polarity flipped, a plan then its outcome)
or restate the same thing (a Merge). Split candidates come from `engine.llm.offline_split`; `prefetch`
embeds a whole buffer's cuts ahead of the per-target calls.
"""
from __future__ import annotations

import functools
import math
import re

from engine.core.text import (
    content_tokens,
    has_negation,
    jaccard,
    number_change,
    numbers,
    sentence_spans,
    strip_speaker,
    words,
)
from engine.llm.offline_split import (
    FIRST_PERSON,
    MIN_CONTENT,
    SECOND_PERSON,
    SIDE_CHARS,
    best_split,
    scored_cuts,
    terms,
)

# Below this score a rule does not consider the pair a candidate at all (an LLM diagnoser would not
# propose it either); between it and the gate, proposals are shown to a reviewer as gated out.
PROPOSE_FLOOR = 0.5
# Update and Merge compare statements sentence by sentence (sentences with at least this many content words,
# at most this many per statement). A pair of sentences about one subject sits above ~0.6 in MiniLM cosine
# (a plan and its outcome, a figure restated with a new value); the Update's confidence is a logistic in that
# cosine. A restatement of the same thing sits above ~0.8 (paraphrases, the same news told again); the
# Merge's confidence is a logistic in the better of the statements' cosine and their sentences' mean cosine.
_SENTENCE_CONTENT, MAX_SENTENCES = 4, 12
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
_DATED = re.compile(r"\b(yesterday|today|tonight|this (?:morning|afternoon|evening)|last (?:week|month|year|weekend|"
                    r"night|summer|fall|winter|spring|monday|tuesday|wednesday|thursday|friday|saturday|sunday)|"
                    r"\w+ (?:days?|weeks?|months?|years?) ago|the other day)\b", re.I)
_IDIOMS = re.compile(r"can'?t wait|no worries|no problem|no doubt|don'?t forget|never give up|not bad|"
                     r"can'?t believe|no way")
_VALUE_WORDS = frozenset(content_tokens(" ".join(
    "not no never don't doesn't didn't isn't aren't wasn't weren't won't can't cannot anymore longer "
    "yesterday last next week month year weekend ago recently finally soon".split())))


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
    if not comparable(a, b):
        return None
    new, old = (a, b) if _is_newer(a, b) else (b, a)
    match = align(strip_speaker(old["raw"])[1], strip_speaker(new["raw"])[1], embedder)
    if match is None:
        return None
    subject, was, now, restated = match
    if _dated(was) and _dated(now) and _day(old) != _day(new):
        return None         # two occasions told on different days ("won a tournament last week"): both stand
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


def _plan(sentence: str) -> bool:
    """A sentence in which the speaker states an intention or a plan of their own, not yet done."""
    ws = words(sentence)
    return (any(w in FIRST_PERSON for w in ws) and not any(w in SECOND_PERSON for w in ws)
            and bool(_PLAN.search(sentence)) and not _DONE.search(sentence))


def _done(sentence: str) -> bool:
    """A sentence in which the speaker reports something of their own that happened."""
    ws = words(sentence)
    return any(w in FIRST_PERSON for w in ws) and bool(_DONE.search(sentence)) and not _PLAN.search(sentence)


def _value_change(was: str, now: str) -> str:
    """How the newer of two matching sentences changes the older one's value, or "": one proposition (the
    sentences share at least `_SAME_PROPOSITION` of their other content words) with a number replaced or its
    polarity flipped, or the speaker's plan, then its report sharing the plan's object."""
    tw, tn = _propositionterms(was), _propositionterms(now)
    same = jaccard(tw, tn) >= _SAME_PROPOSITION
    nw, nn = numbers(was), numbers(now)
    if same and nw and nn and nw != nn:
        return number_change(nw, nn)
    if same and _negated(was) != _negated(now):
        return "polarity flips"
    if _plan(was) and _done(now) and tw & tn:
        return f"a plan, then its outcome ({', '.join(sorted(tw & tn)[:3])})"
    return ""


def _dated(sentence: str) -> bool:
    """A report of one occasion, dated from when it is told ("last week", "yesterday", "two days ago"): told
    again on another day, it is another occasion, neither a restatement nor a new value of the first."""
    return bool(_DATED.search(sentence))


def _day(statement: dict) -> str:
    return (statement.get("time") or "")[:10]


def _propositionterms(sentence: str) -> frozenset[str]:
    """What a sentence is about, without its value: content words, no numbers, negations or time cues."""
    return frozenset(t for t in terms(_IDIOMS.sub(" ", sentence.lower()))
                     if not t.isdigit() and t not in _VALUE_WORDS)


def _negated(sentence: str) -> bool:
    """Negation of what the sentence states, not of a set phrase ("can't wait", "no worries")."""
    return has_negation(_IDIOMS.sub(" ", sentence.lower()))


def _is_newer(a: dict, b: dict) -> bool:
    return (a.get("time") or "", int(a["id"])) > (b.get("time") or "", int(b["id"]))


"""Offline rule for All-Mem's Split: where one unit holds two topics, and how sure that is.

A concept of its own, used by two roles: candidate cuts between sentences, each scored by how separate its
sides are, whether each is a memory of its own and how the second side opens. `diagnosis`
(`engine.llm.offline_diagnosis`) proposes the best cut above its floor and `split_plan`
(`engine.llm.offline`) cuts there. The cached `terms` and the person words are shared with the statement
rules of the diagnosis.
"""
from __future__ import annotations

import functools
import math

from engine.core.text import content_tokens, jaccard, sentence_spans, strip_speaker, words

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
SECOND_PERSON = frozenset("you your you're you've you'll you'd yours yourself ya y'all".split())
FIRST_PERSON = frozenset("i i'm i've i'll i'd my me mine myself we we're we've we'll our ours us".split())
_SHOWING = tuple(tuple(p.split()) for p in ("here's", "here is", "check out", "take a look", "look at this"))
_OPENING_WORDS = 12       # words of the second side read for who it is about
MIN_CONTENT = 4           # tokens a statement or segment needs before Merge/Update/Split rules apply
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
MAX_CUTS = 32             # candidate Split points per text
SIDE_CHARS = 2000         # characters of each side of a cut that are compared (MiniLM reads ~256 tokens)
# How a cut's second side opens, as a factor of its confidence.
_MARKER = {"shift": 1.0, "turn": 1.0, "leans": _LEANS, "plain": _UNMARKED}


@functools.lru_cache(maxsize=8192)
def terms(text: str) -> frozenset[str]:
    """The content tokens of a text as a set; cached, because diagnosis compares the same turns again and again
    (a turn is a neighbour of many targets, and its cuts are scored when prefetched and when diagnosed)."""
    return frozenset(content_tokens(text))


def split_cuts(raw: str) -> list[tuple[int, int, str, str]]:
    """Candidate two-way cuts between sentences: (sentences on the left, char offset, left text, right text).

    At most `MAX_CUTS` cut points, evenly spread over the sentence boundaries, and each side clipped to the
    `SIDE_CHARS` nearest the cut (the embedder reads no more), so a long turn costs time and memory linear
    in its length rather than one prefix and one suffix per sentence.
    """
    spans = sentence_spans(raw)
    n = len(spans)
    picks = (range(1, n) if n - 1 <= MAX_CUTS
             else sorted({1 + round(k * (n - 2) / (MAX_CUTS - 1)) for k in range(MAX_CUTS)}))
    cuts = []
    for i in picks:
        start = max(spans[0][0], spans[i - 1][1] - SIDE_CHARS)
        left = raw[start:spans[i - 1][1]]
        right = raw[spans[i][0]:min(spans[-1][1], spans[i][0] + SIDE_CHARS)]
        cuts.append((i, spans[i][0], strip_speaker(left)[1] if start == spans[0][0] else left, right))
    return cuts


def scored_cuts(raw: str, all_cuts: list[tuple[int, int, str, str]] | None = None, floor: float = 0.0
                 ) -> list[tuple[int, int, str, str, float, int]]:
    """The cuts whose sides both have substance, with their shared-word share and the shorter side's
    content words: the only cuts Split embeds. With a `floor`, also only the cuts that could reach it:
    a confidence is at most (1 - shared) x substance x opening (the cosine factor is below 1), so a cut
    whose bound is under the floor needs no embedding to be ruled out."""
    cuts = []
    for n_left, cut, left, right in split_cuts(raw) if all_cuts is None else all_cuts:
        tl, tr = terms(left), terms(right)
        if len(tl) < MIN_CONTENT or len(tr) < MIN_CONTENT:
            continue
        shared, content = jaccard(tl, tr), min(len(tl), len(tr))
        if floor and (1.0 - shared) * _substance(content) * _MARKER[_opening(left, right)[0]] < floor:
            continue
        cuts.append((n_left, cut, left, right, shared, content))
    return cuts


def best_split(raw: str, embedder, floor: float = 0.0) -> tuple[float, int, str] | None:
    """The most confident two-way cut between sentences, as (confidence, char offset, reason).

    The confidence is that of two topics, a product of three parts: how separate the sides are (no
    shared words, a low cosine), whether each is substantive enough to be a memory of its own, and
    whether the speaker marks the change of topic; two sentences about one situation miss the last
    two however low their cosine.
    """
    all_cuts = split_cuts(raw)
    cuts = scored_cuts(raw, all_cuts, floor)
    if not cuts:
        return None
    n_sentences = all_cuts[-1][0] + 1          # the last sentence boundary is always a candidate
    vecs = embedder.embed([t for _, _, left, right, _, _ in cuts for t in (left, right)])
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
    """The words that show the speaker turning from the partner to their own news, or "" (see SECOND_PERSON):
    the first side speaks of "you" more than of "I", the second's opening of "I" (or shows something) and
    not of "you"."""
    lw, rw = words(left), words(right)[:_OPENING_WORDS]
    if sum(w in SECOND_PERSON for w in lw) <= sum(w in FIRST_PERSON for w in lw):
        return ""
    if any(w in SECOND_PERSON for w in rw):
        return ""
    shows = next((" ".join(p) for p in _SHOWING if tuple(rw[:len(p)]) == p), "")
    if shows or "[shares an image" in right[:200]:
        return shows or "a shared image"
    mine = [w for w in rw if w in FIRST_PERSON]
    return mine[0] if mine else ""

"""Offline rule for All-Mem's Split: where one unit holds two topics, and how sure that is.

A concept of its own, used by two roles: candidate cuts between sentences, each read for how separate its sides
are (cosine, shared words), whether each is a memory of its own (its content words) and how the second side
opens (a cue phrase such as "Also," or "Oh, and", turning from the partner to the speaker's own news, pointing
back); the calibrated split model (`engine.llm.decision_models`, fit on the dev decision sets by
`scripts/fit_decisions.py`) turns that into a probability, so the gate's θ reads as one. `diagnosis`
(`engine.llm.offline_diagnosis`) proposes the best cut above its floor and `split_plan` (`engine.llm.offline`)
cuts there. The cached `terms` and the person words are shared with the statement rules of the diagnosis.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from engine.core.text import content_tokens, jaccard, sentence_spans, strip_speaker, words
from engine.llm.decision_models import Logistic, models

# Words that make a sentence lean on the one before it (also as "it's", "they're"): splitting there would
# cut a narrative.
_CONTINUATIONS = frozenset("it that this these those he she they him her them his their its so because but "
                           "and which then there after afterwards".split())
# Discourse markers with which a speaker announces a change of topic (cue phrases, Hirschberg & Litman
# 1993), possibly after "oh" or "and" ("Oh, and BTW, ..."): the one signal that a low cosine is a new
# topic rather than a new detail of the same situation; "Oh, and" opening a sentence is one of them.
_SHIFT_CUES = tuple(tuple(cue.split()) for cue in (
    "also", "by the way", "btw", "fyi", "anyway", "anyways", "speaking of", "on another note",
    "on a different note", "on a side note", "side note", "in other news", "besides that", "apart from that",
    "aside from that", "other than that", "changing the subject", "unrelated", "totally unrelated",
    "completely unrelated", "separately", "completely separately", "different subject"))
_CUE_LEAD_INS = frozenset({"oh", "ah", "and"})
_LEAD_IN_CUES = (("oh", "and"), ("ah", "and"))      # "Oh, and Liv lost her first tooth!": a cue of its own
# Who a side is about. In conversation the commonest change of topic is unannounced: a speaker answers the
# partner ("Glad you have support, Caroline!") and then opens news of their own ("Here's a pic of my family
# camping at the beach"): the side before the cut is about the addressee (second person), the side after
# about the speaker (first person, or showing something: "here's", "check out", a shared image).
SECOND_PERSON = frozenset("you your you're you've you'll you'd yours yourself ya y'all".split())
FIRST_PERSON = frozenset("i i'm i've i'll i'd my me mine myself we we're we've we'll our ours us".split())
_SHOWING = tuple(tuple(p.split()) for p in ("here's", "here is", "check out", "take a look", "look at this"))
_OPENING_WORDS = 12       # words of the second side read for who it is about
MIN_SIDE = 2              # content words each side of a cut needs to be read at all ("Rude but accurate.")
# Below this probability a cut is no Split candidate at all (an LLM diagnoser would not propose it either, and
# a plan finds no two topics); between it and the gate, the proposal is shown to a reviewer as gated out.
SPLIT_FLOOR = 0.5
# Content words past which a side counts as no more of a memory of its own: the dev sets' sides are a
# sentence or two, LoCoMo's run to paragraphs, and the model must not read a long side as ever surer.
SUBSTANCE_CAP = 8
# Below any cosine MiniLM gives two English sentences: a cut whose probability at this cosine is under the
# floor cannot reach it, so it is never embedded.
COSINE_BOUND = -0.5
MAX_CUTS = 32             # candidate Split points per text
SIDE_CHARS = 2000         # characters of each side of a cut that are compared (MiniLM reads ~256 tokens)
SPLIT_FEATURES = ("cosine", "shared", "substance", "shift", "turn", "leans", "asks")
_WORDS = {"shift": "the second part opens with '{}', a change of topic",
          "turn": "the first part answers the partner, the second opens the speaker's own news ('{}')",
          "leans": "the second part leans on the first ('{}')",
          "plain": "no marker of a change of topic"}


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
    """The cuts whose sides both say something (`MIN_SIDE` content words), with their shared-word share and
    the shorter side's content words: the only cuts Split embeds. With a `floor`, also only the cuts that
    could reach it: the split model's probability at `COSINE_BOUND`, the most separate the sides can read, is
    a bound that needs no embedding."""
    cuts = []
    for n_left, cut, left, right in split_cuts(raw) if all_cuts is None else all_cuts:
        tl, tr = terms(left), terms(right)
        if len(tl) < MIN_SIDE or len(tr) < MIN_SIDE:
            continue
        shared, content = jaccard(tl, tr), min(len(tl), len(tr))
        if floor and _model().probability(cut_features(COSINE_BOUND, shared, content, _opening(left, right)[0],
                                                       right)) < floor:
            continue
        cuts.append((n_left, cut, left, right, shared, content))
    return cuts


def cut_features(cosine: float, shared: float, content: int, opening: str, right: str) -> np.ndarray:
    """The split model's features of a cut (`SPLIT_FEATURES`): the sides' cosine and shared-word share, the
    shorter side's content words (at most `SUBSTANCE_CAP`), how the second side opens, and whether it asks."""
    return np.array([cosine, shared, float(min(content, SUBSTANCE_CAP)), float(opening == "shift"),
                     float(opening == "turn"), float(opening == "leans"), float(right.rstrip().endswith("?"))])


@dataclass(frozen=True)
class CutReading:
    """One candidate cut as the split model reads it."""

    n_left: int               # sentences before the cut
    offset: int               # where the second side starts in the text
    n_sentences: int
    cosine: float
    shared: float
    content: int
    opening: str              # shift | turn | leans | plain
    word: str                 # the words that mark the opening
    features: np.ndarray      # `cut_features`

    def reason(self, p: float) -> str:
        return (f"sentences 1-{self.n_left} and {self.n_left + 1}-{self.n_sentences} share {self.shared:.2f} of "
                f"their words, cosine {self.cosine:.2f}; the shorter side has {self.content} content words; "
                f"{_WORDS[self.opening].format(self.word)}; split model {p:.2f}")


def read_cuts(raw: str, embedder, floor: float = 0.0) -> list[CutReading]:
    """The candidate cuts of a text (`scored_cuts`, with its `floor`), each read for the split model."""
    all_cuts = split_cuts(raw)
    cuts = scored_cuts(raw, all_cuts, floor)
    if not cuts:
        return []
    n_sentences = all_cuts[-1][0] + 1          # the last sentence boundary is always a candidate
    vecs = embedder.embed([t for _, _, left, right, _, _ in cuts for t in (left, right)])
    out = []
    for i, (n_left, cut, left, right, shared, content) in enumerate(cuts):
        cosine = float(vecs[2 * i] @ vecs[2 * i + 1])
        opening, word = _opening(left, right)
        out.append(CutReading(n_left, cut, n_sentences, cosine, shared, content, opening, word,
                              cut_features(cosine, shared, content, opening, right)))
    return out


def best_split(raw: str, embedder, floor: float = 0.0) -> tuple[float, int, str] | None:
    """The most probable two-way cut between sentences, as (probability, char offset, reason), or None when
    no cut reaches `floor`: the split model's judgement of how separate the sides read, whether each says
    something of its own and whether the speaker marks the change of topic; two sentences about one situation
    miss the last two however low their cosine."""
    model = _model()
    best: tuple[float, CutReading] | None = None
    for reading in read_cuts(raw, embedder, floor):
        p = model.probability(reading.features)
        if best is None or p > best[0]:
            best = (p, reading)
    if best is None or best[0] < floor:
        return None
    return best[0], best[1].offset, best[1].reason(best[0])


def _model() -> Logistic:
    model = models()["split"]
    if model.features != SPLIT_FEATURES:
        raise ValueError("the stored split model was fit on other features; run scripts/fit_decisions.py")
    return model


def _points_back(word: str) -> bool:
    return word.split("'")[0] in _CONTINUATIONS


def _opening(left: str, text: str) -> tuple[str, str]:
    """How a cut's second side opens: ("shift", cue) when a cue phrase ("Also,", "Oh, and") announces a new
    topic, ("leans",
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
    if tuple(ws[:2]) in _LEAD_IN_CUES:
        after = ws[start] if start < len(ws) else ""
        return ("leans", after) if _points_back(after) else ("shift", " ".join(ws[:2]))
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

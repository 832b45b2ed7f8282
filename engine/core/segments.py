"""Segmentations of a turn sequence: boundaries, segment labels and ranges, and the two baselines.

A segmentation of ``n`` items (turns ``0 .. n-1``) is the sorted list of its
*boundaries*: a boundary at ``i`` means a new segment starts at item ``i``.
Item 0 always starts a segment, so it is never listed; valid boundaries are
``1 .. n-1``. ``[]`` is one segment holding everything; ``list(range(1, n))``
puts every item in its own segment. Conversions from per-item segment labels
and from inclusive ``(start, end)`` ranges (human topic spans) are here, so a
loader, a boundary detector and the metrics (`engine.eval.segmentation`) read
one representation. Baselines: `no_boundaries` (the whole meeting one
segment) and `fixed_windows` (a new segment every ``size`` turns).

Detection by depth (TextTiling, Hearst 1997, over any item features): each
gap is scored by the similarity of what lies within a window before and after
it (`window_similarity`, windows measured in item *sizes*, e.g. words, so a
window is a stretch of speaking time rather than a count of turns), the curve
is smoothed (`smooth`), each gap's depth is how far it lies below the peaks
reached by climbing from it on both sides (`depth_scores`), and the deepest
gaps reaching a threshold become boundaries, spaced apart (`deepest_boundaries`).
`topic_depths` scores the gaps of a conversation's turns that way by what is
said (utterance vectors) and who says it (the participants' share of words),
under a `DepthRule`.
"""
from __future__ import annotations

import heapq
import math
from collections.abc import Collection, Hashable, Sequence
from dataclasses import dataclass

import numpy as np

from engine.core.text import content_tokens

Boundaries = list[int]


def check_boundaries(boundaries: Sequence[int], n: int) -> Boundaries:
    """`boundaries` as a sorted list without duplicates; ValueError if any is outside ``1 .. n-1``."""
    check_length(n)
    out = sorted(set(boundaries))
    for b in out:
        if isinstance(b, bool) or not isinstance(b, int):
            raise ValueError(f"boundary {b!r} is not an integer position")
        if not 0 < b < n:
            raise ValueError(f"boundary {b} outside 1..{n - 1} (item 0 always starts a segment; n = {n})")
    return out


def boundaries_from_labels(labels: Sequence[Hashable]) -> Boundaries:
    """Boundaries where the segment label changes: ``['a', 'a', 'b', 'a']`` -> ``[2, 3]``.

    A label that comes back later starts a new segment (segments are
    contiguous runs), as in the last example.
    """
    return [i for i in range(1, len(labels)) if labels[i] != labels[i - 1]]


def labels_from_boundaries(boundaries: Sequence[int], n: int) -> list[int]:
    """Segment number of each item: ``([2, 3], 5)`` -> ``[0, 0, 1, 2, 2]``."""
    starts = set(check_boundaries(boundaries, n))
    labels: list[int] = []
    segment = 0
    for i in range(n):
        if i in starts:
            segment += 1
        labels.append(segment)
    return labels


def segments_from_boundaries(boundaries: Sequence[int], n: int) -> list[tuple[int, int]]:
    """Inclusive ``(start, end)`` ranges: ``([2, 3], 5)`` -> ``[(0, 1), (2, 2), (3, 4)]``."""
    if n == 0:
        check_length(n)
        return []
    starts = [0, *check_boundaries(boundaries, n)]
    ends = [s - 1 for s in starts[1:]] + [n - 1]
    return list(zip(starts, ends))


def boundaries_from_ranges(ranges: Sequence[Sequence[int]], n: int) -> Boundaries:
    """Boundaries of annotated inclusive ``(start, end)`` ranges that need not partition ``0 .. n-1``.

    Human topic spans (QMSum) overlap, nest and leave gaps, so each item is
    given one segment deterministically:

    1. an item covered by one or more ranges belongs to the covering range that
       started most recently (ties: the one ending first, i.e. the inner one).
       Hence a later range takes over where it starts (overlap ``10-97`` /
       ``84-215`` gives boundaries at 10 and 84), and a range nested in
       another is its own segment, after which the outer one resumes
       (``143-538`` holding ``195-206`` gives 143, 195 and 207);
    2. an item covered by no range never opens a segment: it continues the
       segment of the item before it, and items before the first range belong
       to the first range's segment. Gaps in human annotation are slack
       ("Okay ." before the first topic, a mic check, a stray turn between two
       topics), not topics; giving each its own segment would add one-turn
       gold segments and boundaries nobody annotated.

    Ranges are identified by ``(start, end)``, so two spans touching end to
    start always give a boundary between them, even if annotated with the
    same topic. ValueError if a range is not ``0 <= start <= end < n``.
    """
    check_length(n)
    spans: list[tuple[int, int]] = []
    for raw in ranges:
        if len(raw) != 2:
            raise ValueError(f"range {raw!r} is not a (start, end) pair")
        start, end = raw
        if any(isinstance(v, bool) or not isinstance(v, int) for v in (start, end)):
            raise ValueError(f"range {raw!r} does not hold integer positions")
        if not 0 <= start <= end < n:
            raise ValueError(f"range ({start}, {end}) is not within 0..{n - 1} with start <= end")
        spans.append((start, end))
    spans = sorted(set(spans))
    if not spans:
        return []
    # A sweep over the items with a heap of the ranges started so far, keyed so that the top is the one
    # started most recently (ties: ending first); ranges that ended are dropped when they reach the top.
    # O((n + ranges) log ranges), where testing every range at every item was O(n x ranges).
    labels: list[tuple[int, int]] = []
    current = spans[0]  # items before the first range join its segment
    started: list[tuple[int, int]] = []
    nxt = 0
    for i in range(n):
        while nxt < len(spans) and spans[nxt][0] <= i:
            heapq.heappush(started, (-spans[nxt][0], spans[nxt][1]))
            nxt += 1
        while started and started[0][1] < i:
            heapq.heappop(started)
        if started:
            current = (-started[0][0], started[0][1])
        labels.append(current)
    return boundaries_from_labels(labels)


def no_boundaries(n: int) -> Boundaries:
    """The one-segment baseline: no boundaries at all."""
    check_length(n)
    return []


def fixed_windows(n: int, size: int = 50) -> Boundaries:
    """The fixed-window (chunking) baseline: a new segment every `size` items."""
    check_length(n)
    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        raise ValueError(f"window size must be a positive integer, got {size!r}")
    return list(range(size, n, size))


def check_length(n: int) -> None:
    """ValueError unless `n` (the number of items) is a non-negative integer."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise ValueError(f"n must be a non-negative integer, got {n!r}")


# -- detection by depth --------------------------------------------------------------------------
def window_similarity(features: np.ndarray, weights: Sequence[float], sizes: Sequence[float],
                      window: float) -> np.ndarray:
    """Cosine, at every gap, of the weighted feature sums of the items within `window` size before and after it.

    Entry ``g - 1`` is the gap before item ``g`` (``g = 1 .. n-1``). A side holds the items whose sizes add up to
    at most `window` counted from the gap, and always at least the one item next to the gap; near either end
    it holds what there is. A side whose sum is zero gives similarity 1 (nothing tells the two sides apart).
    """
    x = np.asarray(features, dtype=float) * np.asarray(weights, dtype=float)[:, None]
    n = len(x)
    if n < 2:
        return np.zeros(0)
    prefix = np.vstack([np.zeros((1, x.shape[1])), np.cumsum(x, axis=0)])
    cum = np.concatenate([[0.0], np.cumsum(np.asarray(sizes, dtype=float))])
    gaps = np.arange(1, n)
    lo = np.minimum(np.searchsorted(cum, cum[gaps] - window, side="left"), gaps - 1)
    hi = np.clip(np.searchsorted(cum, cum[gaps] + window, side="right") - 1, gaps + 1, n)
    left, right = prefix[gaps] - prefix[lo], prefix[hi] - prefix[gaps]
    norm = np.linalg.norm(left, axis=1) * np.linalg.norm(right, axis=1)
    dots = np.einsum("ij,ij->i", left, right)
    return np.where(norm > 0, dots / np.where(norm > 0, norm, 1.0), 1.0)


def smooth(values: np.ndarray, width: int) -> np.ndarray:
    """Moving average over `width` values (edges padded with the end values); `width` <= 1 returns a copy."""
    values = np.asarray(values, dtype=float)
    if width <= 1 or len(values) == 0:
        return values.copy()
    padded = np.pad(values, (width // 2, width - 1 - width // 2), mode="edge")
    return np.convolve(padded, np.ones(width) / width, mode="valid")


def depth_scores(similarity: np.ndarray) -> np.ndarray:
    """Each gap's depth: (left peak − it) + (right peak − it), a peak being where climbing stops (0 on a peak)."""
    s = np.asarray(similarity, dtype=float)
    depth = np.zeros(len(s))
    for i, here in enumerate(s):
        left = right = here
        j = i
        while j > 0 and s[j - 1] >= left:
            j -= 1
            left = s[j]
        j = i
        while j < len(s) - 1 and s[j + 1] >= right:
            j += 1
            right = s[j]
        depth[i] = (left - here) + (right - here)
    return depth


def deepest_boundaries(depth: np.ndarray, sizes: Sequence[float], threshold: float, min_size: float,
                       lookahead: float, start: int = 0, allowed: Collection[int] | None = None) -> Boundaries:
    """Boundaries at the deepest gaps, deepest first (ties: the earlier), while they keep the spacing.

    A gap before item ``b`` (depth entry ``b - 1``) is taken when its depth reaches `threshold`, ``b`` lies
    after `start` (where the undecided stretch begins: the last boundary already made), at least `min_size`
    of size lies between it and `start` and between it and every boundary taken, at least `lookahead`
    of size follows it (what was seen after the gap), and ``b`` is in `allowed` (every gap when None).
    """
    cum = np.concatenate([[0.0], np.cumsum(np.asarray(sizes, dtype=float))])
    n = len(cum) - 1
    taken: list[int] = []
    for gap in sorted(range(len(depth)), key=lambda g: (-round(float(depth[g]), 9), g)):
        if depth[gap] < threshold:
            break
        b = gap + 1
        if b <= start or (allowed is not None and b not in allowed):
            continue
        if cum[b] - cum[start] < min_size or cum[n] - cum[b] < lookahead:
            continue
        if any(abs(cum[b] - cum[e]) < min_size for e in taken):
            continue
        taken.append(b)
    return sorted(taken)


@dataclass(frozen=True)
class DepthRule:
    """How `topic_depths` and `deepest_boundaries` cut a stream of turns; every size is in words."""

    window: float = 1000.0         # words on each side of a gap
    mix: float = 1.0               # weight of what is said; 1 - mix for who says it
    smoothing: int = 9             # gaps in the moving average of the similarity curve
    threshold: float = 0.15        # least depth of a boundary
    min_size: float = 400.0        # least words between two boundaries
    lookahead: float = 300.0       # least words heard after a gap before it may be cut


def turn_sizes(texts: Sequence[str]) -> np.ndarray:
    """Each turn's size in words (at least 1): the stand-in for its speaking time."""
    return np.array([max(1, len(t.split())) for t in texts], dtype=float)


def topic_depths(vectors: np.ndarray, texts: Sequence[str], speakers: Sequence[str], rule: DepthRule) -> np.ndarray:
    """Depth of every gap between turns: `rule.mix` x the similarity of the utterance vectors on both sides
    (each weighted by log(1 + its content words), so a backchannel barely counts) plus (1 - `rule.mix`) x the
    similarity of who holds the floor (each speaker's words) on both sides, smoothed, as TextTiling depth.

    A meeting moves to its next topic when the talk changes and, as often, when someone else takes the floor
    (the next presenter, the next report); a chat between two people changes only by what is said.
    """
    n = len(texts)
    if n < 2:
        return np.zeros(0)
    sizes = turn_sizes(texts)
    weights = np.array([math.log1p(len(content_tokens(t))) for t in texts])
    names = sorted(set(speakers))
    floor = np.zeros((n, len(names)))
    floor[np.arange(n), [names.index(sp) for sp in speakers]] = sizes
    said = window_similarity(np.asarray(vectors, dtype=float), weights, sizes, rule.window)
    held = window_similarity(floor, np.ones(n), sizes, rule.window)
    return depth_scores(smooth(rule.mix * said + (1 - rule.mix) * held, rule.smoothing))

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
"""
from __future__ import annotations

import heapq
from collections.abc import Hashable, Sequence

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

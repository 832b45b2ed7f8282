"""Event-boundary quality: segmentations of a turn sequence and Pk, WindowDiff, ΔB (DESIGN §7).

Representation. A segmentation of ``n`` items (turns ``0 .. n-1``) is the
sorted list of its *boundaries*: a boundary at ``i`` means a new segment
starts at item ``i``. Item 0 always starts a segment, so it is never listed;
valid boundaries are ``1 .. n-1``. ``[]`` is one segment holding everything;
``list(range(1, n))`` puts every item in its own segment. Conversions from
per-item segment labels and from inclusive ``(start, end)`` ranges are below.

Metrics compare a hypothesis (``hyp``, the system) with a reference (``gold``)
over the same ``n`` items; lower is better for Pk and WindowDiff:

* `pk` (Beeferman, Berger & Lafferty, 1999): slide a probe over the pairs of
  items ``(i, i+k)`` for ``i = 0 .. n-k-1`` and count the pairs on which gold
  and hyp disagree about "same segment or not"; divide by ``n-k``. This is
  MemLoom's Eq. (6).
* `window_diff` (Pevzner & Hearst, 2002): over the same ``n-k`` windows,
  count those where gold and hyp put a different *number* of boundaries
  strictly after ``i`` and up to ``i+k`` (positions ``i+1 .. i+k``); divide by
  ``n-k``. MemLoom's Eq. (7).
* Window size ``k``: unless given, half the mean gold segment length, rounded
  half up, and at least 2 (`window_size`); the mean segment length is
  ``n / (len(gold) + 1)``. When the sequence is not longer than the window
  (``n <= k``), ``k`` is lowered to ``n - 1`` so the single window compares the
  first and the last item; with fewer than two items there is nothing to
  disagree about and both metrics are 0.
* `delta_b`: MemLoom defines the boundary-count difference ΔB = B_sys − B_ref
  (seed §4.3, after Eq. (7); the minus sign is lost in the text extraction but
  the sign convention is spelled out): positive means fragmentation (more
  boundaries than the human reference), negative means over-merging. The seed
  gives no normalisation, so `delta_b` is the raw signed count, as defined.
  A raw count is not comparable between a 130-turn and a 1,300-turn meeting,
  so `delta_b_rate` divides it by the number of gold boundaries (−1.0 = no
  boundaries at all, +1.0 = twice as many as gold); average that one across
  meetings. (MemLoom's Table 2 also reports "Frag%" and "Over-Merge%" but does
  not define them, so they are not implemented.)

Baselines: `no_boundaries` (the whole meeting one event) and `fixed_windows`
(a new segment every ``size`` turns, the chunk-based baseline).

Detection: `texttiling` is an embedding TextTiling (Hearst, 1997, with sentence
vectors in place of term counts): the similarity of the mean vectors of the
``window`` items before and after each gap, its depth against the nearest
peaks on either side, and boundaries at the deepest gaps reaching a threshold,
no two closer than ``min_segment`` items. GAM's offline boundary detector is
this function (its parameters fit on QMSum train by `scripts/fit_gam.py`).
"""
from __future__ import annotations

import heapq
import math
from collections.abc import Hashable, Sequence

import numpy as np

__all__ = [
    "boundaries_from_labels",
    "boundaries_from_ranges",
    "check_boundaries",
    "deepest_gaps",
    "delta_b",
    "depth_scores",
    "delta_b_rate",
    "evaluate",
    "fixed_windows",
    "labels_from_boundaries",
    "no_boundaries",
    "pk",
    "segments_from_boundaries",
    "texttiling",
    "window_diff",
    "window_size",
]

Boundaries = list[int]


def check_boundaries(boundaries: Sequence[int], n: int) -> Boundaries:
    """`boundaries` as a sorted list without duplicates; ValueError if any is outside ``1 .. n-1``."""
    _check_n(n)
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
        _check_n(n)
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
    _check_n(n)
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


def window_size(gold: Sequence[int], n: int) -> int:
    """Half the mean gold segment length, rounded half up, at least 2."""
    _check_n(n)
    mean_length = n / (len(gold) + 1)
    return max(2, math.floor(mean_length / 2 + 0.5))


def pk(gold: Sequence[int], hyp: Sequence[int], n: int, k: int | None = None) -> float:
    """Pk: share of the ``n-k`` probes ``(i, i+k)`` where gold and hyp disagree on same-segment."""
    gold_labels, hyp_labels, k = _prepare(gold, hyp, n, k)
    if n < 2:
        return 0.0
    errors = sum(
        (gold_labels[i] == gold_labels[i + k]) != (hyp_labels[i] == hyp_labels[i + k]) for i in range(n - k)
    )
    return errors / (n - k)


def window_diff(gold: Sequence[int], hyp: Sequence[int], n: int, k: int | None = None) -> float:
    """WindowDiff: share of the ``n-k`` windows ``i+1 .. i+k`` holding different boundary counts."""
    gold_labels, hyp_labels, k = _prepare(gold, hyp, n, k)
    if n < 2:
        return 0.0
    # Segment labels count the boundaries seen so far, so a difference of
    # labels is the number of boundaries in positions i+1 .. i+k.
    errors = sum(
        (gold_labels[i + k] - gold_labels[i]) != (hyp_labels[i + k] - hyp_labels[i]) for i in range(n - k)
    )
    return errors / (n - k)


def delta_b(gold: Sequence[int], hyp: Sequence[int]) -> int:
    """ΔB = B_sys − B_ref as MemLoom defines it: > 0 fragmentation, < 0 over-merging."""
    return len(set(hyp)) - len(set(gold))


def delta_b_rate(gold: Sequence[int], hyp: Sequence[int]) -> float:
    """ΔB divided by the number of gold boundaries, comparable across meeting lengths.

    0.0 when both have no boundaries; ValueError when only gold has none (the
    rate is undefined).
    """
    n_gold = len(set(gold))
    if n_gold == 0:
        if not hyp:
            return 0.0
        raise ValueError("delta_b_rate is undefined when the gold segmentation has no boundaries")
    return delta_b(gold, hyp) / n_gold


def evaluate(gold: Sequence[int], hyp: Sequence[int], n: int, k: int | None = None) -> dict[str, float]:
    """All boundary metrics for one sequence: pk, window_diff, delta_b, delta_b_rate, and the k used."""
    used_k = _effective_k(gold, n, k)
    result: dict[str, float] = {
        "k": used_k,
        "pk": pk(gold, hyp, n, k),
        "window_diff": window_diff(gold, hyp, n, k),
        "delta_b": delta_b(gold, hyp),
    }
    if gold or not hyp:
        result["delta_b_rate"] = delta_b_rate(gold, hyp)
    return result


def no_boundaries(n: int) -> Boundaries:
    """The one-segment baseline: no boundaries at all."""
    _check_n(n)
    return []


def fixed_windows(n: int, size: int = 50) -> Boundaries:
    """The fixed-window (chunking) baseline: a new segment every `size` items."""
    _check_n(n)
    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        raise ValueError(f"window size must be a positive integer, got {size!r}")
    return list(range(size, n, size))


def gap_similarities(vectors: np.ndarray, window: int) -> np.ndarray:
    """Cosine of the mean unit vectors of the `window` items before and after each gap (gap i lies between
    items i and i+1; n-1 gaps), near the ends over the items there are."""
    n = len(vectors)
    if n < 2:
        return np.zeros(0)
    prefix = np.vstack([np.zeros((1, vectors.shape[1])), np.cumsum(vectors, axis=0)])
    sims = np.empty(n - 1)
    for i in range(n - 1):
        left = prefix[i + 1] - prefix[max(0, i + 1 - window)]
        right = prefix[min(n, i + 1 + window)] - prefix[i + 1]
        norm = float(np.linalg.norm(left) * np.linalg.norm(right))
        sims[i] = float(left @ right) / norm if norm else 0.0
    return sims


def depth_scores(vectors: np.ndarray, window: int) -> np.ndarray:
    """TextTiling depth of each gap: how far its similarity lies below the highest similarity reached by
    climbing from it to the left and to the right (0 where it is no valley)."""
    sims = gap_similarities(vectors, window)
    depth = np.zeros(len(sims))
    for i, here in enumerate(sims):
        left = right = here
        j = i
        while j > 0 and sims[j - 1] >= left:
            j -= 1
            left = sims[j]
        j = i
        while j < len(sims) - 1 and sims[j + 1] >= right:
            j += 1
            right = sims[j]
        depth[i] = (left - here) + (right - here)
    return depth


def texttiling(vectors: np.ndarray, window: int, threshold: float, min_segment: int) -> Boundaries:
    """Boundaries (segment starts, see the module doc) of `vectors` by their gaps' TextTiling depth."""
    return deepest_gaps(depth_scores(vectors, window), threshold, min_segment)


def deepest_gaps(depth: np.ndarray, threshold: float, min_segment: int) -> Boundaries:
    """Segment starts at the deepest gaps whose depth reaches `threshold`, taken deepest first (ties: the
    earlier gap) while every segment keeps `min_segment` items (gap i starts a segment at i+1)."""
    n = len(depth) + 1
    starts: list[int] = []
    for gap in sorted(range(len(depth)), key=lambda g: (-round(float(depth[g]), 9), g)):
        if depth[gap] < threshold or depth[gap] <= 0:
            break
        start = gap + 1
        edges = [0, *starts, n]
        if start < min_segment or n - start < min_segment or \
                any(abs(start - e) < min_segment for e in edges[1:-1]):
            continue
        starts.append(start)
    return sorted(starts)


def _check_n(n: int) -> None:
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise ValueError(f"n must be a non-negative integer, got {n!r}")


def _effective_k(gold: Sequence[int], n: int, k: int | None) -> int:
    if k is None:
        k = window_size(gold, n)
    elif isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError(f"window size k must be a positive integer, got {k!r}")
    return max(1, min(k, n - 1))


def _prepare(gold: Sequence[int], hyp: Sequence[int], n: int, k: int | None) -> tuple[list[int], list[int], int]:
    gold_labels = labels_from_boundaries(gold, n)
    hyp_labels = labels_from_boundaries(hyp, n)
    return gold_labels, hyp_labels, _effective_k(gold, n, k)


def turn_labels(state) -> list[int]:
    """Each ingested turn's group node (event, topic …) in ingestion order: the boundary projection.

    A turn belongs to the group node whose `members` hold its node, preferring one no lineage edge
    retired, then one on the retrieval surface, then the newest; a turn in no group is its own segment.
    """
    lineage = state.schema.lineage_types if state.schema else ()
    owner: dict[int, tuple] = {}
    for n in state.nodes.values():
        retired = any(state.inc(n.id, t) for t in lineage)
        for m in n.members:
            key = (not retired, n.visible, n.id)
            if m not in owner or key > owner[m]:
                owner[m] = key
    labels = []
    for tid in state.turn_ids:
        node = state.turn_units.get(tid)
        labels.append(owner[node][2] if node in owner else -(node or 0) - 1)
    return labels

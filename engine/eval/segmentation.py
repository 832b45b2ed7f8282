"""Event-boundary quality: segmentations of a turn sequence and Pk, WindowDiff, ΔB (DESIGN §7).

Segmentations are sorted boundary lists (`engine.core.segments`).

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
"""
from __future__ import annotations

import math
from collections.abc import Sequence

from engine.core.segments import check_length, labels_from_boundaries

__all__ = ["delta_b", "delta_b_rate", "evaluate", "pk", "turn_labels", "window_diff", "window_size"]


def window_size(gold: Sequence[int], n: int) -> int:
    """Half the mean gold segment length, rounded half up, at least 2."""
    check_length(n)
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

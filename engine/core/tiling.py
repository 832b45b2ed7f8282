"""Boundary detection by embedding TextTiling (Hearst, 1997, with sentence vectors in place of term counts).

The similarity of the mean vectors of the ``window`` items before and after
each gap, its depth against the nearest peaks on either side, and boundaries
(segment starts, as in `engine.core.segments`) at the deepest gaps reaching a
threshold, no two closer than ``min_segment`` items. GAM's offline boundary
detector is `texttiling` (its parameters calibrated for chats on LoCoMo dev by
`scripts/fit_gam_chat.py`, for meetings fit on QMSum train by `scripts/fit_gam.py`).
"""
from __future__ import annotations

import numpy as np

from engine.core import segments
from engine.core.segments import Boundaries


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
    return segments.depth_scores(gap_similarities(vectors, window))


def texttiling(vectors: np.ndarray, window: int, threshold: float, min_segment: int) -> Boundaries:
    """Boundaries of `vectors` by their gaps' TextTiling depth."""
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

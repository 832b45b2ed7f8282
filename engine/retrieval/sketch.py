"""What a query over a large surface reads instead of every float32 row: an 8-bit copy of the rows, for finding
the candidates near the query, and the rows' running first and second moments, from which the mean and spread
of any query's cosines over the whole surface follow without scoring one row.

At 100,000 visible units one pass over the float32 rows is most of a query (about 8 ms here: 150 MB read).
Relevance needs that pass for two things only: the z-statistics of the dense scores, and the few units that can
rank near the top. The first is exact from the moments (mean q·Σx / n, second moment qᵀ(Σxxᵀ)q / n). The second
is bounded. A row is stored as integers c = round(S·x) (|c| ≤ 127; S from the largest component seen), the
query as g = round(T·q), and FAISS's 8-bit scan (QT_8bit_direct_signed, integer products, a fifth of the float32
pass) returns g·c; g·c / (S·T) differs from the exact cosine q·x by at most L / 2T + ‖q‖₁ / 2S, where L bounds
every stored row's ‖c‖₁ / S (rounding of each side, by Hölder), plus the float32 rounding of the exact product.
So a row the scan leaves out has an exact cosine no higher than the last one it found plus that bound: the
`ceiling` `engine.retrieval.relevance` needs to prove a rescored top complete, and so exactly the ranking of the
whole surface.

The rows are kept aligned with the float32 index's storage (`VisibleIndex`): appended, overwritten and removed
together, so a row number means the same unit in both.
"""
from __future__ import annotations

from collections.abc import Callable

import faiss
import numpy as np

# Sets this large are ranked from their sketch; below it one pass over the float32 rows costs under 2 ms.
SKETCH_FROM = 20_000
LEVELS = 127              # |c| and |g| at most this: one signed byte each
HEADROOM = 1.25           # the scale leaves room for components this much larger than the largest seen
FLOAT_ERROR = 3e-5        # the float32 rounding of a 384-term unit dot product (384 · 2⁻²⁴), rounded up
PENDING_ROWS = 4096       # rows whose outer products wait to be added to the Gram matrix together


def inner_products(matrix_ptr, vector: np.ndarray, rows: int) -> np.ndarray:
    """Dot products of `vector` with `rows` stored float32 rows (a FAISS pointer): one C loop, each row on its
    own, so a row's value never depends on its position or on how many rows there are (BLAS's does)."""
    query = np.ascontiguousarray(vector, dtype=np.float32)
    out = np.empty(rows, dtype=np.float32)
    if rows:
        faiss.fvec_inner_products_ny(faiss.swig_ptr(out), faiss.swig_ptr(query), matrix_ptr, query.shape[0], rows)
    return out


def row_products(matrix: np.ndarray, rows: np.ndarray, vector: np.ndarray) -> np.ndarray:
    """`inner_products` of `vector` with `matrix[rows]` only: each row's value as a pass over the whole matrix
    gives it (float32)."""
    picked = np.ascontiguousarray(matrix[rows], dtype=np.float32)
    return inner_products(faiss.swig_ptr(picked), vector, len(picked))


class SurfaceSketch:
    """An 8-bit FAISS copy of a set of unit rows (row numbers as ids) and their float64 moments.

    `source()` gives the float32 rows as they are now: when a row arrives with a component beyond the scale,
    every row is stored again at a new scale, which happens a few times at most (the scale grows by
    `HEADROOM` each time and a unit vector's components are at most 1)."""

    def __init__(self, source: Callable[[], np.ndarray]):
        self.source = source
        rows = np.ascontiguousarray(source(), dtype=np.float32)
        self.dim = rows.shape[1]
        wide = rows.astype(np.float64)
        self.total = wide.sum(axis=0)
        self._gram = wide.T @ wide
        self._pending: list[tuple[np.ndarray, float]] = []      # rows whose outer products are still to add (±1)
        self._pending_rows = 0
        self._store(rows)

    def _note(self, rows: np.ndarray, sign: float) -> None:
        """Add (sign 1) or take away (-1) rows' outer products, folded into the Gram matrix together when it is
        read or when enough wait: one product per turn would move the whole 384 x 384 matrix each time."""
        self.total += sign * rows.sum(axis=0, dtype=np.float64)
        self._pending.append((rows.astype(np.float64), sign))
        self._pending_rows += len(rows)
        if self._pending_rows >= PENDING_ROWS:
            self._fold()

    def _fold(self) -> None:
        for sign in (1.0, -1.0):
            chunk = [r for r, s in self._pending if s == sign]
            if chunk:
                rows = np.concatenate(chunk)
                self._gram += sign * (rows.T @ rows)
        self._pending, self._pending_rows = [], 0

    @property
    def gram(self) -> np.ndarray:
        """Σ x xᵀ over the rows held."""
        if self._pending:
            self._fold()
        return self._gram

    def _store(self, rows: np.ndarray) -> None:
        """Quantize every row afresh, at a scale fitting the largest component."""
        self.scale = LEVELS / (HEADROOM * max(float(np.abs(rows).max()) if rows.size else 0.0, 1e-3))
        self.l1 = 0.0
        self.byte = faiss.IndexScalarQuantizer(self.dim, faiss.ScalarQuantizer.QT_8bit_direct_signed,
                                               faiss.METRIC_INNER_PRODUCT)
        self.byte.add(self._levels(rows))

    def _levels(self, rows: np.ndarray) -> np.ndarray:
        """round(S·x) as float32 integers (FAISS stores them exactly), noting the largest ‖c‖₁ / S."""
        levels = np.rint(rows * self.scale).astype(np.float32)
        if len(levels):
            self.l1 = max(self.l1, float(np.abs(levels).sum(axis=1).max()) / self.scale)
        return levels

    def _fits(self, rows: np.ndarray) -> bool:
        return not rows.size or float(np.abs(rows).max()) * self.scale <= LEVELS

    def __len__(self) -> int:
        return self.byte.ntotal

    def codes(self) -> np.ndarray:
        """The stored rows as a writable (rows, dim) byte view (each level + 128)."""
        return np.asarray(faiss.rev_swig_ptr(self.byte.codes.data(), len(self) * self.dim)).reshape(
            len(self), self.dim)

    def add(self, rows: np.ndarray) -> None:
        """Rows appended after the last (`source()` already holds them)."""
        rows = np.ascontiguousarray(rows, dtype=np.float32)
        self._note(rows, 1.0)
        if self._fits(rows):
            self.byte.add(self._levels(rows))
        else:
            self._store(self.source())

    def replace(self, at: list[int], old: np.ndarray, new: np.ndarray) -> None:
        """Rows `at` changed from `old` to `new` (`source()` already holds the new ones)."""
        new = np.ascontiguousarray(new, dtype=np.float32)
        self._note(np.asarray(old, dtype=np.float32), -1.0)
        self._note(new, 1.0)
        if self._fits(new):
            self.codes()[at] = self.byte.sa_encode(self._levels(new))
        else:
            self._store(self.source())

    def remove(self, at: np.ndarray, old: np.ndarray) -> None:
        """Drop rows `at` (holding `old`); the later rows move up in order, as the float32 index's do. L stays
        a bound (it may only be larger than the largest left)."""
        self.byte.remove_ids(faiss.IDSelectorBatch(np.asarray(at, dtype=np.int64)))
        self._note(np.asarray(old, dtype=np.float32), -1.0)

    def moments(self, query: np.ndarray) -> tuple[float, float]:
        """The mean and standard deviation of the query's cosines over every row."""
        n = len(self)
        if not n:
            return 0.0, 0.0
        q = np.asarray(query, dtype=np.float64)
        mean = float(q @ self.total) / n
        second = float(q @ self.gram @ q) / n
        return mean, max(second - mean * mean, 0.0) ** 0.5

    def nearest(self, query: np.ndarray, m: int) -> tuple[np.ndarray, float]:
        """The rows of the `m` best 8-bit cosines, and the ceiling of every other row's exact cosine."""
        q = np.asarray(query, dtype=np.float32)
        top = float(np.abs(q).max()) if q.size else 0.0
        if not len(self) or not top:
            return np.zeros(0, dtype=np.int64), float("inf")
        t = LEVELS / top
        scores, rows = self.byte.search(np.rint(q * t).reshape(1, -1), min(m, len(self)))
        found = rows[0] >= 0
        error = self.l1 / (2 * t) + float(np.abs(q).sum()) / (2 * self.scale) + FLOAT_ERROR
        return rows[0][found], float(scores[0][found][-1]) / (self.scale * t) + error


class SketchedRows:
    """The vectors of a set of ids that only grows, each new id larger than every one before (an engine's
    records, appended in time), as one float32 matrix in id order, with its sketch once it holds
    `SKETCH_FROM` rows. `sync` extends it when the set has only grown, and builds it afresh otherwise."""

    def __init__(self, dim: int):
        self.ids = np.zeros(0, dtype=np.int64)
        self._buffer = np.zeros((0, dim), dtype=np.float32)
        self.sketch: SurfaceSketch | None = None

    @property
    def matrix(self) -> np.ndarray:
        return self._buffer[:len(self.ids)]

    def sync(self, ids: np.ndarray, vector_of: Callable[[int], np.ndarray]) -> None:
        """Hold exactly `ids` (increasing), reading a new id's vector with `vector_of`."""
        n = len(self.ids)
        grown = len(ids) >= n and np.array_equal(ids[:n], self.ids)
        new = ids[n:] if grown else ids
        if not grown:
            self.ids, self.sketch = self.ids[:0], None
        if len(new):
            rows = np.stack([vector_of(i) for i in new.tolist()]).astype(np.float32)
            start = len(self.ids)
            if start + len(rows) > len(self._buffer):
                bigger = np.zeros((max(2 * len(self._buffer), start + len(rows)), rows.shape[1]), dtype=np.float32)
                bigger[:start] = self._buffer[:start]
                self._buffer = bigger
            self._buffer[start:start + len(rows)] = rows
            self.ids = np.asarray(ids, dtype=np.int64).copy()
            if self.sketch is not None:
                self.sketch.add(rows)
        if self.sketch is None and len(self.ids) >= SKETCH_FROM:
            self.sketch = SurfaceSketch(lambda: self.matrix)

    def holds(self, uid: int) -> bool:
        i = int(np.searchsorted(self.ids, uid))
        return i < len(self.ids) and int(self.ids[i]) == uid

    def dense_of(self, vector: np.ndarray, ids: np.ndarray) -> np.ndarray:
        """The cosine of `vector` with each of `ids` (all held), each from its own row (float64)."""
        return row_products(self.matrix, np.searchsorted(self.ids, ids), vector).astype(np.float64)

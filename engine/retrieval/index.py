"""FAISS exact inner-product index over the visible surface only, growing vector rows scored whole (a gate's store),
and exact top-k selection by score. A surface of `SKETCH_FROM` units or more also keeps its `SurfaceSketch`."""
from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import faiss
import numpy as np

from engine.retrieval.sketch import SKETCH_FROM, SurfaceSketch, inner_products, row_products

# Rankings order by the score rounded to 6 decimals, then by id. A score more than this below the k-th best
# raw score rounds strictly lower, so it cannot reach the top k: selection may drop it unsorted.
TIE_MARGIN = 2e-6
# Below this many values `rounded` calls `round` on each: the array path's fixed cost (~8 µs) is more.
ROUND_IN_PYTHON = 32
# Neighbours fetched beyond k at first; widened (x4) only when the last one fetched could still tie the k-th.
SEARCH_SLACK = 16

# One thread: a search here is one query over at most a few thousand vectors, where FAISS's OpenMP threads cost
# far more than they save (20 ms instead of 0.03 ms per search on a busy 2-core machine, as they spin-wait).
faiss.omp_set_num_threads(1)


def top_k(ids: Sequence[int] | np.ndarray, scores: np.ndarray, k: int, decimals: int = 6) -> list[int]:
    """The `k` ids of highest score, ties at `decimals` decimals by smaller id: exactly
    ``sorted(ids, key=(-round(score, decimals), id))[:k]``, but only the near-top scores are sorted in Python
    (a partition finds them), so choosing a few among n costs O(n) instead of an O(n log n) Python sort."""
    n = len(ids)
    if k <= 0 or n == 0:
        return []
    keep: Sequence[int] = range(n)
    if k < n:
        kth = np.partition(scores, n - k)[n - k]
        keep = np.flatnonzero(scores >= kth - 2 * 10.0 ** -decimals).tolist()
    order = sorted(keep, key=lambda i: (-round(float(scores[i]), decimals), int(ids[i])))
    return [int(ids[i]) for i in order[:k]]


def rounded(values: np.ndarray, decimals: int) -> np.ndarray:
    """Python's ``round(v, decimals)`` of every value, as an array: rint(v·10^d)/10^d is that exactly (both are
    the double nearest N/10^d) unless v·10^d lies within its rounding error of a half, where `round` decides."""
    if len(values) < ROUND_IN_PYTHON:
        return np.array([round(v, decimals) for v in np.asarray(values, dtype=np.float64).tolist()], dtype=np.float64)
    scale = 10.0 ** decimals
    with np.errstate(over="ignore", invalid="ignore"):
        scaled = np.asarray(values, dtype=np.float64) * scale
        out = np.rint(scaled) / scale
        unsure = np.abs(scaled - np.floor(scaled) - 0.5) <= 4 * np.spacing(np.abs(scaled)) + 1e-9
        unsure |= ~(np.abs(scaled) < 2.0 ** 52)
    for i in np.flatnonzero(unsure).tolist():
        out[i] = round(float(values[i]), decimals)
    return out


def where_of(ids: np.ndarray) -> np.ndarray:
    """A position lookup for increasing `ids`: where[id] is id's index in `ids`, -1 for an id not among them
    (length max id + 1)."""
    where = np.full(int(ids[-1]) + 1 if len(ids) else 0, -1, dtype=np.int64)
    where[ids] = np.arange(len(ids))
    return where


def position(where: np.ndarray, uid: int) -> int:
    """`uid`'s index by a `where_of` lookup, -1 when it is not among the ids (or beyond the largest)."""
    return int(where[uid]) if 0 <= uid < len(where) else -1


def positions(where: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """`position` of each of `ids` at once."""
    inside = ids < len(where)
    out = np.full(len(ids), -1, dtype=np.int64)
    out[inside] = where[ids[inside]]
    return out


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    """One dense score, computed as the surface's are (`inner_products`)."""
    row = np.ascontiguousarray(a, dtype=np.float32)
    return float(inner_products(faiss.swig_ptr(row), b, 1)[0])


class VectorRows:
    """Vectors by id in one growing float32 matrix, for a set that changes a little at every turn and is scored
    whole against one vector at a time (a store an online gate searches). Adding or removing an id moves at most
    one row (a removal fills its hole with the last row), so nothing is restacked per search; `dots` gives the
    ids in row order, which no caller may rely on (ties are broken by id)."""

    def __init__(self, dim: int = 384):
        self.matrix = np.zeros((16, dim), dtype=np.float32)
        self.ids = np.zeros(16, dtype=np.int64)
        self.row: dict[int, int] = {}

    def __len__(self) -> int:
        return len(self.row)

    def add(self, uid: int, vector: np.ndarray) -> None:
        """Put `uid` in the set with this vector (a new vector for one already in it)."""
        r = self.row.get(uid)
        if r is None:
            r = len(self.row)
            if r == len(self.ids):
                self.matrix = np.vstack([self.matrix, np.zeros_like(self.matrix)])
                self.ids = np.concatenate([self.ids, np.zeros_like(self.ids)])
            self.row[uid] = r
            self.ids[r] = uid
        self.matrix[r] = vector

    def remove(self, uid: int) -> None:
        r = self.row.pop(uid, None)
        if r is None:
            return
        last = len(self.row)
        if r != last:
            moved = int(self.ids[last])
            self.matrix[r], self.ids[r] = self.matrix[last], moved
            self.row[moved] = r

    def dots(self, vector: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The ids and each one's dot product with `vector` (the cosine, for unit vectors)."""
        n = len(self.row)
        return self.ids[:n].copy(), self.matrix[:n] @ vector


class Surface(NamedTuple):
    """The visible ids in increasing order, where each sits in FAISS storage, and a position lookup by id."""
    ids: np.ndarray          # int64, sorted
    storage: np.ndarray      # storage[i]: FAISS row of ids[i]
    where: np.ndarray        # where[uid]: index of uid in `ids`, -1 off the surface (length max id + 1)
    stored: np.ndarray       # stored[row]: the id at FAISS row `row`


class VisibleIndex:
    """IndexFlatIP on unit-normalised vectors with id mapping.

    It holds exactly the visible units: engines call `add`/`remove` on every
    visibility or descriptor change, so Stage-1 search never sees archived units.
    """

    def __init__(self, dim: int = 384):
        self.dim = dim
        self.flat = faiss.IndexFlatIP(dim)
        self.index = faiss.IndexIDMap2(self.flat)
        self.ids: set[int] = set()
        self._surface: Surface | None = None
        self._rows: dict[int, int] | None = {}        # id -> FAISS row; None after a removal shifted rows
        self._leaving: set[int] = set()               # ids taken off the surface, still stored until the next read
        self.sketch_from = SKETCH_FROM
        self._sketch: SurfaceSketch | None = None     # kept row for row with the storage once built

    def __len__(self) -> int:
        return len(self.ids)

    def add(self, ids: list[int], vectors: np.ndarray) -> None:
        """Put `ids` on the surface with these vectors. One already there keeps its row and has its vector
        overwritten in place: a group node's centroid changes on every turn that joins it, and removing a row
        from FAISS compacts the whole index and rebuilds its id map (most of a 100,000-unit MemLoom ingest).
        No score depends on a row's position (`inner_products`), so where a vector sits changes nothing."""
        if not ids:
            return
        vectors = np.ascontiguousarray(vectors, dtype=np.float32).reshape(len(ids), self.dim)
        back = [i for i in ids if i in self._leaving]
        if back:
            self._leaving.difference_update(back)
            self.ids.update(back)
            self._surface = None
        kept = [j for j, i in enumerate(ids) if i in self.ids]
        if kept:
            rows = self.rows()
            at = [rows[ids[j]] for j in kept]
            stored = self._stored()
            old = stored[at].copy() if self._sketch is not None else None
            stored[at] = vectors[kept]
            if self._sketch is not None:
                self._sketch.replace(at, old, vectors[kept])
        fresh = [j for j, i in enumerate(ids) if i not in self.ids]
        if fresh:
            first = self.flat.ntotal
            self.index.add_with_ids(vectors[fresh], np.asarray([ids[j] for j in fresh], dtype=np.int64))
            if self._sketch is not None:
                self._sketch.add(vectors[fresh])
            self.ids.update(ids[j] for j in fresh)
            if self._rows is not None:
                self._rows.update((ids[j], first + r) for r, j in enumerate(fresh))
            self._surface = None

    def _stored(self) -> np.ndarray:
        """The float32 storage as a writable (rows, dim) view."""
        n = self.flat.ntotal
        return faiss.rev_swig_ptr(self.flat.get_xb(), n * self.dim).reshape(n, self.dim)

    def rows(self) -> dict[int, int]:
        """Each id's row in FAISS storage: kept as rows are appended, read again from the id map after a
        removal (which shifts every later row down)."""
        if self._rows is None:
            stored = faiss.vector_to_array(self.index.id_map).tolist()
            self._rows = dict(zip(stored, range(len(stored))))
        return self._rows

    def remove(self, ids: list[int]) -> None:
        """Take `ids` off the surface. FAISS compacts the whole index at every removal, so the rows are dropped
        together at the next read (`_settle`): an ingest that takes a unit off the surface at every turn and
        reads the index only when asked a question pays one compaction per question, not one per turn."""
        present = [i for i in ids if i in self.ids]
        if present:
            self.ids.difference_update(present)
            self._leaving.update(present)
            self._surface = None

    def _settle(self) -> None:
        """Drop the rows of the ids taken off the surface since the last read."""
        if self._leaving:
            leaving = np.asarray(sorted(self._leaving), dtype=np.int64)
            if self._sketch is not None:
                at = np.flatnonzero(np.isin(faiss.vector_to_array(self.index.id_map), leaving))
                self._sketch.remove(at, self._stored()[at])
            self.index.remove_ids(leaving)
            self._leaving.clear()
            self._surface = self._rows = None

    def sketch(self) -> SurfaceSketch | None:
        """The surface's sketch when it holds `sketch_from` units or more (built at the first call that needs
        it, then kept with every change), else None."""
        self._settle()
        if len(self.ids) < self.sketch_from:
            return None
        if self._sketch is None:
            self._sketch = SurfaceSketch(self._stored)
        return self._sketch

    def dense_of(self, vector: np.ndarray, ids: np.ndarray) -> np.ndarray:
        """The cosine of `vector` with each of `ids` (all on the surface), as `surface_scores` gives it: the
        same per-row products over only these rows (float64)."""
        surface = self.surface()
        return row_products(self._stored(), surface.storage[surface.where[ids]], vector).astype(np.float64)

    def search(self, vector: np.ndarray, k: int) -> list[tuple[int, float]]:
        """Top-k (id, cosine), ties (equal to 6 decimals) broken by smaller id for determinism.

        FAISS is asked for k + `SEARCH_SLACK` neighbours, more only while the last one fetched could still
        tie the k-th, so a search sorts a few dozen pairs in Python rather than the whole surface.
        """
        if not self.ids or k <= 0:
            return []
        sketch = self.sketch()
        if sketch is not None:
            found = self._sketched_search(sketch, vector, k)
            if found is not None:
                return found
        n = len(self.ids)
        query = np.asarray(vector, dtype=np.float32).reshape(1, -1)
        fetch = min(n, k + SEARCH_SLACK)
        while True:
            scores, ids = self.index.search(query, fetch)
            pairs = [(int(i), float(s)) for i, s in zip(ids[0], scores[0]) if i >= 0]
            if fetch >= n or len(pairs) <= k or pairs[-1][1] < pairs[k - 1][1] - TIE_MARGIN:
                break
            fetch = min(n, fetch * 4)
        pairs.sort(key=lambda p: (-round(p[1], 6), p[0]))
        return pairs[:k]

    def _sketched_search(self, sketch: SurfaceSketch, vector: np.ndarray, k: int) -> list[tuple[int, float]] | None:
        """`search` from the sketch's scan, its rows rescored exactly (the values FAISS's search gives), widened
        until the k-th is clearly above the ceiling of every row left out; None once that means every row."""
        stored = self.surface().stored
        m = max(4 * k, SEARCH_SLACK * 4)
        while m < len(self.ids):
            rows, ceiling = sketch.nearest(vector, m)
            rows = np.sort(rows)
            scores = row_products(self._stored(), rows, vector)
            pairs = sorted(zip(stored[rows].tolist(), scores.tolist()), key=lambda p: (-round(p[1], 6), p[0]))[:k]
            if len(pairs) == k and round(pairs[-1][1], 6) > ceiling + TIE_MARGIN:
                return pairs
            m *= 4
        return None

    def surface(self) -> Surface:
        """The surface's ids in id order (rebuilt only after the surface changed)."""
        self._settle()
        if self._surface is None:
            stored = faiss.vector_to_array(self.index.id_map).astype(np.int64)
            storage = np.argsort(stored, kind="stable")
            ids = stored[storage]
            self._surface = Surface(ids, storage, where_of(ids), stored)
        return self._surface

    def surface_scores(self, vector: np.ndarray) -> tuple[Surface, np.ndarray]:
        """Cosine of `vector` with every visible unit, aligned with `surface().ids` (float64)."""
        surface = self.surface()                      # settles first: every stored row is on the surface
        dense = inner_products(self.flat.get_xb(), vector, self.flat.ntotal)
        return surface, dense[surface.storage].astype(np.float64)

    def all_scores(self, vector: np.ndarray) -> dict[int, float]:
        surface, dense = self.surface_scores(vector)
        return dict(zip(surface.ids.tolist(), dense.tolist()))

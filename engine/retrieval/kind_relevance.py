"""Relevance of a fixed set of nodes (an engine's records of one kind), z over that set: what MemLoom ranks its
sentence records by and GAM its topics and events. The same fusion as `engine.retrieval.relevance` (z(dense) +
w·z(BM25)), over arrays aligned with the set's ids; over a large set of records held in `SketchedRows`, from
their sketch (`SketchedKindRelevance`), as the surface's relevance is from the surface's.
"""
from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import NamedTuple

import numpy as np

from engine.retrieval.index import position, positions, rounded, top_k, where_of
from engine.retrieval.lexical import at, hits_of
from engine.retrieval.relevance import DECIMALS, GATHER_MAX, ZReference, scan_top, sketched_statistics
from engine.retrieval.sketch import SketchedRows


class ById(Mapping):
    """A read-only {id: value} view of an array aligned with a `Positions` set, rounded to `decimals` on read when
    given: per-id reads of a query's scores without a dict per query."""

    def __init__(self, at_: "Positions", values: np.ndarray, decimals: int | None = None):
        self.positions, self.values, self.decimals = at_, values, decimals

    def _index(self, uid: object) -> int:
        return position(self.positions.where, uid) if isinstance(uid, (int, np.integer)) else -1

    def __contains__(self, uid: object) -> bool:
        return self._index(uid) >= 0

    def __getitem__(self, uid: int) -> float:
        i = self._index(uid)
        if i < 0:
            raise KeyError(uid)
        value = float(self.values[i])
        return value if self.decimals is None else round(value, self.decimals)

    def __iter__(self) -> Iterator[int]:
        return iter(self.positions.ids)

    def __len__(self) -> int:
        return len(self.positions.ids)


class Positions(NamedTuple):
    """A fixed set of node ids in increasing order and where each sits (`where_of`)."""

    ids: list[int]
    array: np.ndarray
    where: np.ndarray

    @classmethod
    def of(cls, ids: list[int]) -> "Positions":
        array = np.asarray(ids, dtype=np.int64)
        return cls(list(ids), array, where_of(array))

    def find(self, ids: list[int] | np.ndarray) -> np.ndarray:
        """The index of each of `ids` in the set, -1 for one not in it."""
        return positions(self.where, np.asarray(ids, dtype=np.int64))


def lookup_dicts(ids: list[int], values: np.ndarray) -> tuple[dict[int, float], dict[int, float]]:
    """`lookup`'s answer: {id: value} and {id: value rounded to `DECIMALS`}."""
    return dict(zip(ids, values.tolist())), dict(zip(ids, rounded(values, DECIMALS).tolist()))


class KindRelevance:
    """z(dense) + w·z(BM25) of a fixed set of nodes (an engine's records of one kind), z over that set: the
    relevance MemLoom ranks its sentence records by and GAM its topics and events. Arrays aligned with the ids;
    `fused`, `order` (fused rounded as rankings key it), `dense` and `lexical` read them by id."""

    def __init__(self, at_: Positions, dense: np.ndarray, bm25_by_id: np.ndarray, weight: float):
        """`dense`: the set's cosines in id order; `bm25_by_id`: the query's BM25 indexed by node id."""
        self.positions, self.weight = at_, weight
        ids = at_.array
        n = len(ids)
        lex = at(bm25_by_id, ids) if weight and n else np.zeros(n)
        self.dense_mu, self.dense_sd, self.lex_mu, self.lex_sd = 0.0, 1.0, 0.0, 1.0
        if n:
            self.dense_mu, self.dense_sd = float(dense.mean()), float(dense.std() or 1.0)
            self.lex_mu, self.lex_sd = float(lex.mean()), float(lex.std() or 1.0)
        fused = (dense - self.dense_mu) / self.dense_sd
        if weight:
            fused = fused + weight * (lex - self.lex_mu) / self.lex_sd
        self.scores = fused
        self.fused = ById(at_, fused)
        self.order = ById(at_, fused, DECIMALS)
        self.dense = ById(at_, dense)
        self.lexical = ById(at_, lex)

    @property
    def ids(self) -> list[int]:
        return self.positions.ids

    @property
    def reference(self) -> ZReference:
        """What the z-values are relative to: the whole set, none of it off a surface."""
        return ZReference(len(self.positions.ids), 0, self.dense_mu, self.dense_sd, self.lex_mu, self.lex_sd)

    def z(self, uid: int) -> tuple[float, float]:
        """The z-values of both signals of `uid`."""
        return ((self.dense[uid] - self.dense_mu) / self.dense_sd,
                (self.lexical[uid] - self.lex_mu) / self.lex_sd if self.weight else 0.0)

    def lookup(self, ids: list[int]) -> tuple[dict[int, float], dict[int, float]]:
        """{id: fused} and {id: fused rounded to `DECIMALS`} of those of `ids` in the set: the records a query
        reads again and again, as plain dicts."""
        found = np.asarray(ids, dtype=np.int64)
        pos = self.positions.find(found)
        return lookup_dicts(found[pos >= 0].tolist(), self.scores[pos[pos >= 0]])

    def columns(self, ids: list[int]) -> tuple[list[float], list[float], list[float]]:
        """The fused, dense and lexical scores of `ids` (all in the set), as lists in that order."""
        pos = self.positions.where[np.asarray(ids, dtype=np.int64)]
        return self.scores[pos].tolist(), self.dense.values[pos].tolist(), self.lexical.values[pos].tolist()

    def ranked(self, among: np.ndarray | None = None, top: int | None = None) -> list[tuple[int, float]]:
        """The best `top` (all by default) of the set, or of the ids `among` it, by fused score rounded to
        `DECIMALS`, ties by id, with their fused score."""
        pos = np.arange(len(self.positions.array)) if among is None else self.positions.where[among]
        ids, scores = self.positions.array[pos], self.scores[pos]
        chosen = top_k(ids, scores, len(ids) if top is None else min(top, len(ids)), DECIMALS)
        return [(uid, self.fused[uid]) for uid in chosen]


class LazyColumn(Mapping):
    """A read-only {id: value} view of one column of a `SketchedKindRelevance`, each value computed when read."""

    def __init__(self, rel: "SketchedKindRelevance", column: int, decimals: int | None = None):
        self.rel, self.column, self.decimals = rel, column, decimals

    def __contains__(self, uid: object) -> bool:
        return isinstance(uid, (int, np.integer)) and position(self.rel.positions.where, int(uid)) >= 0

    def __getitem__(self, uid: int) -> float:
        """Through `row`: a query reads a few dozen ids one at a time, mostly ones already scored, and making an
        array for each cost most of a millisecond a query at 100,000 records."""
        if uid not in self:
            raise KeyError(uid)
        value = self.rel.row(int(uid))[self.column]
        return value if self.decimals is None else round(value, self.decimals)

    def __iter__(self) -> Iterator[int]:
        return iter(self.rel.positions.ids)

    def __len__(self) -> int:
        return len(self.rel.positions.ids)


class SketchedKindRelevance(KindRelevance):
    """`KindRelevance` of a large set held in `SketchedRows`: the same scores and rankings, but the z-statistics
    come from the rows' moments, a ranking from the sketch's scan rescored exactly (`scan_top`), and a score is
    computed for the ids a query reads, not for the whole set (`scores` still gives every one, when asked)."""

    def __init__(self, at_: Positions, rows: SketchedRows, query_vector: np.ndarray, bm25_by_id: np.ndarray,
                 weight: float):
        """`rows` holds exactly the set's ids, with a sketch."""
        self.positions, self.weight, self.rows, self.zq = at_, weight, rows, query_vector
        self.by_id = bm25_by_id if weight else np.zeros(0)
        hits = hits_of(self.by_id)
        self.hits = hits[at_.find(hits) >= 0]
        self.dense_mu, self.dense_sd, self.lex_mu, self.lex_sd = sketched_statistics(
            rows.sketch, query_vector, self.by_id[self.hits], len(at_.ids))
        self._known: dict[int, tuple[float, float, float]] = {}      # id -> (fused, dense, lexical)
        self._scores: np.ndarray | None = None
        self.fused, self.order = LazyColumn(self, 0), LazyColumn(self, 0, DECIMALS)
        self.dense, self.lexical = LazyColumn(self, 1), LazyColumn(self, 2)

    def fuse(self, dense: np.ndarray, lex: np.ndarray) -> np.ndarray:
        fused = (dense - self.dense_mu) / self.dense_sd
        return fused + self.weight * (lex - self.lex_mu) / self.lex_sd if self.weight else fused

    def values(self, ids: np.ndarray) -> tuple[list[float], list[float], list[float]]:
        """The fused, dense and lexical scores of `ids` (all in the set), each from its own row."""
        new = np.asarray([u for u in ids.tolist() if u not in self._known], dtype=np.int64)
        if len(new):
            dense = self.rows.dense_of(self.zq, new)
            lex = at(self.by_id, new) if self.weight else np.zeros(len(new))
            self._known.update(zip(new.tolist(), zip(self.fuse(dense, lex).tolist(), dense.tolist(),
                                                     lex.tolist())))
        rows = [self._known[u] for u in ids.tolist()]
        return [r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows]

    def row(self, uid: int) -> tuple[float, float, float]:
        """(fused, dense, lexical) of one id of the set, as `values` gives it."""
        found = self._known.get(uid)
        if found is None:
            self.values(np.asarray([uid], dtype=np.int64))
            found = self._known[uid]
        return found

    @property
    def scores(self) -> np.ndarray:
        if self._scores is None:
            self._scores = np.asarray(self.values(self.positions.array)[0])
        return self._scores

    def lookup(self, ids: list[int]) -> tuple[dict[int, float], dict[int, float]]:
        found = np.asarray(ids, dtype=np.int64)
        found = found[self.positions.find(found) >= 0]
        return lookup_dicts(found.tolist(), np.asarray(self.values(found)[0], dtype=np.float64))

    def columns(self, ids: list[int]) -> tuple[list[float], list[float], list[float]]:
        return self.values(np.asarray(ids, dtype=np.int64))

    def ranked(self, among: np.ndarray | None = None, top: int | None = None) -> list[tuple[int, float]]:
        if among is not None and len(among) == len(self.positions.ids):
            among = None
        ids = self.positions.array if among is None else np.asarray(among, dtype=np.int64)
        limit = len(ids) if top is None else min(top, len(ids))
        if self._scores is not None:
            return super().ranked(among, top)
        if limit < len(ids) and len(ids) > GATHER_MAX:
            hits = self.hits if among is None else np.intersect1d(self.hits, among, assume_unique=True)
            chosen = scan_top(self.rows.sketch, self.zq, self.rows.ids, among, hits, self.by_id[hits], limit,
                              DECIMALS, lambda found: np.asarray(self.values(found)[0]), self.fuse,
                              len(self.rows.ids))
            if chosen is None:                  # the scan would read every row: score them all
                return super().ranked(among, top)
        else:                                   # a few ids, or every one of them: score just those
            chosen = top_k(ids, np.asarray(self.values(ids)[0]), limit, DECIMALS)
        return [(uid, self._known[uid][0]) for uid in chosen]

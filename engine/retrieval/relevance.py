"""Query relevance of any node: z(dense cosine) + w · z(BM25), z-statistics taken over the surface.

DESIGN §5 measured this fusion as the strongest cheap signal on LoCoMo; every
engine that ranks by relevance (All-Mem's stages, the hybrid baseline) uses
this one definition. With w = 0 the score is the plain cosine (minus the
off-surface penalty in units of the surface's cosine spread).

The surface is scored at once: numpy arrays aligned with the visible ids in id
order (dense cosines from the index, BM25 from its posting arrays), so a query
costs a few vector operations rather than a Python call per unit. Per-unit
accessors (`dense`, `lexical`, `score`) read the same arrays, and compute the
same formula for a node off the surface.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import NamedTuple

import numpy as np

from engine.retrieval.index import cosine, position, positions, top_k, where_of
from engine.retrieval.lexical import at
from engine.retrieval.memory import IndexedMemory

# Surface rankings order by the fused score rounded to this many decimals, then by id.
DECIMALS = 9


class ScoresById(Mapping):
    """A read-only {id: score} view of an array indexed by id, holding the ids whose score is not 0
    (BM25 is 0 exactly for a document sharing no term with the query)."""

    def __init__(self, values: np.ndarray):
        self.values = values

    def __getitem__(self, uid: int) -> float:
        if 0 <= uid < len(self.values) and self.values[uid]:
            return float(self.values[uid])
        raise KeyError(uid)

    def __iter__(self) -> Iterator[int]:
        return iter(np.flatnonzero(self.values).tolist())

    def __len__(self) -> int:
        return int(np.count_nonzero(self.values))


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

    def z(self, uid: int) -> tuple[float, float]:
        """The z-values of both signals of `uid`."""
        return ((self.dense[uid] - self.dense_mu) / self.dense_sd,
                (self.lexical[uid] - self.lex_mu) / self.lex_sd if self.weight else 0.0)

    def lookup(self, ids: list[int]) -> tuple[dict[int, float], dict[int, float]]:
        """{id: fused} and {id: fused rounded to `DECIMALS`} of those of `ids` in the set: the records a query
        reads again and again, as plain dicts."""
        found = np.asarray(ids, dtype=np.int64)
        pos = self.positions.find(found)
        fused = dict(zip(found[pos >= 0].tolist(), self.scores[pos[pos >= 0]].tolist()))
        return fused, {uid: round(v, DECIMALS) for uid, v in fused.items()}

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


class Relevance:
    def __init__(self, engine: IndexedMemory, query: str, weight: float, off_surface_penalty: float = 0.0,
                 penalised: Callable[[int], bool] | None = None):
        """`penalised(uid)` says which off-surface nodes pay `off_surface_penalty` (default: all of them)."""
        self.engine = engine
        self.zq = engine.embedder.embed_one(query)
        self.weight = weight
        self.penalty = off_surface_penalty
        self.penalised = penalised
        self.surface, self.dense_scores = engine.index.surface_scores(self.zq)
        self.ids = self.surface.ids
        by_id = engine.bm25.score_vector(query) if self.weight else np.zeros(0)
        self.lexical = ScoresById(by_id)                   # {id: BM25} of every node sharing a query term
        self.lexical_scores = at(by_id, self.ids)
        dense = self.dense_scores if len(self.ids) else np.zeros(1)
        self.dense_mu, self.dense_sd = float(dense.mean()), float(dense.std()) or 1.0
        lex = self.lexical_scores if len(self.ids) else np.zeros(1)
        self.lex_mu, self.lex_sd = float(lex.mean()), float(lex.std()) or 1.0
        if self.weight:
            self.scores = ((self.dense_scores - self.dense_mu) / self.dense_sd
                           + self.weight * (self.lexical_scores - self.lex_mu) / self.lex_sd)
        else:
            self.scores = self.dense_scores

    def _position(self, uid: int) -> int:
        return position(self.surface.where, uid)

    @property
    def visible_dense(self) -> dict[int, float]:
        """{id: dense cosine} over the surface."""
        return dict(zip(self.ids.tolist(), self.dense_scores.tolist()))

    def dense(self, uid: int) -> float:
        pos = self._position(uid)
        if pos >= 0:
            return float(self.dense_scores[pos])
        return cosine(self.engine.vector(uid), self.zq)

    def score(self, uid: int) -> float:
        pos = self._position(uid)
        if pos >= 0:
            return float(self.scores[pos])
        d = self.dense(uid)
        penalty = self.penalty_of(uid)
        if not self.weight:
            return d - penalty * self.dense_sd
        return ((d - self.dense_mu) / self.dense_sd - penalty
                + self.weight * (self.lexical.get(uid, 0.0) - self.lex_mu) / self.lex_sd)

    def penalty_of(self, uid: int) -> float:
        """The penalty `uid` pays: none on the surface; off it, the penalty unless `penalised` exempts it."""
        if self.engine.state.nodes[uid].visible or (self.penalised is not None and not self.penalised(uid)):
            return 0.0
        return self.penalty

    def ranked_surface(self, limit: int | None = None, decimals: int = DECIMALS) -> list[tuple[int, float]]:
        """The surface's best `limit` (all by default) by score rounded to `decimals`, ties by id."""
        n = len(self.ids)
        chosen = top_k(self.ids, self.scores, n if limit is None else min(limit, n), decimals)
        return [(uid, float(self.scores[self.surface.where[uid]])) for uid in chosen]

    def terms(self, uid: int) -> dict[str, float]:
        """The parts `score(uid)` adds up: both raw signals, their z-values, the weight and the penalty
        subtracted (in z units, or cosine units when the weight is 0), and the fused value."""
        d = self.dense(uid)
        lex = self.lexical.get(uid, 0.0)
        off = self.penalty_of(uid)
        return {"dense": d, "lexical": lex, "z_dense": (d - self.dense_mu) / self.dense_sd,
                "z_lexical": (lex - self.lex_mu) / self.lex_sd if self.weight else 0.0, "weight": self.weight,
                "penalty": off if self.weight else off * self.dense_sd, "relevance": self.score(uid)}

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

import numpy as np

from engine.retrieval.index import cosine, top_k
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
        where = self.surface.where
        return int(where[uid]) if 0 <= uid < len(where) else -1

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

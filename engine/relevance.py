"""Query relevance of any node: z(dense cosine) + w · z(BM25), z-statistics taken over the surface.

DESIGN §5 measured this fusion as the strongest cheap signal on LoCoMo; every
engine that ranks by relevance (All-Mem's stages, the hybrid baseline) uses
this one definition. With w = 0 the score is the plain cosine (minus the
off-surface penalty in units of the surface's cosine spread).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from engine.interface import BaseEngine


class Relevance:
    def __init__(self, engine: "BaseEngine", query: str, weight: float, off_surface_penalty: float = 0.0):
        self.engine = engine
        self.zq = engine.embedder.embed_one(query)
        self.weight = weight
        self.penalty = off_surface_penalty
        self.visible_dense = engine.index.all_scores(self.zq)
        self.lexical = engine.bm25.scores(query) if self.weight else {}
        dense = np.fromiter(self.visible_dense.values(), dtype=np.float64) if self.visible_dense else np.zeros(1)
        self.dense_mu, self.dense_sd = float(dense.mean()), float(dense.std()) or 1.0
        lex = np.array([self.lexical.get(u, 0.0) for u in self.visible_dense] or [0.0])
        self.lex_mu, self.lex_sd = float(lex.mean()), float(lex.std()) or 1.0

    def dense(self, uid: int) -> float:
        if uid in self.visible_dense:
            return self.visible_dense[uid]
        return float(self.engine.vector(uid) @ self.zq)

    def score(self, uid: int) -> float:
        d = self.dense(uid)
        penalty = 0.0 if self.engine.state.nodes[uid].visible else self.penalty
        if not self.weight:
            return d - penalty * self.dense_sd
        return ((d - self.dense_mu) / self.dense_sd - penalty
                + self.weight * (self.lexical.get(uid, 0.0) - self.lex_mu) / self.lex_sd)

    def ranked_surface(self) -> list[tuple[int, float]]:
        """Every surface node by score, ties by id."""
        return sorted(((u, self.score(u)) for u in self.visible_dense), key=lambda p: (-round(p[1], 9), p[0]))

    def terms(self, uid: int) -> dict[str, float]:
        """The parts `score(uid)` adds up: both raw signals, their z-values, the weight and the penalty
        subtracted (in z units, or cosine units when the weight is 0), and the fused value."""
        d = self.dense(uid)
        lex = self.lexical.get(uid, 0.0)
        off = 0.0 if self.engine.state.nodes[uid].visible else self.penalty
        return {"dense": d, "lexical": lex, "z_dense": (d - self.dense_mu) / self.dense_sd,
                "z_lexical": (lex - self.lex_mu) / self.lex_sd if self.weight else 0.0, "weight": self.weight,
                "penalty": off if self.weight else off * self.dense_sd, "relevance": self.score(uid)}

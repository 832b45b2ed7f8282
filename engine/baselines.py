"""Baselines that share the engine's embedder: naive dense RAG over raw turns."""
from __future__ import annotations

import numpy as np

from engine.conversation import Turn
from engine.embedder import Embedder


class NaiveRAG:
    """Dense cosine top-k over raw ``speaker: text`` turns, no memory structure at all."""

    name = "naive-rag"

    def __init__(self, embedder: Embedder, turns: list[Turn]):
        self.embedder = embedder
        self.turns = list(turns)
        self.matrix = embedder.embed([t.raw for t in self.turns]) if self.turns else np.zeros((0, 384), np.float32)

    def retrieve(self, query: str, k: int = 5) -> list[tuple[Turn, float]]:
        if not self.turns:
            return []
        scores = self.matrix @ self.embedder.embed_one(query)
        order = sorted(range(len(self.turns)), key=lambda i: (-round(float(scores[i]), 6), i))[:k]
        return [(self.turns[i], float(scores[i])) for i in order]

    def source_ids(self, query: str, k: int = 5) -> list[str]:
        return [t.id for t, _ in self.retrieve(query, k)]

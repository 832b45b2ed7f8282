"""FAISS exact inner-product index over the visible surface only."""
from __future__ import annotations

import faiss
import numpy as np


class VisibleIndex:
    """IndexFlatIP on unit-normalised vectors with id mapping.

    It holds exactly the visible units: engines call `add`/`remove` on every
    visibility or descriptor change, so Stage-1 search never sees archived units.
    """

    def __init__(self, dim: int = 384):
        self.dim = dim
        self.index = faiss.IndexIDMap2(faiss.IndexFlatIP(dim))
        self.ids: set[int] = set()

    def __len__(self) -> int:
        return len(self.ids)

    def add(self, ids: list[int], vectors: np.ndarray) -> None:
        if not ids:
            return
        self.remove([i for i in ids if i in self.ids])
        self.index.add_with_ids(np.ascontiguousarray(vectors, dtype=np.float32), np.asarray(ids, dtype=np.int64))
        self.ids.update(ids)

    def remove(self, ids: list[int]) -> None:
        present = [i for i in ids if i in self.ids]
        if present:
            self.index.remove_ids(np.asarray(present, dtype=np.int64))
            self.ids.difference_update(present)

    def search(self, vector: np.ndarray, k: int) -> list[tuple[int, float]]:
        """Top-k (id, cosine), ties broken by smaller id for determinism."""
        if not self.ids or k <= 0:
            return []
        n = len(self.ids)
        scores, ids = self.index.search(np.asarray(vector, dtype=np.float32).reshape(1, -1), n)
        pairs = [(int(i), float(s)) for i, s in zip(ids[0], scores[0]) if i >= 0]
        pairs.sort(key=lambda p: (-round(p[1], 6), p[0]))
        return pairs[:k]

    def all_scores(self, vector: np.ndarray) -> dict[int, float]:
        if not self.ids:
            return {}
        scores, ids = self.index.search(np.asarray(vector, dtype=np.float32).reshape(1, -1), len(self.ids))
        return {int(i): float(s) for i, s in zip(ids[0], scores[0]) if i >= 0}

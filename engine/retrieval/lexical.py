"""Incremental BM25 over unit texts: the lexical half of hybrid anchoring (DESIGN §5).

Scoring is vectorised per query term over the term's posting arrays (built
once and kept until a document with that term changes), with the same
floating-point operations in the same order as the per-document formula, so
the scores are the exact BM25 values a loop over documents gives.
"""
from __future__ import annotations

import math
from collections import Counter, defaultdict

import numpy as np

from engine.core.text import content_tokens


def hits_of(by_id: np.ndarray) -> np.ndarray:
    """The ids of nonzero score in increasing order. Compared with 0 first: numpy finds the nonzero entries of a
    bool array about eight times faster than a float one's (0.08 against 0.7 ms for 30,000 hits among 111,860
    documents), and a query at that size asks once or twice."""
    return np.flatnonzero(by_id != 0)


def at(by_id: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """Scores indexed by id (`BM25.score_vector`) read at `ids`; an id past the end scores 0."""
    out = np.zeros(len(ids))
    inside = ids < len(by_id)
    out[inside] = by_id[ids[inside]]
    return out


class BM25:
    def __init__(self, k1: float = 1.2, b: float = 0.75):
        self.k1, self.b = k1, b
        self.docs: dict[int, Counter] = {}
        self.lengths: dict[int, int] = {}
        self.postings: dict[str, set[int]] = defaultdict(set)
        self.total_len = 0
        self.size = 0                    # one more than the largest document id ever added
        self._arrays: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}

    def add(self, doc_id: int, text: str) -> None:
        self.remove(doc_id)
        tf = Counter(content_tokens(text))
        self.docs[doc_id] = tf
        self.lengths[doc_id] = sum(tf.values())
        self.total_len += self.lengths[doc_id]
        self.size = max(self.size, doc_id + 1)
        for term in tf:
            self.postings[term].add(doc_id)
            self._arrays.pop(term, None)

    def remove(self, doc_id: int) -> None:
        tf = self.docs.pop(doc_id, None)
        if tf is None:
            return
        self.total_len -= self.lengths.pop(doc_id)
        for term in tf:
            self.postings[term].discard(doc_id)
            self._arrays.pop(term, None)

    def _posting(self, term: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The term's documents (by id), their term frequencies and lengths, as arrays."""
        arrays = self._arrays.get(term)
        if arrays is None:
            docs = sorted(self.postings[term])
            arrays = (np.array(docs, dtype=np.int64),
                      np.array([self.docs[d][term] for d in docs], dtype=np.float64),
                      np.array([self.lengths[d] for d in docs], dtype=np.float64))
            self._arrays[term] = arrays
        return arrays

    def score_vector(self, query: str) -> np.ndarray:
        """BM25 of every document, indexed by document id (0 for ids sharing no term with the query)."""
        out = np.zeros(self.size)
        n = len(self.docs)
        if not n:
            return out
        avg = self.total_len / n or 1.0
        k1, b, lift = self.k1, self.b, self.k1 + 1
        for term in dict.fromkeys(content_tokens(query)):      # fixed order: float sums are reproducible
            if not self.postings.get(term):
                continue
            docs, tf, lengths = self._posting(term)
            idf = math.log(1 + (n - len(docs) + 0.5) / (len(docs) + 0.5))
            norm = tf + k1 * (1 - b + b * lengths / avg)
            out[docs] += idf * tf * lift / norm
        return out

    def scores(self, query: str, restrict: set[int] | None = None) -> dict[int, float]:
        """BM25 score of every document sharing a term with the query (others score 0)."""
        vector = self.score_vector(query)
        hits = hits_of(vector).tolist()
        if restrict is not None:
            hits = [d for d in hits if d in restrict]
        return {d: float(vector[d]) for d in hits}

"""Incremental BM25 over unit texts: the lexical half of hybrid anchoring (DESIGN §5)."""
from __future__ import annotations

import math
from collections import Counter, defaultdict

from engine.text import content_tokens


class BM25:
    def __init__(self, k1: float = 1.2, b: float = 0.75):
        self.k1, self.b = k1, b
        self.docs: dict[int, Counter] = {}
        self.lengths: dict[int, int] = {}
        self.postings: dict[str, set[int]] = defaultdict(set)
        self.total_len = 0

    def add(self, doc_id: int, text: str) -> None:
        self.remove(doc_id)
        tf = Counter(content_tokens(text))
        self.docs[doc_id] = tf
        self.lengths[doc_id] = sum(tf.values())
        self.total_len += self.lengths[doc_id]
        for term in tf:
            self.postings[term].add(doc_id)

    def remove(self, doc_id: int) -> None:
        tf = self.docs.pop(doc_id, None)
        if tf is None:
            return
        self.total_len -= self.lengths.pop(doc_id)
        for term in tf:
            self.postings[term].discard(doc_id)

    def scores(self, query: str, restrict: set[int] | None = None) -> dict[int, float]:
        """BM25 score of every document sharing a term with the query (others score 0)."""
        n = len(self.docs)
        if not n:
            return {}
        avg = self.total_len / n or 1.0
        out: dict[int, float] = defaultdict(float)
        for term in dict.fromkeys(content_tokens(query)):      # fixed order: float sums are reproducible
            posting = self.postings.get(term)
            if not posting:
                continue
            idf = math.log(1 + (n - len(posting) + 0.5) / (len(posting) + 0.5))
            for doc in posting:
                if restrict is not None and doc not in restrict:
                    continue
                tf = self.docs[doc][term]
                norm = tf + self.k1 * (1 - self.b + self.b * self.lengths[doc] / avg)
                out[doc] += idf * tf * (self.k1 + 1) / norm
        return dict(out)

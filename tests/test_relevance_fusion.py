"""The vectorised fusion ranks exactly as the per-unit Python fusion it replaced, on a replayed LoCoMo conversation.

The reference below is the old implementation kept verbatim: a dict of dense cosines from a full FAISS search,
a dict of BM25 scores from a loop over postings, a Python `score(uid)` per unit and a `sorted` over the surface.
"""
from __future__ import annotations

import dataclasses
import math
from collections import defaultdict

import numpy as np
import pytest

from engine.core.text import content_tokens
from engine.loaders import load_conversation
from engine.retrieval.relevance import Relevance
from engine.runtime.replay import Schedule, replay
from engine.session import open_session
from tests.conftest import locomo_or_skip

SESSIONS = 7      # conv-26's first sessions: two consolidation runs, so some units are archived


def old_bm25(bm25, query: str) -> dict[int, float]:
    n = len(bm25.docs)
    if not n:
        return {}
    avg = bm25.total_len / n or 1.0
    out: dict[int, float] = defaultdict(float)
    for term in dict.fromkeys(content_tokens(query)):
        posting = bm25.postings.get(term)
        if not posting:
            continue
        idf = math.log(1 + (n - len(posting) + 0.5) / (len(posting) + 0.5))
        for doc in posting:
            tf = bm25.docs[doc][term]
            norm = tf + bm25.k1 * (1 - bm25.b + bm25.b * bm25.lengths[doc] / avg)
            out[doc] += idf * tf * (bm25.k1 + 1) / norm
    return dict(out)


def faiss_all_scores(index, vector) -> dict[int, float]:
    """The old `VisibleIndex.all_scores`: a FAISS search for every visible unit."""
    scores, ids = index.index.search(np.asarray(vector, dtype=np.float32).reshape(1, -1), len(index.ids))
    return {int(i): float(s) for i, s in zip(ids[0], scores[0]) if i >= 0}


class OldRelevance:
    def __init__(self, engine, query, weight, penalty, visible_dense):
        self.engine, self.weight, self.penalty = engine, weight, penalty
        self.zq = engine.embedder.embed_one(query)
        self.visible_dense = visible_dense
        self.lexical = old_bm25(engine.bm25, query) if weight else {}
        dense = np.fromiter(self.visible_dense.values(), dtype=np.float64) if self.visible_dense else np.zeros(1)
        self.dense_mu, self.dense_sd = float(dense.mean()), float(dense.std()) or 1.0
        lex = np.array([self.lexical.get(u, 0.0) for u in self.visible_dense] or [0.0])
        self.lex_mu, self.lex_sd = float(lex.mean()), float(lex.std()) or 1.0

    def dense(self, uid):
        if uid in self.visible_dense:
            return self.visible_dense[uid]
        return float(self.engine.vector(uid) @ self.zq)

    def score(self, uid):
        d = self.dense(uid)
        penalty = 0.0 if self.engine.state.nodes[uid].visible else self.penalty
        if not self.weight:
            return d - penalty * self.dense_sd
        return ((d - self.dense_mu) / self.dense_sd - penalty
                + self.weight * (self.lexical.get(uid, 0.0) - self.lex_mu) / self.lex_sd)

    def ranked_surface(self, decimals=9):
        return sorted(((u, self.score(u)) for u in self.visible_dense),
                      key=lambda p: (-round(p[1], decimals), p[0]))


@pytest.fixture(scope="module")
def conv26(tmp_path_factory):
    full = load_conversation(locomo_or_skip(), "conv-26")
    sessions = set(full.sessions[:SESSIONS])
    conv = dataclasses.replace(full, turns=[t for t in full.turns if t.session in sessions])
    folder = tmp_path_factory.mktemp("fusion")
    allmem = open_session(folder / "allmem.sqlite")
    replay(allmem, conv, Schedule.parse("every-3-sessions"))
    hybrid = open_session(folder / "hybrid.sqlite", engine="hybrid", embedder=allmem.embedder)
    replay(hybrid, conv, Schedule.parse("manual"))
    queries = [q.question for q in conv.questions if q.category in (1, 2, 3, 4)][:40]
    return allmem, hybrid, queries, len(conv.turns)


def test_the_fixture_has_archived_units_and_a_lexical_index(conv26):
    allmem, hybrid, queries, turns = conv26
    assert len(allmem.index) > 100 and len(hybrid.index) == turns
    assert any(not n.visible for n in allmem.state.nodes.values())
    assert len(queries) == 40


@pytest.mark.parametrize("weight", [0.5, 0.0])
def test_rankings_and_scores_equal_the_old_fusion(conv26, weight):
    allmem, hybrid, queries, _ = conv26
    compared = 0
    for engine in (allmem, hybrid):
        for query in queries:
            new = Relevance(engine, query, weight, 0.7)
            # exactly the old arithmetic on the same dense cosines: bit-for-bit the same scores and ranking
            same_dense = OldRelevance(engine, query, weight, 0.7, new.visible_dense)
            old_ranked = same_dense.ranked_surface()
            new_ranked = new.ranked_surface()
            assert [u for u, _ in new_ranked] == [u for u, _ in old_ranked]
            assert np.allclose([s for _, s in new_ranked], [s for _, s in old_ranked], rtol=0, atol=1e-12)
            assert new.ranked_surface(10) == new_ranked[:10]
            assert new.ranked_surface(40, decimals=6) == same_dense.ranked_surface(6)[:40]
            assert dict(new.lexical) == same_dense.lexical
            # against the old dense source too (a full FAISS search, whose float32 sums differ in the last bits)
            old = OldRelevance(engine, query, weight, 0.7, faiss_all_scores(engine.index, new.zq))
            assert [u for u, _ in new_ranked] == [u for u, _ in old.ranked_surface()]
            assert max(abs(a - b) for (_, a), (_, b) in zip(new_ranked, old.ranked_surface())) < 1e-5
            # per-unit accessors, on and off the surface (archived units carry the penalty)
            for uid in list(engine.state.nodes)[::7]:
                assert new.score(uid) == pytest.approx(old.score(uid), abs=1e-5)
                assert new.dense(uid) == pytest.approx(old.dense(uid), abs=1e-6)
                assert new.lexical.get(uid, 0.0) == old.lexical.get(uid, 0.0)
            compared += 1
    assert compared == 80


def test_retrieve_uses_the_same_anchors_as_the_reference(conv26):
    allmem, hybrid, queries, _ = conv26
    s = allmem.settings
    for query in queries[:10]:
        res = allmem.retrieve(query)
        rel = Relevance(allmem, query, s.lexical_weight, s.archived_penalty)
        ref = OldRelevance(allmem, query, s.lexical_weight, s.archived_penalty, rel.visible_dense)
        assert [a for a, _ in res.anchors] == [u for u, _ in ref.ranked_surface()[: s.k]]
        ranked = hybrid.retrieve(query).candidates
        ref = OldRelevance(hybrid, query, hybrid.lexical_weight(), 0.0,
                           Relevance(hybrid, query, 0.0).visible_dense)
        assert [r.id for r in ranked] == [u for u, _ in ref.ranked_surface()[: hybrid.settings.candidates]]

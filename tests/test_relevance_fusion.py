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
from engine.engines.allmem.retrieval import held_parts
from engine.loaders import load_conversation
from engine.retrieval.relevance import Relevance
from engine.runtime.replay import Schedule, replay
from engine.session import open_session
from tests.conftest import LOCOMO, needs_data

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
    def __init__(self, engine, query, weight, penalty, visible_dense, held=(), archived=()):
        """`held`: (holder, part) pairs, the holder scoring BM25 at least as its part (All-Mem's representatives);
        `archived`: off-surface ids the z-statistics take in beside the surface (All-Mem's whole memory)."""
        self.engine, self.weight, self.penalty = engine, weight, penalty
        self.zq = engine.embedder.embed_one(query)
        self.visible_dense = visible_dense
        self.lexical = old_bm25(engine.bm25, query) if weight else {}
        for holder, part in held if weight else ():
            if self.lexical.get(part, 0.0) > self.lexical.get(holder, 0.0):
                self.lexical[holder] = self.lexical[part]
        reference = list(self.visible_dense) + list(archived)
        dense = np.array([self.dense(u) for u in reference] or [0.0])
        self.dense_mu, self.dense_sd = float(dense.mean()), float(dense.std()) or 1.0
        lex = np.array([self.lexical.get(u, 0.0) for u in reference] or [0.0])
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
    full = load_conversation(needs_data(LOCOMO), "conv-26")
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
        ref = OldRelevance(allmem, query, s.lexical_weight, s.archived_penalty, rel.visible_dense,
                           held=zip(*(a.tolist() for a in held_parts(allmem.state))),
                           archived=allmem.state.archived_ids)
        assert [a for a, _ in res.anchors] == [u for u, _ in ref.ranked_surface()[: s.k]]
        ranked = hybrid.retrieve(query).candidates
        ref = OldRelevance(hybrid, query, hybrid.lexical_weight(), 0.0,
                           Relevance(hybrid, query, 0.0).visible_dense)
        assert [r.id for r in ranked] == [u for u, _ in ref.ranked_surface()[: hybrid.settings.candidates]]


@pytest.mark.parametrize("weight", [0.5, 0.0])
def test_a_sketched_surface_ranks_as_the_whole_surface_does(conv26, weight, monkeypatch):
    """The half-precision scan and the moments give the ranking the whole float32 surface gives, without reading
    it: the scan starts at 8 rows, so it has to widen, and a subset of more than 16 ids is scanned too. All-Mem's
    z-statistics take in its archived units too, pooled with the surface's moments."""
    from engine.retrieval import relevance as relevance_module
    monkeypatch.setattr(relevance_module, "SCAN_FIRST", 8)
    monkeypatch.setattr(relevance_module, "GATHER_MAX", 16)
    allmem, hybrid, queries, _ = conv26
    scanned = 0
    for engine in (allmem, hybrid):
        subset = engine.index.surface().ids[::3]
        reference = {"archived": np.asarray(engine.state.archived_ids, dtype=np.int64)} if engine is allmem else {}
        for query in queries:
            whole = Relevance(engine, query, weight, 0.7, **reference)
            searched = engine.index.search(whole.zq, 10)
            with monkeypatch.context() as m:
                m.setattr(engine.index, "sketch_from", 1)
                assert engine.index.search(whole.zq, 10) == searched       # the values FAISS's search gives
                sketched = Relevance(engine, query, weight, 0.7, **reference)
                assert sketched.sketch is not None and whole.sketch is None
                for limit, decimals in ((1, 9), (5, 9), (10, 9), (10, 6)):
                    got, want = sketched.ranked_surface(limit, decimals), whole.ranked_surface(limit, decimals)
                    assert [u for u, _ in got] == [u for u, _ in want]
                    # the moments are exact; the whole surface's mean is of float32 products (error ~1e-8)
                    assert np.allclose([s for _, s in got], [s for _, s in want], rtol=0, atol=1e-6)
                got, want = sketched.ranked_among(subset, 7), whole.ranked_among(subset, 7)
                assert [u for u, _ in got] == [u for u, _ in want]
                scanned += sketched._signals is None          # ranked without scoring the whole surface
                assert sketched.dense_mu == pytest.approx(whole.dense_mu, abs=1e-7)
                assert sketched.dense_sd == pytest.approx(whole.dense_sd, abs=1e-7)
                assert sketched.lex_sd == pytest.approx(whole.lex_sd, abs=1e-9)
                for uid in list(engine.state.nodes)[::11]:
                    assert sketched.score(uid) == pytest.approx(whole.score(uid), abs=1e-6)
                    assert sketched.dense(uid) == whole.dense(uid)
                assert [u for u, _ in sketched.ranked_surface()] == [u for u, _ in whole.ranked_surface()]
    assert scanned == 2 * len(queries)


def test_a_sketch_kept_through_adds_replacements_and_removals_equals_one_built_afresh(conv26):
    """Its moments equal those of the rows as they are, every row is stored at its scale (a larger component
    stores them all again), and the scan's ceiling holds for every row it leaves out."""
    from engine.retrieval.index import VisibleIndex
    from engine.retrieval.sketch import SurfaceSketch
    allmem, _, queries, _ = conv26
    vectors = allmem.embedder.embed(queries + [n.raw for n in list(allmem.state.nodes.values())[:80]])
    vectors[31] = 0.0
    vectors[31, 3] = 1.0                                # a component far beyond the first rows' largest
    rng = np.random.default_rng(7)
    index = VisibleIndex(vectors.shape[1])
    index.sketch_from = 1
    index.add(list(range(30)), vectors[:30])
    first_scale = index.sketch().scale
    next_id = 30
    for step in range(60):
        action = rng.integers(4)
        present = sorted(index.ids)
        if action == 0 and next_id < len(vectors):
            index.add([next_id], vectors[next_id:next_id + 1])
            next_id += 1
        elif action == 1 and present:
            uid = int(rng.choice(present))
            index.add([uid], vectors[rng.integers(len(vectors))][None, :])
        elif action == 2 and len(present) > 2:
            index.remove([int(u) for u in rng.choice(present, 2, replace=False)])
        elif action == 3 and next_id > 0:
            uid = int(rng.integers(next_id))
            index.add([uid], vectors[uid:uid + 1])
        if step % 3 == 0:
            kept = index.sketch()
            stored = index._stored()
            fresh = SurfaceSketch(index._stored)
            assert len(kept) == len(fresh) == len(index.ids)
            assert np.allclose(kept.total, fresh.total, atol=1e-9) and np.allclose(kept.gram, fresh.gram, atol=1e-9)
            levels = np.rint(stored * kept.scale)
            assert np.abs(levels).max() <= 127 and np.array_equal(kept.codes(), levels + 128)
            assert kept.l1 >= np.abs(levels).sum(axis=1).max() / kept.scale - 1e-9
            for q in vectors[::9]:                      # no row the scan leaves out is above its ceiling
                rows, ceiling = kept.nearest(q, 5)
                others = np.setdiff1d(np.arange(len(stored)), rows)
                assert (stored[others] @ q <= ceiling).all()
    assert next_id > 31 and index.sketch().scale < first_scale


def test_rows_the_byte_scan_cannot_tell_apart_are_still_searched_and_ranked_exactly(conv26, monkeypatch):
    """300 rows within 1e-4 of one another in cosine to the query, far finer than the 8-bit levels; and a scan
    that finds the worst rows first but states its ceiling honestly: only the ceiling keeps the search and the
    ranking exact, by widening the scan until nothing left out can reach the top."""
    from engine.retrieval import relevance as relevance_module
    from engine.retrieval.index import VisibleIndex
    monkeypatch.setattr(relevance_module, "GATHER_MAX", 16)

    class Memory:
        pass

    allmem, _, queries, _ = conv26
    q = allmem.embedder.embed_one(queries[0])
    rng = np.random.default_rng(3)
    rows = q[None, :] + 0.001 * rng.standard_normal((300, len(q))).astype(np.float32)
    rows /= np.linalg.norm(rows, axis=1, keepdims=True)
    memory = Memory()
    memory.index, memory.embedder, memory.bm25 = VisibleIndex(len(q)), allmem.embedder, allmem.bm25
    memory.index.add(list(range(300)), rows)
    exact = sorted(((i, float(s)) for i, s in enumerate(rows @ q)), key=lambda p: (-round(p[1], 6), p[0]))
    whole = memory.index.search(q, 5)
    memory.index.sketch_from = 1
    assert memory.index.search(q, 5) == whole and [i for i, _ in whole] == [i for i, _ in exact[:5]]
    rel = Relevance(memory, queries[0], 0.0)
    assert rel.sketch is not None
    assert [i for i, _ in rel.ranked_surface(5)] == [i for i, _ in exact[:5]]

    class WorstFirst:
        def __init__(self, sketch):
            self.sketch = sketch

        def moments(self, query):
            return self.sketch.moments(query)

        def nearest(self, query, m):
            scores = rows @ query
            order = np.argsort(scores, kind="stable")
            return order[:m], float(scores[order[m:]].max()) if m < len(order) else float("-inf")

    memory.index._sketch = WorstFirst(memory.index._sketch)
    assert memory.index.search(q, 5) == whole
    assert [i for i, _ in Relevance(memory, queries[0], 0.0).ranked_surface(5)] == [i for i, _ in exact[:5]]


def test_outside_and_hits_of_are_the_numpy_calls_they_replace():
    """`outside` looks the found ids up instead of sorting every hit, and `hits_of` compares with 0 first; both
    must give exactly what `~np.isin` and `np.flatnonzero` give, found ids beyond either end and absent included."""
    from engine.retrieval.lexical import hits_of
    from engine.retrieval.relevance import outside

    rng = np.random.default_rng(7)
    for size in (0, 1, 5, 300, 5000):
        scores = np.where(rng.random(size) < 0.3, rng.random(size), 0.0)
        scores[::7] = -0.0
        ids = np.flatnonzero(scores)
        assert np.array_equal(hits_of(scores), ids)
        for found in (np.zeros(0, dtype=np.int64), ids[::3], np.unique(rng.integers(-5, size + 5, 40)),
                      np.union1d(ids[:2], [size + 10])):
            assert np.array_equal(outside(ids, found), ~np.isin(ids, found)), (size, found)

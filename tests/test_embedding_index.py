"""Real MiniLM embeddings (offline), the content-hash cache, and the visible-surface index."""
from __future__ import annotations

import numpy as np

from engine.llm.embedder import Embedder
from engine.retrieval.index import VisibleIndex
from engine.store.log_store import Store


def test_embedder_is_real_normalised_and_cached(tmp_path):
    store = Store(tmp_path / "e.sqlite")
    emb = Embedder(cache=store)
    vecs = emb.embed(["The cat sat on the mat.", "A kitten rested on the rug.", "Quarterly tax filing deadline."])
    assert vecs.shape == (3, 384) and np.allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-5)
    assert vecs[0] @ vecs[1] > vecs[0] @ vecs[2] + 0.2            # semantics, not hashing
    fresh = Embedder(cache=store)
    again = fresh.embed(["The cat sat on the mat."])
    assert fresh.encoded == 0 and np.allclose(again[0], vecs[0])   # served from the SQLite cache


def test_index_holds_only_what_it_is_given_and_breaks_ties_by_id():
    idx = VisibleIndex(4)
    v = np.eye(4, dtype=np.float32)
    idx.add([10, 11, 12], np.stack([v[0], v[0], v[1]]))
    assert [i for i, _ in idx.search(v[0], 2)] == [10, 11]
    idx.remove([10])
    assert 10 not in idx.ids and [i for i, _ in idx.search(v[0], 3)] == [11, 12]
    idx.add([11], v[2][None, :])                                   # re-adding replaces the vector
    assert idx.search(v[2], 1)[0][0] == 11 and len(idx) == 2


def test_a_vector_replaced_in_place_scores_as_in_an_index_built_afresh():
    """A unit already on the surface gets its new vector in its own row (no FAISS removal, which compacts the
    index): every search and every surface score equals those of an index built from the final vectors."""
    rng = np.random.default_rng(3)
    vecs = rng.normal(size=(40, 16)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    idx = VisibleIndex(16)
    idx.add(list(range(30)), vecs[:30])
    idx.remove([4, 17])
    surface = idx.surface()
    final = {i: vecs[i] for i in range(30) if i not in (4, 17)}
    for step, uid in enumerate([5, 29, 0, 5]):                     # ids already there, one replaced twice
        final[uid] = vecs[30 + step]
        idx.add([uid], vecs[30 + step][None, :])
    assert idx.surface() is surface                               # the same rows: nothing was rebuilt
    idx.add([4, 6], np.stack([vecs[35], vecs[36]]))               # one back on the surface, one replaced
    final[4], final[6] = vecs[35], vecs[36]
    fresh = VisibleIndex(16)
    fresh.add(sorted(final), np.stack([final[i] for i in sorted(final)]))
    assert idx.ids == fresh.ids and len(idx) == len(final)
    for q in vecs[30:40]:
        assert idx.search(q, 8) == fresh.search(q, 8)
        (ids, dense), (ids2, dense2) = [(s.ids.tolist(), d.tolist()) for s, d in (idx.surface_scores(q),
                                                                                fresh.surface_scores(q))]
        assert ids == ids2 and dense == dense2


def test_removals_settled_at_the_next_read_leave_the_index_as_one_built_afresh():
    """Removed rows leave FAISS together at the next read; whatever mix of additions, replacements, removals and
    returns comes between two reads, every read scores exactly the ids on the surface with their latest vectors."""
    rng = np.random.default_rng(11)
    vecs = rng.normal(size=(500, 16)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    idx, final = VisibleIndex(16), {}
    for step in range(500):
        uid = int(rng.integers(0, 40))
        if rng.random() < 0.4:
            idx.remove([uid])
            final.pop(uid, None)
        else:
            idx.add([uid], vecs[step][None, :])
            final[uid] = vecs[step]
        assert idx.ids == set(final) and len(idx) == len(final)
        if final and rng.random() < 0.2:
            fresh = VisibleIndex(16)
            fresh.add(sorted(final), np.stack([final[i] for i in sorted(final)]))
            q = vecs[int(rng.integers(0, 500))]
            assert idx.search(q, 5) == fresh.search(q, 5)
            (ids, dense), (ids2, dense2) = [(s.ids.tolist(), d.tolist()) for s, d in (idx.surface_scores(q),
                                                                                    fresh.surface_scores(q))]
            assert ids == ids2 and dense == dense2

def test_vector_rows_score_every_id_it_holds_after_any_adds_replacements_and_removals():
    """RecMem's gate stores: the ids `dots` returns are exactly those added and not removed since, each with
    its latest vector's dot product, however rows moved to fill the holes."""
    import numpy as np

    from engine.retrieval.index import VectorRows

    rng = np.random.default_rng(7)
    rows, truth = VectorRows(dim=8), {}
    for step in range(400):
        uid = int(rng.integers(0, 60))
        if rng.random() < 0.35:
            rows.remove(uid)
            truth.pop(uid, None)
        else:
            truth[uid] = rng.standard_normal(8).astype(np.float32)
            rows.add(uid, truth[uid])
        q = rng.standard_normal(8).astype(np.float32)
        ids, dots = rows.dots(q)
        assert sorted(ids.tolist()) == sorted(truth) and len(rows) == len(truth)
        expected = {u: float(v @ q) for u, v in truth.items()}
        assert all(abs(float(d) - expected[int(u)]) < 1e-5 for u, d in zip(ids, dots))

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

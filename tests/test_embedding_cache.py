"""The workspace's shared embedding cache: a second replay never runs the model; concurrent writers; a failing
cache never fails an ingest."""
from __future__ import annotations

import dataclasses
import json
import sqlite3
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from engine.llm.embedder import Embedder
from engine.loaders import load_conversation
from engine.runtime.replay import Schedule, replay
from engine.session import open_session
from engine.store.embedding_cache import SharedEmbeddingCache
from engine.store.workspace import embedding_cache_path
from tests.conftest import LOCOMO, ROOT, needs_data


@pytest.fixture
def workspace(tmp_path, monkeypatch):
    monkeypatch.setenv("MEMWB_WORKSPACE", str(tmp_path / "workspace"))
    return tmp_path / "workspace"


@pytest.fixture
def model_calls(monkeypatch):
    """Counts texts through the real model's encode (the model itself still runs)."""
    model = Embedder(shared=None).model()
    real = model.encode
    calls: list[int] = []

    def counting(sentences, *args, **kwargs):
        calls.append(len(sentences))
        return real(sentences, *args, **kwargs)

    monkeypatch.setattr(model, "encode", counting)
    return calls


def two_sessions_of_conv26():
    conv = load_conversation(needs_data(LOCOMO), "conv-26")
    keep = set(conv.sessions[:2])
    return dataclasses.replace(conv, turns=[t for t in conv.turns if t.session in keep])


def test_a_second_replay_into_a_fresh_database_never_runs_the_model(workspace, tmp_path, model_calls):
    conv = two_sessions_of_conv26()
    first = open_session(tmp_path / "first.sqlite", embedder=Embedder())
    replay(first, conv, Schedule.parse("every-1-sessions"))
    encoded_first = sum(model_calls)
    assert encoded_first >= len(conv.turns)
    assert embedding_cache_path().is_relative_to(workspace) and embedding_cache_path().exists()
    assert len(SharedEmbeddingCache()) >= len(conv.turns)

    model_calls.clear()
    second = open_session(tmp_path / "second.sqlite", embedder=Embedder())     # shares only the workspace file
    replay(second, conv, Schedule.parse("every-1-sessions"))
    assert model_calls == []
    assert second.embedder.encoded == 0
    assert len(second.state.nodes) == len(first.state.nodes)
    for uid, vec in first.vectors.items():
        assert np.array_equal(second.vectors[uid], vec)
    # the session's own database holds the vectors too (a branch or a copied file carries them)
    assert len(second.store.get_embeddings(list(second.embedder.memory))) == len(second.embedder.memory)


def test_the_default_cache_is_the_workspace_file_and_siblings_share_it(workspace):
    emb = Embedder()
    assert isinstance(emb.shared, SharedEmbeddingCache) and emb.shared.path == workspace / "embeddings.sqlite"
    assert emb.sibling().shared is emb.shared
    assert Embedder(shared=None).shared is None


WRITER = textwrap.dedent("""
    import sys
    import numpy as np
    from engine.store.embedding_cache import SharedEmbeddingCache
    cache = SharedEmbeddingCache(sys.argv[1])
    start = int(sys.argv[2])
    for batch in range(40):
        keys = [f"k{start + batch * 50 + i}" for i in range(50)]
        cache.put_embeddings({k: np.full(384, float(k[1:]), np.float32) for k in keys})
    print(cache.failed_writes)
""")


def test_two_processes_write_at_once_and_keep_every_vector(tmp_path):
    path = tmp_path / "embeddings.sqlite"
    SharedEmbeddingCache(path).put_embeddings({"k0": np.zeros(384, np.float32)})
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(path), str(start)], cwd=ROOT,
                              stdout=subprocess.PIPE, text=True) for start in (0, 1000)]     # keys 1000-1999 overlap
    outs = [p.communicate(timeout=120)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0]
    failed = sum(int(o.strip()) for o in outs)
    cache = SharedEmbeddingCache(path)
    keys = [f"k{i}" for i in range(3000)]
    got = cache.get_embeddings(keys)
    # every batch either landed whole or was dropped whole (a dropped write is only a later miss)
    assert len(got) == 3000 if failed == 0 else len(got) >= 3000 - 50 * failed
    assert all(np.all(v == float(k[1:])) for k, v in got.items())
    assert failed < 40


def test_a_locked_or_broken_cache_never_fails_an_ingest(workspace, tmp_path):
    emb = Embedder()
    path = emb.shared.path
    emb.shared.put_embeddings({"warm": np.zeros(384, np.float32)})
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")              # another process holds the write lock for longer than we wait
    try:
        engine = open_session(tmp_path / "s.sqlite", embedder=emb)
        conv = two_sessions_of_conv26()
        engine.ingest(conv.turns[0])
        assert len(engine.state.nodes) == 1
        assert emb.shared.failed_writes >= 1
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    path.unlink()
    path.write_bytes(b"this is not a database" * 100)     # a corrupt file: every read is a miss, every write dropped
    broken = Embedder()
    vec = broken.embed(["A sentence nobody cached."])
    assert vec.shape == (1, 384) and broken.encoded == 1 and broken.shared.failed_writes == 1


def test_every_text_a_paper_engine_embeds_is_read_by_a_stage(tmp_path):
    """`scripts/embedded_texts.py` traces each embedder call of a demo replay to the function that asked: MemLoom,
    GAM and RecMem embed no text that only a warm-up asked for (MemLoom's router rewrites were, until 6 Dec);
    All-Mem's prefetch of every utterance leaves a few short turns no diagnosis compares."""
    out = tmp_path / "embedded.json"
    run = subprocess.run([sys.executable, "scripts/embedded_texts.py", "--out", str(out)], cwd=ROOT,
                         capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stderr
    found = {e["engine"]: e for e in json.loads(out.read_text())["engines"]}
    assert set(found) == {"allmem", "memloom", "gam", "recmem"}
    for name in ("memloom", "gam", "recmem"):
        assert found[name]["unread"]["texts"] == 0, (name, found[name]["unread"])
    assert found["allmem"]["unread"]["texts"] <= 3
    assert "engine.engines.memloom.engine:route_vector" in found["memloom"]["read_by"]
    assert found["memloom"]["texts"] < 3 * found["memloom"]["turns"] + 200
    assert "memloom" in run.stdout and "read by nothing" in run.stdout

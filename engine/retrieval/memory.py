"""What the retrieval layer reads of an engine, as protocols: its state and the views derived from it.

Relevance scoring (`engine.retrieval.relevance`) takes any object with these
parts (why-this-rank's `ExplainingMemory` is beside `Placement`). Every engine built on
`engine.runtime.engine.BaseEngine` has them, but the retrieval layer sits below
the runtime and so names only what it reads, never the engine class.
"""
from __future__ import annotations

from typing import Protocol

import numpy as np

from engine.core.state import MemoryState
from engine.retrieval.index import VisibleIndex
from engine.retrieval.lexical import BM25
from engine.retrieval.sketch import SketchedRows


class Encoder(Protocol):
    """Turns a text into its normalised vector (the embedder, or anything standing in for it)."""

    dim: int

    def embed_one(self, text: str) -> np.ndarray: ...


class IndexedMemory(Protocol):
    """A memory state with its derived views: node vectors, the retrieval surface's index, BM25, and the kept
    vectors (with their sketch) of a large set the engine ranks itself."""

    state: MemoryState
    embedder: Encoder
    index: VisibleIndex
    bm25: BM25

    def vector(self, uid: int) -> np.ndarray: ...

    def sketched_rows(self, name: str, ids: np.ndarray) -> SketchedRows: ...

"""What RecMem's stages read of the engine, as a protocol: its state, views, settings, vectors and LLM client.

Consolidation, retrieval and why-this-rank take an object of this shape instead
of importing `RecMemEngine`, which imports them; the engine class satisfies it.
"""
from __future__ import annotations

from typing import Protocol

import numpy as np

from engine.core.node import Node
from engine.engines.recmem.settings import RecMemSettings
from engine.llm.base import LLM
from engine.retrieval.memory import IndexedMemory


class RecMemContext(IndexedMemory, Protocol):
    settings: RecMemSettings
    llm: LLM
    vectors: dict[int, np.ndarray]

    def embed_text(self, node: Node) -> str: ...

    def derived(self, name: str, build): ...

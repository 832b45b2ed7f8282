"""What MemLoom's stages read of the engine, as a protocol: its state, views, settings, LLM client and snapshot.

The steward, retrieval and why-this-rank take an object of this shape instead
of importing `MemLoomEngine`, which imports them; the engine class satisfies it.
"""
from __future__ import annotations

from typing import Protocol

import numpy as np

from engine.core.node import Node
from engine.engines.memloom.settings import MemLoomSettings
from engine.llm.base import LLM
from engine.retrieval.memory import IndexedMemory


class MemLoomContext(IndexedMemory, Protocol):
    settings: MemLoomSettings
    llm: LLM
    vectors: dict[int, np.ndarray]

    def utterance_vector(self, node: Node) -> np.ndarray: ...

    def stacked_vectors(self, ids: list[int]) -> np.ndarray: ...

    def derived(self, name: str, build): ...

    def published_view(self) -> MemLoomContext | None: ...

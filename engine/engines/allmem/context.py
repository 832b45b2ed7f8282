"""What All-Mem's stages read of the engine, as a protocol: its state, views, settings and LLM client.

Diagnosis (`atc`), the executor, retrieval and why-this-rank take an object of
this shape instead of importing `AllMemEngine`, which imports them; the engine
class satisfies it.
"""
from __future__ import annotations

from typing import Protocol

import numpy as np

from engine.core.node import Node
from engine.engines.allmem.settings import AllMemSettings
from engine.llm.base import LLM
from engine.retrieval.memory import IndexedMemory


class AllMemContext(IndexedMemory, Protocol):
    settings: AllMemSettings
    llm: LLM

    def visible_neighbours(self, uid: int, k: int) -> list[tuple[int, float]]: ...

    def embed_node(self, node: Node) -> np.ndarray: ...

    def derived(self, name: str, build): ...

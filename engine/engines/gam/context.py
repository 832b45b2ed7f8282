"""What GAM's consolidation, retrieval and why-this-rank read of the engine, as a protocol: its state, views,
settings and LLM client.

Those modules take an object of this shape instead of importing `GamEngine`, which imports them; the engine
class satisfies it.
"""
from __future__ import annotations

from typing import Protocol

import numpy as np

from engine.engines.gam.settings import GamSettings
from engine.llm.base import LLM
from engine.retrieval.memory import IndexedMemory


class GamContext(IndexedMemory, Protocol):
    settings: GamSettings
    llm: LLM
    vectors: dict[int, np.ndarray]

    def derived(self, name: str, build): ...

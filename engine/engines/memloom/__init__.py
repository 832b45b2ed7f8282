"""MemLoom: event-centric memory with a lifecycle FSM, an off-peak steward and dual-stream retrieval
(seeds/memloom.txt)."""
from engine.engines.memloom.engine import MemLoomEngine
from engine.engines.memloom.schema import SCHEMA
from engine.engines.memloom.settings import ABLATIONS, MemLoomSettings

__all__ = ["MemLoomEngine", "MemLoomSettings", "ABLATIONS", "SCHEMA"]

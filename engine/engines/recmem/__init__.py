"""RecMem: recurrence-triggered consolidation over a subconscious store of exchanges (seeds/recmem.txt)."""
from engine.engines.recmem.engine import RecMemEngine
from engine.engines.recmem.schema import ABLATIONS, SCHEMA
from engine.engines.recmem.settings import PRESETS, RecMemSettings

__all__ = ["RecMemEngine", "RecMemSettings", "ABLATIONS", "PRESETS", "SCHEMA"]

"""All-Mem: visible-surface memory with agentic topology consolidation (seeds/all-mem.txt)."""
from engine.engines.allmem.engine import AllMemEngine
from engine.engines.allmem.schema import ABLATIONS, SCHEMA
from engine.engines.allmem.settings import AllMemSettings

__all__ = ["AllMemEngine", "AllMemSettings", "ABLATIONS", "SCHEMA"]

"""All-Mem: visible-surface memory with agentic topology consolidation (seeds/all-mem.txt)."""
from engine.allmem.engine import AllMemEngine
from engine.allmem.settings import ABLATIONS, AllMemSettings

__all__ = ["AllMemEngine", "AllMemSettings", "ABLATIONS"]

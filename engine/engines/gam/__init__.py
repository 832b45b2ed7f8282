"""GAM: hierarchical graph-based agentic memory, two-state consolidation and graph-guided multi-factor retrieval
(seeds/gam.txt)."""
from engine.engines.gam.engine import GamEngine
from engine.engines.gam.schema import SCHEMA
from engine.engines.gam.settings import ABLATIONS, GamSettings

__all__ = ["GamEngine", "GamSettings", "ABLATIONS", "SCHEMA"]

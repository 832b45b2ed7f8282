"""Typed, directed edges between units, with who made them."""
from __future__ import annotations

from dataclasses import asdict, dataclass


class EdgeType:
    TEMPORAL = "temporal"     # tau: new -> session-local predecessor (cap 1)
    SEMANTIC = "semantic"     # sigma: degree-capped association
    VERSION = "version"       # nu: new/representative -> old/archived, never pruned by default
    SIBLING = "sibling"       # beta: among Split siblings (capped)
    ALLMEM = (TEMPORAL, SEMANTIC, VERSION, SIBLING)
    RECOVERY = (VERSION, SIBLING)

    # Stage-2 expansion priority (All-Mem App. D.3): smaller expands first.
    PRIORITY = {SIBLING: 0, VERSION: 1, TEMPORAL: 2, SEMANTIC: 3}


EDGE_STYLE = {
    EdgeType.TEMPORAL: {"color": "#7f7f7f", "dashes": False, "label": "temporal (τ)"},
    EdgeType.SEMANTIC: {"color": "#1f77b4", "dashes": True, "label": "semantic (σ)"},
    EdgeType.VERSION: {"color": "#d62728", "dashes": False, "label": "version (ν)"},
    EdgeType.SIBLING: {"color": "#2ca02c", "dashes": True, "label": "sibling (β)"},
}


@dataclass
class Edge:
    src: int
    dst: int
    type: str
    made_by: str = "online"
    confidence: float | None = None
    created_turn: int = 0

    @property
    def key(self) -> tuple[int, int, str]:
        return (self.src, self.dst, self.type)

    def to_dict(self) -> dict:
        return asdict(self)

"""Typed, directed edges between nodes, with who made them. Types are declared by each engine's schema."""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Edge:
    """`evidence` lists the nodes a synthesised relation cites (MemLoom's evidence citation)."""

    src: int
    dst: int
    type: str
    made_by: str = "online"
    confidence: float | None = None
    created_turn: int = 0
    evidence: list[int] = field(default_factory=list)

    @property
    def key(self) -> tuple[int, int, str]:
        return (self.src, self.dst, self.type)

    def to_dict(self) -> dict:
        """Every field in field order, as `dataclasses.asdict` gives them, without its generic recursion."""
        return {"src": self.src, "dst": self.dst, "type": self.type, "made_by": self.made_by,
                "confidence": self.confidence, "created_turn": self.created_turn, "evidence": list(self.evidence)}

    def copy(self) -> "Edge":
        return Edge(**self.to_dict())

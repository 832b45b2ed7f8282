"""What one turn or one run caused, as the engine reports it to the replay, the CLI and the pages."""
from __future__ import annotations

from dataclasses import dataclass, field

from engine.core.edge import Edge
from engine.core.oplog import OpRecord
from engine.core.proposal import Proposal


@dataclass
class IngestReport:
    """What one turn caused: the node(s), anchors, edges, buffers, and engine-specific figures."""

    turn_id: str
    unit_id: int
    anchors: list[tuple[int, float]]
    edges: list[Edge]
    buffer_size: int
    ops: list[OpRecord] = field(default_factory=list)
    created: list[int] = field(default_factory=list)
    details: dict = field(default_factory=dict)


@dataclass
class RunReport:
    run_id: str
    proposals: list[Proposal]
    created: list[int] = field(default_factory=list)
    archived: list[int] = field(default_factory=list)
    rewired: list[tuple[int, int, int]] = field(default_factory=list)
    ops: list[OpRecord] = field(default_factory=list)

    @property
    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for p in self.proposals:
            out[p.status] = out.get(p.status, 0) + 1
        return out

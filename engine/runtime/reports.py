"""What one turn or one run caused, as the engine reports it to the replay, the CLI and the pages."""
from __future__ import annotations

from dataclasses import dataclass, field

from engine.core.edge import Edge
from engine.core.oplog import OpRecord
from engine.core.proposal import Proposal, ProposalCounts


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
    """What one apply of a run did, with every proposal of the run as it stands after it."""

    run_id: str
    proposals: list[Proposal]
    created: list[int] = field(default_factory=list)
    archived: list[int] = field(default_factory=list)
    rewired: list[tuple[int, int, int]] = field(default_factory=list)
    ops: list[OpRecord] = field(default_factory=list)

    @property
    def counts(self) -> ProposalCounts:
        return ProposalCounts.of(self.proposals)

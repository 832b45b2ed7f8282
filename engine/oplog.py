"""The append-only operation log: every change to memory is one record.

The state at any point is the fold of the log up to that point
(`engine.state.MemoryState.fold`), which is what time travel, diffs, undo and
branching are built on.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field


class OpKind:
    TURN_INGESTED = "turn_ingested"
    UNIT_CREATED = "unit_created"
    UNIT_RETRACTED = "unit_retracted"          # undo of a unit a consolidation run created
    DESCRIPTOR_CHANGED = "descriptor_changed"
    VISIBILITY_CHANGED = "visibility_changed"
    EDGE_ADDED = "edge_added"
    EDGE_REMOVED = "edge_removed"
    BUFFER_PUSHED = "buffer_pushed"
    BUFFER_FLUSHED = "buffer_flushed"
    PROPOSAL_MADE = "proposal_made"
    PROPOSAL_UPDATED = "proposal_updated"      # decision, status, plan or reason code
    RUN_STARTED = "run_started"
    RUN_COMMITTED = "run_committed"
    RUN_UNDONE = "run_undone"
    LLM_CALL = "llm_call"
    NOTE = "note"


@dataclass
class OpRecord:
    kind: str
    payload: dict
    turn: int = 0
    run_id: str | None = None
    actor: str = "engine"
    seq: int = 0

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class RunInfo:
    """A consolidation run as the log tells it."""

    run_id: str
    mode: str
    turn: int
    status: str = "open"            # open | committed | undone
    first_seq: int = 0
    last_seq: int = 0
    summary: dict = field(default_factory=dict)

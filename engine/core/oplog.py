"""The append-only operation log: every change to memory is one record.

The state at any point is the fold of the log up to that point
(`engine.core.ops.fold`), which is what time travel, diffs, undo and
branching are built on. What each kind does is declared once, in `engine.core.ops`.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field


class OpKind:
    TURN_INGESTED = "turn_ingested"
    NODE_CREATED = "node_created"
    NODE_RETRACTED = "node_retracted"          # undo of a node a run created
    NODE_UPDATED = "node_updated"              # members, statistics, provenance of a group node
    DESCRIPTOR_CHANGED = "descriptor_changed"
    STATUS_CHANGED = "status_changed"          # a lifecycle transition, with its cause
    EDGE_ADDED = "edge_added"
    EDGE_REMOVED = "edge_removed"
    BUFFER_PUSHED = "buffer_pushed"
    BUFFER_FLUSHED = "buffer_flushed"
    ENGINE_STATE_SET = "engine_state_set"      # an engine's own variable (phase, counter, snapshot pointer)
    PROPOSAL_MADE = "proposal_made"
    PROPOSAL_UPDATED = "proposal_updated"      # decision, status, plan or reason code
    RUN_STARTED = "run_started"
    RUN_COMMITTED = "run_committed"
    RUN_UNDONE = "run_undone"
    RUN_DISCARDED = "run_discarded"            # an open run closed without applying anything
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
    v: int = 0          # payload version; 0 = the kind's current version (set when stored)

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class RunInfo:
    """A run of an offline process as the log tells it."""

    run_id: str
    mode: str
    turn: int
    process: str = ""
    status: str = "open"            # open | committed | undone | discarded
    first_seq: int = 0
    last_seq: int = 0
    summary: dict = field(default_factory=dict)

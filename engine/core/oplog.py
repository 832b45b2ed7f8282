"""The append-only operation log: every change to memory is one record.

The state at any point is the fold of the log up to that point
(`engine.core.ops.fold`), which is what time travel, diffs, undo and
branching are built on. What each kind does is declared once, in `engine.core.ops`.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from enum import StrEnum


class OpKind(StrEnum):
    """The kinds of record; a record stores its kind's value. Each is declared in `engine.core.ops` with
    its payload class (`engine.core.payloads`)."""

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


class RunStatus(StrEnum):
    """Where a run of an offline process stands: open until its proposals are decided, then committed; a
    committed run can be undone, an open one discarded."""

    OPEN = "open"
    COMMITTED = "committed"
    UNDONE = "undone"
    DISCARDED = "discarded"


@dataclass
class OpRecord:
    """One record of the log as stored: `kind` an `OpKind` value, `payload` its payload class's dict."""

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
    status: RunStatus = RunStatus.OPEN
    first_seq: int = 0
    last_seq: int = 0
    summary: dict = field(default_factory=dict)

    @classmethod
    def from_dict(cls, data: dict) -> "RunInfo":
        """A run as a checkpoint stores it (its status the enum's value)."""
        return cls(**{**data, "status": RunStatus(data["status"])})

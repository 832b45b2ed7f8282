"""One payload class per op kind: what a record of that kind carries, field by field.

`Tx` builds them, the fold (`engine.core.ops`) reads them, and the log stores each as the plain dict
`to_dict` gives: the same dict, key for key and in the same order, that records held before these classes
existed, so every stored log reads unchanged. `from_dict` reads a stored payload that is in its kind's current
version (`engine.core.ops.payload_of` upcasts an older one first); a missing required field or an unknown one
raises, so a payload of the wrong shape stops the fold instead of being half read.
"""
from __future__ import annotations

import functools
from dataclasses import MISSING, dataclass, field, fields
from enum import Enum
from typing import Any, ClassVar, Self

from engine.core.errors import WorkbenchError
from engine.core.oplog import OpKind, OpRecord


class _Unset(Enum):
    """A field a record leaves out (a variable's first value has no `prev`), which None could not say: None
    is a value a variable may hold. An enum member, so it stays itself through copies."""

    UNSET = "UNSET"


class MalformedPayload(WorkbenchError, ValueError):
    """A stored payload that is not of its kind's shape (a field missing or unknown)."""


UNSET: Any = _Unset.UNSET
OPTIONAL = {"optional": True}       # field metadata: stored only when it is not its default


@dataclass(frozen=True, slots=True)
class Payload:
    """The fields of one op kind. A class whose `extra` names a dict field stores that dict's keys beside its
    own (an engine's details on `turn_ingested`, an LLM call's record), and reads any key it does not declare
    into it."""

    kind: ClassVar[OpKind]
    extra: ClassVar[str | None] = None

    def to_dict(self) -> dict:
        """The stored form: every field in declaration order, an optional one only when it differs from its
        default, the `extra` dict's keys last."""
        out: dict = {}
        for name, optional, default in _layout(type(self)):
            value = getattr(self, name)
            if name == self.extra:
                out.update(value)
            elif not (optional and value is default):
                out[name] = value
        return out

    @classmethod
    def from_dict(cls, data: dict) -> Self:
        if cls.extra is not None:
            own = {name for name, _, _ in _layout(cls)}
            data = {**{k: v for k, v in data.items() if k in own},
                    cls.extra: {k: v for k, v in data.items() if k not in own}}
        try:
            return cls(**data)
        except TypeError:
            raise MalformedPayload(f"{cls.kind} payload {_misfit(cls, data)}") from None

    def record(self, turn: int = 0, run_id: str | None = None, actor: str = "engine") -> OpRecord:
        """The log record carrying this payload."""
        return OpRecord(kind=self.kind, payload=self.to_dict(), turn=turn, run_id=run_id, actor=actor)


def _misfit(cls: type[Payload], data: dict) -> str:
    """How `data` misses the fields of `cls`: the required ones it lacks, the ones it has that `cls` has not."""
    names = {name for name, _, _ in _layout(cls)}
    missing = [f.name for f in fields(cls)
               if f.name not in data and f.default is MISSING and f.default_factory is MISSING]
    unknown = sorted(set(data) - names)
    problems = ([f"lacks {', '.join(map(repr, missing))}"] if missing else []) + \
               ([f"has unknown {', '.join(map(repr, unknown))}"] if unknown else [])
    return "; ".join(problems)


@functools.cache
def _layout(cls: type[Payload]) -> tuple[tuple[str, bool, Any], ...]:
    """(name, optional, default) of each field, read once per class."""
    return tuple((f.name, bool(f.metadata.get("optional")), f.default if f.default is not MISSING else None)
                 for f in fields(cls))


# -- turns and nodes -----------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class TurnIngested(Payload):
    """Where the turn sits and its content hash (missing from records written before hashes were stored), and
    the engine's own details of the turn (All-Mem's descriptor outcome, MemLoom's routing, RecMem's gate)."""

    kind = OpKind.TURN_INGESTED
    extra = "details"
    turn_id: str
    index: int | None = None
    session: str | None = None
    sha256: str | None = None
    details: dict = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class NodeCreated(Payload):
    """`node` is `Node.payload()`; `restored` marks the undo of a retraction, which claims no new id."""

    kind = OpKind.NODE_CREATED
    node: dict
    restored: bool = field(default=False, metadata=OPTIONAL)

    @property
    def node_id(self) -> int:
        return self.node["id"]


@dataclass(frozen=True, slots=True)
class NodeChange(Payload):
    """A record about one node held in the state, named by its id in `node`."""

    node: int

    @property
    def node_id(self) -> int:
        return self.node


@dataclass(frozen=True, slots=True)
class NodeRetracted(NodeChange):
    """`was` is the node as it stood (`Node.payload()`), which the undo creates again."""

    kind = OpKind.NODE_RETRACTED
    was: dict


@dataclass(frozen=True, slots=True)
class NodeUpdated(NodeChange):
    kind = OpKind.NODE_UPDATED
    changes: dict
    prev: dict


@dataclass(frozen=True, slots=True)
class DescriptorChanged(NodeChange):
    kind = OpKind.DESCRIPTOR_CHANGED
    summary: str
    keywords: list[str]
    prev_summary: str
    prev_keywords: list[str]


@dataclass(frozen=True, slots=True)
class StatusChanged(NodeChange):
    """`cause` says why (a rule and its figures); an undo's carries `undo_of`, which the fold lets through
    whatever the schema's transitions say."""

    kind = OpKind.STATUS_CHANGED
    status: str
    was: str
    cause: dict = field(default_factory=dict)


# -- edges ---------------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class EdgeAdded(Payload):
    """`edge` is `Edge.to_dict()`."""

    kind = OpKind.EDGE_ADDED
    edge: dict

    @property
    def key(self) -> tuple[int, int, str]:
        return (self.edge["src"], self.edge["dst"], self.edge["type"])


@dataclass(frozen=True, slots=True)
class EdgeRemoved(Payload):
    """`edge` is the removed edge whole, which the undo adds again."""

    kind = OpKind.EDGE_REMOVED
    src: int
    dst: int
    type: str
    edge: dict

    @property
    def key(self) -> tuple[int, int, str]:
        return (self.src, self.dst, self.type)


# -- buffers and engine variables ----------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class BufferPushed(Payload):
    """`entries` are [node id, [anchor ids]] pairs."""

    kind = OpKind.BUFFER_PUSHED
    buffer: str
    entries: list[list]


@dataclass(frozen=True, slots=True)
class BufferFlushed(Payload):
    kind = OpKind.BUFFER_FLUSHED
    buffer: str
    entries: list[list]


@dataclass(frozen=True, slots=True)
class EngineStateSet(Payload):
    """Without `value` the variable is removed (the undo of its first set); without `prev` it had none."""

    kind = OpKind.ENGINE_STATE_SET
    key: str
    value: Any = field(default=UNSET, metadata=OPTIONAL)
    prev: Any = field(default=UNSET, metadata=OPTIONAL)


# -- proposals and runs --------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class ProposalMade(Payload):
    """`proposal` is `Proposal.to_dict()`."""

    kind = OpKind.PROPOSAL_MADE
    proposal: dict

    @property
    def proposal_id(self) -> int:
        return self.proposal["id"]


@dataclass(frozen=True, slots=True)
class ProposalUpdated(Payload):
    """`changes` are new values of the proposal's fields (decision, status, plan, reason code, note)."""

    kind = OpKind.PROPOSAL_UPDATED
    id: int
    changes: dict

    @property
    def proposal_id(self) -> int:
        return self.id


@dataclass(frozen=True, slots=True)
class RunStarted(Payload):
    """`buffer` holds the ids the run took from its process's buffer."""

    kind = OpKind.RUN_STARTED
    mode: str = ""
    process: str = ""
    buffer: list[int] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class RunCommitted(Payload):
    kind = OpKind.RUN_COMMITTED
    summary: dict = field(default_factory=dict)
    decided_by: str | None = None


@dataclass(frozen=True, slots=True)
class RunUndone(Payload):
    kind = OpKind.RUN_UNDONE
    undone_run: str


@dataclass(frozen=True, slots=True)
class RunDiscarded(Payload):
    kind = OpKind.RUN_DISCARDED


# -- evidence ------------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class LLMCallMade(Payload):
    """The record of one model call (`engine.llm.base.LLMCall.to_dict()`, a layer above this one)."""

    kind = OpKind.LLM_CALL
    extra = "call"
    call: dict = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Note(Payload):
    """A line for the audit log, with what it is about (a part of a run's summary, a deferred trigger)."""

    kind = OpKind.NOTE
    extra = "details"
    text: str = ""
    details: dict = field(default_factory=dict)


NodePayload = NodeCreated | NodeChange          # a record about one node: each has `node_id`

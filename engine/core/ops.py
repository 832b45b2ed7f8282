"""Every op kind declared once: its payload class, how it applies to the state, its inverse, what it
materializes, the ids it claims, its version.

The fold (`apply`, `fold` below), the store's materialized tables and claims, the derived views and the
generic undo of a run all read a record through `payload_of` and these specs, so a payload is interpreted in
one place. A kind the registry does not know makes the fold raise instead of being skipped. Records written
under an older payload version are upcast on read.
"""
from __future__ import annotations

import copy
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Callable

from engine.core.edge import Edge
from engine.core.errors import WorkbenchError
from engine.core.node import Node, json_copy
from engine.core.oplog import OpKind, OpRecord, RunInfo, RunStatus
from engine.core.payloads import (UNSET, BufferFlushed, BufferPushed, DescriptorChanged, EdgeAdded, EdgeRemoved,
                                  EngineStateSet, LLMCallMade, NodeCreated, NodePayload, NodeRetracted, NodeUpdated,
                                  Note, Payload, ProposalMade, ProposalUpdated, RunCommitted, RunDiscarded, RunStarted,
                                  RunUndone, StatusChanged, TurnIngested)
from engine.core.proposal import Proposal
from engine.core.schema import EngineSchema
from engine.core.state import MemoryState


class UnknownOpKind(WorkbenchError, ValueError):
    pass


class IllegalTransition(WorkbenchError, ValueError):
    pass


@dataclass
class Touched:
    """Rows of the materialized tables an op changes."""

    nodes: set[int] = field(default_factory=set)
    edges: set[tuple[int, int, str]] = field(default_factory=set)
    proposals: set[int] = field(default_factory=set)


@dataclass(frozen=True)
class OpSpec:
    """What a kind does: `apply(state, payload, op)` changes a state; `inverse(state, payload, op)` gives the
    payloads that revert it in `state` (None: nothing to revert: records, decisions, runs); `touches` names
    the materialized rows it changes; `claims` the ids it hands out, unique per log."""

    payload: type[Payload]
    version: int
    apply: Callable[[MemoryState, Payload, OpRecord], None]
    inverse: Callable[[MemoryState, Payload, OpRecord], list[Payload]] | None = None
    touches: Callable[[Payload], Touched] = lambda p: Touched()
    claims: Callable[[Payload, OpRecord], list[tuple[str, str]]] = lambda p, op: []
    upcast: dict[int, Callable[[dict], dict]] = field(default_factory=dict)   # old version -> payload

    @property
    def kind(self) -> OpKind:
        return self.payload.kind


SPECS: dict[str, OpSpec] = {}


def declare(spec: OpSpec) -> OpSpec:
    SPECS[spec.kind] = spec
    return spec


def spec(kind: str) -> OpSpec:
    try:
        return SPECS[kind]
    except KeyError:
        raise UnknownOpKind(f"op kind {kind!r} is not declared in engine.ops; known kinds: "
                            f"{sorted(map(str, SPECS))}") from None


def current(op: OpRecord) -> OpRecord:
    """The record in its kind's current payload version (older payloads upcast step by step)."""
    s = spec(op.kind)
    v = op.v or s.version
    if v == s.version:
        op.v = v
        return op
    payload = op.payload
    while v < s.version:
        if v not in s.upcast:
            raise UnknownOpKind(f"{op.kind} payload version {v} has no upcast to version {s.version}")
        payload, v = s.upcast[v](payload), v + 1
    return OpRecord(kind=op.kind, payload=payload, turn=op.turn, run_id=op.run_id, actor=op.actor, seq=op.seq, v=v)


def payload_of(op: OpRecord) -> Payload:
    """The record's payload as its kind's class, in the current version."""
    return spec(op.kind).payload.from_dict(current(op).payload)


def touches(op: OpRecord) -> Touched:
    """The materialized rows `op` changes."""
    return spec(op.kind).touches(payload_of(op))


def claims(op: OpRecord) -> list[tuple[str, str]]:
    """The (kind, id) pairs `op` hands out, which no other record of the log may."""
    return spec(op.kind).claims(payload_of(op), op)


def inverse(state: MemoryState, op: OpRecord) -> list[Payload]:
    """The payloads that revert `op` in `state` (none for a kind with nothing to revert)."""
    s = spec(op.kind)
    return s.inverse(state, payload_of(op), op) if s.inverse else []


# -- nodes -----------------------------------------------------------------------------------------
def _node_created(s: MemoryState, p: NodeCreated, op: OpRecord) -> None:
    node = Node.from_dict(p.node)
    if not node.status:
        node.status = s.initial_status
    node.visible = s.on_surface(node.status)
    s.put_node(node)
    s.next_node_id = max(s.next_node_id, node.id + 1)
    if node.kind == s.turn_kind:
        for sid in node.source_ids:
            s.turn_units.setdefault(sid, node.id)


def _node_retracted(s: MemoryState, p: NodeRetracted, op: OpRecord) -> None:
    uid = p.node
    for e in s.out_edges(uid) + s.in_edges(uid):
        s.drop_edge(e.key)
    node = s.nodes.pop(uid, None)
    for buf in s.buffers.values():
        buf.pop(uid, None)
    if node is not None and node.kind == s.turn_kind:
        for sid in node.source_ids:
            if s.turn_units.get(sid) == uid:
                del s.turn_units[sid]


def _descriptor_changed(s: MemoryState, p: DescriptorChanged, op: OpRecord) -> None:
    u = s.node_to_change(p.node)
    u.summary = p.summary
    u.keywords = list(p.keywords)


_UPDATABLE = ("members", "attrs", "source_ids", "speakers")


def _node_updated(s: MemoryState, p: NodeUpdated, op: OpRecord) -> None:
    u = s.node_to_change(p.node)
    for key, value in p.changes.items():
        if key not in _UPDATABLE:
            raise ValueError(f"node_updated cannot change {key!r}; only {', '.join(_UPDATABLE)}")
        setattr(u, key, json_copy(value))


def _status_changed(s: MemoryState, p: StatusChanged, op: OpRecord) -> None:
    u = s.node_to_change(p.node)
    if not p.cause.get("undo_of") and not s.legal(u.status, p.status):
        raise IllegalTransition(f"u{u.id} ({u.kind}): {u.status} -> {p.status} is not a legal transition")
    u.status = p.status
    u.visible = s.on_surface(u.status)


def _node_touch(p: NodePayload) -> Touched:
    return Touched(nodes={p.node_id})


declare(OpSpec(
    NodeCreated, 1, _node_created,
    inverse=lambda s, p, op: [NodeRetracted(node=p.node_id, was=p.node)] if p.node_id in s.nodes else [],
    touches=_node_touch,
    claims=lambda p, op: [] if p.restored else [("node", str(p.node_id))]))
declare(OpSpec(
    NodeRetracted, 1, _node_retracted,
    inverse=lambda s, p, op: [NodeCreated(node=p.was, restored=True)] if p.was else [],
    touches=_node_touch))
declare(OpSpec(
    DescriptorChanged, 1, _descriptor_changed,
    inverse=lambda s, p, op: [DescriptorChanged(node=p.node, summary=p.prev_summary, keywords=p.prev_keywords,
                                                prev_summary=p.summary, prev_keywords=p.keywords)]
    if p.node in s.nodes else [],
    touches=_node_touch))
declare(OpSpec(
    NodeUpdated, 1, _node_updated,
    inverse=lambda s, p, op: [NodeUpdated(node=p.node, changes=p.prev, prev=p.changes)] if p.node in s.nodes else [],
    touches=_node_touch))
declare(OpSpec(
    StatusChanged, 1, _status_changed,
    inverse=lambda s, p, op: [StatusChanged(node=p.node, status=p.was, was=p.status, cause={"undo_of": op.seq})]
    if p.node in s.nodes else [],
    touches=_node_touch))


# -- edges -----------------------------------------------------------------------------------------
def _edge_added(s: MemoryState, p: EdgeAdded, op: OpRecord) -> None:
    s.put_edge(Edge(**p.edge))


def _edge_removed(s: MemoryState, p: EdgeRemoved, op: OpRecord) -> None:
    s.drop_edge(p.key)


declare(OpSpec(
    EdgeAdded, 1, _edge_added,
    inverse=lambda s, p, op: [EdgeRemoved(*p.key, edge=p.edge)] if p.key in s.edges else [],
    touches=lambda p: Touched(edges={p.key})))
declare(OpSpec(
    EdgeRemoved, 1, _edge_removed,
    inverse=lambda s, p, op: [EdgeAdded(edge=p.edge)]
    if p.edge["src"] in s.nodes and p.edge["dst"] in s.nodes and p.key not in s.edges else [],
    touches=lambda p: Touched(edges={p.key})))


# -- buffers and engine variables ------------------------------------------------------------------
def _buffer_pushed(s: MemoryState, p: BufferPushed, op: OpRecord) -> None:
    buf = s.buffers.setdefault(p.buffer, {})
    for uid, anchors in p.entries:
        buf[uid] = list(anchors)


def _buffer_flushed(s: MemoryState, p: BufferFlushed, op: OpRecord) -> None:
    buf = s.buffers.setdefault(p.buffer, {})
    for uid, _ in p.entries:
        buf.pop(uid, None)


declare(OpSpec(
    BufferPushed, 1, _buffer_pushed,
    inverse=lambda s, p, op: [BufferFlushed(buffer=p.buffer, entries=p.entries)]))
declare(OpSpec(
    BufferFlushed, 1, _buffer_flushed,
    inverse=lambda s, p, op: [BufferPushed(buffer=p.buffer, entries=[
        [u, a] for u, a in p.entries if u in s.nodes and u not in s.buffers.get(p.buffer, {})])]))


def _engine_state_set(s: MemoryState, p: EngineStateSet, op: OpRecord) -> None:
    """`value` sets the variable; a payload without `value` removes it (the inverse of a first set)."""
    if p.value is not UNSET:
        s.engine_state[p.key] = copy.deepcopy(p.value)
    else:
        s.engine_state.pop(p.key, None)


declare(OpSpec(EngineStateSet, 1, _engine_state_set,
               inverse=lambda s, p, op: [EngineStateSet(key=p.key, value=p.prev, prev=p.value)]))


# -- turns, proposals, runs, records -----------------------------------------------------------------
def _turn_ingested(s: MemoryState, p: TurnIngested, op: OpRecord) -> None:
    s.turn = op.turn
    s.turn_ids.append(p.turn_id)


def _proposal_made(s: MemoryState, p: ProposalMade, op: OpRecord) -> None:
    proposal = Proposal.from_dict(p.proposal)
    s.put_proposal(proposal)
    s.next_proposal_id = max(s.next_proposal_id, proposal.id + 1)


def _proposal_updated(s: MemoryState, p: ProposalUpdated, op: OpRecord) -> None:
    s.proposal_to_change(p.id).change(p.changes)


def _run_started(s: MemoryState, p: RunStarted, op: OpRecord) -> None:
    s.put_run(RunInfo(run_id=op.run_id, mode=p.mode, turn=op.turn, process=p.process, first_seq=op.seq,
                      last_seq=op.seq))


def _run_committed(s: MemoryState, p: RunCommitted, op: OpRecord) -> None:
    run = s.run_to_change(op.run_id)
    run.status, run.last_seq, run.summary = RunStatus.COMMITTED, op.seq, dict(p.summary)


def _run_undone(s: MemoryState, p: RunUndone, op: OpRecord) -> None:
    s.run_to_change(p.undone_run).status = RunStatus.UNDONE


def _run_discarded(s: MemoryState, p: RunDiscarded, op: OpRecord) -> None:
    run = s.run_to_change(op.run_id)
    run.status, run.last_seq = RunStatus.DISCARDED, op.seq


def _record_only(s: MemoryState, p: Payload, op: OpRecord) -> None:
    """LLM calls and notes are evidence in the log; they change no state."""


declare(OpSpec(TurnIngested, 1, _turn_ingested, claims=lambda p, op: [("turn", p.turn_id)]))
declare(OpSpec(ProposalMade, 1, _proposal_made,
               touches=lambda p: Touched(proposals={p.proposal_id}),
               claims=lambda p, op: [("proposal", str(p.proposal_id))]))
declare(OpSpec(ProposalUpdated, 1, _proposal_updated, touches=lambda p: Touched(proposals={p.proposal_id})))
declare(OpSpec(RunStarted, 1, _run_started, claims=lambda p, op: [("run", op.run_id)]))
declare(OpSpec(RunCommitted, 1, _run_committed))
declare(OpSpec(RunUndone, 1, _run_undone))
declare(OpSpec(RunDiscarded, 1, _run_discarded))
declare(OpSpec(LLMCallMade, 1, _record_only))
declare(OpSpec(Note, 1, _record_only))


def apply(state: MemoryState, op: OpRecord) -> None:
    """Change `state` by one record (upcast to its kind's current version first): the one way a state changes."""
    op = current(op)
    s = spec(op.kind)
    s.apply(state, s.payload.from_dict(op.payload), op)
    if op.seq:
        state.seq = op.seq


def fold(ops: Iterable[OpRecord], schema: EngineSchema | None = None, upto_turn: int | None = None,
         upto_seq: int | None = None, start: MemoryState | None = None) -> MemoryState:
    """The state after every op with turn <= upto_turn and seq <= upto_seq (from `start` if given)."""
    state = start if start is not None else MemoryState(schema=schema)
    for op in ops:
        if upto_turn is not None and op.turn > upto_turn:
            break
        if upto_seq is not None and op.seq > upto_seq:
            break
        apply(state, op)
    return state

"""Every op kind declared once: how it applies to the state, its inverse, what it materializes, its version.

The fold (`apply`, `fold` below), the store's materialized tables and the
generic undo of a run all read these specs, so a payload is interpreted in one
place. A kind the registry does not know makes the fold raise instead of being
skipped. Records written under an older payload version are upcast on read.
"""
from __future__ import annotations

import copy
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Callable

from engine.core.edge import Edge
from engine.core.errors import WorkbenchError
from engine.core.node import Node, json_copy
from engine.core.oplog import OpKind, OpRecord, RunInfo
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


Inverse = Callable[[MemoryState, OpRecord], list[tuple[str, dict]]]


@dataclass(frozen=True)
class OpSpec:
    kind: str
    version: int
    apply: Callable[[MemoryState, OpRecord], None]
    inverse: Inverse | None = None               # None: nothing to revert (records, decisions, runs)
    touches: Callable[[dict], Touched] = lambda p: Touched()
    claims: Callable[[OpRecord], list[tuple[str, str]]] = lambda op: []   # ids it hands out, unique per log
    upcast: dict[int, Callable[[dict], dict]] = field(default_factory=dict)   # old version -> payload


SPECS: dict[str, OpSpec] = {}


def declare(spec: OpSpec) -> OpSpec:
    SPECS[spec.kind] = spec
    return spec


def spec(kind: str) -> OpSpec:
    try:
        return SPECS[kind]
    except KeyError:
        raise UnknownOpKind(f"op kind {kind!r} is not declared in engine.ops; known kinds: {sorted(SPECS)}") from None


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


# -- nodes -----------------------------------------------------------------------------------------
def _node_created(s: MemoryState, op: OpRecord) -> None:
    node = Node.from_dict(op.payload["node"])
    if not node.status:
        node.status = s.initial_status
    node.visible = s.on_surface(node.status)
    s.put_node(node)
    s.next_node_id = max(s.next_node_id, node.id + 1)
    if node.kind == s.turn_kind:
        for sid in node.source_ids:
            s.turn_units.setdefault(sid, node.id)


def _node_retracted(s: MemoryState, op: OpRecord) -> None:
    uid = op.payload["node"]
    for e in s.out_edges(uid) + s.in_edges(uid):
        s.drop_edge(e.key)
    node = s.nodes.pop(uid, None)
    for buf in s.buffers.values():
        buf.pop(uid, None)
    if node is not None and node.kind == s.turn_kind:
        for sid in node.source_ids:
            if s.turn_units.get(sid) == uid:
                del s.turn_units[sid]


def _descriptor_changed(s: MemoryState, op: OpRecord) -> None:
    u = s.node_to_change(op.payload["node"])
    u.summary = op.payload["summary"]
    u.keywords = list(op.payload["keywords"])


_UPDATABLE = ("members", "attrs", "source_ids", "speakers")


def _node_updated(s: MemoryState, op: OpRecord) -> None:
    u = s.node_to_change(op.payload["node"])
    for key, value in op.payload["changes"].items():
        if key not in _UPDATABLE:
            raise ValueError(f"node_updated cannot change {key!r}; only {', '.join(_UPDATABLE)}")
        setattr(u, key, json_copy(value))


def _status_changed(s: MemoryState, op: OpRecord) -> None:
    p = op.payload
    u = s.node_to_change(p["node"])
    if not (p.get("cause") or {}).get("undo_of") and not s.legal(u.status, p["status"]):
        raise IllegalTransition(f"u{u.id} ({u.kind}): {u.status} -> {p['status']} is not a legal transition")
    u.status = p["status"]
    u.visible = s.on_surface(u.status)


def _node_touch(p: dict) -> Touched:
    return Touched(nodes={p["node"]["id"] if isinstance(p["node"], dict) else p["node"]})


declare(OpSpec(
    OpKind.NODE_CREATED, 1, _node_created,
    inverse=lambda s, op: [(OpKind.NODE_RETRACTED, {"node": op.payload["node"]["id"], "was": op.payload["node"]})]
    if op.payload["node"]["id"] in s.nodes else [],
    touches=_node_touch,
    claims=lambda op: [] if op.payload.get("restored") else [("node", str(op.payload["node"]["id"]))]))
declare(OpSpec(
    OpKind.NODE_RETRACTED, 1, _node_retracted,
    inverse=lambda s, op: [(OpKind.NODE_CREATED, {"node": op.payload["was"], "restored": True})]
    if op.payload.get("was") else [],
    touches=lambda p: Touched(nodes={p["node"]})))
declare(OpSpec(
    OpKind.DESCRIPTOR_CHANGED, 1, _descriptor_changed,
    inverse=lambda s, op: [(OpKind.DESCRIPTOR_CHANGED, {
        "node": op.payload["node"], "summary": op.payload["prev_summary"], "keywords": op.payload["prev_keywords"],
        "prev_summary": op.payload["summary"], "prev_keywords": op.payload["keywords"]})]
    if op.payload["node"] in s.nodes else [],
    touches=_node_touch))
declare(OpSpec(
    OpKind.NODE_UPDATED, 1, _node_updated,
    inverse=lambda s, op: [(OpKind.NODE_UPDATED, {"node": op.payload["node"], "changes": op.payload["prev"],
                                                  "prev": op.payload["changes"]})]
    if op.payload["node"] in s.nodes else [],
    touches=_node_touch))
declare(OpSpec(
    OpKind.STATUS_CHANGED, 1, _status_changed,
    inverse=lambda s, op: [(OpKind.STATUS_CHANGED, {"node": op.payload["node"], "status": op.payload["was"],
                                                    "was": op.payload["status"], "cause": {"undo_of": op.seq}})]
    if op.payload["node"] in s.nodes else [],
    touches=_node_touch))


# -- edges -----------------------------------------------------------------------------------------
def _edge_added(s: MemoryState, op: OpRecord) -> None:
    s.put_edge(Edge(**op.payload["edge"]))


def _edge_removed(s: MemoryState, op: OpRecord) -> None:
    p = op.payload
    s.drop_edge((p["src"], p["dst"], p["type"]))


def _edge_key(p: dict) -> tuple[int, int, str]:
    e = p.get("edge") or p
    return (e["src"], e["dst"], e["type"])


declare(OpSpec(
    OpKind.EDGE_ADDED, 1, _edge_added,
    inverse=lambda s, op: [(OpKind.EDGE_REMOVED, {**dict(zip(("src", "dst", "type"), _edge_key(op.payload))),
                                                  "edge": op.payload["edge"]})]
    if _edge_key(op.payload) in s.edges else [],
    touches=lambda p: Touched(edges={_edge_key(p)})))
declare(OpSpec(
    OpKind.EDGE_REMOVED, 1, _edge_removed,
    inverse=lambda s, op: [(OpKind.EDGE_ADDED, {"edge": op.payload["edge"]})]
    if op.payload["edge"]["src"] in s.nodes and op.payload["edge"]["dst"] in s.nodes
    and _edge_key(op.payload) not in s.edges else [],
    touches=lambda p: Touched(edges={_edge_key(p)})))


# -- buffers and engine variables ------------------------------------------------------------------
def _buffer_pushed(s: MemoryState, op: OpRecord) -> None:
    buf = s.buffers.setdefault(op.payload["buffer"], {})
    for uid, anchors in op.payload["entries"]:
        buf[uid] = list(anchors)


def _buffer_flushed(s: MemoryState, op: OpRecord) -> None:
    buf = s.buffers.setdefault(op.payload["buffer"], {})
    for uid, _ in op.payload["entries"]:
        buf.pop(uid, None)


declare(OpSpec(
    OpKind.BUFFER_PUSHED, 1, _buffer_pushed,
    inverse=lambda s, op: [(OpKind.BUFFER_FLUSHED, op.payload)]))
declare(OpSpec(
    OpKind.BUFFER_FLUSHED, 1, _buffer_flushed,
    inverse=lambda s, op: [(OpKind.BUFFER_PUSHED, {
        "buffer": op.payload["buffer"],
        "entries": [[u, a] for u, a in op.payload["entries"]
                    if u in s.nodes and u not in s.buffers.get(op.payload["buffer"], {})]})]))

def _engine_state_set(s: MemoryState, op: OpRecord) -> None:
    """`value` sets the variable; a payload without `value` removes it (the inverse of a first set)."""
    p = op.payload
    if "value" in p:
        s.engine_state[p["key"]] = copy.deepcopy(p["value"])
    else:
        s.engine_state.pop(p["key"], None)


def _engine_state_inverse(s: MemoryState, op: OpRecord) -> list[tuple[str, dict]]:
    p = op.payload
    back = {"key": p["key"]}
    if "prev" in p:
        back["value"] = p["prev"]
    if "value" in p:
        back["prev"] = p["value"]
    return [(OpKind.ENGINE_STATE_SET, back)]


declare(OpSpec(OpKind.ENGINE_STATE_SET, 1, _engine_state_set, inverse=_engine_state_inverse))


# -- turns, proposals, runs, records -----------------------------------------------------------------
def _turn_ingested(s: MemoryState, op: OpRecord) -> None:
    """`sha256` (the turn's content hash) is missing from records written before it was stored."""
    s.turn = op.turn
    s.turn_ids.append(op.payload["turn_id"])


def _proposal_made(s: MemoryState, op: OpRecord) -> None:
    p = Proposal.from_dict(copy.deepcopy(op.payload["proposal"]))
    s.put_proposal(p)
    s.next_proposal_id = max(s.next_proposal_id, p.id + 1)


def _proposal_updated(s: MemoryState, op: OpRecord) -> None:
    p = s.proposal_to_change(op.payload["id"])
    for key, value in op.payload["changes"].items():
        setattr(p, key, copy.deepcopy(value))


def _run_started(s: MemoryState, op: OpRecord) -> None:
    s.put_run(RunInfo(run_id=op.run_id, mode=op.payload.get("mode", ""), turn=op.turn,
                      process=op.payload.get("process", ""), first_seq=op.seq, last_seq=op.seq))


def _run_committed(s: MemoryState, op: OpRecord) -> None:
    run = s.run_to_change(op.run_id)
    run.status, run.last_seq, run.summary = "committed", op.seq, dict(op.payload.get("summary", {}))


def _run_undone(s: MemoryState, op: OpRecord) -> None:
    s.run_to_change(op.payload["undone_run"]).status = "undone"


def _run_discarded(s: MemoryState, op: OpRecord) -> None:
    run = s.run_to_change(op.run_id)
    run.status, run.last_seq = "discarded", op.seq


def _record_only(s: MemoryState, op: OpRecord) -> None:
    """LLM calls and notes are evidence in the log; they change no state."""


declare(OpSpec(OpKind.TURN_INGESTED, 1, _turn_ingested, claims=lambda op: [("turn", op.payload["turn_id"])]))
declare(OpSpec(OpKind.PROPOSAL_MADE, 1, _proposal_made,
               touches=lambda p: Touched(proposals={p["proposal"]["id"]}),
               claims=lambda op: [("proposal", str(op.payload["proposal"]["id"]))]))
declare(OpSpec(OpKind.PROPOSAL_UPDATED, 1, _proposal_updated, touches=lambda p: Touched(proposals={p["id"]})))
declare(OpSpec(OpKind.RUN_STARTED, 1, _run_started, claims=lambda op: [("run", op.run_id)]))
declare(OpSpec(OpKind.RUN_COMMITTED, 1, _run_committed))
declare(OpSpec(OpKind.RUN_UNDONE, 1, _run_undone))
declare(OpSpec(OpKind.RUN_DISCARDED, 1, _run_discarded))
declare(OpSpec(OpKind.LLM_CALL, 1, _record_only))
declare(OpSpec(OpKind.NOTE, 1, _record_only))


def apply(state: MemoryState, op: OpRecord) -> None:
    """Change `state` by one record (upcast to its kind's current version first): the one way a state changes."""
    op = current(op)
    spec(op.kind).apply(state, op)
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

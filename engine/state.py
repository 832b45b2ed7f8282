"""In-memory memory state, changed only by applying operation records.

Engines never mutate units or edges directly: they build `OpRecord`s, and the
state (and the store) apply them. That keeps the log the single truth and makes
the state at any turn a pure fold.
"""
from __future__ import annotations

import copy
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Iterable

from engine.edge import Edge
from engine.oplog import OpKind, OpRecord, RunInfo
from engine.proposal import Proposal
from engine.unit import Unit


@dataclass
class MemoryState:
    units: dict[int, Unit] = field(default_factory=dict)
    edges: dict[tuple[int, int, str], Edge] = field(default_factory=dict)
    out_adj: dict[int, dict[str, set[int]]] = field(default_factory=lambda: defaultdict(lambda: defaultdict(set)))
    in_adj: dict[int, dict[str, set[int]]] = field(default_factory=lambda: defaultdict(lambda: defaultdict(set)))
    proposals: dict[int, Proposal] = field(default_factory=dict)
    buffer: dict[int, list[int]] = field(default_factory=dict)   # target id -> anchor ids, insertion ordered
    runs: dict[str, RunInfo] = field(default_factory=dict)
    turn: int = 0
    turn_ids: list[str] = field(default_factory=list)
    turn_units: dict[str, int] = field(default_factory=dict)       # dataset turn id -> unit id
    seq: int = 0
    next_unit_id: int = 1
    next_proposal_id: int = 1

    # -- reading -----------------------------------------------------------
    @property
    def visible_ids(self) -> list[int]:
        return sorted(uid for uid, u in self.units.items() if u.visible)

    @property
    def archived_ids(self) -> list[int]:
        return sorted(uid for uid, u in self.units.items() if not u.visible)

    def out(self, uid: int, etype: str) -> set[int]:
        return self.out_adj.get(uid, {}).get(etype, set())

    def inc(self, uid: int, etype: str) -> set[int]:
        return self.in_adj.get(uid, {}).get(etype, set())

    def out_edges(self, uid: int) -> list[Edge]:
        adj = self.out_adj.get(uid, {})
        return [self.edges[(uid, dst, t)] for t, dsts in adj.items() for dst in dsts]

    def in_edges(self, uid: int) -> list[Edge]:
        adj = self.in_adj.get(uid, {})
        return [self.edges[(src, uid, t)] for t, srcs in adj.items() for src in srcs]

    def edge_counts(self) -> dict[str, int]:
        counts: dict[str, int] = defaultdict(int)
        for (_, _, t) in self.edges:
            counts[t] += 1
        return dict(sorted(counts.items()))

    def last_committed_run(self) -> RunInfo | None:
        committed = [r for r in self.runs.values() if r.status == "committed"]
        return max(committed, key=lambda r: r.last_seq) if committed else None

    # -- changing ----------------------------------------------------------
    def apply(self, op: OpRecord) -> None:
        handler = _HANDLERS.get(op.kind)
        if handler is not None:
            handler(self, op)
        if op.seq:
            self.seq = op.seq

    def apply_all(self, ops: Iterable[OpRecord]) -> None:
        for op in ops:
            self.apply(op)

    def clone(self) -> "MemoryState":
        return copy.deepcopy(self)

    @classmethod
    def fold(cls, ops: Iterable[OpRecord], upto_turn: int | None = None, upto_seq: int | None = None) -> "MemoryState":
        """The state after every op with turn <= upto_turn and seq <= upto_seq."""
        state = cls()
        for op in ops:
            if upto_turn is not None and op.turn > upto_turn:
                break
            if upto_seq is not None and op.seq > upto_seq:
                break
            state.apply(op)
        return state


def _unit_created(s: MemoryState, op: OpRecord) -> None:
    unit = Unit.from_dict(copy.deepcopy(op.payload["unit"]))
    s.units[unit.id] = unit
    s.next_unit_id = max(s.next_unit_id, unit.id + 1)
    if unit.kind == "turn":
        for sid in unit.source_ids:
            s.turn_units.setdefault(sid, unit.id)


def _unit_retracted(s: MemoryState, op: OpRecord) -> None:
    uid = op.payload["unit"]
    for e in s.out_edges(uid) + s.in_edges(uid):
        _drop_edge(s, e.key)
    s.units.pop(uid, None)
    s.buffer.pop(uid, None)


def _descriptor_changed(s: MemoryState, op: OpRecord) -> None:
    u = s.units[op.payload["unit"]]
    u.summary = op.payload["summary"]
    u.keywords = list(op.payload["keywords"])


def _visibility_changed(s: MemoryState, op: OpRecord) -> None:
    s.units[op.payload["unit"]].visible = bool(op.payload["visible"])


def _edge_added(s: MemoryState, op: OpRecord) -> None:
    e = Edge(**op.payload["edge"])
    s.edges[e.key] = e
    s.out_adj[e.src][e.type].add(e.dst)
    s.in_adj[e.dst][e.type].add(e.src)


def _drop_edge(s: MemoryState, key: tuple[int, int, str]) -> None:
    if s.edges.pop(key, None) is None:
        return
    src, dst, etype = key
    s.out_adj[src][etype].discard(dst)
    s.in_adj[dst][etype].discard(src)


def _edge_removed(s: MemoryState, op: OpRecord) -> None:
    p = op.payload
    _drop_edge(s, (p["src"], p["dst"], p["type"]))


def _turn_ingested(s: MemoryState, op: OpRecord) -> None:
    s.turn = op.turn
    s.turn_ids.append(op.payload["turn_id"])


def _buffer_pushed(s: MemoryState, op: OpRecord) -> None:
    s.buffer[op.payload["unit"]] = list(op.payload["anchors"])


def _buffer_flushed(s: MemoryState, op: OpRecord) -> None:
    for uid in op.payload["units"]:
        s.buffer.pop(uid, None)


def _proposal_made(s: MemoryState, op: OpRecord) -> None:
    p = Proposal.from_dict(copy.deepcopy(op.payload["proposal"]))
    s.proposals[p.id] = p
    s.next_proposal_id = max(s.next_proposal_id, p.id + 1)


def _proposal_updated(s: MemoryState, op: OpRecord) -> None:
    p = s.proposals[op.payload["id"]]
    for key, value in op.payload["changes"].items():
        setattr(p, key, copy.deepcopy(value))


def _run_started(s: MemoryState, op: OpRecord) -> None:
    s.runs[op.run_id] = RunInfo(run_id=op.run_id, mode=op.payload.get("mode", ""), turn=op.turn,
                                first_seq=op.seq, last_seq=op.seq)


def _run_committed(s: MemoryState, op: OpRecord) -> None:
    run = s.runs[op.run_id]
    run.status, run.last_seq, run.summary = "committed", op.seq, dict(op.payload.get("summary", {}))


def _run_undone(s: MemoryState, op: OpRecord) -> None:
    s.runs[op.payload["undone_run"]].status = "undone"


_HANDLERS = {
    OpKind.UNIT_CREATED: _unit_created,
    OpKind.UNIT_RETRACTED: _unit_retracted,
    OpKind.DESCRIPTOR_CHANGED: _descriptor_changed,
    OpKind.VISIBILITY_CHANGED: _visibility_changed,
    OpKind.EDGE_ADDED: _edge_added,
    OpKind.EDGE_REMOVED: _edge_removed,
    OpKind.TURN_INGESTED: _turn_ingested,
    OpKind.BUFFER_PUSHED: _buffer_pushed,
    OpKind.BUFFER_FLUSHED: _buffer_flushed,
    OpKind.PROPOSAL_MADE: _proposal_made,
    OpKind.PROPOSAL_UPDATED: _proposal_updated,
    OpKind.RUN_STARTED: _run_started,
    OpKind.RUN_COMMITTED: _run_committed,
    OpKind.RUN_UNDONE: _run_undone,
}

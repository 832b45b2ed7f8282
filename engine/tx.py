"""A write transaction: ops applied to a private copy, committed to the store in one go.

Consolidation runs build their edits here so that a run applies atomically or
not at all: if anything raises before `commit`, the live state and the store
are untouched.
"""
from __future__ import annotations

from engine.edge import Edge
from engine.oplog import OpKind, OpRecord
from engine.state import MemoryState
from engine.unit import Unit


class Tx:
    def __init__(self, state: MemoryState, turn: int, run_id: str | None = None, actor: str = "engine",
                 isolated: bool = True):
        self.state = state.clone() if isolated else state
        self.turn, self.run_id, self.actor = turn, run_id, actor
        self.ops: list[OpRecord] = []
        self.isolated = isolated

    def emit(self, kind: str, payload: dict, actor: str | None = None) -> OpRecord:
        op = OpRecord(kind=kind, payload=payload, turn=self.turn, run_id=self.run_id, actor=actor or self.actor)
        self.ops.append(op)
        if self.isolated:
            self.state.apply(op)
        return op

    # -- typed helpers ---------------------------------------------------------
    def create_unit(self, unit: Unit) -> None:
        self.emit(OpKind.UNIT_CREATED, {"unit": unit.to_dict()})

    def add_edge(self, edge: Edge) -> bool:
        if edge.key in self.state.edges or edge.src == edge.dst:
            return False
        self.emit(OpKind.EDGE_ADDED, {"edge": edge.to_dict()})
        return True

    def remove_edge(self, src: int, dst: int, etype: str) -> None:
        edge = self.state.edges.get((src, dst, etype))
        if edge is not None:
            self.emit(OpKind.EDGE_REMOVED, {"src": src, "dst": dst, "type": etype, "edge": edge.to_dict()})

    def set_visible(self, uid: int, visible: bool) -> None:
        unit = self.state.units[uid]
        if unit.visible != visible:
            self.emit(OpKind.VISIBILITY_CHANGED, {"unit": uid, "visible": visible, "was": unit.visible})

    def set_descriptor(self, uid: int, summary: str, keywords: list[str]) -> bool:
        unit = self.state.units[uid]
        if unit.summary == summary and unit.keywords == keywords:
            return False
        self.emit(OpKind.DESCRIPTOR_CHANGED, {"unit": uid, "summary": summary, "keywords": keywords,
                                              "prev_summary": unit.summary, "prev_keywords": list(unit.keywords)})
        return True

    def update_proposal(self, pid: int, actor: str | None = None, **changes) -> None:
        self.emit(OpKind.PROPOSAL_UPDATED, {"id": pid, "changes": changes}, actor=actor)

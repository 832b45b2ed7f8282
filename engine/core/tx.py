"""A write transaction: ops applied to a private copy, committed to the store in one go.

Offline runs build their edits here so that a run applies atomically or not
at all: if anything raises before the commit, the live state and the store are
untouched. The copy is a copy-on-write clone (`MemoryState.clone`): read a node
or proposal from `tx.state` again after changing it. The helpers build each record's payload
(`engine.core.payloads`) with every prior value its inverse needs.
"""
from __future__ import annotations

from engine.core.edge import Edge
from engine.core.node import Node
from engine.core.oplog import OpRecord
from engine.core.ops import apply
from engine.core.payloads import (UNSET, BufferFlushed, BufferPushed, DescriptorChanged, EdgeAdded, EdgeRemoved,
                                  EngineStateSet, NodeCreated, NodeRetracted, NodeUpdated, Payload, ProposalMade,
                                  ProposalUpdated, StatusChanged)
from engine.core.proposal import Proposal
from engine.core.state import MemoryState


class Tx:
    def __init__(self, state: MemoryState, turn: int, run_id: str | None = None, actor: str = "engine",
                 isolated: bool = True):
        self.state = state.clone() if isolated else state
        self.turn, self.run_id, self.actor = turn, run_id, actor
        self.ops: list[OpRecord] = []
        self.isolated = isolated

    def emit(self, payload: Payload, actor: str | None = None) -> OpRecord:
        """Append a record of `payload`'s kind (applied to the private state at once when isolated)."""
        op = payload.record(turn=self.turn, run_id=self.run_id, actor=actor or self.actor)
        self.ops.append(op)
        if self.isolated:
            apply(self.state, op)
        return op

    # -- nodes -------------------------------------------------------------------
    def create_node(self, node: Node) -> None:
        self.emit(NodeCreated(node=node.payload()))

    def retract_node(self, uid: int) -> None:
        """Remove a node a run made: its edges first (each an invertible record), then the node."""
        for e in sorted(self.state.out_edges(uid) + self.state.in_edges(uid), key=lambda e: e.key):
            self.remove_edge(*e.key)
        self.emit(NodeRetracted(node=uid, was=self.state.nodes[uid].payload()))

    def set_status(self, uid: int, status: str, cause: dict | None = None) -> bool:
        node = self.state.nodes[uid]
        if node.status == status:
            return False
        self.emit(StatusChanged(node=uid, status=status, was=node.status, cause=cause or {}))
        return True

    def set_descriptor(self, uid: int, summary: str, keywords: list[str]) -> bool:
        node = self.state.nodes[uid]
        if node.summary == summary and node.keywords == keywords:
            return False
        self.emit(DescriptorChanged(node=uid, summary=summary, keywords=keywords, prev_summary=node.summary,
                                    prev_keywords=list(node.keywords)))
        return True

    def update_node(self, uid: int, **changes) -> None:
        """Members, statistics (attrs) or provenance of a group node."""
        node = self.state.nodes[uid]
        self.emit(NodeUpdated(node=uid, changes=changes, prev={k: getattr(node, k) for k in changes}))

    # -- edges -------------------------------------------------------------------
    def add_edge(self, edge: Edge) -> bool:
        if edge.key in self.state.edges or edge.src == edge.dst:
            return False
        self.emit(EdgeAdded(edge=edge.to_dict()))
        return True

    def remove_edge(self, src: int, dst: int, etype: str) -> None:
        edge = self.state.edges.get((src, dst, etype))
        if edge is not None:
            self.emit(EdgeRemoved(src=src, dst=dst, type=etype, edge=edge.to_dict()))

    # -- buffers, engine variables, proposals --------------------------------------
    def push_buffer(self, name: str, entries: list[tuple[int, list[int]]]) -> None:
        if entries:
            self.emit(BufferPushed(buffer=name, entries=[[u, list(a)] for u, a in entries]))

    def flush_buffer(self, name: str, ids: list[int] | None = None) -> None:
        buf = self.state.buffer(name)
        entries = [[u, buf[u]] for u in (list(buf) if ids is None else ids) if u in buf]
        if entries:
            self.emit(BufferFlushed(buffer=name, entries=entries))

    def set_var(self, key: str, value) -> None:
        """Set an engine variable (a phase, a counter, a published-snapshot pointer)."""
        self.emit(EngineStateSet(key=key, value=value, prev=self.state.engine_state.get(key, UNSET)))

    def make_proposal(self, proposal: Proposal) -> None:
        self.emit(ProposalMade(proposal=proposal.to_dict()))

    def update_proposal(self, pid: int, actor: str | None = None, **changes) -> None:
        self.emit(ProposalUpdated(id=pid, changes=changes), actor=actor)

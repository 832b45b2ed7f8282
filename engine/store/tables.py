"""The session database's tables, the rows the fold materializes into them, and the statements that write them.

`op_log` is the truth; `node`, `edge` and `proposal` are the fold materialized
(one row per node, edge and proposal of the state, kept in step inside each
write transaction); `checkpoint` caches a fold every few hundred records;
`claim` makes the database itself refuse a second record handing out the same
id; `meta` holds what the session replays and with which engine; and
`embedding_cache` holds vectors by content hash. The table names and columns
are the database format (`memwb dump` writes them): a change here is a format
change.
"""
from __future__ import annotations

import json
import zlib

from sqlalchemy import Connection, func
from sqlalchemy.dialects.postgresql import insert as postgresql_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlmodel import Field, SQLModel, select

from engine.core.edge import Edge
from engine.core.node import Node
from engine.core.proposal import Proposal
from engine.core.state import CHECKPOINT_FORMAT, MemoryState


class OpRow(SQLModel, table=True):
    __tablename__ = "op_log"
    seq: int | None = Field(default=None, primary_key=True)
    turn: int = Field(index=True)
    run_id: str | None = Field(default=None, index=True)
    kind: str = Field(index=True)
    v: int = 1
    actor: str
    payload: str


class NodeRow(SQLModel, table=True):
    __tablename__ = "node"
    id: int = Field(primary_key=True)
    kind: str = Field(index=True)
    status: str = Field(index=True)
    visible: bool = Field(index=True)
    raw: str
    summary: str
    keywords: str
    time: str
    source_ids: str
    speakers: str
    session: str
    members: str
    attrs: str
    created_turn: int
    made_by: str


class EdgeRow(SQLModel, table=True):
    __tablename__ = "edge"
    src: int = Field(primary_key=True)
    dst: int = Field(primary_key=True)
    type: str = Field(primary_key=True)
    made_by: str
    confidence: float | None = None
    created_turn: int
    evidence: str = "[]"


class ProposalRow(SQLModel, table=True):
    __tablename__ = "proposal"
    id: int = Field(primary_key=True)
    run_id: str = Field(index=True)
    op: str
    status: str = Field(index=True)
    confidence: float
    gate: str
    reason_code: str | None = None
    decided_by: str | None = None
    body: str


class CheckpointRow(SQLModel, table=True):
    """A cached fold at `seq`; the log stays the truth, a checkpoint only saves re-folding."""

    __tablename__ = "checkpoint"
    seq: int = Field(primary_key=True)
    turn: int = Field(index=True)
    format: int
    body: bytes


class EmbeddingRow(SQLModel, table=True):
    __tablename__ = "embedding_cache"
    key: str = Field(primary_key=True)
    dim: int
    vector: bytes


class MetaRow(SQLModel, table=True):
    __tablename__ = "meta"
    key: str = Field(primary_key=True)
    value: str


class ClaimRow(SQLModel, table=True):
    """An id the log has handed out (a node, run, proposal or ingested turn), unique by constraint.

    The write lock already keeps two writers from allocating the same id; this table makes the database
    itself refuse a second record claiming one, whatever wrote it."""

    __tablename__ = "claim"
    kind: str = Field(primary_key=True)
    key: str = Field(primary_key=True)
    seq: int


HEAD = select(func.max(OpRow.seq))
_STATEMENTS: dict[tuple[str, str], object] = {}


def write_statement(conn: Connection, name: str):
    """A write statement of `commit`, built once per dialect: "append" (log records, returning their seqs in
    order), "claim" (ids not claimed before, returning those it added), or a table name (insert or replace
    rows by key: a merge per row would cost a SELECT each)."""
    dialect = conn.dialect.name
    stmt = _STATEMENTS.get((dialect, name))
    if stmt is not None:
        return stmt
    insert = sqlite_insert if dialect == "sqlite" else postgresql_insert
    if name == "append":
        table = OpRow.__table__
        stmt = insert(table).returning(table.c.seq, sort_by_parameter_order=True)
    elif name == "claim":
        table = ClaimRow.__table__
        stmt = insert(table).on_conflict_do_nothing().returning(table.c.kind, table.c.key)
    else:
        table = SQLModel.metadata.tables[name]
        stmt = insert(table)
        keys = [c.name for c in table.primary_key.columns]
        stmt = stmt.on_conflict_do_update(index_elements=keys, set_={c.name: stmt.excluded[c.name]
                                                                     for c in table.columns if c.name not in keys})
    _STATEMENTS[(dialect, name)] = stmt
    return stmt


def node_row(u: Node) -> dict:
    return {"id": u.id, "kind": u.kind, "status": u.status, "visible": u.visible, "raw": u.raw,
            "summary": u.summary, "keywords": json.dumps(u.keywords), "time": u.time,
            "source_ids": json.dumps(u.source_ids), "speakers": json.dumps(u.speakers), "session": u.session,
            "members": json.dumps(u.members), "attrs": json.dumps(u.attrs, sort_keys=True),
            "created_turn": u.created_turn, "made_by": u.made_by}


def edge_row(e: Edge) -> dict:
    return {**e.to_dict(), "evidence": json.dumps(e.evidence)}


def proposal_row(p: Proposal) -> dict:
    return {"id": p.id, "run_id": p.run_id, "op": p.op, "status": p.status, "confidence": p.confidence,
            "gate": p.gate, "reason_code": p.reason_code, "decided_by": p.decided_by,
            "body": json.dumps(p.to_dict())}


def rows_of(state: MemoryState) -> dict[str, list[dict]]:
    """What the materialized tables must hold for `state`."""
    return {"node": [node_row(state.nodes[i]) for i in sorted(state.nodes)],
            "edge": [edge_row(state.edges[k]) for k in sorted(state.edges)],
            "proposal": [proposal_row(state.proposals[i]) for i in sorted(state.proposals)]}


def checkpoint_row(state: MemoryState) -> dict:
    body = zlib.compress(json.dumps(state.to_dict(), ensure_ascii=False).encode("utf-8"), 3)
    return {"seq": state.seq, "turn": state.turn, "format": CHECKPOINT_FORMAT, "body": body}

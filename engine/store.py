"""Persistent store: the operation log plus materialized tables, via SQLModel.

The database file is the session. `op_log` is the truth; the `node`, `edge`
and `proposal` tables are a materialized fold kept in step inside the same
transaction, so other tools can query them with plain SQL, and `checkpoint`
holds a fold every few hundred records so time travel re-folds only the
records since the nearest one. A URL setting (`sqlite:///…`,
`postgresql://…`) selects the database.
"""
from __future__ import annotations

import json
import zlib
from pathlib import Path
from typing import Iterable, Iterator

import numpy as np
from sqlalchemy import event as sa_event
from sqlalchemy import inspect
from sqlmodel import Field, Session, SQLModel, create_engine, delete, select

from engine.edge import Edge
from engine.node import Node
from engine.ops import Touched
from engine.ops import spec as ops_spec
from engine.oplog import OpRecord
from engine.proposal import Proposal
from engine.schema import EngineSchema
from engine.state import CHECKPOINT_FORMAT, MemoryState


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


class StoreError(Exception):
    pass


def database_url(target: str | Path) -> str:
    text = str(target)
    return text if "://" in text else f"sqlite:///{Path(text).expanduser().resolve()}"


CHECKPOINT_EVERY = 400          # records between fold checkpoints
_FOLD_TABLES = (OpRow, NodeRow, EdgeRow, ProposalRow, CheckpointRow, EmbeddingRow, MetaRow)


class Store:
    """The op log, its materialized fold and fold checkpoints in one database.

    `schema` is the engine schema folds are made with (which statuses are on
    the surface); `open_session` sets it from the engine named in the meta table.
    """

    def __init__(self, target: str | Path, schema: EngineSchema | None = None,
                 checkpoint_every: int = CHECKPOINT_EVERY, create: bool = True):
        """`create=False` opens a database that must already hold a memory and creates nothing (not even
        the file): tools that inspect a database (`memwb check`, `memwb dump`) must not change it."""
        self.url = database_url(target)
        self.schema = schema
        self.checkpoint_every = checkpoint_every
        if not create:
            self._require_file()
        self.engine = create_engine(self.url)
        if self.url.startswith("sqlite"):
            sa_event.listen(self.engine, "connect", _sqlite_pragmas)
        self._refuse_old_layout()
        if create:
            SQLModel.metadata.create_all(self.engine)
        elif not inspect(self.engine).has_table(OpRow.__tablename__):
            raise StoreError(f"{self.location} holds no memory (it has no {OpRow.__tablename__} table)")

    @property
    def location(self) -> str:
        """The database file (or the URL of a database server), for messages."""
        return self.url.removeprefix("sqlite:///")

    def _require_file(self) -> None:
        """A SQLite file must exist before it is opened: connecting would create an empty one."""
        if self.url.startswith("sqlite:///") and not Path(self.location).is_file():
            raise StoreError(f"no memory database at {self.location}")

    def _refuse_old_layout(self) -> None:
        """A database from before lifecycle statuses has an `op_log` without payload versions."""
        insp = inspect(self.engine)
        if insp.has_table("op_log") and "v" not in {c["name"] for c in insp.get_columns("op_log")}:
            raise StoreError(f"{self.url} was written by an older Memory Workbench (its log has no payload "
                             "versions and its units a visible flag instead of a status); replay the "
                             "conversation into a new database")

    # -- meta ----------------------------------------------------------------
    def get_meta(self, key: str, default=None):
        with Session(self.engine) as s:
            row = s.get(MetaRow, key)
            return json.loads(row.value) if row else default

    def set_meta(self, **values) -> None:
        with Session(self.engine) as s:
            for key, value in values.items():
                s.merge(MetaRow(key=key, value=json.dumps(value)))
            s.commit()

    def meta(self) -> dict:
        with Session(self.engine) as s:
            return {r.key: json.loads(r.value) for r in s.exec(select(MetaRow))}

    # -- the log ---------------------------------------------------------------
    def commit(self, ops: list[OpRecord], state: MemoryState) -> list[OpRecord]:
        """Append `ops` and apply them to `state`, all or nothing.

        On a database failure the in-memory state is rebuilt from the log, so
        nothing already stored is lost and nothing half-written is kept.
        """
        if not ops:
            return ops
        try:
            with Session(self.engine) as s:
                rows = []
                for op in ops:
                    op.v = op.v or ops_spec(op.kind).version
                    rows.append(OpRow(turn=op.turn, run_id=op.run_id, kind=op.kind, v=op.v, actor=op.actor,
                                      payload=json.dumps(op.payload, ensure_ascii=False)))
                s.add_all(rows)
                s.flush()
                before = state.seq
                for op, row in zip(ops, rows):
                    op.seq = row.seq
                    state.apply(op)
                self._materialize(s, ops, state)
                if state.seq // self.checkpoint_every > before // self.checkpoint_every:
                    s.merge(_checkpoint_row(state))
                s.commit()
        except Exception as exc:
            fresh = self.load_state()
            state.__dict__.update(fresh.__dict__)
            raise StoreError(f"could not write {len(ops)} operation(s) to {self.url}: {exc}") from exc
        return ops

    def ops(self, upto_seq: int | None = None, kinds: Iterable[str] | None = None, run_id: str | None = None,
            seq: int | None = None, after_seq: int | None = None, turns: tuple[int, int] | None = None
            ) -> Iterator[OpRecord]:
        """Log records in seq order, filtered in SQL (the log can be long)."""
        with Session(self.engine) as s:
            query = select(OpRow).order_by(OpRow.seq)
            if upto_seq is not None:
                query = query.where(OpRow.seq <= upto_seq)
            if after_seq is not None:
                query = query.where(OpRow.seq > after_seq)
            if kinds is not None:
                query = query.where(OpRow.kind.in_(list(kinds)))
            if run_id is not None:
                query = query.where(OpRow.run_id == run_id)
            if seq is not None:
                query = query.where(OpRow.seq == seq)
            if turns is not None:
                query = query.where(OpRow.turn >= turns[0]).where(OpRow.turn <= turns[1])
            for row in s.exec(query):
                yield OpRecord(kind=row.kind, payload=json.loads(row.payload), turn=row.turn,
                               run_id=row.run_id, actor=row.actor, seq=row.seq, v=row.v)

    def load_state(self, upto_turn: int | None = None, upto_seq: int | None = None,
                   checkpoints: bool = True) -> MemoryState:
        """The fold at a point, starting from the nearest checkpoint at or before it."""
        target = self.last_seq(upto_turn=upto_turn)
        if upto_seq is not None:
            target = min(target, upto_seq)
        start = self._checkpoint(target) if checkpoints else None
        after = start.seq if start is not None else None
        return MemoryState.fold(self.ops(upto_seq=target, after_seq=after), schema=self.schema, start=start)

    def _checkpoint(self, upto_seq: int) -> MemoryState | None:
        with Session(self.engine) as s:
            row = s.exec(select(CheckpointRow).where(CheckpointRow.seq <= upto_seq)
                         .order_by(CheckpointRow.seq.desc()).limit(1)).first()
        if row is None:
            return None
        try:
            return MemoryState.from_dict(json.loads(zlib.decompress(row.body)), schema=self.schema)
        except (ValueError, KeyError, zlib.error):
            return None          # an unreadable or older-format checkpoint: fold from the start instead

    def last_seq(self, upto_turn: int | None = None) -> int:
        """The newest record's seq (of those with turn <= upto_turn, when given); 0 for an empty log."""
        with Session(self.engine) as s:
            query = select(OpRow.seq).order_by(OpRow.seq.desc()).limit(1)
            if upto_turn is not None:
                query = query.where(OpRow.turn <= upto_turn)
            return s.exec(query).first() or 0

    # -- embeddings cache ----------------------------------------------------
    def get_embeddings(self, keys: list[str]) -> dict[str, np.ndarray]:
        found: dict[str, np.ndarray] = {}
        with Session(self.engine) as s:
            for start in range(0, len(keys), 500):
                chunk = keys[start:start + 500]
                for row in s.exec(select(EmbeddingRow).where(EmbeddingRow.key.in_(chunk))):
                    found[row.key] = np.frombuffer(row.vector, dtype=np.float32).copy()
        return found

    def put_embeddings(self, vectors: dict[str, np.ndarray]) -> None:
        if not vectors:
            return
        with Session(self.engine) as s:
            for key, vec in vectors.items():
                s.merge(EmbeddingRow(key=key, dim=int(vec.shape[0]), vector=vec.astype(np.float32).tobytes()))
            s.commit()

    # -- branching -------------------------------------------------------------
    def branch(self, target: str | Path, upto_seq: int) -> "Store":
        """A new store holding this log up to `upto_seq`: the "what if" starting point."""
        other = Store(target, schema=self.schema, checkpoint_every=self.checkpoint_every)
        if other.last_seq():
            raise StoreError(f"branch target {other.url} already holds a log")
        ops = list(self.ops(upto_seq=upto_seq))
        state = MemoryState(schema=self.schema)
        for start in range(0, len(ops), self.checkpoint_every):
            chunk = ops[start:start + self.checkpoint_every]
            for op in chunk:
                op.seq = 0
            other.commit(chunk, state)
        meta = self.meta()
        meta["branched_from"] = {"url": self.url, "seq": upto_seq}
        other.set_meta(**meta)
        with Session(self.engine) as s:
            rows = list(s.exec(select(EmbeddingRow)))
        other.put_embeddings({r.key: np.frombuffer(r.vector, dtype=np.float32) for r in rows})
        self._copy_side_tables(other)
        return other

    def _copy_side_tables(self, other: "Store") -> None:
        """Carry tables that are not part of the fold (annotations and the like) into a branch."""
        core = {t.__tablename__ for t in _FOLD_TABLES}
        SQLModel.metadata.create_all(other.engine)
        with self.engine.connect() as src, other.engine.begin() as dst:
            for table in SQLModel.metadata.sorted_tables:
                if table.name in core:
                    continue
                rows = [dict(r._mapping) for r in src.execute(table.select())]
                if rows:
                    dst.execute(table.insert(), rows)

    # -- materialized tables ---------------------------------------------------
    def _materialize(self, s: Session, ops: list[OpRecord], state: MemoryState) -> None:
        touched = Touched()
        for op in ops:
            t = ops_spec(op.kind).touches(op.payload)
            touched.nodes |= t.nodes
            touched.edges |= t.edges
            touched.proposals |= t.proposals
        for uid in touched.nodes:
            node = state.nodes.get(uid)
            if node is None:
                s.exec(delete(NodeRow).where(NodeRow.id == uid))
                s.exec(delete(EdgeRow).where((EdgeRow.src == uid) | (EdgeRow.dst == uid)))
            else:
                s.merge(NodeRow(**node_row(node)))
        for key in touched.edges:
            edge = state.edges.get(key)
            if edge is None:
                s.exec(delete(EdgeRow).where((EdgeRow.src == key[0]) & (EdgeRow.dst == key[1])
                                             & (EdgeRow.type == key[2])))
            else:
                s.merge(EdgeRow(**edge_row(edge)))
        for pid in touched.proposals:
            s.merge(ProposalRow(**proposal_row(state.proposals[pid])))

    def table_rows(self) -> dict[str, list[dict]]:
        """The materialized tables as plain rows (sorted), to compare with `rows_of(fold)`."""
        out = {}
        with Session(self.engine) as s:
            for name, model, key in (("node", NodeRow, "id"), ("edge", EdgeRow, None),
                                     ("proposal", ProposalRow, "id")):
                rows = [r.model_dump() for r in s.exec(select(model))]
                out[name] = sorted(rows, key=(lambda r: r[key]) if key else (lambda r: (r["src"], r["dst"],
                                                                                       r["type"])))
        return out


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


def _checkpoint_row(state: MemoryState) -> CheckpointRow:
    body = zlib.compress(json.dumps(state.to_dict(), ensure_ascii=False).encode("utf-8"), 3)
    return CheckpointRow(seq=state.seq, turn=state.turn, format=CHECKPOINT_FORMAT, body=body)


def _sqlite_pragmas(dbapi_conn, _record) -> None:
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA synchronous=NORMAL")
    cur.close()


__all__ = ["Store", "StoreError", "database_url", "rows_of", "Edge", "Proposal"]

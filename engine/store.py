"""Persistent store: the operation log plus materialized tables, via SQLModel.

The database file is the session. `op_log` is the truth; the `unit`, `edge`,
`proposal` and `event` tables are a materialized fold kept in step inside the
same transaction, so other tools can query them with plain SQL. A URL setting
(`sqlite:///…`, `postgresql://…`) selects the database.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Iterable, Iterator

import numpy as np
from sqlalchemy import event as sa_event
from sqlmodel import Field, Session, SQLModel, create_engine, delete, select

from engine.edge import Edge
from engine.event import Event
from engine.oplog import OpKind, OpRecord
from engine.proposal import Proposal
from engine.state import MemoryState
from engine.unit import Unit


class OpRow(SQLModel, table=True):
    __tablename__ = "op_log"
    seq: int | None = Field(default=None, primary_key=True)
    turn: int = Field(index=True)
    run_id: str | None = Field(default=None, index=True)
    kind: str = Field(index=True)
    actor: str
    payload: str


class UnitRow(SQLModel, table=True):
    __tablename__ = "unit"
    id: int = Field(primary_key=True)
    raw: str
    summary: str
    keywords: str
    time: str
    kind: str
    source_ids: str
    speakers: str
    session: str
    visible: bool = Field(index=True)
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


class EventRow(SQLModel, table=True):
    __tablename__ = "event"
    id: int = Field(primary_key=True)
    state: str
    body: str


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


class Store:
    """The op log and its materialized fold in one database."""

    def __init__(self, target: str | Path):
        self.url = database_url(target)
        self.engine = create_engine(self.url)
        if self.url.startswith("sqlite"):
            sa_event.listen(self.engine, "connect", _sqlite_pragmas)
        SQLModel.metadata.create_all(self.engine)

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
                rows = [OpRow(turn=op.turn, run_id=op.run_id, kind=op.kind, actor=op.actor,
                              payload=json.dumps(op.payload, ensure_ascii=False)) for op in ops]
                s.add_all(rows)
                s.flush()
                for op, row in zip(ops, rows):
                    op.seq = row.seq
                    state.apply(op)
                self._materialize(s, ops, state)
                s.commit()
        except Exception as exc:
            fresh = self.load_state()
            state.__dict__.update(fresh.__dict__)
            raise StoreError(f"could not write {len(ops)} operation(s) to {self.url}: {exc}") from exc
        return ops

    def ops(self, upto_seq: int | None = None, kinds: Iterable[str] | None = None, run_id: str | None = None,
            seq: int | None = None) -> Iterator[OpRecord]:
        """Log records in seq order, filtered in SQL (the log can be long)."""
        with Session(self.engine) as s:
            query = select(OpRow).order_by(OpRow.seq)
            if upto_seq is not None:
                query = query.where(OpRow.seq <= upto_seq)
            if kinds is not None:
                query = query.where(OpRow.kind.in_(list(kinds)))
            if run_id is not None:
                query = query.where(OpRow.run_id == run_id)
            if seq is not None:
                query = query.where(OpRow.seq == seq)
            for row in s.exec(query):
                yield OpRecord(kind=row.kind, payload=json.loads(row.payload), turn=row.turn,
                               run_id=row.run_id, actor=row.actor, seq=row.seq)

    def load_state(self, upto_turn: int | None = None, upto_seq: int | None = None) -> MemoryState:
        return MemoryState.fold(self.ops(), upto_turn=upto_turn, upto_seq=upto_seq)

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
        other = Store(target)
        if other.last_seq():
            raise StoreError(f"branch target {other.url} already holds a log")
        ops = list(self.ops(upto_seq=upto_seq))
        state = MemoryState()
        for op in ops:
            op.seq = 0
        other.commit(ops, state)
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
        core = {OpRow.__tablename__, UnitRow.__tablename__, EdgeRow.__tablename__, ProposalRow.__tablename__,
                EventRow.__tablename__, EmbeddingRow.__tablename__, MetaRow.__tablename__}
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
        units: set[int] = set()
        edges: set[tuple[int, int, str]] = set()
        proposals: set[int] = set()
        for op in ops:
            p = op.payload
            if op.kind == OpKind.UNIT_CREATED:
                units.add(p["unit"]["id"])
            elif op.kind in (OpKind.DESCRIPTOR_CHANGED, OpKind.VISIBILITY_CHANGED, OpKind.UNIT_RETRACTED):
                units.add(p["unit"])
            elif op.kind == OpKind.EDGE_ADDED:
                e = p["edge"]
                edges.add((e["src"], e["dst"], e["type"]))
            elif op.kind == OpKind.EDGE_REMOVED:
                edges.add((p["src"], p["dst"], p["type"]))
            elif op.kind == OpKind.PROPOSAL_MADE:
                proposals.add(p["proposal"]["id"])
            elif op.kind == OpKind.PROPOSAL_UPDATED:
                proposals.add(p["id"])
        for uid in units:
            unit = state.units.get(uid)
            if unit is None:
                s.exec(delete(UnitRow).where(UnitRow.id == uid))
                s.exec(delete(EdgeRow).where((EdgeRow.src == uid) | (EdgeRow.dst == uid)))
            else:
                s.merge(_unit_row(unit))
        for key in edges:
            edge = state.edges.get(key)
            if edge is None:
                s.exec(delete(EdgeRow).where((EdgeRow.src == key[0]) & (EdgeRow.dst == key[1])
                                             & (EdgeRow.type == key[2])))
            else:
                s.merge(EdgeRow(**edge.to_dict()))
        for pid in proposals:
            prop = state.proposals[pid]
            s.merge(ProposalRow(id=prop.id, run_id=prop.run_id, op=prop.op, status=prop.status,
                                confidence=prop.confidence, gate=prop.gate, reason_code=prop.reason_code,
                                decided_by=prop.decided_by, body=json.dumps(prop.to_dict())))

    def write_events(self, events: Iterable[Event]) -> None:
        with Session(self.engine) as s:
            for ev in events:
                s.merge(EventRow(id=ev.id, state=ev.state, body=json.dumps(ev.to_dict())))
            s.commit()


def _unit_row(u: Unit) -> UnitRow:
    return UnitRow(id=u.id, raw=u.raw, summary=u.summary, keywords=json.dumps(u.keywords), time=u.time,
                   kind=u.kind, source_ids=json.dumps(u.source_ids), speakers=json.dumps(u.speakers),
                   session=u.session, visible=u.visible, created_turn=u.created_turn, made_by=u.made_by)


def _sqlite_pragmas(dbapi_conn, _record) -> None:
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA synchronous=NORMAL")
    cur.close()


__all__ = ["Store", "StoreError", "database_url", "Edge", "Proposal"]

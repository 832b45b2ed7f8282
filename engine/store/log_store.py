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
import threading
import zlib
from contextlib import contextmanager
from pathlib import Path
from typing import Iterable, Iterator

import numpy as np
from sqlalchemy import Connection, func, inspect
from sqlalchemy.dialects.postgresql import insert as postgresql_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.exc import OperationalError
from sqlmodel import Field, Session, SQLModel, delete, select

from engine.core.edge import Edge
from engine.core.errors import WorkbenchError
from engine.core.node import Node
from engine.core.oplog import OpRecord
from engine.core.ops import Touched, apply, fold
from engine.core.ops import spec as ops_spec
from engine.core.proposal import Proposal
from engine.core.schema import EngineSchema
from engine.core.state import CHECKPOINT_FORMAT, MemoryState
from engine.store.database import (
    WriteLockTimeout,
    create_tables,
    database_url,
    display_url,
    open_database,
    public_url,
    write_transaction,
)


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


class StoreError(WorkbenchError):
    pass


class StaleView(StoreError):
    """The log grew since this state was folded: another process wrote to the database."""


CHECKPOINT_EVERY = 400          # records between fold checkpoints
CACHE_WRITE_WAIT = 0.5          # seconds a cache write waits for the write lock before it is dropped
_FOLD_TABLES = (OpRow, NodeRow, EdgeRow, ProposalRow, CheckpointRow, EmbeddingRow, MetaRow, ClaimRow)


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
        self.engine = open_database(self.url)
        self._local = threading.local()
        try:
            self._refuse_old_layout()
            if create:
                create_tables(self.engine, SQLModel.metadata.sorted_tables)
            elif not inspect(self.engine).has_table(OpRow.__tablename__):
                raise StoreError(f"{self.location} holds no memory (it has no {OpRow.__tablename__} table)")
        except OperationalError as exc:          # server down, no such database, refused login...
            raise StoreError(f"cannot open {self.location}: {' '.join(str(exc.orig).split())}") from None
        if create:
            self._claim_old_log()

    @property
    def location(self) -> str:
        """The database file (or the URL of a database server without its password), for messages."""
        return display_url(self.url)

    # -- the write lock --------------------------------------------------------
    @property
    def in_write(self) -> bool:
        return getattr(self._local, "session", None) is not None

    @contextmanager
    def writing(self, wait: float | None = None) -> Iterator[Session]:
        """Hold the database's write lock for a block: its writes are one transaction, all or nothing.

        Blocks nest: an inner block joins the outer one's transaction (per thread)."""
        if self.in_write:
            yield self._local.session
            return
        self._local.after, self._local.head = [], None
        with write_transaction(self.engine, wait) as s:
            self._local.session = s
            try:
                yield s
            finally:
                self._local.session = self._local.head = None
        for action in self._local.after:
            action()

    def after_commit(self, action) -> None:
        """Run `action` once the current write transaction is committed (now, outside one): what other
        readers may be pointed at must be in the database first. Dropped if the transaction rolls back."""
        if self.in_write:
            self._local.after.append(action)
        else:
            action()

    @contextmanager
    def _reading(self) -> Iterator[Session]:
        """A session for reads: the open write transaction's (so it sees its own writes), else a fresh one."""
        if self.in_write:
            yield self._local.session
            return
        with Session(self.engine) as s:
            yield s

    def _claim_old_log(self) -> None:
        """Claim the ids of a log written before the claim table existed (once, on open)."""
        with self._reading() as s:
            if s.exec(select(ClaimRow.kind).limit(1)).first() is not None or \
                    s.exec(select(OpRow.seq).limit(1)).first() is None:
                return
        with self.writing() as s:
            if s.exec(select(ClaimRow.kind).limit(1)).first() is not None:
                return
            claims: dict[tuple[str, str], int] = {}
            for op in self.ops():
                for key in ops_spec(op.kind).claims(op):
                    claims.setdefault(key, op.seq)
            s.add_all(ClaimRow(kind=k, key=v, seq=seq) for (k, v), seq in claims.items())

    def _require_file(self) -> None:
        """A SQLite file must exist before it is opened: connecting would create an empty one."""
        if self.url.startswith("sqlite:///") and not Path(self.location).is_file():
            raise StoreError(f"no memory database at {self.location}")

    def _refuse_old_layout(self) -> None:
        """A database from before lifecycle statuses has an `op_log` without payload versions."""
        insp = inspect(self.engine)
        if insp.has_table("op_log") and "v" not in {c["name"] for c in insp.get_columns("op_log")}:
            raise StoreError(f"{self.location} was written by an older Memory Workbench (its log has no payload "
                             "versions and its units a visible flag instead of a status); replay the "
                             "conversation into a new database")

    # -- meta ----------------------------------------------------------------
    def get_meta(self, key: str, default=None):
        with self._reading() as s:
            row = s.get(MetaRow, key)
            return json.loads(row.value) if row else default

    def set_meta(self, **values) -> None:
        with self.writing() as s:
            for key, value in values.items():
                s.merge(MetaRow(key=key, value=json.dumps(value)))

    def meta(self) -> dict:
        with self._reading() as s:
            return {r.key: json.loads(r.value) for r in s.exec(select(MetaRow))}

    # -- the log ---------------------------------------------------------------
    def commit(self, ops: list[OpRecord], state: MemoryState) -> list[OpRecord]:
        """Append `ops` and apply them to `state`, all or nothing, under the write lock.

        `state` must be the fold of the whole stored log: ops built on an older fold would allocate ids
        and decisions another writer already made, so they are refused (`StaleView`) and nothing is
        written. Inside a `writing()` block the ops join its transaction. On a database failure the
        in-memory state is rebuilt from the log, so nothing already stored is lost and nothing
        half-written is kept.
        """
        if not ops:
            return ops
        outermost = not self.in_write
        try:
            with self.writing() as s:
                head = self._head(s)
                if head != state.seq:
                    raise StaleView(f"the memory in {self.location} changed since this view was loaded (its log "
                                    f"is at record {head}, this view at {state.seq}): another process wrote "
                                    "to it; nothing was written")
                conn = s.connection()
                for op in ops:
                    op.v = op.v or ops_spec(op.kind).version
                seqs = conn.execute(_statement(conn, "append"), [
                    {"turn": op.turn, "run_id": op.run_id, "kind": op.kind, "v": op.v, "actor": op.actor,
                     "payload": json.dumps(op.payload, ensure_ascii=False)} for op in ops]).scalars().all()
                for op, seq in zip(ops, seqs, strict=True):
                    op.seq = seq
                self._local.head = ops[-1].seq
                self._claim(conn, ops)
                before = state.seq
                for op in ops:
                    apply(state, op)
                self._materialize(conn, ops, state)
                if state.seq // self.checkpoint_every > before // self.checkpoint_every:
                    conn.execute(_statement(conn, CheckpointRow.__tablename__), [_checkpoint_row(state)])
        except (StaleView, WriteLockTimeout):
            raise
        except Exception as exc:
            if outermost:
                fresh = self.load_state()
                state.__dict__.update(fresh.__dict__)
            raise StoreError(f"could not write {len(ops)} operation(s) to {self.location}: {exc}") from exc
        return ops

    def _head(self, s: Session) -> int:
        """The log's newest seq. Under the write lock only this store appends, so a write transaction reads it
        once and then keeps it in step with its own appends."""
        head = getattr(self._local, "head", None) if self.in_write else None
        if head is None:
            head = s.connection().execute(_HEAD).scalar() or 0
            if self.in_write:
                self._local.head = head
        return head

    def _claim(self, conn: Connection, ops: list[OpRecord]) -> None:
        """Insert the ids these records hand out; the table's key refuses any id claimed before.

        Ids already claimed are skipped by the insert (it returns the ones it added), so the message can name
        one without a lookup before every write; the key constraint stays the guarantee."""
        claims: dict[tuple[str, str], OpRecord] = {}
        for op in ops:
            for claim in ops_spec(op.kind).claims(op):
                if claim in claims:
                    raise StoreError(_twice(op, claim))
                claims[claim] = op
        if not claims:
            return
        added = conn.execute(_statement(conn, "claim"), [{"kind": k, "key": key, "seq": op.seq}
                                                        for (k, key), op in claims.items()]).all()
        if len(added) < len(claims):
            taken = min(set(claims) - {(r.kind, r.key) for r in added})
            raise StoreError(_twice(claims[taken], taken))

    def ops(self, upto_seq: int | None = None, kinds: Iterable[str] | None = None, run_id: str | None = None,
            seq: int | None = None, after_seq: int | None = None, turns: tuple[int, int] | None = None
            ) -> Iterator[OpRecord]:
        """Log records in seq order, filtered in SQL (the log can be long)."""
        with self._reading() as s:
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
        return fold(self.ops(upto_seq=target, after_seq=after), schema=self.schema, start=start)

    def _checkpoint(self, upto_seq: int) -> MemoryState | None:
        with self._reading() as s:
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
        with self._reading() as s:
            if upto_turn is None:
                return self._head(s)
            query = select(OpRow.seq).where(OpRow.turn <= upto_turn).order_by(OpRow.seq.desc()).limit(1)
            return s.exec(query).first() or 0

    # -- embeddings cache ----------------------------------------------------
    def get_embeddings(self, keys: list[str]) -> dict[str, np.ndarray]:
        found: dict[str, np.ndarray] = {}
        with self._reading() as s:
            for start in range(0, len(keys), 500):
                chunk = keys[start:start + 500]
                for row in s.exec(select(EmbeddingRow).where(EmbeddingRow.key.in_(chunk))):
                    found[row.key] = np.frombuffer(row.vector, dtype=np.float32).copy()
        return found

    def put_embeddings(self, vectors: dict[str, np.ndarray]) -> None:
        """Cache vectors: inside a write block as part of it; otherwise briefly, dropped if another writer
        holds the lock (a cache miss costs an encode, never a lost record)."""
        if not vectors:
            return
        try:
            with self.writing(wait=None if self.in_write else CACHE_WRITE_WAIT) as s:
                conn = s.connection()
                conn.execute(_statement(conn, EmbeddingRow.__tablename__),
                             [{"key": key, "dim": int(vec.shape[0]), "vector": vec.astype(np.float32).tobytes()}
                              for key, vec in vectors.items()])
        except WriteLockTimeout:
            return

    # -- branching -------------------------------------------------------------
    def branch(self, target: str | Path, upto_seq: int) -> "Store":
        """A new store holding this log up to `upto_seq`: the "what if" starting point."""
        other = Store(target, schema=self.schema, checkpoint_every=self.checkpoint_every)
        if other.last_seq():
            raise StoreError(f"branch target {other.location} already holds a log")
        ops = list(self.ops(upto_seq=upto_seq))
        state = MemoryState(schema=self.schema)
        for start in range(0, len(ops), self.checkpoint_every):
            chunk = ops[start:start + self.checkpoint_every]
            for op in chunk:
                op.seq = 0
            other.commit(chunk, state)
        meta = self.meta()
        meta["branched_from"] = {"url": public_url(self.url), "seq": upto_seq}
        other.set_meta(**meta)
        with self._reading() as s:
            rows = list(s.exec(select(EmbeddingRow)))
        other.put_embeddings({r.key: np.frombuffer(r.vector, dtype=np.float32) for r in rows})
        self._copy_side_tables(other)
        return other

    def _copy_side_tables(self, other: "Store") -> None:
        """Carry tables that are not part of the fold (annotations and the like) into a branch."""
        core = {t.__tablename__ for t in _FOLD_TABLES}
        create_tables(other.engine, SQLModel.metadata.sorted_tables)
        with self._reading() as src, other.writing() as dst:
            for table in SQLModel.metadata.sorted_tables:
                if table.name in core:
                    continue
                rows = [dict(r._mapping) for r in src.execute(table.select())]
                if rows:
                    dst.execute(table.insert(), rows)

    # -- materialized tables ---------------------------------------------------
    def _materialize(self, conn: Connection, ops: list[OpRecord], state: MemoryState) -> None:
        touched = Touched()
        for op in ops:
            t = ops_spec(op.kind).touches(op.payload)
            touched.nodes |= t.nodes
            touched.edges |= t.edges
            touched.proposals |= t.proposals
        nodes, edges = [], []
        for uid in sorted(touched.nodes):
            node = state.nodes.get(uid)
            if node is None:
                conn.execute(delete(NodeRow).where(NodeRow.id == uid))
                conn.execute(delete(EdgeRow).where((EdgeRow.src == uid) | (EdgeRow.dst == uid)))
            else:
                nodes.append(node_row(node))
        for key in sorted(touched.edges):
            edge = state.edges.get(key)
            if edge is None:
                conn.execute(delete(EdgeRow).where((EdgeRow.src == key[0]) & (EdgeRow.dst == key[1])
                                                   & (EdgeRow.type == key[2])))
            else:
                edges.append(edge_row(edge))
        for model, rows in ((NodeRow, nodes), (EdgeRow, edges),
                            (ProposalRow, [proposal_row(state.proposals[pid]) for pid in sorted(touched.proposals)])):
            if rows:
                conn.execute(_statement(conn, model.__tablename__), rows)

    def table_rows(self) -> dict[str, list[dict]]:
        """The materialized tables as plain rows (sorted), to compare with `rows_of(fold)`."""
        out = {}
        with self._reading() as s:
            for name, model, key in (("node", NodeRow, "id"), ("edge", EdgeRow, None),
                                     ("proposal", ProposalRow, "id")):
                rows = [r.model_dump() for r in s.exec(select(model))]
                out[name] = sorted(rows, key=(lambda r: r[key]) if key else (lambda r: (r["src"], r["dst"],
                                                                                       r["type"])))
        return out


_HEAD = select(func.max(OpRow.seq))
_STATEMENTS: dict[tuple[str, str], object] = {}


def _statement(conn: Connection, name: str):
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


def _twice(op: OpRecord, claim: tuple[str, str]) -> str:
    return f"record {op.seq} ({op.kind}) would hand out {claim[0]} id {claim[1]!r} a second time; nothing was written"


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


def _checkpoint_row(state: MemoryState) -> dict:
    body = zlib.compress(json.dumps(state.to_dict(), ensure_ascii=False).encode("utf-8"), 3)
    return {"seq": state.seq, "turn": state.turn, "format": CHECKPOINT_FORMAT, "body": body}


__all__ = ["Store", "StoreError", "StaleView", "database_url", "public_url", "rows_of", "Edge", "Proposal"]

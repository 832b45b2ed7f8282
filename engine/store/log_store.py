"""The session store: the operation log, its materialized fold, checkpoints, meta, the embedding rows, branching.

The database file is the session. `op_log` is the truth; the `node`, `edge`
and `proposal` tables are a materialized fold kept in step inside the same
transaction, so other tools can query them with plain SQL, and `checkpoint`
holds a fold every few hundred records so time travel re-folds only the
records since the nearest one (the tables: `engine.store.tables`). A URL
setting (`sqlite:///…`, `postgresql://…`) selects the database.
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
from sqlalchemy.exc import OperationalError
from sqlmodel import Session, SQLModel, delete, select

from engine.core import ops as opspecs
from engine.core.errors import WorkbenchError
from engine.core.oplog import OpRecord
from engine.core.ops import Touched, apply, fold
from engine.core.schema import EngineSchema
from engine.core.state import MemoryState
from engine.store.database import (WriteLockTimeout, create_tables, database_url, display_url, open_database,
                                   public_url, write_transaction)
from engine.store.tables import (HEAD, CheckpointRow, ClaimRow, EdgeRow, EmbeddingRow, MetaRow, NodeRow, OpRow,
                                 ProposalRow, checkpoint_row, edge_row, node_row, proposal_row, write_statement)


class StoreError(WorkbenchError):
    pass


class StaleView(StoreError):
    """The log grew since this state was folded: another process wrote to the database."""


CHECKPOINT_EVERY = 400          # least records between fold checkpoints ...
CHECKPOINT_SHARE = 4            # ... and at least the fold's node count over this (`_checkpoint_due`)
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
        self._checkpoint_at: int | None = None       # seq of the newest checkpoint, read once, then kept
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
                for key in opspecs.claims(op):
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
                    op.v = op.v or opspecs.spec(op.kind).version
                seqs = conn.execute(write_statement(conn, "append"), [
                    {"turn": op.turn, "run_id": op.run_id, "kind": op.kind, "v": op.v, "actor": op.actor,
                     "payload": json.dumps(op.payload, ensure_ascii=False)} for op in ops]).scalars().all()
                for op, seq in zip(ops, seqs, strict=True):
                    op.seq = seq
                self._local.head = ops[-1].seq
                self._claim(conn, ops)
                for op in ops:
                    apply(state, op)
                self._materialize(conn, ops, state)
                if self._checkpoint_due(conn, state):
                    conn.execute(write_statement(conn, CheckpointRow.__tablename__), [checkpoint_row(state)])
                    self._checkpoint_at = state.seq
        except (StaleView, WriteLockTimeout):
            raise
        except Exception as exc:
            self._checkpoint_at = None
            if outermost:
                fresh = self.load_state()
                state.__dict__.update(fresh.__dict__)
            raise StoreError(f"could not write {len(ops)} operation(s) to {self.location}: {exc}") from exc
        return ops

    def _checkpoint_due(self, conn: Connection, state: MemoryState) -> bool:
        """Whether the fold is far enough past the newest checkpoint to store another: `checkpoint_every`
        records, or a `CHECKPOINT_SHARE`-th of what a checkpoint writes (nodes, edges, proposals) once the
        memory is larger. A fixed spacing made ingest quadratic (the history of docs/PERFORMANCE.md); spacing that grows with
        what is written keeps checkpoints' total cost linear in the log, and a fold from the nearest checkpoint
        still replays at most that many records."""
        if self._checkpoint_at is None:
            self._checkpoint_at = conn.execute(select(func.max(CheckpointRow.seq))).scalar() or 0
        size = len(state.nodes) + len(state.edges) + len(state.proposals)
        return state.seq - self._checkpoint_at >= max(self.checkpoint_every, size // CHECKPOINT_SHARE)

    def _head(self, s: Session) -> int:
        """The log's newest seq. Under the write lock only this store appends, so a write transaction reads it
        once and then keeps it in step with its own appends."""
        head = getattr(self._local, "head", None) if self.in_write else None
        if head is None:
            head = s.connection().execute(HEAD).scalar() or 0
            if self.in_write:
                self._local.head = head
        return head

    def _claim(self, conn: Connection, ops: list[OpRecord]) -> None:
        """Insert the ids these records hand out; the table's key refuses any id claimed before.

        Ids already claimed are skipped by the insert (it returns the ones it added), so the message can name
        one without a lookup before every write; the key constraint stays the guarantee."""
        claims: dict[tuple[str, str], OpRecord] = {}
        for op in ops:
            for claim in opspecs.claims(op):
                if claim in claims:
                    raise StoreError(_twice(op, claim))
                claims[claim] = op
        if not claims:
            return
        added = conn.execute(write_statement(conn, "claim"), [{"kind": k, "key": key, "seq": op.seq}
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
                conn.execute(write_statement(conn, EmbeddingRow.__tablename__),
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
            t = opspecs.touches(op)
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
                conn.execute(write_statement(conn, model.__tablename__), rows)

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


def _twice(op: OpRecord, claim: tuple[str, str]) -> str:
    return f"record {op.seq} ({op.kind}) would hand out {claim[0]} id {claim[1]!r} a second time; nothing was written"


__all__ = ["Store", "StoreError", "StaleView"]

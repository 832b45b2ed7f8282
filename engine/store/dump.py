"""Lossless dump and load of a memory database: every table, one JSON line per row.

`memwb export` shows a memory; a dump *is* the memory. It holds every table the
workbench declares with SQLModel (the log with its seq values, the materialized
node/edge/proposal tables, fold checkpoints, meta, annotations and any table a
module adds later) and, when asked, the embedding cache, which is only a cache
(vectors are recomputed on demand). Loading it into a new database gives the same
fold and the same rows. Both directions stream: a row is read, written and
forgotten, so memory stays flat however long the log is.

Format (JSON Lines, UTF-8, lines split on ``\\n`` only)::

    {"format": "memwb-dump", "version": 1, "created_from": "sqlite:////path/m.sqlite",
     "tables": [{"name": "op_log", "rows": 1234,
                 "columns": [{"name": "seq", "type": "int", "nullable": false}, ...]}, ...]}
    {"table": "op_log", "row": {"seq": 1, "turn": 1, ...}}
    ...

The header lists every table dumped with its row count (taken in the same read
transaction as the rows, so a truncated file is caught) and its columns; then one
line per row, tables in dependency order, rows in primary-key order, `bytes`
columns as base64 text. ``created_from`` is the source URL with any credentials
removed.
"""
from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from importlib import import_module
from pathlib import Path
from typing import IO, Any

from sqlalchemy import Connection, Table, func, inspect, select, text
from sqlalchemy import types as sqltypes
from sqlalchemy.exc import DBAPIError
from sqlmodel import SQLModel

from engine.core.errors import WorkbenchError
from engine.loaders.errors import LoaderError, check, decode_json, require
from engine.store.database import database_url, open_database, public_url, write_transaction
from engine.store.log_store import Store
from engine.store.tables import EmbeddingRow

FORMAT = "memwb-dump"
VERSION = 1
# Modules that declare tables: importing them fills SQLModel.metadata. A module that adds a table joins this
# list; a database holding a table no module declares is refused rather than dumped without it.
TABLE_MODULES = ("engine.store.tables", "engine.store.annotations", "engine.store.labels",
                 "engine.store.decision_labels")
OPTIONAL_TABLES = {EmbeddingRow.__tablename__: "embeddings"}     # table -> the flag that includes it
_BATCH = 500                    # rows per INSERT on load


class DumpError(WorkbenchError):
    pass


def tables() -> list[Table]:
    """Every table the workbench declares, in dependency order."""
    for module in TABLE_MODULES:
        import_module(module)
    return list(SQLModel.metadata.sorted_tables)


def _table(name: str) -> Table | None:
    return next((t for t in tables() if t.name == name), None)


# -- column types ---------------------------------------------------------------------------
_TYPES: tuple[tuple[type, str], ...] = ((sqltypes.LargeBinary, "bytes"), (sqltypes.Boolean, "bool"),
                                        (sqltypes.Integer, "int"), (sqltypes.Float, "float"),
                                        (sqltypes.String, "str"))


def column_type(table: Table, column: str) -> str:
    sqltype = table.columns[column].type
    while isinstance(sqltype, sqltypes.TypeDecorator):      # SQLModel's AutoString wraps String
        sqltype = sqltype.impl
    for cls, name in _TYPES:
        if isinstance(sqltype, cls):
            return name
    raise DumpError(f"column {table.name}.{column} has type {sqltype!r}, which the dump format has no "
                    "encoding for yet")


def _encode(value: Any, kind: str) -> Any:
    if value is None:
        return None
    return base64.b64encode(value).decode("ascii") if kind == "bytes" else value


# -- dump -----------------------------------------------------------------------------------
@dataclass
class DumpReport:
    rows: dict[str, int] = field(default_factory=dict)     # table -> rows written
    left_out: list[str] = field(default_factory=list)      # optional tables not asked for

    def line(self) -> str:
        out = f"dumped {sum(self.rows.values())} rows of {len(self.rows)} tables"
        if self.left_out:
            flags = ", ".join(f"--{OPTIONAL_TABLES[t]}" for t in self.left_out)
            out += f" ({', '.join(self.left_out)} left out; {flags} includes it)"
        return out


def dump(source: str | Path, out: IO[bytes], embeddings: bool = False) -> DumpReport:
    """Write the database at `source` to `out` (a binary stream) in the dump format, from one snapshot."""
    store = Store(source, create=False)
    insp = inspect(store.engine)
    present = set(insp.get_table_names())
    known = tables()
    unknown = [f"table {name}" for name in sorted(present - {t.name for t in known})]
    unknown += sorted(f"column {t.name}.{c['name']}" for t in known if t.name in present
                      for c in insp.get_columns(t.name) if c["name"] not in t.columns)
    if unknown:
        raise DumpError(f"{store.location} holds {', '.join(unknown)}, which this version of Memory Workbench "
                        "does not declare; a dump without them would not be lossless")
    wanted = [t for t in known if embeddings or t.name not in OPTIONAL_TABLES]
    report = DumpReport(left_out=[t.name for t in known if t not in wanted])
    with _snapshot(store) as conn:
        counts = {t.name: conn.execute(select(func.count()).select_from(t)).scalar_one() if t.name in present
                  else 0 for t in wanted}
        header = {"format": FORMAT, "version": VERSION, "created_from": public_url(store.url),
                  "tables": [{"name": t.name, "rows": counts[t.name],
                              "columns": [{"name": c.name, "type": column_type(t, c.name), "nullable": c.nullable}
                                          for c in t.columns]} for t in wanted]}
        _write_line(out, header)
        for t in wanted:
            report.rows[t.name] = 0
            if not counts[t.name]:
                continue
            kinds = {c.name: column_type(t, c.name) for c in t.columns}
            query = t.select().order_by(*t.primary_key.columns)
            for row in conn.execution_options(yield_per=_BATCH).execute(query):
                values = {k: _encode(v, kinds[k]) for k, v in row._mapping.items()}
                _write_line(out, {"table": t.name, "row": values})
                report.rows[t.name] += 1
    return report


def _write_line(out: IO[bytes], obj: dict) -> None:
    out.write(json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode("utf-8") + b"\n")


class _snapshot:
    """One read transaction, so the header's counts and the rows come from the same state of the database
    even while a writer works (SQLite WAL readers see the snapshot of their first read)."""

    def __init__(self, store: Store):
        self.store = store

    def __enter__(self) -> Connection:
        conn = self.store.engine.connect()
        if conn.dialect.name == "postgresql":
            conn.execution_options(isolation_level="REPEATABLE READ")
        conn.begin()
        if conn.dialect.name == "sqlite" and not conn.connection.dbapi_connection.in_transaction:
            conn.exec_driver_sql("BEGIN")         # pysqlite itself opens transactions only before a write
        self.conn = conn
        return conn

    def __exit__(self, *exc) -> None:
        self.conn.rollback()
        self.conn.close()


# -- load -----------------------------------------------------------------------------------
@dataclass
class LoadReport:
    target: str
    rows: dict[str, int]
    last_seq: int

    def line(self) -> str:
        return (f"loaded {sum(self.rows.values())} rows of {len(self.rows)} tables into {self.target} "
                f"(log up to seq {self.last_seq})")


@dataclass
class _Declared:
    """A table as the header declares it: its target table, column kinds and row count."""

    table: Table
    kinds: dict[str, str]
    rows: int
    loaded: int = 0


def load(path: str | Path, target: str | Path, stream: IO[bytes] | None = None) -> LoadReport:
    """Load the dump at `path` (read from `stream` if given) into `target`, which must hold no rows.

    Everything is written in one transaction, so a malformed or truncated file leaves the target empty."""
    refuse_non_empty(target)
    source = open(path, "rb") if stream is None else stream
    try:
        lines = _numbered_lines(path, source)
        first = next(lines, None)
        if first is None:
            raise LoaderError(path, "empty file: no header line")
        declared = _header(path, first[1])          # a file that is no dump creates no database
        store = Store(target)
        with write_transaction(store.engine) as session:
            conn = session.connection()
            refuse_non_empty(target, conn)          # a writer may have come in since the first look
            rows = _load_rows(path, lines, declared, conn)
            _advance_sequences(conn)
    finally:
        if stream is None:
            source.close()
    return LoadReport(store.location, rows, store.last_seq())


def refuse_non_empty(target: str | Path, conn: Connection | None = None) -> None:
    """Raise unless no table of `target` holds a row; a database that does not exist yet is empty."""
    if conn is None:
        url = database_url(target)
        if url.startswith("sqlite:///") and not Path(url.removeprefix("sqlite:///")).exists():
            return
        engine = open_database(url)
        try:
            with engine.connect() as c:
                return refuse_non_empty(target, c)
        finally:
            engine.dispose()
    quote = conn.dialect.identifier_preparer.quote
    held = {name: n for name in inspect(conn).get_table_names()
            if (n := conn.execute(text(f"SELECT COUNT(*) FROM {quote(name)}")).scalar_one())}
    if held:
        listing = ", ".join(f"{name} {n} rows" for name, n in sorted(held.items()))
        raise DumpError(f"{target} is not empty ({listing}); load a dump into a new database")


def _load_rows(path, lines: Iterator[tuple[int, str]], declared: dict[str, "_Declared"], conn: Connection
               ) -> dict[str, int]:
    batch: list[dict] = []
    batch_of: _Declared | None = None
    batch_line = 0
    for n, line in lines:
        record = f"line {n}"
        obj = check(decode_json(line, path, record=record), dict, path=path, record=record)
        extra = sorted(set(obj) - {"table", "row"})
        if extra:
            raise LoaderError(path, "unexpected key: a row line holds 'table' and 'row'", record=record,
                              field=extra[0])
        name = check(obj.get("table"), str, path=path, record=record, field="table")
        if name not in declared:
            raise LoaderError(path, f"unknown table {name!r}: the header declares "
                              f"{', '.join(declared) or 'no table'}", record=record, field="table")
        into = declared[name]
        row = _row(path, record, into, check(obj.get("row"), dict, path=path, record=record, field="row"))
        if batch and (batch_of is not into or len(batch) >= _BATCH):
            _insert(path, conn, batch_of, batch, batch_line, n - 1)
            batch = []
        if not batch:
            batch_of, batch_line = into, n
        batch.append(row)
        into.loaded += 1
    if batch:
        _insert(path, conn, batch_of, batch, batch_line, batch_line + len(batch) - 1)
    short = [f"{name} {d.loaded} of {d.rows}" for name, d in declared.items() if d.loaded != d.rows]
    if short:
        raise LoaderError(path, "the file holds other row counts than its header declares (a truncated or "
                                f"edited dump): {', '.join(short)}")
    return {name: d.loaded for name, d in declared.items()}


def _numbered_lines(path, source: IO[bytes]) -> Iterator[tuple[int, str]]:
    """Lines split on b"\\n" only (U+2028 and the like are ordinary characters inside JSON strings)."""
    for n, raw in enumerate(source, start=1):
        if not raw.endswith(b"\n"):
            raise LoaderError(path, "the line is cut off (no newline at its end): a truncated dump",
                              record=f"line {n}")
        try:
            line = raw[:-1].decode("utf-8")
        except UnicodeDecodeError as exc:
            raise LoaderError(path, f"not UTF-8: {exc.reason} at byte {exc.start}", record=f"line {n}") from None
        if not line.strip():
            raise LoaderError(path, "blank line", record=f"line {n}")
        yield n, line


def _header(path, line: str) -> dict[str, _Declared]:
    record = "line 1 (header)"
    head = check(decode_json(line, path, record=record), dict, path=path, record=record)
    fmt = head.get("format")
    if fmt != FORMAT:
        raise LoaderError(path, f"expected {FORMAT!r}, got {fmt!r}: not a Memory Workbench dump", record=record,
                          field="format")
    version = require(head, "version", int, path=path, record=record)
    if version != VERSION:
        raise LoaderError(path, f"unsupported version {version}; this build reads version {VERSION}",
                          record=record, field="version")
    declared: dict[str, _Declared] = {}
    for i, item in enumerate(require(head, "tables", list, path=path, record=record)):
        rec = f"{record} / tables[{i}]"
        spec = check(item, dict, path=path, record=rec)
        name = require(spec, "name", str, path=path, record=rec)
        table = _table(name)
        if table is None:
            raise LoaderError(path, f"unknown table {name!r}; this version declares "
                              f"{', '.join(t.name for t in tables())}", record=rec, field="name")
        if name in declared:
            raise LoaderError(path, f"table {name!r} is declared twice", record=rec, field="name")
        rows = require(spec, "rows", int, path=path, record=rec)
        kinds: dict[str, str] = {}
        for j, col in enumerate(require(spec, "columns", list, path=path, record=rec)):
            crec = f"{rec} / columns[{j}]"
            col = check(col, dict, path=path, record=crec)
            cname = require(col, "name", str, path=path, record=crec)
            if cname not in table.columns:
                raise LoaderError(path, f"unknown column {cname!r} of table {name!r}", record=crec, field="name")
            kind = require(col, "type", str, path=path, record=crec)
            if kind != column_type(table, cname):
                raise LoaderError(path, f"{name}.{cname} is {kind!r} in the dump but "
                                  f"{column_type(table, cname)!r} here", record=crec, field="type")
            kinds[cname] = kind
        missing = [c.name for c in table.columns if c.name not in kinds and not c.nullable]
        if missing:
            raise LoaderError(path, f"table {name!r} lacks column(s) {', '.join(missing)}, which cannot be "
                                    "empty", record=rec, field="columns")
        declared[name] = _Declared(table, kinds, rows)
    return declared


def _row(path, record: str, into: _Declared, row: dict) -> dict:
    unknown = sorted(set(row) - set(into.kinds))
    if unknown:
        raise LoaderError(path, f"unknown column of table {into.table.name!r}", record=record,
                          field=f"row.{unknown[0]}")
    out = {}
    for name, kind in into.kinds.items():
        where = f"row.{name}"
        if name not in row:
            raise LoaderError(path, "missing", record=record, field=where)
        value = row[name]
        if value is None:
            if not into.table.columns[name].nullable:
                raise LoaderError(path, f"null in a column of {into.table.name!r} that cannot be empty",
                                  record=record, field=where)
            out[name] = None
        elif kind == "bytes":
            try:
                out[name] = base64.b64decode(check(value, str, path=path, record=record, field=where),
                                             validate=True)
            except binascii.Error:
                raise LoaderError(path, "not base64 text", record=record, field=where) from None
        elif kind == "float":
            out[name] = float(check(value, (int, float), path=path, record=record, field=where))
        else:
            out[name] = check(value, {"int": int, "bool": bool, "str": str}[kind], path=path, record=record,
                              field=where)
    return out


def _insert(path, conn: Connection, into: _Declared, rows: list[dict], first: int, last: int) -> None:
    try:
        conn.execute(into.table.insert(), rows)
    except DBAPIError as exc:
        raise LoaderError(path, f"rows of table {into.table.name!r} could not be written: "
                          f"{str(exc.orig).strip()}", record=f"lines {first}-{last}") from None


def _advance_sequences(conn: Connection) -> None:
    """PostgreSQL hands out serial ids from a sequence that explicit ids (op_log seq kept as dumped) do not
    move; set each to just past the largest id loaded so the next append does not collide."""
    if conn.dialect.name != "postgresql":
        return
    quote = conn.dialect.identifier_preparer.quote
    for table in tables():
        column = table.autoincrement_column
        if column is None:
            continue
        conn.execute(text(f"SELECT setval(pg_get_serial_sequence(:table, :column), "
                          f"COALESCE((SELECT MAX({quote(column.name)}) FROM {quote(table.name)}), 0) + 1, false)"),
                     {"table": quote(table.name), "column": column.name})

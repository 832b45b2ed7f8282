"""Opening a memory database by URL, and the one write lock every writer takes.

Writers are serialised by the database, not by any process's memory. On SQLite
a write transaction starts with `BEGIN IMMEDIATE`, which takes the write lock up
front: two writers can no longer both read the same log head and then append
after it. On PostgreSQL a transaction-scoped advisory lock does the same. Readers
never wait for a writer (SQLite runs in WAL mode, PostgreSQL under READ
COMMITTED), so the workbench stays responsive while a replay writes.

Durability: SQLite runs in WAL mode with `synchronous=NORMAL`. A commit
survives a crash or `kill -9` of the process (the test suite kills replays
mid-write to check it); a power loss or an OS crash may lose the last few
commits, never the file's consistency. That loss is re-derivable: a replay
resumes from the last durable turn and the offline backend is deterministic.
`FULL` would make review decisions power-safe too, at one fsync per commit
(measured here: 6.9 ms against 0.013 ms per commit, which would cap a warm
replay near 140 turns/s); `MEMWB_SQLITE_SYNC=FULL` chooses it.
"""
from __future__ import annotations

import os
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from sqlalchemy import Engine, Table, create_engine, event, inspect, text
from sqlalchemy.exc import OperationalError
from sqlmodel import Session

from engine.core.errors import WorkbenchError
from engine.core.redact import redact

LOCK_WAIT_ENV = "MEMWB_LOCK_WAIT"
SYNC_ENV = "MEMWB_SQLITE_SYNC"
DEFAULT_LOCK_WAIT = 120.0          # seconds a writer waits for another writer before giving up
_PG_LOCK_KEY = 0x6D656D7762        # the advisory lock every Memory Workbench writer takes ("memwb")


class WriteLockTimeout(WorkbenchError, RuntimeError):
    """Another writer held the database's write lock longer than this one would wait."""


def lock_wait() -> float:
    value = os.environ.get(LOCK_WAIT_ENV)
    if value is None:
        return DEFAULT_LOCK_WAIT
    try:
        return max(0.0, float(value))
    except ValueError:
        raise ValueError(f"{LOCK_WAIT_ENV}={value!r} is not a number of seconds") from None


def sqlite_sync() -> str:
    value = os.environ.get(SYNC_ENV, "NORMAL").upper()
    if value not in ("NORMAL", "FULL"):
        raise ValueError(f"{SYNC_ENV}={value!r}: choose NORMAL (the default) or FULL")
    return value


def database_url(target: str | Path) -> str:
    """A SQLAlchemy URL for a file path or a URL; `postgresql://` uses the psycopg 3 driver."""
    text_ = str(target)
    if "://" not in text_:
        return f"sqlite:///{Path(text_).expanduser().resolve()}"
    if text_.startswith(("postgresql://", "postgres://")):
        return "postgresql+psycopg://" + text_.split("://", 1)[1]
    return text_


def public_url(url: str) -> str:
    """`url` without what may hold a password (user info, query string), for messages and the meta table."""
    return url if url.startswith("sqlite") else redact(url.split("?", 1)[0])


def display_url(url: str) -> str:
    """The database for messages: a file path, or a server URL without credentials or query string."""
    return public_url(url).removeprefix("sqlite:///")


def is_sqlite(engine: Engine) -> bool:
    return engine.dialect.name == "sqlite"


def open_database(url: str) -> Engine:
    """A SQLAlchemy engine set up for the write lock (and, on SQLite, WAL and full durability)."""
    if not url.startswith("sqlite"):
        from engine.store import postgres

        return postgres.prepare(create_engine(url))
    engine = create_engine(url, connect_args={"timeout": lock_wait(), "isolation_level": None})
    event.listen(engine, "connect", _sqlite_connect)
    event.listen(engine, "begin", _sqlite_begin)
    return engine


def _sqlite_connect(dbapi_conn, _record) -> None:
    """Transactions are begun by `_sqlite_begin`, not implicitly by the driver."""
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute(f"PRAGMA synchronous={sqlite_sync()}")
    cur.close()


def _sqlite_begin(conn) -> None:
    wait = conn.get_execution_options().get("memwb_write")
    if wait is None:
        conn.exec_driver_sql("BEGIN")
        return
    conn.exec_driver_sql(f"PRAGMA busy_timeout = {int(wait * 1000)}")
    conn.exec_driver_sql("BEGIN IMMEDIATE")


@contextmanager
def write_transaction(engine: Engine, wait: float | None = None) -> Iterator[Session]:
    """A session holding the database's write lock: committed when the block ends, rolled back if it raises.

    Waits up to `wait` seconds (default `MEMWB_LOCK_WAIT`, 120) for another writer to finish."""
    wait = lock_wait() if wait is None else wait
    conn = engine.connect()
    try:
        if is_sqlite(engine):
            conn.execution_options(memwb_write=wait)
        session = Session(bind=conn)
        try:
            try:
                if is_sqlite(engine):
                    session.connection()
                else:
                    session.execute(text(f"SET LOCAL lock_timeout = {max(1, int(wait * 1000))}"))   # 0 = forever
                    session.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _PG_LOCK_KEY})
            except OperationalError as exc:
                if _is_lock_timeout(exc):
                    raise WriteLockTimeout(
                        f"another process is writing to {display_url(str(engine.url))} and held its write lock "
                        f"for more than {wait:g} s; nothing was written (try again, or set {LOCK_WAIT_ENV} to "
                        "wait longer)") from None
                raise
            yield session
            session.commit()
        except BaseException:
            session.rollback()
            raise
        finally:
            session.close()
    finally:
        conn.close()


def create_tables(engine: Engine, tables: list[Table]) -> None:
    """Create the tables a database lacks, under the write lock (two processes opening a new file at once
    would otherwise race); opening a database that has them all takes no lock."""
    if all(inspect(engine).has_table(t.name) for t in tables):
        return
    with write_transaction(engine) as s:
        for table in tables:
            table.create(s.connection(), checkfirst=True)


def _is_lock_timeout(exc: OperationalError) -> bool:
    message = str(exc.orig).lower()
    return "locked" in message or "busy" in message or "lock timeout" in message


__all__ = ["WriteLockTimeout", "create_tables", "database_url", "display_url", "public_url", "open_database", "write_transaction", "lock_wait"]

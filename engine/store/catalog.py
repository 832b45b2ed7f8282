"""The sessions in the workspace: what each database holds, read without changing any of them.

A session is one database file in the workspace's sessions folder. Its meta
table says what it replays (source file, conversation, engine, schedule), when
the workbench last opened it and, for a branch, which session it branched
from; its log says how far it got. The listing reads those through a
read-only connection, so listing never writes to a file it does not own, and
a file that is not a session gets a line saying so instead of an error.
"""
from __future__ import annotations

import json
import os
import sqlite3
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path, PurePath
from urllib.parse import quote

from sqlalchemy import create_engine, func, inspect
from sqlalchemy.exc import SQLAlchemyError
from sqlmodel import Session, select

from engine.core.errors import WorkbenchError
from engine.core.oplog import OpKind
from engine.store.log_store import Store
from engine.store.tables import MetaRow, OpRow
from engine.store.workspace import sessions_dir

DB_ENV = "MEMWB_DB"                # the database `memwb ui --db` asks the workbench to open
LAST_OPENED = "last_opened"        # meta: when the workbench last opened the session (UTC, ISO 8601)
PARENT = "parent"                  # meta: the file name of the session a branch was made from
OWNER = "owner"                    # meta: the identity that loaded the session or made the branch
SIDECARS = ("-wal", "-shm", "-journal")      # SQLite's own files beside a database
DB_SUFFIXES = (".sqlite", ".sqlite3", ".db")  # what a database made with `memwb replay --db` is called
SEARCH_DEPTH = 3                              # folders below a data folder the search for databases looks into
SEARCH_LIMIT = 200                            # database files read at most per search (a huge data folder)


class SessionNameError(WorkbenchError, ValueError):
    """A session name that is not a file in the sessions folder (a path that escapes it, or no such file)."""


@dataclass(frozen=True)
class SessionInfo:
    """One line of the listing. `problem` is set (and the rest mostly empty) for a file that is no session."""

    name: str                         # file name inside the sessions folder
    path: Path
    source: str | None = None
    label: str | None = None          # how the workbench names the source ("bundled demo", "upload: x.json")
    conversation: str | None = None
    engine: str | None = None
    schedule: str | None = None
    turn: int = 0                     # turns ingested (the log head)
    last_opened: str | None = None
    parent: str | None = None         # name of the session this one branched from
    owner: str | None = None          # who loaded it (meta OWNER); None when it was made outside the workbench
    depth: int = 0                    # 0 for a session, 1 for its branch, 2 for a branch of that ...
    problem: str | None = None

    @property
    def readable(self) -> bool:
        return self.problem is None


def now_text() -> str:
    """Wall-clock time for UI metadata only (never part of a fold)."""
    return datetime.now(timezone.utc).isoformat(timespec="microseconds")


def mark_opened(store: Store) -> None:
    """Record that the session was opened now: the listing sorts by it."""
    store.set_meta(**{LAST_OPENED: now_text()})


def new_session_path(stem: str, folder: Path | None = None) -> Path:
    """A file name in `folder` (the sessions folder by default) no other session uses: `stem-1.sqlite`,
    `stem-2.sqlite`, ... The file is created empty on the spot, so two browser sessions never get one name."""
    folder = folder or sessions_dir()
    folder.mkdir(parents=True, exist_ok=True)
    n = 1
    while True:
        path = folder / f"{stem}-{n}.sqlite"
        try:
            os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
            return path
        except FileExistsError:
            n += 1


def session_name(path: Path, folder: Path | None = None) -> str | None:
    """The name `path` has in the sessions folder, or None when it lies elsewhere."""
    folder = (folder or sessions_dir()).resolve()
    path = Path(path).resolve()
    return path.name if path.parent == folder else None


def resolve_session(name: str, folder: Path | None = None) -> Path:
    """The database file a session name (as a URL carries it) stands for; refuses anything that is not a plain
    file name inside the sessions folder."""
    folder = (folder or sessions_dir()).resolve()
    parts = PurePath(name).parts
    if not name or len(parts) != 1 or parts[0] in (".", "..") or "\\" in name or "\x00" in name:
        raise SessionNameError(f"session {name!r} is not a file name inside the workspace's sessions folder "
                               f"({folder}); only names listed there can be opened from a link")
    path = folder / parts[0]
    if path.resolve().parent != folder:
        raise SessionNameError(f"session {name!r} points outside the workspace's sessions folder ({folder})")
    if not path.is_file():
        raise SessionNameError(f"no session {name!r} in the workspace's sessions folder ({folder})")
    return path


def read_session(path: Path, name: str | None = None) -> SessionInfo:
    """What one file holds, through a read-only connection (a foreign database is never touched)."""
    name = name or path.name
    if path.stat().st_size == 0:
        return SessionInfo(name, path, problem="empty file: no session was written to it")
    uri = f"file:{quote(str(path.resolve()))}?mode=ro"
    engine = create_engine("sqlite://", creator=lambda: sqlite3.connect(uri, uri=True))
    try:
        tables = set(inspect(engine).get_table_names())
        if not {MetaRow.__tablename__, OpRow.__tablename__} <= tables:
            return SessionInfo(name, path, problem="a SQLite database, but not a Memory Workbench session "
                                                   f"(it has no {OpRow.__tablename__} and meta tables)")
        with Session(engine) as s:
            meta = {r.key: r.value for r in s.exec(select(MetaRow))}
            turn = s.exec(select(func.max(OpRow.turn)).where(OpRow.kind == OpKind.TURN_INGESTED)).one() or 0
    except (SQLAlchemyError, sqlite3.Error) as exc:
        reason = getattr(exc, "orig", None) or exc
        return SessionInfo(name, path, problem=f"not a readable session database ({reason})")
    finally:
        engine.dispose()
    values = {key: _json(value) for key, value in meta.items()}
    return SessionInfo(name, path, source=values.get("source"), label=values.get("label"),
                       conversation=values.get("conversation"), engine=values.get("engine"), schedule=values.get("schedule"), turn=int(turn),
                       last_opened=values.get(LAST_OPENED), parent=_parent_name(values, path.parent),
                       owner=values.get(OWNER))


def list_sessions(folder: Path | None = None) -> list[SessionInfo]:
    """Every file in the sessions folder, sessions first (last opened first) each followed by its branches
    (indented by `depth`), then the files that are no session."""
    folder = folder or sessions_dir()
    files = sorted(p for p in folder.iterdir() if p.is_file() and not _is_sidecar(p, folder)) \
        if folder.is_dir() else []
    infos = [read_session(p) for p in files]
    readable = {i.name: i for i in infos if i.readable}
    children: dict[str | None, list[SessionInfo]] = {}
    for info in readable.values():
        parent = info.parent if info.parent in readable and info.parent != info.name else None
        children.setdefault(parent, []).append(info)
    ordered: list[SessionInfo] = []

    def add(parent: str | None, depth: int) -> None:
        for info in sorted(children.get(parent, []), key=lambda i: (-_stamp(i.last_opened), i.name)):
            ordered.append(replace(info, depth=depth))
            add(info.name, depth + 1)

    add(None, 0)
    seen = {i.name for i in ordered}
    ordered += [i for i in readable.values() if i.name not in seen]      # a cycle of parents: listed flat
    return ordered + [i for i in infos if not i.readable]


def sessions_in_folders(folders: list[Path], skip: Path | None = None) -> list[SessionInfo]:
    """Session databases made outside the workbench (`memwb replay --db FILE`) in `folders` (the data folders) and
    up to SEARCH_DEPTH folders below them, most recently changed first; `skip` (the sessions folder, listed on
    its own), hidden folders and files that are no session are left out. Each is named by its full path."""
    skip = skip.resolve() if skip else None
    found: dict[Path, None] = {}
    for root in folders:
        if not root.is_dir():
            continue
        for here, dirs, files in os.walk(root):
            depth = len(Path(here).relative_to(root).parts)
            dirs[:] = sorted(d for d in dirs if not d.startswith(".") and depth < SEARCH_DEPTH
                             and (Path(here) / d).resolve() != skip)
            for f in sorted(files):
                path = (Path(here) / f).resolve()
                if f.endswith(DB_SUFFIXES) and path.parent != skip and len(found) < SEARCH_LIMIT:
                    found[path] = None
    infos = [read_session(p, name=str(p)) for p in found if p.is_file()]
    sessions = [i for i in infos if i.readable]
    return sorted(sessions, key=lambda i: (-i.path.stat().st_mtime, i.name))


def _json(value: str):
    try:
        return json.loads(value)
    except ValueError:
        return value


def _parent_name(meta: dict, folder: Path) -> str | None:
    """The session a branch was made from: its `parent` name, else the file its `branched_from` URL names."""
    if meta.get(PARENT):
        return str(meta[PARENT])
    origin = meta.get("branched_from")
    url = origin.get("url") if isinstance(origin, dict) else None
    if not isinstance(url, str) or not url.startswith("sqlite:///"):
        return None
    return session_name(Path(url.removeprefix("sqlite:///")), folder)


def _is_sidecar(path: Path, folder: Path) -> bool:
    return any(path.name.endswith(s) and (folder / path.name[: -len(s)]).exists() for s in SIDECARS)


def _stamp(text: str | None) -> float:
    try:
        return datetime.fromisoformat(text).timestamp() if text else 0.0
    except ValueError:
        return 0.0

"""The session picker: every database in the workspace, branches under their session, the session databases in
the data folders (made with `memwb replay --db`), and Open controls.

The rows come from `engine.store.catalog.list_sessions` (read-only); opening one
reopens it at its log head through `Workbench.resume`, which says so when the
source file it was replayed from is gone.
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable

import pandas as pd
import streamlit as st

from engine.engines import UnknownEngine, engine_schema
from engine.llm.embedder import Embedder
from engine.loaders import LoaderError
from engine.session import SessionError
from engine.store.catalog import SEARCH_DEPTH, SessionInfo, list_sessions, sessions_in_folders
from engine.store.data_paths import PathRefused, data_dirs, resolve_data_path
from engine.store.log_store import StoreError
from engine.store.workspace import sessions_dir
from workbench.model import Workbench
from workbench.text import MISSING, md_code, md_escape, table

INDENT = "\u2003↳ "          # a branch's row starts under its parent's name


def session_rows(sessions: list[SessionInfo], current: Path | None = None) -> list[dict]:
    """The listing as table rows: source, conversation, engine, turn, last opened; a problem for a foreign file
    (None where a value is missing: `table` shows the one missing mark)."""
    here = current.resolve() if current else None
    return [{"": "●" if here and s.path.resolve() == here else "",
             "Session": INDENT * s.depth + s.name,
             "Source": s.label or (Path(s.source).name if s.source else None),
             "Conversation": s.conversation,
             "Engine": engine_label(s.engine) if s.engine else None,
             "Turn": s.turn if s.readable else None,
             "Last opened": opened_text(s.last_opened),
             "Note": s.problem or (f"branch of {s.parent}" if s.parent else "")} for s in sessions]


def engine_label(name: str) -> str:
    try:
        return engine_schema(name).label
    except UnknownEngine:
        return f"{name} (not installed)"


def opened_text(stamp: str | None) -> str:
    """ISO UTC time as "2026-11-22 15:40 UTC"."""
    return f"{stamp[:16].replace('T', ' ')} UTC" if stamp else MISSING


def session_picker(current: Workbench, embedder: Callable[[], Embedder]) -> Workbench | None:
    """Draw the listings (the workspace's sessions, then session databases made with `memwb replay --db` in the
    data folders) and the Open controls; the reopened workbench when Open was pressed and worked."""
    folder = sessions_dir()
    sessions = list_sessions(folder)
    elsewhere = sessions_in_folders(data_dirs(), skip=folder)
    st.caption(f"Every session is a database in {md_code(folder)}; each change is saved there as it happens.")
    if sessions:
        _listing(sessions, current, "sessions_table")
    else:
        st.info("No session in the workspace yet.")
    folders = ", ".join(md_code(f) for f in data_dirs())
    st.markdown(f"**Session databases in the data folders** ({folders}, and up to {SEARCH_DEPTH} folders below): "
                "a database made with `memwb replay --db FILE` shows here when FILE is in one of them "
                "(`memwb ui --data-dir DIR` adds a folder).")
    if elsewhere:
        _listing(elsewhere, current, "databases_table")
    else:
        st.caption("None found.")
    readable = [s for s in sessions if s.readable] + elsewhere
    opened = _choose(readable, current, embedder) if readable else None
    return opened or _open_by_path(embedder)


def _listing(sessions: list[SessionInfo], current: Workbench, key: str) -> None:
    st.dataframe(table(pd.DataFrame(session_rows(sessions, current.db_path))), hide_index=True, width="stretch",
                 height=min(38 + 35 * len(sessions), 360), key=key)


def _choose(readable: list[SessionInfo], current: Workbench, embedder: Callable[[], Embedder]) -> Workbench | None:
    """The select box over every listed session and its Open button."""
    names = [s.name for s in readable]
    by_name = {s.name: s for s in readable}
    here = next((s.name for s in readable if s.path.resolve() == current.db_path.resolve()), None)
    if st.session_state.get("sessions_choice") not in names:
        st.session_state["sessions_choice"] = here or names[0]
    c1, c2 = st.columns([5, 1], vertical_alignment="bottom")
    name = c1.selectbox("Session", names, key="sessions_choice",
                        format_func=lambda n: (INDENT * by_name[n].depth + f"{n} · {by_name[n].conversation} · "
                                               f"turn {by_name[n].turn}"))
    if not c2.button("Open session", key="sessions_open", width="stretch",
                     help="Reopen this session at its log head (the cursor can then move back through its log)."):
        return None
    return _resume(by_name[name].path, name, embedder)


def _open_by_path(embedder: Callable[[], Embedder]) -> Workbench | None:
    """Open a database by its path, inside the data folders only (a path outside them is refused unread)."""
    c1, c2 = st.columns([5, 1], vertical_alignment="bottom")
    text = c1.text_input("Open a database", key="sessions_path", placeholder="/path/to/session.sqlite",
                         help="A session database (say, made with memwb replay --db FILE) in the workspace, the "
                              "bundled datasets or a folder of MEMWB_DATA_DIRS (memwb ui --data-dir DIR).")
    if not c2.button("Open database", key="sessions_open_path", width="stretch", disabled=not text.strip()):
        return None
    try:
        path = resolve_data_path(text, "session database")
    except PathRefused as exc:
        st.error(md_escape(exc), icon=":material/block:")
        return None
    return _resume(path, path.name, embedder)


def _resume(path: Path, name: str, embedder: Callable[[], Embedder]) -> Workbench | None:
    try:
        with st.spinner(f"Opening {name}…"):
            return Workbench.resume(path, embedder=embedder())
    except (SessionError, LoaderError, StoreError, ValueError) as exc:
        st.error(f"Could not open {md_code(name)}: {md_escape(exc)}. The open session is unchanged.",
                 icon=":material/error:")
        return None

"""The session picker: every database in the workspace, branches under their session, and an Open button.

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
from engine.store.catalog import SessionInfo, list_sessions
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
    """Draw the listing and the Open control; the reopened workbench when Open was pressed and worked."""
    folder = sessions_dir()
    sessions = list_sessions(folder)
    st.caption(f"Every session is a database in {md_code(folder)}; each change is saved there as it happens.")
    if not sessions:
        st.info("No session in the workspace yet.")
        return None
    st.dataframe(table(pd.DataFrame(session_rows(sessions, current.db_path))), hide_index=True, width="stretch",
                 height=min(38 + 35 * len(sessions), 360), key="sessions_table")
    readable = [s for s in sessions if s.readable]
    if not readable:
        return None
    names = [s.name for s in readable]
    by_name = {s.name: s for s in readable}
    if st.session_state.get("sessions_choice") not in names:
        st.session_state["sessions_choice"] = current.session_name if current.session_name in names else names[0]
    c1, c2 = st.columns([5, 1], vertical_alignment="bottom")
    name = c1.selectbox("Session", names, key="sessions_choice",
                        format_func=lambda n: (INDENT * by_name[n].depth + f"{n} · {by_name[n].conversation} · "
                                               f"turn {by_name[n].turn}"))
    if not c2.button("Open session", key="sessions_open", width="stretch",
                     help="Reopen this session at its log head (the cursor can then move back through its log)."):
        return None
    try:
        with st.spinner(f"Opening {name}…"):
            return Workbench.resume(by_name[name].path, embedder=embedder())
    except (SessionError, LoaderError, StoreError, ValueError) as exc:
        st.error(f"Could not open {md_code(name)}: {md_escape(exc)}. The open session is unchanged.",
                 icon=":material/error:")
        return None

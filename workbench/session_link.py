"""Where a browser session starts: the session and turn its URL names, the database `memwb ui --db` named, or
the bundled demo.

The URL carries the session's file name in the workspace's sessions folder
(`?session=demo-allmem-1.sqlite&turn=12`) and the page is its path
(`/consolidation`), so a reload or a shared link returns to the same place.
Plain Python: `workbench.state` feeds it Streamlit's query parameters.
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable, Mapping

from engine.llm.embedder import Embedder
from engine.loaders import LoaderError
from engine.session import SessionError
from engine.store.catalog import resolve_session
from engine.store.log_store import StoreError
from workbench.model import Workbench

SESSION_PARAM, TURN_PARAM = "session", "turn"
_REFUSED = (SessionError, LoaderError, StoreError, ValueError)     # ValueError: a bad name, a changed source


def first_workbench(params: Mapping[str, str], db: str | None, embedder: Callable[[], Embedder],
                    owner: str | None = None) -> tuple[Workbench, list[str]]:
    """The workbench a fresh browser session opens, and notes on what in the link could not be followed.

    The link's session wins over `db` (the `memwb ui --db` file), which wins over the bundled demo (a new
    session owned by `owner`); the link's turn then places the cursor (never past the log head: a link does
    not ingest)."""
    notes: list[str] = []
    wb = None
    name = params.get(SESSION_PARAM)
    if name:
        try:
            wb = Workbench.resume(resolve_session(name), embedder=embedder())
        except _REFUSED as exc:
            notes.append(f"The link's session {name!r} could not be opened: {exc}. The bundled demo is open instead.")
    elif db:
        try:
            wb = Workbench.resume(Path(db).expanduser(), embedder=embedder())
        except _REFUSED as exc:
            notes.append(f"{db} (memwb ui --db) could not be opened: {exc}. The bundled demo is open instead.")
    if wb is None:
        return Workbench.demo(embedder=embedder(), owner=owner), notes
    turn = params.get(TURN_PARAM)
    if turn is not None:
        notes += place_cursor(wb, turn)
    return wb, notes


def place_cursor(wb: Workbench, turn: str) -> list[str]:
    """Move the cursor to the link's turn when the log holds it; a note when it cannot."""
    try:
        target = int(turn)
    except ValueError:
        return [f"The link's turn {turn!r} is not a number; the session is shown at its log head ({wb.head})."]
    if not 0 <= target <= wb.head:
        return [f"The link's turn {target} is outside what this session holds (0 to {wb.head}); it is shown at its "
                f"log head ({wb.head})."]
    wb.jump(target)
    return []


def url_params(wb: Workbench) -> dict[str, str]:
    """The query parameters that bring a browser back to this session and turn. A database outside the
    workspace (opened with `memwb ui --db`) has no name a link may carry: only its turn goes in the URL."""
    params = {TURN_PARAM: str(wb.cursor)}
    if wb.session_name:
        params[SESSION_PARAM] = wb.session_name
    return params

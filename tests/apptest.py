"""Opening a workbench page under Streamlit's AppTest, shared by the page tests."""
from __future__ import annotations

from pathlib import Path

from streamlit.testing.v1 import AppTest

from workbench.model import Workbench

APP = str(Path(__file__).resolve().parents[1] / "workbench" / "app.py")


def open_app_page(page: str, turn: int = 0) -> tuple[AppTest, Workbench]:
    """Start the app on the demo, optionally jump to `turn`, then switch to `page` (relative to workbench/)."""
    at = AppTest.from_file(APP, default_timeout=180)
    at.run()
    wb = at.session_state["workbench"]
    if turn:
        wb.jump(turn)
    at.switch_page(page).run()
    assert not at.exception
    return at, wb

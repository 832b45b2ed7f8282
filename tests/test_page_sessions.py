"""The session picker and the link (query parameters) under Streamlit's AppTest, on real session databases."""
from __future__ import annotations

import shutil

import pytest
from apptest import APP, shown_text
from streamlit.testing.v1 import AppTest

from engine.store.workspace import ENV, sessions_dir
from workbench.model import DEMO_PATH, Workbench


@pytest.fixture(autouse=True)
def own_workspace(tmp_path, monkeypatch):
    """Each test its own workspace: the listing sees only the sessions it made."""
    monkeypatch.setenv(ENV, str(tmp_path / "workspace"))


def _app(**params) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=180)
    for key, value in params.items():
        at.query_params[key] = value
    at.run()
    assert not at.exception
    return at


def _warnings(at: AppTest) -> str:
    return " ".join(shown_text(str(w.value))[0] for w in at.warning)


def test_the_url_follows_the_session_and_cursor_and_a_link_returns_there():
    at = _app()
    wb = at.session_state["workbench"]
    assert wb.db_path.parent == sessions_dir()                     # the workspace, not a temporary folder
    at.button(key="replay_next").click().run()
    at.button(key="replay_next").click().run()
    at.button(key="replay_next").click().run()
    at.button(key="replay_back").click().run()
    assert dict(at.query_params) == {"session": wb.db_path.name, "turn": "2"}
    again = _app(session=wb.db_path.name, turn="2")                 # a fresh browser session with that link
    other = again.session_state["workbench"]
    assert other.db_path == wb.db_path and (other.cursor, other.head) == (2, 3)
    assert "**Turn** · 2 / " in " ".join(m.value for m in again.markdown)
    assert not _warnings(again)


def test_a_link_outside_the_sessions_folder_is_refused_clearly(tmp_path):
    outside = tmp_path / "elsewhere.sqlite"
    wb = Workbench.open(DEMO_PATH, workdir=tmp_path)
    wb.jump(2)
    assert outside != wb.db_path
    shutil.copy(wb.db_path, outside)
    at = _app(session=f"../../{tmp_path.name}/{wb.db_path.name}", turn="2")
    opened = at.session_state["workbench"]
    assert opened.db_path.parent == sessions_dir() and opened.head == 0        # the demo, nothing of that file
    assert "is not a file name inside the workspace's sessions folder" in _warnings(at)
    at = _app(session="no-such.sqlite")
    assert "no session 'no-such.sqlite'" in _warnings(at)


def test_a_turn_the_log_does_not_hold_is_not_ingested_by_a_link():
    wb = Workbench.open(DEMO_PATH)
    wb.jump(4)
    at = _app(session=wb.db_path.name, turn="40")
    opened = at.session_state["workbench"]
    assert (opened.cursor, opened.head) == (4, 4)
    assert "outside what this session holds (0 to 4)" in _warnings(at)


def test_the_picker_lists_sessions_and_opens_one_at_its_head(tmp_path):
    source = tmp_path / "copy.jsonl"
    shutil.copy(DEMO_PATH, source)
    first = Workbench.open(DEMO_PATH, engine="naive", label="picked demo")
    first.jump(7)
    first.jump(3)
    gone = Workbench.open(source, label="gone source")
    source.unlink()
    (sessions_dir() / "stray.txt").write_text("hello")
    at = _app()
    assert not at.dataframe                                        # closed: no database is read
    at.session_state["replay_sessions_open"] = True
    at.run()
    frame = next(d.value for d in at.dataframe)
    rows = {r["Session"].strip(" ↳\u2003"): r for r in frame.to_dict("records")}
    assert rows[first.db_path.name]["Turn"] == "7" and rows[first.db_path.name]["Source"] == "picked demo"
    assert "not a readable session database" in rows["stray.txt"]["Note"] and rows["stray.txt"]["Turn"] == "–"
    current = at.session_state["workbench"].db_path.name
    assert list(rows) == [current, gone.db_path.name, first.db_path.name, "stray.txt"]     # last opened first
    assert rows[current][""] == "●" and rows[first.db_path.name][""] == ""
    at.selectbox(key="sessions_choice").set_value(first.db_path.name).run()
    at.button(key="sessions_open").click().run()
    assert not at.exception
    opened = at.session_state["workbench"]
    assert opened.db_path == first.db_path and opened.cursor == opened.head == 7 and opened.engine_name == "naive"
    at.selectbox(key="sessions_choice").set_value(gone.db_path.name).run()
    at.button(key="sessions_open").click().run()
    errors = " ".join(shown_text(str(e.value))[0] for e in at.error)
    assert "which is gone" in errors and at.session_state["workbench"].db_path == first.db_path

"""Replay page through Streamlit's AppTest: stepping, jumping, loading, and loader errors."""
from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

ROOT = Path(__file__).resolve().parents[1]
APP = str(ROOT / "workbench" / "app.py")


@pytest.fixture
def at() -> AppTest:
    app = AppTest.from_file(APP, default_timeout=180)
    app.run()
    assert not app.exception
    return app


def _wb(at: AppTest):
    return at.session_state["workbench"]


def _texts(at: AppTest) -> str:
    return " ".join(str(e.value) for kind in ("markdown", "info", "success", "error", "subheader", "caption")
                    for e in getattr(at, kind))


def test_page_runs_on_the_demo(at):
    assert _wb(at).conversation.id == "demo"
    assert {"replay_next", "replay_back", "replay_play", "replay_go_turn", "replay_go_session", "replay_load"} <= {
        b.key for b in at.button}
    assert "Nothing ingested yet" in _texts(at)


def test_next_adds_a_unit_and_explains_it(at):
    before = len(_wb(at).engine.state.units)
    at.button(key="replay_next").click().run()
    assert not at.exception
    wb = _wb(at)
    assert len(wb.engine.state.units) == before + 1 and wb.cursor == 1
    at.button(key="replay_next").click().run()
    assert len(_wb(at).engine.state.units) == before + 2
    assert any(s.value == "What turn D1:2 caused" for s in at.subheader)
    assert at.dataframe, "anchors / edges tables"
    html = " ".join(h.proto.body for h in at.get("html"))
    assert "▶ current turn" in html and "D1:2" in html


def test_back_moves_the_cursor_without_changing_the_log(at):
    for _ in range(3):
        at.button(key="replay_next").click().run()
    wb = _wb(at)
    seq, head, units = wb.engine.store.last_seq(), wb.head, len(wb.engine.state.units)
    at.button(key="replay_back").click().run()
    assert not at.exception
    wb = _wb(at)
    assert wb.cursor == 2 and wb.head == head == 3
    assert wb.engine.store.last_seq() == seq and len(wb.engine.state.units) == units
    assert len(wb.view.state.units) == units - 1
    assert "fold of the log" in _texts(at)
    assert any(s.value == "What turn D1:2 caused" for s in at.subheader)
    at.button(key="replay_next").click().run()
    assert _wb(at).cursor == 3 and _wb(at).engine.store.last_seq() == seq


def test_jump_to_session_and_turn_and_play(at):
    at.selectbox(key="replay_session_target").set_value("3")
    at.button(key="replay_go_session").click().run()
    assert not at.exception
    wb = _wb(at)
    first = next(i for i, t in enumerate(wb.conversation.turns) if t.session == "3")
    assert wb.cursor == first + 1 and wb.current_turn.session == "3"
    assert at.number_input(key="replay_turn_target").value == wb.cursor

    at.button(key="replay_play").click().run()
    wb = _wb(at)
    assert wb.current_turn.session == "3" and wb.conversation.turns[wb.cursor].session == "4"

    at.number_input(key="replay_turn_target").set_value(5)
    at.button(key="replay_go_turn").click().run()
    assert _wb(at).cursor == 5 and not _wb(at).at_head


def test_scheduled_consolidation_is_reported(at):
    at.selectbox(key="replay_schedule").set_value("every-3-sessions")
    at.button(key="replay_load").click().run()
    assert not at.exception
    assert _wb(at).schedule.kind == "sessions"
    at.selectbox(key="replay_session_target").set_value("4")
    at.button(key="replay_go_session").click().run()
    assert not at.exception
    assert any("run-0001 ran before this turn was ingested, on schedule" in s.value for s in at.success)


def test_load_a_jsonl_file_with_settings(at):
    at.radio(key="replay_source").set_value("JSONL file").run()
    at.text_input(key="replay_path_JSONL file").input(str(ROOT / "datasets" / "fixtures" / "tiny.jsonl")).run()
    assert not at.error
    at.multiselect(key="replay_ablations").set_value(["no-merge"])
    at.button(key="replay_load").click().run()
    assert not at.exception
    wb = _wb(at)
    assert wb.source_label == "tiny.jsonl" and wb.engine.settings.ablations == ["no-merge"]


def test_malformed_file_is_rejected_and_nothing_is_lost(at, tmp_path):
    at.button(key="replay_next").click().run()
    loaded = _wb(at)
    bad = tmp_path / "broken.jsonl"
    bad.write_text('{"id": "t1", "speaker": "Ana", "text": "hi", "time": "2024-01-01T10:00:00", "session": "1"}\n'
                   '{"id": "t2", "speaker": "Ana", "time": "2024-01-01T10:01:00", "session": "1"}\n')
    at.radio(key="replay_source").set_value("JSONL file").run()
    at.text_input(key="replay_path_JSONL file").input(str(bad)).run()
    assert not at.exception
    message = " ".join(e.value for e in at.error)
    assert "broken.jsonl" in message and "text" in message and "line 2" in message
    assert at.button(key="replay_load").disabled
    assert _wb(at) is loaded and loaded.cursor == 1


def test_missing_path_is_reported(at, tmp_path):
    at.radio(key="replay_source").set_value("LoCoMo file").run()
    at.text_input(key="replay_path_LoCoMo file").input(str(tmp_path / "nope.json")).run()
    assert any("No file at" in e.value for e in at.error)


# -- the helpers behind the page ---------------------------------------------------------------------------
def test_transcript_escapes_text_and_marks_the_cursor():
    from engine.conversation import Turn
    from engine.state import MemoryState
    from workbench.replay_view import transcript_html

    turns = [Turn(f"D1:{i}", "<b>Ana</b>", f"<script>alert({i})</script>", f"2024-01-01T10:0{i}:00", "1", i)
             for i in range(1, 6)]
    html = transcript_html(turns, cursor=2, head=3, state=MemoryState(), before=1, after=2)
    assert "<script>" not in html and "&lt;script&gt;alert(2)&lt;/script&gt;" in html
    assert "&lt;b&gt;Ana&lt;/b&gt;" in html
    assert html.count("▶ current turn") == 1
    assert "in the log, ahead of the cursor" in html and "not yet ingested" in html
    assert "alert(5)" not in html                     # outside the window


def test_turn_effects_read_from_the_log_match_the_ingest_report():
    from workbench.model import Workbench
    from workbench.replay_view import turn_effects

    wb = Workbench.demo()
    wb.jump(6)
    report = wb.last_ingest
    at_head = turn_effects(wb.view, 6, report)
    assert at_head.unit_id == report.unit_id and at_head.anchors == [(a, float(c)) for a, c in report.anchors]
    assert [e.key for e in at_head.edges] == [e.key for e in report.edges]
    assert at_head.buffer_size == report.buffer_size
    wb.back()
    wb.back()
    behind = turn_effects(wb.engine.at(upto_turn=6), 6)
    assert behind.unit_id == report.unit_id and [e.key for e in behind.edges] == [e.key for e in report.edges]
    assert [a for a, _ in behind.anchors] == [a for a, _ in report.anchors]
    assert all(abs(c - float(r)) < 1e-4 for (_, c), (_, r) in zip(behind.anchors, report.anchors))

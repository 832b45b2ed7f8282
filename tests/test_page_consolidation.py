"""The Consolidation page through Streamlit's AppTest, on the bundled demo with the real embedder."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from engine.edge import EdgeType
from engine.proposal import Op, Status
from engine.state import MemoryState
from engine.unit import Unit
from workbench import review_view as rv
from tests.apptest import open_app_page
from workbench.model import Workbench

ROOT = Path(__file__).resolve().parents[1]
PAGE = "../pages/3_consolidation.py"      # relative to the main script, which lives in workbench/

pytestmark = pytest.mark.slow


def open_page(turn: int = 0) -> tuple[AppTest, Workbench]:
    return open_app_page(PAGE, turn)


def turn_count(wb: Workbench, turn_id: str) -> int:
    """Cursor position just after `turn_id` was ingested."""
    return next(i for i, t in enumerate(wb.conversation.turns) if t.id == turn_id) + 1


def diagnose_past_update() -> tuple[AppTest, Workbench, int, str]:
    """Demo at D5:4 (Jon's 3 -> 4 half marathons), diagnosed from the page; returns the Update's id."""
    at, wb = open_page()
    wb.jump(turn_count(wb, "D5:4"))
    at.run()
    at.button(key="run_diagnosis").click().run()
    assert not at.exception
    state = wb.engine.state
    current, superseded = state.turn_units["D5:4"], state.turn_units["D1:4"]
    update = next(p for p in state.proposals.values()
                  if p.op == Op.UPDATE and p.targets == [current, superseded] and p.status == Status.PENDING)
    at.multiselect(key="queue_ops").set_value(["Update"]).run()
    return at, wb, update.id, rv.run_key(wb.db_path.name, update.run_id)


def markdown_text(at: AppTest) -> str:
    return "\n".join(m.value for m in at.markdown)


def test_page_runs_on_a_fresh_demo():
    at, _ = open_page()
    assert any("No open run" in i.value for i in at.info)
    assert at.button(key="run_diagnosis").disabled          # nothing buffered yet


def test_cursor_behind_head_warns():
    at, wb = open_page(turn=10)
    wb.back()
    at.run()
    assert any("branch the log" in w.value and "turn 9" in w.value for w in at.warning)


def test_diagnosis_behind_head_branches_at_the_cursor():
    at, wb = open_page(turn=10)
    wb.back()
    wb.back()
    at.run()
    old_db = wb.db_path
    at.button(key="run_diagnosis").click().run()
    assert not at.exception
    assert wb.db_path != old_db and wb.branches == [old_db]
    assert wb.head == wb.cursor == 8
    assert wb.engine.open_run() is not None
    assert not at.warning


def test_diagnosis_lists_the_update_and_reject_changes_nothing():
    at, wb, pid, run_key = diagnose_past_update()
    queue = at.dataframe[0].value
    assert pid in set(queue["#"]) and set(queue["operator"]) == {"Update"}
    assert f"#{pid} · Update" in markdown_text(at)

    at.radio(key=rv.widget_key(run_key, pid)).set_value(rv.REJECT).run()
    assert at.session_state["review_decisions"][run_key] == {pid: False}
    before = wb.engine.snapshot()
    at.button(key="apply_run").click().run()
    assert not at.exception
    assert wb.engine.snapshot() == before
    p = wb.engine.state.proposals[pid]
    assert (p.status, p.decided_by) == (Status.REJECTED, "human")
    assert any("decided by **human**" in c.value for c in at.caption)      # the diff tab opened by itself


def test_plan_then_accept_update_then_undo():
    at, wb, pid, run_key = diagnose_past_update()
    at.button(key=f"plan:{run_key}:{pid}").click().run()
    assert wb.engine.state.proposals[pid].plan is not None
    assert "Refreshed summary:" in markdown_text(at)

    before = wb.engine.snapshot()
    at.radio(key=rv.widget_key(run_key, pid)).set_value(rv.ACCEPT).run()
    at.button(key="apply_run").click().run()
    assert not at.exception
    state = wb.engine.state
    current, superseded = state.proposals[pid].targets
    assert not state.units[superseded].visible and state.units[current].visible
    assert (current, superseded, EdgeType.VERSION) in state.edges
    assert state.proposals[pid].status == Status.APPLIED and state.proposals[pid].decided_by == "human"
    archived_tables = [d.value for d in at.dataframe if "unit" in d.value.columns]
    assert any(f"u{superseded}" in set(t["unit"]) for t in archived_tables)

    at.button(key="undo_start").click().run()
    assert any("Compensating records" in w.value for w in at.warning)
    at.button(key="undo_confirm").click().run()
    assert not at.exception
    assert wb.engine.snapshot() == before
    assert wb.engine.state.units[superseded].visible


def test_gate_decides():
    at, wb, pid, _ = diagnose_past_update()
    at.radio(key="decision_mode").set_value("Let the gate decide").run()
    at.button(key="apply_run").click().run()
    assert not at.exception
    p = wb.engine.state.proposals[pid]
    assert (p.status, p.decided_by) == (Status.APPLIED, "gate")
    assert all(q.decided_by in (None, "gate") for q in wb.engine.state.proposals.values())


def test_audit_log_and_reason_codes():
    at, wb, _, _ = diagnose_past_update()
    at.session_state["consolidation_tab"] = "Audit log"
    at.run()
    assert not at.exception
    log = at.dataframe[0].value
    assert {"proposal_made", "llm_call", "run_started"} <= set(log["kind"])
    llm = log[log["kind"] == "llm_call"]
    assert (llm["LLM role"] != "").all() and llm["latency (ms)"].notna().all()
    at.multiselect(key="audit_kinds").set_value(["run_started"]).run()
    assert list(at.dataframe[0].value["kind"]) == ["run_started"]
    breakdown = rv.reason_breakdown(wb.engine.state.proposals.values())
    assert breakdown["proposals"].sum() == len(wb.engine.state.proposals)
    assert "LOW_CONF" in set(breakdown["reason code"])


HOSTILE = '<img src=x onerror="alert(1)"> & <b>bold</b>'


def test_conversation_text_is_escaped(tmp_path):
    lines = [{"id": "s1:1", "speaker": "Ana", "text": f"I have 3 cats at home. {HOSTILE}",
              "time": "2024-01-01T10:00:00", "session": "1"},
             {"id": "s1:2", "speaker": "Ben", "text": "Nice, what are their names?",
              "time": "2024-01-01T10:01:00", "session": "1"},
             {"id": "s2:1", "speaker": "Ana", "text": f"I have 4 cats at home. {HOSTILE}",
              "time": "2024-02-01T10:00:00", "session": "2"}]
    path = tmp_path / "hostile.jsonl"
    path.write_text("\n".join(json.dumps(x) for x in lines), encoding="utf-8")
    at, wb = open_page()
    hostile = Workbench.open(path, label="<i>hostile</i>", embedder=wb.engine.embedder, workdir=tmp_path)
    hostile.jump(3)
    at.session_state["workbench"] = hostile
    at.run()
    at.button(key="run_diagnosis").click().run()
    assert not at.exception
    html_blocks = markdown_text(at)
    assert "&lt;img src=x onerror=&quot;alert(1)&quot;&gt; &amp; &lt;b&gt;bold&lt;/b&gt;" in html_blocks
    assert "<img" not in html_blocks and "<b>bold" not in html_blocks


def test_unit_and_text_html_escape():
    state = MemoryState()
    state.units[1] = Unit(id=1, raw=f"Ana: {HOSTILE}\nsecond line", summary="", keywords=[], time="t",
                          kind="turn", source_ids=["<x>"], visible=False)
    block = rv.unit_html(state, 1, role="<role>")
    assert "<img" not in block and "&lt;img" in block and "&lt;x&gt;" in block and "&lt;role&gt;" in block
    assert "<br>second line" in block and rv.ARCHIVED_MARK in block and "dashed" in block
    assert "<b>" not in rv.text_html("<b>label</b>", HOSTILE)


def test_reviewer_name_is_stored_with_decisions():
    at, wb, pid, run_key = diagnose_past_update()
    at.text_input(key="reviewer").set_value("dr-lee").run()
    at.radio(key=rv.widget_key(run_key, pid)).set_value(rv.ACCEPT).run()
    at.button(key="apply_run").click().run()
    assert not at.exception
    assert wb.engine.state.proposals[pid].decided_by == "dr-lee"
    assert wb.engine.state.proposals[pid].status == Status.APPLIED

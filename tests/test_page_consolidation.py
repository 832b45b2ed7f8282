"""The Consolidation page through Streamlit's AppTest, on the bundled demo with the real embedder."""
from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from apptest import WITH_PROCESS, WITHOUT_PROCESS, open_app_page, shown_text
from streamlit.testing.v1 import AppTest

from engine.core.access import Identity, Role, local_identity
from engine.core.node import Node as Unit
from engine.core.oplog import OpKind, OpRecord
from engine.core.proposal import GateVerdict, Proposal, Status
from engine.core.state import MemoryState
from engine.engines import engine_schema
from workbench import retrieval_view
from workbench.model import Workbench
from workbench.review import audit as audit_view
from workbench.review import decisions as review_decisions
from workbench.review import proposal_text
from workbench.review import queue as review_view
from workbench.text import text_html

SCHEMA = engine_schema("allmem")
LOCAL = local_identity().name           # who the page records on a loopback-only server: local:<os user>
UPDATE = "update"                      # All-Mem's operators and edge types, as its schema names them
VERSION = "version"

ROOT = Path(__file__).resolve().parents[1]
PAGE = "../pages/3_consolidation.py"      # relative to the main script, which lives in workbench/

pytestmark = pytest.mark.slow


def open_page(turn: int = 0, engine: str = "allmem") -> tuple[AppTest, Workbench]:
    return open_app_page(PAGE, turn, engine)


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
                  if p.op == UPDATE and p.targets == [current, superseded] and p.status == Status.PENDING)
    at.multiselect(key="queue_ops").set_value(["Update"]).run()
    return at, wb, update.id, review_decisions.run_key(wb.db_path.name, update.run_id)


def markdown_text(at: AppTest) -> str:
    return "\n".join(m.value for m in at.markdown)


def diagnose_in_review(turn_id: str = "D5:9") -> tuple[AppTest, Workbench, str, list[Proposal]]:
    """Demo at `turn_id`, diagnosed from the page, queue in manual mode; the run id and its pending proposals."""
    at, wb = open_page()
    wb.jump(turn_count(wb, turn_id))
    at.run()
    at.button(key="run_diagnosis").click().run()
    assert not at.exception
    run_id = wb.engine.open_run()
    pending = [p for p in wb.engine.state.proposals.values() if p.run_id == run_id and p.status == Status.PENDING]
    assert len(pending) >= 3 and {p.gate for p in pending} == {GateVerdict.PASS, GateVerdict.FAIL}
    made = [p for p in wb.engine.state.proposals.values() if p.run_id == run_id]
    banner = next(s.value for s in at.success if s.value.startswith(f"{run_id}:"))
    assert banner.startswith(f"{run_id}: {len(made)} proposals, {len(pending)} waiting for a decision")
    for status, n in Counter(p.status for p in made if p.status != Status.PENDING).items():
        assert f"{n} {status} at diagnosis" in banner or f", {n} {status}" in banner   # where the others went
    return at, wb, run_id, pending


def page_decisions(at: AppTest) -> dict[int, str]:
    """Each listed proposal's decision as the queue table shows it; every card's radio must say the same."""
    queue = next(d.value for d in at.dataframe if "your decision" in d.value.columns)
    table = dict(zip(queue["#"].astype(int), queue["your decision"]))
    cards = {int(r.key.rsplit(":", 1)[1]): r.value for r in at.radio if (r.key or "").startswith("decide:")}
    assert cards and all(table[pid] == choice for pid, choice in cards.items()), (table, cards)
    return table


def press(at: AppTest, label_start: str) -> None:
    next(b for b in at.button if b.label.startswith(label_start)).click().run()
    assert not at.exception


def stored_statuses(wb: Workbench, ids) -> dict[int, tuple[str, str | None]]:
    """(status, decided by) of each proposal as the session database holds it, folded afresh from the file."""
    stored = wb.engine.store.load_state()
    return {i: (stored.proposals[i].status, stored.proposals[i].decided_by) for i in ids}


def test_reject_all_shown_is_what_the_cards_show_and_what_is_stored():
    at, wb, run_id, pending = diagnose_in_review()
    before = wb.engine.snapshot()
    press(at, "Reject all shown")
    assert set(page_decisions(at).values()) == {review_decisions.REJECT}
    assert at.button(key="apply_run").label == f"Apply decisions (0 accept, {len(pending)} reject)"
    at.button(key="apply_run").click().run()
    assert not at.exception
    assert stored_statuses(wb, [p.id for p in pending]) == {p.id: (Status.REJECTED, LOCAL) for p in pending}
    run = wb.engine.store.load_state().runs[run_id]
    assert run.status == "committed" and run.summary["rejected"] == len(pending) and run.summary["applied"] == 0
    assert wb.engine.snapshot() == before                                     # nothing archived, nothing made
    assert any(f"{run_id} committed: 0 applied, {len(pending)} rejected" in s.value for s in at.success)


def test_accept_gate_passes_reject_the_rest_is_what_is_stored():
    at, wb, run_id, pending = diagnose_in_review()
    passes = {p.id for p in pending if p.gate == GateVerdict.PASS}
    press(at, "Accept gate passes, reject the rest")
    assert page_decisions(at) == {p.id: review_decisions.ACCEPT if p.id in passes else review_decisions.REJECT for p in pending}
    assert at.button(key="apply_run").label == \
        f"Apply decisions ({len(passes)} accept, {len(pending) - len(passes)} reject)"
    at.button(key="apply_run").click().run()
    assert not at.exception
    stored = wb.engine.store.load_state()
    for p in pending:
        status, who = stored.proposals[p.id].status, stored.proposals[p.id].decided_by
        assert who == LOCAL
        assert status == Status.REJECTED if p.id not in passes else status != Status.REJECTED, (p.id, status)
    applied = [stored.proposals[i] for i in passes if stored.proposals[i].status == Status.APPLIED]
    assert applied and stored.runs[run_id].summary["applied"] == len(applied)
    for p in applied:                                # an applied Update archives its superseded target
        if p.op == UPDATE:
            assert not stored.units[p.targets[1]].visible and (p.targets[0], p.targets[1], VERSION) in stored.edges


def test_bulk_then_single_choices_apply_exactly_and_undecided_ones_stay_pending():
    at, wb, run_id, pending = diagnose_in_review()
    key = review_decisions.run_key(wb.db_path.name, run_id)
    press(at, "Accept gate passes, reject the rest")
    flipped = next(p for p in pending if p.gate == GateVerdict.PASS)
    left_open = next(p for p in pending if p.gate == GateVerdict.FAIL)
    at.radio(key=review_decisions.widget_key(key, flipped.id)).set_value(review_decisions.REJECT).run()
    at.radio(key=review_decisions.widget_key(key, left_open.id)).set_value(review_decisions.UNDECIDED).run()
    expected = {p.id: review_decisions.ACCEPT if p.gate == GateVerdict.PASS else review_decisions.REJECT for p in pending}
    expected.update({flipped.id: review_decisions.REJECT, left_open.id: review_decisions.UNDECIDED})
    assert page_decisions(at) == expected
    accepted = sum(v == review_decisions.ACCEPT for v in expected.values())
    assert at.button(key="apply_run").label == \
        f"Apply decisions ({accepted} accept, {len(pending) - accepted - 1} reject; 1 undecided stay pending)"
    at.button(key="apply_run").click().run()
    assert not at.exception
    stored = stored_statuses(wb, expected)
    assert stored[left_open.id] == (Status.PENDING, None) and stored[flipped.id] == (Status.REJECTED, LOCAL)
    assert all(stored[i][0] == Status.REJECTED for i, v in expected.items() if v == review_decisions.REJECT)
    assert all(stored[i][0] not in (Status.PENDING, Status.REJECTED) for i, v in expected.items() if v == review_decisions.ACCEPT)
    assert wb.engine.store.load_state().runs[run_id].status == "open"
    with pytest.raises(RuntimeError, match="waiting for a decision"):
        wb.next()                                       # the open run still blocks ingest
    assert page_decisions(at) == {left_open.id: review_decisions.UNDECIDED}       # the queue lists what is still pending
    assert at.button(key="apply_run").disabled

    at.radio(key=review_decisions.widget_key(key, left_open.id)).set_value(review_decisions.ACCEPT).run()   # decided in a later apply
    at.button(key="apply_run").click().run()
    assert not at.exception
    stored_state = wb.engine.store.load_state()
    run = stored_state.runs[run_id]
    assert run.status == "committed" and stored_state.proposals[left_open.id].decided_by == LOCAL
    assert stored_state.proposals[left_open.id].status != Status.PENDING
    statuses = [stored_state.proposals[p.id].status for p in pending]
    assert (run.summary["applied"], run.summary["rejected"]) == (statuses.count(Status.APPLIED),
                                                                 statuses.count(Status.REJECTED))
    assert any(f"decided by {LOCAL}" in shown_text(c.value)[0] for c in at.caption)        # the diff tab opened by itself


def test_deferring_the_undecided_closes_the_run_with_a_visible_note():
    at, wb, run_id, pending = diagnose_in_review()
    key = review_decisions.run_key(wb.db_path.name, run_id)
    first = pending[0]
    at.radio(key=review_decisions.widget_key(key, first.id)).set_value(review_decisions.REJECT).run()
    assert at.button(key="apply_defer").label == f"Apply and defer the {len(pending) - 1} undecided"
    at.button(key="apply_defer").click().run()
    assert not at.exception
    stored = wb.engine.store.load_state()
    routed = sum(p.run_id == run_id and p.status == Status.SKIPPED and not p.decided_by
                 for p in stored.proposals.values())                  # closed at diagnosis, before the review
    assert stored.runs[run_id].status == "committed"
    assert stored.runs[run_id].summary["skipped"] == len(pending) - 1 + routed
    assert stored.runs[run_id].summary["skipped_at_diagnosis"] == routed
    assert (stored.proposals[first.id].status, stored.proposals[first.id].decided_by) == (Status.REJECTED, LOCAL)
    for p in pending[1:]:
        assert stored.proposals[p.id].status == Status.SKIPPED and stored.proposals[p.id].decided_by == LOCAL
        assert stored.proposals[p.id].note.startswith(f"deferred by {LOCAL}")
    notes = next(d.value for d in at.dataframe if "note" in d.value.columns and "decided by" in d.value.columns)
    assert (notes["note"].str.startswith(f"deferred by {LOCAL}")).sum() == len(pending) - 1
    wb.next()                                            # the run is closed: ingest goes on


def test_page_runs_on_a_fresh_demo():
    at, _ = open_page()
    assert any("No open run" in i.value for i in at.info)
    assert at.button(key="run_diagnosis").disabled          # nothing buffered yet
    assert any(m.label == "Queued nodes" for m in at.metric)
    header = " ".join(m.value for m in at.markdown)
    assert "**Queued for Consolidation (ATC)** · 0" in header
    assert any("Offline process **Consolidation (ATC)**" in c.value for c in at.caption)


@pytest.mark.parametrize("engine", WITH_PROCESS)
def test_any_process_diagnoses_decides_applies_and_undoes(engine):
    """Every engine with an offline process: the queue speaks its schema, the gate decides, undo restores."""
    schema = engine_schema(engine)
    at, wb = open_page(turn=33, engine=engine)            # just after D3:4, the demo's Split
    assert not at.button(key="run_diagnosis").disabled
    before = wb.engine.snapshot()
    at.button(key="run_diagnosis").click().run()
    assert not at.exception
    run_id = wb.engine.open_run()
    proposals = [p for p in wb.engine.state.proposals.values() if p.run_id == run_id]
    assert proposals
    queue = at.dataframe[0].value
    pending = [p for p in proposals if p.status == Status.PENDING]
    carded = [p for p in pending if not proposal_text.is_structural(schema, p)]    # structural: one decision
    assert set(queue["#"]) == {p.id for p in carded}
    labels = {o.label for o in schema.operators}
    assert set(queue["operator"]) <= labels
    for p in carded:
        row = queue[queue["#"] == p.id].iloc[0]
        assert row["targets"] == proposal_text.targets_label(schema, p)
        if "threshold" in p.detail:
            assert row["gate θ"] == f"{p.detail['threshold']:.2f}"
    text = markdown_text(at)
    shown = review_view.sort_queue(carded)[:10]
    assert all(f"#{p.id} · {proposal_text.op_label(schema, p.op)}" in text for p in shown)
    assert all(proposal_text.target_roles(schema, p)[0] in text for p in shown)
    at.radio(key="decision_mode").set_value("Let the gate decide").run()
    at.button(key="apply_run").click().run()
    assert not at.exception
    run = wb.engine.state.runs[run_id]
    assert run.status == "committed" and run.process == schema.processes[0].name
    closed = [wb.engine.state.proposals[p.id] for p in pending]
    assert all(p.decided_by == "gate" for p in closed if p.status in (Status.APPLIED, Status.REJECTED))
    assert sum(p.status == Status.APPLIED for p in closed) == run.summary["applied"]
    at.button(key="undo_start").click().run()
    at.button(key="undo_confirm").click().run()
    assert not at.exception
    assert wb.engine.state.runs[run_id].status == "undone"
    assert wb.engine.snapshot() == before


@pytest.mark.parametrize("engine", WITHOUT_PROCESS)
def test_an_engine_without_a_process_says_so_and_shows_the_audit_log(engine):
    at, wb = open_page(turn=4, engine=engine)
    label = engine_schema(engine).label
    assert any(f"The {label} engine has no offline process: nothing to consolidate" in i.value for i in at.info)
    assert not [b for b in at.button if b.key == "run_diagnosis"]
    log = at.dataframe[0].value
    assert set(log["kind"]) == {"turn_ingested", "node_created"} and len(log) == 8
    assert log["summary"].str.startswith("u").sum() == 4


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
    runs = list(wb.engine.state.runs.values())
    assert len(runs) == 1 and runs[0].turn == 8           # diagnosed at the cursor, in the branch
    assert not at.warning


def test_diagnosis_lists_the_update_and_reject_changes_nothing():
    at, wb, pid, run_key = diagnose_past_update()
    queue = at.dataframe[0].value
    assert pid in set(queue["#"]) and set(queue["operator"]) == {"Update"}
    row = queue[queue["#"] == pid].iloc[0]
    p = wb.engine.state.proposals[pid]
    assert row["targets"] == f"u{p.targets[0]} → u{p.targets[1]}"       # ordered targets
    assert row["gate θ"] == f"{p.detail['threshold']:.2f}" and p.detail["threshold"] == wb.engine.settings.theta["update"]
    text = markdown_text(at)
    assert f"#{pid} · Update" in text and f"(gate θ {p.detail['threshold']:.2f})" in text
    assert all(role in text for role in SCHEMA.operator(UPDATE).target_roles)

    at.radio(key=review_decisions.widget_key(run_key, pid)).set_value(review_decisions.REJECT).run()
    assert at.session_state["review_decisions"][run_key] == {pid: False}
    before = wb.engine.snapshot()
    at.button(key="apply_defer").click().run()              # reject it, defer the rest: the run closes
    assert not at.exception
    assert wb.engine.snapshot() == before
    p = wb.engine.state.proposals[pid]
    assert (p.status, p.decided_by) == (Status.REJECTED, LOCAL)
    assert any(f"decided by {LOCAL}" in shown_text(c.value)[0] for c in at.caption)      # the diff tab opened by itself


def test_plan_then_accept_update_then_undo():
    at, wb, pid, run_key = diagnose_past_update()
    at.button(key=f"plan:{run_key}:{pid}").click().run()
    assert wb.engine.state.proposals[pid].plan is not None
    assert "Refreshed summary:" in markdown_text(at)

    before = wb.engine.snapshot()
    at.radio(key=review_decisions.widget_key(run_key, pid)).set_value(review_decisions.ACCEPT).run()
    at.button(key="apply_defer").click().run()
    assert not at.exception
    state = wb.engine.state
    current, superseded = state.proposals[pid].targets
    assert not state.units[superseded].visible and state.units[current].visible
    assert state.units[superseded].status == "archived"
    assert (current, superseded, VERSION) in state.edges
    assert state.proposals[pid].status == Status.APPLIED and state.proposals[pid].decided_by == LOCAL
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
    breakdown = audit_view.reason_breakdown(wb.engine.state.proposals.values(), SCHEMA)
    assert breakdown["proposals"].sum() == len(wb.engine.state.proposals)
    assert "LOW_CONF" in set(breakdown["reason code"])
    low = breakdown[breakdown["reason code"] == "LOW_CONF"].iloc[0]
    assert low["meaning"] == next(r.description for r in SCHEMA.reason_codes if r.code == "LOW_CONF")
    codes = [c for c in breakdown["reason code"] if c != audit_view.NO_CODE]
    order = [r.code for r in SCHEMA.reason_codes]
    assert codes == sorted(codes, key=order.index)              # the schema's order


def test_every_op_kind_has_a_summary():
    kinds = {v for k, v in vars(OpKind).items() if k.isupper() and isinstance(v, str)}
    assert set(audit_view.OP_SUMMARIES) == kinds
    samples = {
        OpKind.TURN_INGESTED: {"turn_id": "D1:1", "session": "1"},
        OpKind.NODE_CREATED: {"node": {"id": 3, "kind": "turn", "status": "visible", "source_ids": ["D1:1"],
                                       "raw": "Ana: hi"}},
        OpKind.NODE_RETRACTED: {"node": 3, "was": {}},
        OpKind.NODE_UPDATED: {"node": 3, "changes": {"members": [1, 2]}, "prev": {"members": []}},
        OpKind.DESCRIPTOR_CHANGED: {"node": 3, "summary": "s", "keywords": []},
        OpKind.STATUS_CHANGED: {"node": 3, "status": "archived", "was": "visible", "cause": {"run": "run-0001"}},
        OpKind.EDGE_ADDED: {"edge": {"src": 1, "dst": 2, "type": "version", "confidence": None}},
        OpKind.EDGE_REMOVED: {"src": 1, "dst": 2, "type": "semantic",
                              "edge": {"src": 1, "dst": 2, "type": "semantic", "confidence": 0.5}},
        OpKind.BUFFER_PUSHED: {"buffer": "atc", "entries": [[3, [1, 2]]]},
        OpKind.BUFFER_FLUSHED: {"buffer": "atc", "entries": [[3, [1, 2]], [4, []]]},
        OpKind.ENGINE_STATE_SET: {"key": "phase", "value": "open", "prev": "closed"},
        OpKind.PROPOSAL_MADE: {"proposal": {"id": 1, "op": "merge", "targets": [1, 2], "confidence": 0.9,
                                            "gate": "pass", "reason_code": None}},
        OpKind.PROPOSAL_UPDATED: {"id": 1, "changes": {"status": "applied", "plan": {}}},
        OpKind.RUN_STARTED: {"mode": "manual", "process": "atc", "buffer": [[3, [1]]]},
        OpKind.RUN_COMMITTED: {"summary": {"applied": 1}, "decided_by": "human"},
        OpKind.RUN_UNDONE: {"undone_run": "run-0001"},
        OpKind.RUN_DISCARDED: {},
        OpKind.LLM_CALL: {"role": "diagnosis", "backend": "offline", "error_code": None},
        OpKind.NOTE: {"text": "a note"},
    }
    expected = {OpKind.NODE_CREATED: "u3 turn [visible] ← D1:1: Ana: hi",
                OpKind.STATUS_CHANGED: "u3 visible → archived (run run-0001)",
                OpKind.EDGE_REMOVED: "u1 —semantic→ u2 (conf 0.50) removed",
                OpKind.BUFFER_PUSHED: "atc ← u3 with 2 anchor(s)",
                OpKind.BUFFER_FLUSHED: "2 node(s) flushed from atc: u3, u4",
                OpKind.ENGINE_STATE_SET: "phase = open (was closed)",
                OpKind.RUN_STARTED: "manual atc run over 1 buffered node(s)",
                OpKind.NOTE: "a note"}
    assert set(samples) == kinds
    for kind, payload in samples.items():
        line = audit_view.op_summary(OpRecord(kind, payload))
        assert line and not line.startswith("{"), (kind, line)
        if kind in expected:
            assert line == expected[kind]


def test_plans_render_from_the_operator_plan_fields():
    split = Proposal(id=1, run_id="run-0001", op="split", targets=[3], confidence=0.95, reason="two topics",
                     plan={"do_split": True, "split_rationale": "dog <and> race",
                           "segments": [{"segment_text": "a", "segment_summary": "A", "segment_keywords": ["x"],
                                         "topic_label": "dog"},
                                        {"segment_text": "b", "segment_summary": "B", "segment_keywords": [],
                                         "topic_label": "race"}]})
    body, tables = review_view.plan_blocks(SCHEMA, split)
    assert "Rationale:" in body and "dog &lt;and&gt; race" in body and "do split:</span> yes" in body
    [(label, frame)] = tables
    assert label == "Segments" and list(frame.columns) == ["#", "Text (exact substring)", "Summary", "Keywords",
                                                           "Topic"]
    assert list(frame["Keywords"]) == ["x", ""] and list(frame["Topic"]) == ["dog", "race"]
    update = Proposal(id=2, run_id="run-0001", op="update", targets=[5, 4], confidence=0.95, reason="newer",
                      plan={"updated_summary": "4 races", "updated_keywords": ["race"], "deprecations": [],
                            "alignment_note": "count"})
    body, tables = review_view.plan_blocks(SCHEMA, update)
    assert not tables and "Refreshed summary:</span> 4 races" in body and "Deprecated facts:</span> none" in body
    assert proposal_text.targets_label(SCHEMA, update) == "u5 → u4"
    merge = Proposal(id=3, run_id="run-0001", op="merge", targets=[1, 2], confidence=0.9, reason="dup")
    assert proposal_text.targets_label(SCHEMA, merge) == "u1, u2"
    assert proposal_text.target_roles(SCHEMA, update) == list(SCHEMA.operator("update").target_roles)
    assert proposal_text.op_label(SCHEMA, "diagnosis") == "Diagnosis" and proposal_text.op_label(SCHEMA, "merge") == "Merge"


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
    state = MemoryState(schema=SCHEMA)
    state.units[1] = Unit(id=1, raw=f"Ana: {HOSTILE}\nsecond line", summary="", keywords=[], time="t",
                          kind="turn", source_ids=["<x>"], status="archived", visible=False)
    block = review_view.unit_html(state, 1, role="<role>")
    assert "<img" not in block and "&lt;img" in block and "&lt;x&gt;" in block and "&lt;role&gt;" in block
    assert "<br>second line" in block and retrieval_view.ARCHIVED_MARK in block and "dashed" in block
    assert "<b>" not in text_html("<b>label</b>", HOSTILE)


def test_the_signed_in_identity_is_stored_with_decisions_and_there_is_no_name_box():
    at, wb, pid, run_key = diagnose_past_update()
    assert not [t for t in at.text_input if t.key == "reviewer"]           # no free-text reviewer any more
    at.session_state["_memwb_identity"] = Identity("dr-lee", Role.REVIEWER, "token")
    at.radio(key=review_decisions.widget_key(run_key, pid)).set_value(review_decisions.ACCEPT).run()
    at.button(key="apply_run").click().run()
    assert not at.exception
    stored = wb.engine.store.load_state()
    assert (stored.proposals[pid].decided_by, stored.proposals[pid].status) == (LOCAL, Status.APPLIED), \
        "on loopback the local user decides, whatever the session state claims"


def crafted_click(at: AppTest, key: str) -> None:
    """Send a click on a disabled button, as a crafted websocket message would (AppTest's click() refuses)."""
    button = at.button(key=key)
    assert button.disabled
    button._value = True
    at.run()


@pytest.fixture
def signed_in(monkeypatch):
    """`sign_in(at, name, role)`: a user of that role in the users file, sign-in required (as beyond loopback),
    and the app's browser session holding the identity signing in gives; returns the users file."""
    from engine.store.users import UserBook

    book, added = UserBook(), []

    def sign_in(at: AppTest, name: str, role: Role) -> UserBook:
        book.add(name, role)
        added.append(name)
        monkeypatch.setenv("MEMWB_SIGN_IN", "1")
        at.session_state["_memwb_identity"] = Identity(name, role, "token", book.users()[name].stamp)
        return book
    yield sign_in
    for name in added:
        book.remove(name)


def test_a_viewer_cannot_decide_or_apply_even_with_crafted_events(signed_in):
    """The buttons are disabled for a viewer and a forged click on them changes nothing."""
    at, wb, pid, run_key = diagnose_past_update()
    signed_in(at, "vera", Role.VIEWER)
    at.run()
    assert not at.exception
    assert at.button(key="apply_run").disabled and at.button(key="run_diagnosis").disabled
    assert any("Signed in as vera (viewer)" in shown_text(i.value)[0] for i in at.info)
    seq = wb.engine.store.last_seq()
    at.radio(key=review_decisions.widget_key(run_key, pid)).set_value(review_decisions.ACCEPT).run()
    crafted_click(at, "apply_run")
    assert not at.exception
    assert wb.engine.store.last_seq() == seq and wb.engine.store.load_state().proposals[pid].status == Status.PENDING


def test_the_role_is_checked_where_the_action_is_done(signed_in):
    """A reviewer demoted to viewer while the page shows an enabled Apply button: the click reaches the callback,
    which refuses it (the users file is read again); a viewer's Show plan is refused the same way."""
    at, wb, pid, run_key = diagnose_past_update()
    book = signed_in(at, "rita", Role.REVIEWER)
    at.radio(key=review_decisions.widget_key(run_key, pid)).set_value(review_decisions.ACCEPT).run()
    assert not at.button(key="apply_run").disabled
    book.set_role("rita", Role.VIEWER)
    seq = wb.engine.store.last_seq()
    at.button(key="apply_run").click().run()
    assert not at.exception
    assert wb.engine.store.last_seq() == seq and wb.engine.store.load_state().proposals[pid].status == Status.PENDING
    assert any("rita is signed in as a viewer" in shown_text(e.value)[0] for e in at.error), \
        [e.value for e in at.error]
    plan = next(b for b in at.button if (b.key or "").startswith("plan:"))
    plan.click().run()
    assert wb.engine.store.last_seq() == seq
    assert any("deciding and applying proposals needs the reviewer role" in shown_text(e.value)[0] for e in at.error)


def test_a_viewer_cannot_undo_even_with_crafted_events(signed_in):
    at, wb, pid, run_key = diagnose_past_update()
    at.radio(key=review_decisions.widget_key(run_key, pid)).set_value(review_decisions.ACCEPT).run()
    at.button(key="apply_defer").click().run()               # applied (the rest deferred) by the local user
    run_id = wb.engine.state.last_committed_run().run_id
    signed_in(at, "vera", Role.VIEWER)
    at.session_state["confirm_undo"] = True
    at.session_state["consolidation_tab"] = "Run diff & undo"
    at.run()
    seq = wb.engine.store.last_seq()
    crafted_click(at, "undo_confirm")
    assert not at.exception
    assert wb.engine.store.last_seq() == seq and wb.engine.store.load_state().runs[run_id].status == "committed"

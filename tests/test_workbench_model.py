"""The workbench session model: stepping folds the log, edits behind the head branch, open runs block ingest."""
from __future__ import annotations

import pytest

from engine.engines import engine_schema, known_engines
from engine.interface import BaseEngine, RunError
from workbench.driver import demo_turn_after
from workbench.model import DEMO_PATH, Workbench


def test_stepping_folds_and_refuses_to_ingest_past_an_open_run(tmp_path):
    wb = Workbench.demo(workdir=tmp_path)
    wb.jump(12)
    seq = wb.engine.store.last_seq()
    wb.back()
    wb.back()
    assert wb.cursor == 10 and wb.head == 12 and wb.engine.store.last_seq() == seq   # the log is untouched
    assert len(wb.view.state.units) == 10
    wb.next()
    assert wb.cursor == 11 and wb.engine.store.last_seq() == seq                    # moved through the log
    split_turn = demo_turn_after("D3:4")               # the demo's intended Split is then in the buffer
    wb.jump(split_turn)
    assert wb.engine.propose(manual=True)
    with pytest.raises(RuntimeError, match="waiting for a decision"):
        wb.next()
    assert wb.head == split_turn
    with pytest.raises(RunError, match="nothing to apply"):
        wb.engine.apply({}, decided_by="test")          # undecided proposals are never closed silently
    wb.engine.apply({}, decided_by="test", defer_rest=True)
    wb.next()
    assert wb.head == split_turn + 1


def test_edit_behind_the_head_branches(tmp_path):
    wb = Workbench.demo(workdir=tmp_path)
    wb.jump(12)
    original = wb.db_path
    wb.jump(8)
    wb.ensure_head()
    assert wb.db_path != original and wb.branches == [original]
    assert wb.head == 8 and wb.at_head


@pytest.mark.parametrize("engine", known_engines())
def test_opens_any_registered_engine(tmp_path, engine):
    wb = Workbench.open(DEMO_PATH, None, engine=engine, workdir=tmp_path, schedule="every-3-sessions")
    assert wb.engine_name == engine and wb.schema is engine_schema(engine)
    assert isinstance(wb.engine, BaseEngine) and wb.engine.store.meta()["engine"] == engine
    assert wb.has_processes == bool(engine_schema(engine).processes)
    assert wb.schedule.kind == ("sessions" if wb.has_processes else "manual")   # no process: nothing to schedule
    wb.jump(5)
    assert wb.head == 5 and len(wb.view.state.nodes) >= 5
    wb.back()
    assert len(wb.view.state.nodes) >= 4 and wb.view.read_only
    wb.ensure_head()                                   # a branch reopens the same engine
    assert wb.engine_name == engine and wb.head == 4


def test_the_peer_holds_the_turns_up_to_the_cursor_and_is_cached(tmp_path):
    wb = Workbench.demo(workdir=tmp_path)
    assert wb.peer("naive") is None                   # nothing ingested yet
    wb.jump(7)
    peer = wb.peer(wb.default_peer())
    assert wb.default_peer() == "naive" and peer.name == "naive"
    assert peer.state.turn_ids == wb.engine.state.turn_ids
    assert wb.peer("naive") is peer
    assert peer.embedder is not wb.engine.embedder and peer.embedder.memory is wb.engine.embedder.memory
    assert wb.engine.embedder.cache is wb.engine.store            # the session's vectors stay in its database
    wb.back()
    assert wb.peer("naive").state.turn == 6


def test_a_baseline_session_compares_with_all_mem(tmp_path):
    wb = Workbench.demo(workdir=tmp_path, engine="naive")
    assert wb.default_peer() == "allmem"


def test_a_diagnosis_with_nothing_to_decide_closes_its_run(tmp_path):
    """A manual diagnosis that leaves nothing pending is committed at once, so it never blocks ingest."""
    wb = Workbench.demo(workdir=tmp_path)
    wb.jump(12)
    proposals = wb.engine.propose(manual=True)
    assert not [p for p in proposals if p.status == "pending"]
    run = list(wb.engine.state.runs.values())[-1]
    assert wb.engine.open_run() is None and run.status == "committed" and run.mode == "manual"
    wb.next()
    assert wb.head == 13

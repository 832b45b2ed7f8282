"""The workbench session model: stepping folds the log, edits behind the head branch, open runs block ingest."""
from __future__ import annotations

import pytest

from engine.engines import engine_schema
from engine.runtime.engine import BaseEngine
from engine.runtime.errors import RunError
from workbench.driver import demo_turn_after
from workbench.model import DEMO_PATH, Workbench
from tests.conftest import engines_under_test


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


@pytest.mark.parametrize("engine", engines_under_test())
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


class _Interrupt(BaseException):
    """Stands in for Streamlit stopping a run (its stop and rerun signals are BaseExceptions too)."""


def test_a_jump_reports_progress_and_an_interruption_keeps_every_completed_turn(tmp_path):
    """A long jump embeds its turn texts first, then steps; stopped between steps (what a Cancel click does to
    the running page) the cursor is on the last completed turn, the log holds exactly those turns, and the jump
    goes on from there."""
    wb = Workbench.demo(workdir=tmp_path, schedule="every-3-sessions")
    seen, prefetched = [], []
    prefetch = wb.engine.prefetch
    wb.engine.prefetch = lambda turns: (prefetched.extend(t.id for t in turns), prefetch(turns))

    def stop_after_seven(progress):
        seen.append(progress)
        if progress.phase == "ingesting" and progress.done == 1:
            assert sorted(prefetched) == sorted(t.id for t in wb.conversation.turns[:20])   # all, before any step
        if progress.phase == "ingesting" and progress.done == 7:
            raise _Interrupt

    with pytest.raises(_Interrupt):
        wb.jump(20, stop_after_seven)
    phases = [p.phase for p in seen]
    assert phases[0] == "embedding" and phases.index("ingesting") == phases.count("embedding")
    assert seen[phases.count("embedding") - 1].done == seen[0].total == 20        # every text, before stepping
    assert [p.done for p in seen if p.phase == "ingesting"] == list(range(1, 8))
    assert all(p.target == 20 and p.total == 20 for p in seen)
    assert wb.cursor == wb.head == 7 and wb.at_head
    stored = [op.payload["turn_id"] for op in wb.engine.store.ops(kinds=["turn_ingested"])]
    assert stored == [t.id for t in wb.conversation.turns[:7]]
    wb.jump(20)
    assert wb.cursor == wb.head == 20
    assert [op.payload["turn_id"] for op in wb.engine.store.ops(kinds=["turn_ingested"])] == \
        [t.id for t in wb.conversation.turns[:20]]


def test_session_targets_of_a_jump(tmp_path):
    wb = Workbench.demo(workdir=tmp_path)
    assert wb.turns_to_ingest(wb.session_end()) == wb.session_end() == \
        sum(t.session == wb.conversation.turns[0].session for t in wb.conversation.turns)
    second = wb.conversation.sessions[1]
    assert wb.conversation.turns[wb.session_start(second) - 1].session == second
    wb.jump(3)
    assert wb.turns_to_ingest(2) == 0 and wb.turns_to_ingest(10**6) == wb.total_turns - 3


def test_cancel_from_another_thread_stops_the_jump_after_its_step(tmp_path):
    """What the Cancel button does while the page run that is jumping still goes on in its own thread: `cancel`
    returns once the jump has stopped, so the cursor it leaves is the last committed turn, and it stays."""
    import threading

    wb = Workbench.demo(workdir=tmp_path)
    reached, outcome = threading.Event(), []

    def run():
        try:
            wb.jump(60, lambda p: reached.set() if p.phase == "ingesting" and p.done >= 3 else None)
            outcome.append("finished")
        except Exception as exc:          # noqa: BLE001 - the outcome is what the test checks
            outcome.append(exc)

    worker = threading.Thread(target=run)
    worker.start()
    assert reached.wait(120)
    wb.cancel()
    stopped = wb.cursor
    worker.join(60)
    from workbench.model import JumpCancelled
    assert isinstance(outcome[0], JumpCancelled)
    assert 3 <= stopped < 60 and wb.cursor == wb.head == stopped
    assert len(list(wb.engine.store.ops(kinds=["turn_ingested"]))) == stopped
    wb.jump(stopped + 2)                     # the next jump is not cancelled by the earlier request
    assert wb.cursor == stopped + 2


def test_a_peer_build_reports_its_progress(tmp_path):
    """The side-by-side peer is built with progress: every turn text embedded in batches, then every turn
    ingested; a second call at the same cursor is cached and reports nothing."""
    wb = Workbench.demo(workdir=tmp_path)
    wb.jump(40)
    seen = []
    assert not wb.has_peer("naive")
    peer = wb.peer("naive", seen.append)
    assert wb.has_peer("naive") and peer.state.turn == 40
    embedding = [p.done for p in seen if p.phase == "embedding"]
    ingesting = [p.done for p in seen if p.phase == "ingesting"]
    assert embedding == [40] and ingesting == list(range(1, 41))      # one batch of 64 holds the 40 texts
    assert [p.phase for p in seen] == ["embedding"] + ["ingesting"] * 40
    seen.clear()
    assert wb.peer("naive", seen.append) is peer and seen == []

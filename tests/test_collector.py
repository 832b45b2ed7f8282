"""The collector's pace during batch work (engine.runtime.collector): a replay and a benchmark task run with the
youngest generation collected every `YOUNG_THRESHOLD` allocations, and the thresholds found are put back after,
also when holders nest or overlap in threads."""
from __future__ import annotations

import gc
import threading
from pathlib import Path

import pytest

from engine.bench.sweep import run_tasks
from engine.loaders import load_conversation
from engine.runtime.collector import YOUNG_THRESHOLD, batch_pace
from engine.runtime.replay import Schedule, replay
from engine.session import open_session

DEMO = Path(__file__).resolve().parents[1] / "datasets" / "demo" / "demo.jsonl"


@pytest.fixture
def default_pace():
    before = gc.get_threshold()
    gc.set_threshold(700, 10, 10)
    yield
    gc.set_threshold(*before)


def test_a_replay_runs_at_the_batch_pace_and_puts_the_thresholds_back(tmp_path, default_pace):
    engine = open_session(tmp_path / "naive.sqlite", engine="naive")
    seen = []
    summary = replay(engine, load_conversation(DEMO), Schedule.parse("every-3-sessions"),
                     progress=lambda done, total: seen.append(gc.get_threshold()))
    assert summary.ingested == len(seen) > 0 and engine.state.turn == len(seen)
    assert set(seen) == {(YOUNG_THRESHOLD, 10, 10)}
    assert gc.get_threshold() == (700, 10, 10)


def test_a_benchmark_task_runs_at_the_batch_pace_even_when_it_fails(default_pace):
    def run(task, embedder):
        if task == "fails":
            raise RuntimeError("this task fails")
        return {"threshold": gc.get_threshold()}

    ok, failed = run_tasks(["runs", "fails"], run)
    assert ok.result == {"threshold": (YOUNG_THRESHOLD, 10, 10)}
    assert failed.error is not None and failed.error.message == "this task fails"
    assert gc.get_threshold() == (700, 10, 10)


def test_nested_and_overlapping_holders_put_back_the_thresholds_once_the_last_leaves(default_pace):
    inside, leave = threading.Event(), threading.Event()

    def hold():
        with batch_pace():
            inside.set()
            leave.wait(10)

    other = threading.Thread(target=hold)
    with batch_pace():
        other.start()
        inside.wait(10)
        with batch_pace():
            assert gc.get_threshold()[0] == YOUNG_THRESHOLD
        assert gc.get_threshold()[0] == YOUNG_THRESHOLD
    assert gc.get_threshold()[0] == YOUNG_THRESHOLD          # the thread still holds it
    leave.set()
    other.join(10)
    assert gc.get_threshold() == (700, 10, 10)


def test_a_larger_young_generation_in_force_is_kept(default_pace):
    gc.set_threshold(50_000, 10, 10)
    with batch_pace():
        assert gc.get_threshold() == (50_000, 10, 10)
    assert gc.get_threshold() == (50_000, 10, 10)

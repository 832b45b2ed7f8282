"""Sweeps on Ray (engine.bench.sweep): a local Ray with 2 workers gives the serial run's results, in input order,
with one embedder per worker, and a failed task is reported with its inputs while the others' are kept.

The task is real work: replay the demo conversation into the engine it names (a fresh SQLite file), then
retrieve its 14 questions. The serial and the Ray run each use their own workspace, so neither reads the
other's cached vectors. One Ray run (started and shut down by `run_tasks`) serves every test of the module.
"""
from __future__ import annotations

import dataclasses
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from engine.bench.sweep import TaskOutcome, run_tasks, worker_env
from engine.llm.embedder import Embedder
from engine.loaders import load_conversation
from engine.runtime.replay import Schedule, replay
from engine.session import open_session
from tests.conftest import LOCOMO, needs_data

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "datasets" / "demo" / "demo.jsonl"


@dataclass(frozen=True)
class ReplayTask:
    """Replay `conversation` into a new `engine` memory under `folder` and retrieve its questions.

    `wait_for` / `signal` order the Ray run deterministically: a task waits for another's signal file before
    it starts, so it finishes after it whatever the machine's load (they never change the result)."""

    engine: str
    folder: str
    conversation: str = str(DEMO)
    k: int = 5
    wait_for: str | None = None
    signal: str | None = None

    @property
    def label(self) -> str:
        return f"demo/{self.engine}"


def replay_and_retrieve(task: ReplayTask, embedder: Embedder) -> dict:
    if task.wait_for:
        deadline = time.monotonic() + 600
        while not os.path.exists(task.wait_for):
            if time.monotonic() > deadline:
                raise TimeoutError(f"{task.wait_for} never appeared")
            time.sleep(0.05)
    conversation = load_conversation(task.conversation)
    engine = open_session(Path(task.folder) / f"{task.engine}.sqlite", engine=task.engine, embedder=embedder)
    summary = replay(engine, conversation, Schedule.parse("every-3-sessions"))
    ranked = {q.id: engine.retrieve(q.question, k=task.k).source_ids for q in conversation.questions}
    if task.signal:
        Path(task.signal).touch()
    return {"units": summary.units, "visible": summary.visible, "ranked": ranked}


ENGINES = ("allmem", "no-such-engine", "naive", "hybrid")       # the second one fails


def tasks_in(folder: Path, ordered: bool) -> list[ReplayTask]:
    folder.mkdir(parents=True)
    tasks = [ReplayTask(name, str(folder)) for name in ENGINES]
    if ordered:      # allmem (first) waits for naive (third): on 2 workers it finishes after tasks sent later
        signal = str(folder / "naive.done")
        tasks[0] = dataclasses.replace(tasks[0], wait_for=signal)
        tasks[2] = dataclasses.replace(tasks[2], signal=signal)
    return tasks


@dataclass
class Run:
    tasks: list[ReplayTask]
    outcomes: list[TaskOutcome]
    progress: list[tuple[int, int, str]]
    ray_running_after: bool = False


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Run]:
    import ray

    made: dict[str, Run] = {}
    with pytest.MonkeyPatch.context() as mp:
        for mode in ("serial", "ray"):
            base = tmp_path_factory.mktemp(mode)
            mp.setenv("MEMWB_WORKSPACE", str(base / "workspace"))      # no vectors shared between the two runs
            tasks = tasks_in(base / "memories", ordered=mode == "ray")
            heard: list[tuple[int, int, str]] = []
            outcomes = run_tasks(tasks, replay_and_retrieve, ray="local" if mode == "ray" else None, workers=2,
                                 progress=lambda done, total, label: heard.append((done, total, label)))
            made[mode] = Run(tasks, outcomes, heard, ray.is_initialized())
    return made


@pytest.mark.slow
def test_the_ray_run_gives_the_serial_runs_results(runs):
    serial, on_ray = runs["serial"].outcomes, runs["ray"].outcomes
    assert [o.result for o in on_ray] == [o.result for o in serial]
    assert all(o.ok for i, o in enumerate(serial) if i != 1)
    assert all(len(o.result["ranked"]) == 14 and o.result["units"] > 0 for i, o in enumerate(serial) if i != 1)
    assert serial[0].result["ranked"] != serial[2].result["ranked"]     # the engines really differ
    assert [(o.error.type, o.error.message) for o in on_ray if o.error] == \
        [(o.error.type, o.error.message) for o in serial if o.error]


@pytest.mark.slow
def test_outcomes_come_back_in_input_order_not_finish_order(runs):
    run = runs["ray"]
    assert [o.task for o in run.outcomes] == run.tasks
    assert [o.result is not None for o in run.outcomes] == [True, False, True, True]
    finished = [label for _, _, label in run.progress]
    assert sorted(finished) == sorted(t.label for t in run.tasks)
    assert finished.index("demo/allmem") > finished.index("demo/naive")       # it waited for naive's signal
    assert [(done, total) for done, total, _ in run.progress] == [(i, 4) for i in range(1, 5)]


@pytest.mark.slow
def test_a_failed_task_is_reported_with_its_inputs_and_the_others_are_kept(runs):
    for mode, run in runs.items():
        failed = run.outcomes[1]
        assert failed.result is None and not failed.ok, mode
        assert failed.error.type == "SessionError"
        assert "unknown engine 'no-such-engine'" in failed.error.message
        assert failed.error.inputs == dataclasses.asdict(run.tasks[1])
        assert "open_session" in failed.error.traceback
        assert failed.error.to_dict()["inputs"]["engine"] == "no-such-engine"
        assert all(o.ok for i, o in enumerate(run.outcomes) if i != 1), mode


@pytest.mark.slow
def test_each_ray_worker_loads_the_embedder_once_for_all_its_tasks(runs):
    workers = [o.worker for o in runs["ray"].outcomes]
    pids = {w.pid for w in workers}
    assert os.getpid() not in pids and 1 <= len(pids) <= 2
    for pid in pids:
        mine = [w for w in workers if w.pid == pid]
        assert len({w.embedder for w in mine}) == 1          # the same Embedder object for every task
        assert all(w.model_loads == 1 for w in mine)
    assert max(sum(w.pid == pid for w in workers) for pid in pids) >= 2    # a worker did run several tasks
    serial = {(o.worker.pid, o.worker.embedder) for o in runs["serial"].outcomes}
    assert serial == {(os.getpid(), runs["serial"].outcomes[0].worker.embedder)}


@pytest.mark.slow
def test_ray_is_shut_down_after_a_run_that_started_it(runs):
    assert runs["ray"].ray_running_after is False


def test_workers_get_the_offline_hub_the_workspace_and_the_drivers_code(monkeypatch, tmp_path):
    monkeypatch.setenv("MEMWB_WORKSPACE", str(tmp_path / "ws"))
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setenv("PYTHONPATH", "/elsewhere")
    env = worker_env(replay_and_retrieve)
    assert env["HF_HUB_OFFLINE"] == "1" and env["TRANSFORMERS_OFFLINE"] == "1"
    assert env["MEMWB_WORKSPACE"] == str(tmp_path / "ws")
    monkeypatch.delenv("MEMWB_ENCODER_THREADS", raising=False)
    assert worker_env()["MEMWB_ENCODER_THREADS"] == "1"          # one CPU a worker, one encoder thread
    monkeypatch.setenv("MEMWB_ENCODER_THREADS", "3")
    assert worker_env()["MEMWB_ENCODER_THREADS"] == "3"          # unless the driver says otherwise
    # this checkout's engine package (not another install of it) and this test module, ahead of the rest
    assert env["PYTHONPATH"].split(os.pathsep) == [str(ROOT), str(Path(__file__).resolve().parent), "/elsewhere"]


def halve(task: int, embedder: Embedder) -> dict:
    if task % 2:
        raise ValueError(f"{task} is odd")
    return {"half": task // 2}


def test_a_serial_run_reports_each_task_and_keeps_going_after_a_failure():
    heard = []
    outcomes = run_tasks([4, 3, 8], halve, progress=lambda *args: heard.append(args))
    assert [o.result for o in outcomes] == [{"half": 2}, None, {"half": 4}]
    error = outcomes[1].error
    assert (error.type, error.message, error.inputs) == ("ValueError", "3 is odd", {"task": "3"})
    assert 'raise ValueError(f"{task} is odd")' in error.traceback
    assert heard == [(1, 3, "4"), (2, 3, "3"), (3, 3, "8")]
    with pytest.raises(ValueError, match="workers must be at least 1"):
        run_tasks([4], halve, ray="local", workers=0)


@pytest.mark.slow
def test_memwb_bench_on_ray_gives_the_serial_figures_on_a_dev_conversation(tmp_path, monkeypatch):
    """The real benchmark (static protocol, All-Mem, naive and hybrid RAG) on a LoCoMo dev conversation: a local
    Ray with 2 workers gives, over its three tasks, every figure and per-question record of the serial
    run. The serial run fills the workspace's embedding cache, which the Ray workers then read. (All eight, 24
    tasks, are compared by `scripts/bench_sweep.py`; the suite runs the smallest to stay well inside CI's time.)"""
    from engine.bench.config import BenchConfig
    from engine.bench.result import figures
    from engine.bench.runner import run_benchmark
    from engine.store.workspace import ENV

    monkeypatch.setenv(ENV, str(tmp_path / "workspace"))
    runs = {}
    for mode, ray in (("serial", None), ("ray", "local")):
        config = BenchConfig(dataset="locomo", source=str(needs_data(LOCOMO)), engines=("allmem", "naive", "hybrid"),
                             protocol="static", out=str(tmp_path / mode), ray=ray,
                             conversations=("conv-30",))
        path = run_benchmark(config)
        runs[mode] = json.loads(path.read_text(encoding="utf-8"))
    serial, on_ray = runs["serial"], runs["ray"]
    assert len(serial["conversations"]) == 1 and len(serial["tasks"]) == 3
    assert all(t["error"] is None for run in runs.values() for t in run["tasks"])
    asked = sum(d["questions"] for d in serial["rounds_detail"] if d["system"] == "naive")
    assert asked > 80 and len(serial["questions"]) == 3 * asked
    assert figures(serial) == figures(on_ray)

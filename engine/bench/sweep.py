"""Run a sweep's tasks (conversations x systems x settings) serially or on Ray, with one embedder per worker.

`run_tasks(tasks, run)` calls `run(task, embedder)` for every task and returns one `TaskOutcome` per task in
the input order. Serially (`ray=None`) one in-process Embedder serves every task. On Ray (`ray="local"` for a
local Ray started here, or a cluster address) each worker is an actor that loads the embedder once and runs
task after task, so the ~5 s model load is paid once per worker, not per task. A task that raises is
reported with its inputs and the traceback; the other tasks' results are kept.

Workers see the driver's environment that decides results: offline Hugging Face, the workspace (its shared
embedding cache is safe for concurrent writers), the embedding model, and the code the driver runs (its
`engine` package and the module of `run`). On a cluster those paths must exist on every node.
"""
from __future__ import annotations

import dataclasses
import os
import sys
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

from engine.llm.embedder import Embedder, model_loads
from engine.runtime.collector import batch_pace
from engine.store.workspace import ENV as WORKSPACE_ENV
from engine.store.workspace import workspace_dir

T = TypeVar("T")
Run = Callable[[T, Embedder], dict]
Progress = Callable[[int, int, str], None]

LOCAL = "local"
OBJECT_STORE_BYTES = 128 * 1024 * 1024     # results are small dicts; Ray's default (30% of RAM) is not needed
PASSED_ENV = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "MEMWB_EMBED_MODEL", "TOKENIZERS_PARALLELISM", "MEMWB_ENCODER",
              "MEMWB_ENCODER_THREADS")


@dataclass(frozen=True)
class TaskError:
    """Why a task failed, with what it was given, so it can be rerun alone."""

    type: str
    message: str
    traceback: str
    inputs: dict

    def to_dict(self) -> dict:
        """The `error` of a task in the result file (docs/BENCHMARK_FORMAT.md), traceback included."""
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class WorkerInfo:
    """Which process ran a task and with which embedder: a worker keeps one embedder for all its tasks."""

    pid: int
    embedder: int            # id() of the Embedder in that process
    model_loads: int         # models that process had loaded when the task ended


@dataclass(frozen=True)
class TaskOutcome(Generic[T]):
    task: T
    result: dict | None
    error: TaskError | None
    seconds: float
    worker: WorkerInfo | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


def task_inputs(task: Any) -> dict:
    """A task's inputs as a plain dict (a dataclass's fields; otherwise its repr)."""
    if dataclasses.is_dataclass(task) and not isinstance(task, type):
        return dataclasses.asdict(task)
    return {"task": repr(task)}


def task_label(task: Any) -> str:
    """What progress shows for a task: its `label` when it has one."""
    return str(getattr(task, "label", None) or task)


def _run_one(run: Run, task: T, embedder: Embedder) -> TaskOutcome[T]:
    """Run one task, turning an exception into a `TaskError`; the same code serially and in a worker."""
    started = time.perf_counter()
    result, error = None, None
    try:
        with batch_pace():
            result = run(task, embedder)
    except Exception as exc:        # a failed task is reported; the sweep goes on
        error = TaskError(type(exc).__name__, str(exc), traceback.format_exc(), task_inputs(task))
    worker = WorkerInfo(os.getpid(), id(embedder), model_loads())
    return TaskOutcome(task, result, error, time.perf_counter() - started, worker)


def run_tasks(tasks: Sequence[T], run: Run, *, ray: str | None = None, workers: int = 2,
              progress: Progress | None = None) -> list[TaskOutcome[T]]:
    """Run `run(task, embedder)` for every task; outcomes in the order of `tasks`, whatever order they finish in.

    `ray`: None runs serially in this process; "local" starts a local Ray with `workers` CPUs (or uses the one
    already started in this process); anything else is the address of a Ray cluster. `workbench.replay.progress(done, total,
    label)` hears of each finished task."""
    tasks = list(tasks)
    if workers < 1:
        raise ValueError(f"workers must be at least 1, not {workers}")
    if ray is None:
        return _run_serial(tasks, run, progress)
    with ray_session(ray, workers):
        return _run_on_ray(tasks, run, workers, progress)


def _run_serial(tasks: list[T], run: Run, progress: Progress | None) -> list[TaskOutcome[T]]:
    embedder = Embedder()
    outcomes = []
    for task in tasks:
        outcomes.append(_run_one(run, task, embedder))
        if progress:
            progress(len(outcomes), len(tasks), task_label(task))
    return outcomes


@contextmanager
def ray_session(address: str, workers: int = 2) -> Iterator[bool]:
    """Connect to Ray for a sweep: start a local one (`workers` CPUs, quiet, no dashboard, no usage reporting)
    or join the cluster at `address`; a Ray already initialised in this process is used as it is. Yields
    whether it started Ray, and shuts down only what it started."""
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")        # never report usage over the network
    import ray

    if ray.is_initialized():
        yield False
        return
    options = dict(logging_level="ERROR", log_to_driver=False, include_dashboard=False)
    if address == LOCAL:
        ray.init(num_cpus=workers, object_store_memory=OBJECT_STORE_BYTES, **options)
    else:
        ray.init(address=address, **options)
    try:
        yield True
    finally:
        ray.shutdown()


def worker_env(run: Run | None = None) -> dict[str, str]:
    """The environment a worker needs to give the driver's results: offline model hub, the same workspace and
    model, and the same code on its import path (the driver's `engine` package and `run`'s module)."""
    env = {name: os.environ[name] for name in PASSED_ENV if name in os.environ}
    env.setdefault("HF_HUB_OFFLINE", "1")
    env.setdefault("TRANSFORMERS_OFFLINE", "1")
    # a worker holds one CPU: an encoder with more threads than that only contends with the other workers
    # (dev-8, four engines, --ray on 2 cores: 273 s with 2 threads a worker, 249 s with 1)
    env.setdefault("MEMWB_ENCODER_THREADS", "1")
    env[WORKSPACE_ENV] = str(workspace_dir())
    roots = [_import_root(sys.modules["engine"])]
    if run is not None and getattr(run, "__module__", None) in sys.modules:
        roots.append(_import_root(sys.modules[run.__module__]))
    existing = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(str(r) for r in roots if r) | dict.fromkeys(existing))
    return env


def _import_root(module) -> Path | None:
    """The sys.path entry `module` was imported from (None for __main__ and built-ins: pickled by value)."""
    file = getattr(module, "__file__", None)
    if not file or module.__name__ == "__main__":
        return None
    path = Path(file).resolve()
    depth = module.__name__.count(".") + (1 if path.name == "__init__.py" else 0)
    return path.parents[depth]


class _Worker:
    """A Ray actor's body: one Embedder, loaded at start, for every task sent to it."""

    def __init__(self):
        self.embedder = Embedder()
        self.embedder.warm()

    def run(self, run: Run, task: T) -> TaskOutcome[T]:
        return _run_one(run, task, self.embedder)


def _run_on_ray(tasks: list[T], run: Run, workers: int, progress: Progress | None) -> list[TaskOutcome[T]]:
    """Keep every worker busy: send the next task to whichever worker finishes first; a worker that dies is
    replaced and its task reported as failed."""
    import ray
    from ray.exceptions import RayError

    actor_cls = ray.remote(num_cpus=1)(_Worker).options(runtime_env={"env_vars": worker_env(run)})
    run_ref = ray.put(run)
    outcomes: list[TaskOutcome[T] | None] = [None] * len(tasks)
    pending: dict[Any, tuple[int, Any]] = {}          # object ref -> (task index, actor)
    queue = list(range(len(tasks)))[::-1]
    idle = [actor_cls.remote() for _ in range(min(workers, len(tasks)))]
    done = 0
    try:
        while queue or pending:
            while queue and idle:
                index, actor = queue.pop(), idle.pop()
                pending[actor.run.remote(run_ref, tasks[index])] = (index, actor)
            ready, _ = ray.wait(list(pending), num_returns=1)
            index, actor = pending.pop(ready[0])
            try:
                outcomes[index] = ray.get(ready[0])
                idle.append(actor)
            except RayError as exc:                   # the worker died or the task could not reach it
                outcomes[index] = TaskOutcome(tasks[index], None, TaskError(
                    type(exc).__name__, str(exc), "".join(traceback.format_exception(exc)),
                    task_inputs(tasks[index])), 0.0)
                ray.kill(actor)
                idle.append(actor_cls.remote())
            done += 1
            if progress:
                progress(done, len(tasks), task_label(tasks[index]))
    finally:
        for actor in idle + [a for _, a in pending.values()]:
            ray.kill(actor)
    return outcomes          # type: ignore[return-value]   (every slot is filled once the loop ends)

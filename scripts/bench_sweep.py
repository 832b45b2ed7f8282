"""Serial vs Ray wall time of one sweep (conversations x engines), and whether both give the same results.

Each mode starts from a fresh workspace (no cached vectors from the other) and fresh memory databases. The
Ray mode also reports how long Ray took to start and the memory its processes and workers held at peak.
Prints the figures and writes them to out/bench_sweep.json.

    python scripts/bench_sweep.py --demo [--data PATH] [--conversations conv-26 ...] [--engines allmem,naive,hybrid]
                                  [--workers 2] [--ray local|ADDRESS] [--modes serial,ray]
    python scripts/bench_sweep.py --task engine.bench.tasks:run_task --tasks engine.bench.tasks:sweep_tasks ...

`--task MODULE:FUNCTION` is the run function `(task, embedder) -> dict`; `--tasks MODULE:FUNCTION` builds the
task list as `factory(data=PATH, conversations=[ids] or None, engines=[names], folder=PATH)`. `--demo` uses
this script's own task: replay one conversation into one engine and retrieve its questions of categories 1-4
(static protocol), returning R@K, N@K and the ranked source ids.
"""
from __future__ import annotations

import argparse
import importlib
import os
import statistics
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from results import write_json  # noqa: E402
from engine.bench.sweep import ray_session, run_tasks  # noqa: E402
from engine.embedder import Embedder  # noqa: E402
from engine.loaders import load_conversation, load_conversations  # noqa: E402
from engine.metrics import ndcg_at_k, recall_at_k  # noqa: E402
from engine.replay import Schedule, replay  # noqa: E402
from engine.session import open_session  # noqa: E402

DEFAULT_DATA = ROOT.parent / "shared" / "data" / "locomo" / "locomo-dev8.json"


@dataclass(frozen=True)
class StaticRecallTask:
    data: str
    conversation: str
    engine: str
    folder: str
    k: int = 5
    schedule: str = "every-3-sessions"

    @property
    def label(self) -> str:
        return f"{self.conversation}/{self.engine}"


def static_recall(task: StaticRecallTask, embedder: Embedder) -> dict:
    """Replay the conversation into a new memory of the engine, then ask its questions of categories 1-4."""
    conversation = load_conversation(task.data, task.conversation)
    engine = open_session(Path(task.folder) / f"{task.conversation}-{task.engine}.sqlite", engine=task.engine,
                          embedder=embedder)
    replay(engine, conversation, Schedule.parse(task.schedule))
    questions = [q for q in conversation.questions if q.category in (1, 2, 3, 4) and q.evidence]
    ranked = {q.id: engine.retrieve(q.question, k=task.k).source_ids for q in questions}
    return {"questions": len(questions), "turns": len(conversation.turns),
            f"r@{task.k}": statistics.mean(recall_at_k(ranked[q.id], q.evidence, task.k) for q in questions),
            f"n@{task.k}": statistics.mean(ndcg_at_k(ranked[q.id], q.evidence, task.k) for q in questions),
            "ranked": ranked}


def static_recall_tasks(data: str, conversations: list[str] | None, engines: list[str], folder: Path,
                        k: int = 5) -> list[StaticRecallTask]:
    ids = conversations or [c.id for c in load_conversations(data)]
    return [StaticRecallTask(str(data), cid, name, str(folder), k) for cid in ids for name in engines]


def imported(path: str):
    module, _, attr = path.partition(":")
    if not attr:
        raise SystemExit(f"{path!r}: expected MODULE:FUNCTION, e.g. engine.bench.tasks:run_task")
    try:
        return getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as exc:
        raise SystemExit(f"cannot import {path}: {exc} (use --demo for this script's own task)") from None


class PeakMemory:
    """Peak resident memory of this process and all its descendants (Ray's daemons and workers), sampled."""

    def __init__(self, every: float = 0.5):
        import psutil

        self.psutil, self.every, self.peak, self.peak_children = psutil, every, 0, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        me = self.psutil.Process()
        while not self._stop.is_set():
            total = children = 0
            for proc in [me, *me.children(recursive=True)]:
                try:
                    rss = proc.memory_info().rss
                except self.psutil.Error:
                    continue
                total += rss
                children += rss if proc.pid != me.pid else 0
            self.peak, self.peak_children = max(self.peak, total), max(self.peak_children, children)
            self._stop.wait(self.every)

    def __enter__(self) -> "PeakMemory":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


def run_mode(mode: str, args, run, make_tasks, base: Path) -> tuple[dict, list]:
    workspace = base / mode / "workspace"
    os.environ["MEMWB_WORKSPACE"] = str(workspace)          # a cold cache for each mode
    tasks = make_tasks(data=args.data, conversations=args.conversations, engines=args.engines,
                       folder=base / mode / "memories")
    (base / mode / "memories").mkdir(parents=True, exist_ok=True)

    def progress(done: int, total: int, label: str) -> None:
        print(f"  [{mode}] {done}/{total} {label} ({time.perf_counter() - started:.0f}s)", flush=True)

    figures: dict = {}
    with PeakMemory() as memory:
        started = time.perf_counter()
        if mode == "serial":
            outcomes = run_tasks(tasks, run, progress=progress)
        else:
            with ray_session(args.ray, args.workers):
                ready = time.perf_counter()
                outcomes = run_tasks(tasks, run, ray=args.ray, workers=args.workers, progress=progress)
                finished = time.perf_counter()
            figures.update(ray_start_s=round(ready - started, 1), ray_stop_s=round(time.perf_counter() - finished, 1))
        wall = time.perf_counter() - started
    figures.update(wall_s=round(wall, 1), task_s=round(sum(o.seconds for o in outcomes), 1),
                   failed=[o.error.to_dict() for o in outcomes if o.error],
                   peak_rss_mb=round(memory.peak / 2**20), peak_rss_children_mb=round(memory.peak_children / 2**20),
                   workers=sorted({o.worker.pid for o in outcomes if o.worker}))
    return figures, outcomes


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--demo", action="store_true", help="this script's own static-recall task over --data")
    ap.add_argument("--task", default="engine.bench.tasks:run_task", help="MODULE:FUNCTION, run(task, embedder)")
    ap.add_argument("--tasks", default="engine.bench.tasks:sweep_tasks", help="MODULE:FUNCTION building the tasks")
    ap.add_argument("--data", default=str(DEFAULT_DATA))
    ap.add_argument("--conversations", nargs="*")
    ap.add_argument("--engines", default="allmem,naive,hybrid")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--ray", default="local", help="'local' or the address of a Ray cluster")
    ap.add_argument("--modes", default="serial,ray")
    ap.add_argument("--out", default=str(ROOT / "out" / "bench_sweep.json"))
    args = ap.parse_args()
    args.engines = [e.strip() for e in args.engines.split(",") if e.strip()]
    run, make_tasks = (static_recall, static_recall_tasks) if args.demo else (imported(args.task), imported(args.tasks))
    modes = [m.strip() for m in args.modes.split(",")]
    base = Path(tempfile.mkdtemp(prefix="memwb-sweep-"))
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    figures, results = {}, {}
    for mode in modes:
        print(f"{mode}:", flush=True)
        figures[mode], outcomes = run_mode(mode, args, run, make_tasks, base)
        results[mode] = [o.result for o in outcomes]
        labels = [str(getattr(o.task, "label", o.task)) for o in outcomes]
        print(f"{mode}: {figures[mode]['wall_s']}s wall for {len(outcomes)} tasks "
              f"({figures[mode]['task_s']}s in tasks), {len(figures[mode]['failed'])} failed, "
              f"peak RSS {figures[mode]['peak_rss_mb']} MB", flush=True)
    out = {"data": args.data, "engines": args.engines, "workers": args.workers, "address": args.ray,
           "cpus": os.cpu_count(), "tasks": labels, "task": "demo static recall" if args.demo else args.task,
           **figures}
    if "serial" in results and "ray" in results:
        same = [a == b for a, b in zip(results["serial"], results["ray"])]
        out["identical"] = all(same)
        out["differing"] = [label for label, ok in zip(labels, same) if not ok]
        out["speedup"] = round(figures["serial"]["wall_s"] / figures["ray"]["wall_s"], 2)
        print(f"serial {figures['serial']['wall_s']}s vs Ray ({args.workers} workers) {figures['ray']['wall_s']}s "
              f"(Ray start {figures['ray']['ray_start_s']}s): speedup x{out['speedup']}; results identical: "
              f"{out['identical']}")
    if args.demo:
        k_keys = [key for key in (results.get("serial") or results[modes[0]])[0] if key[:2] in ("r@", "n@")]
        out["figures"] = {r_label: {key: round(r[key], 4) for key in k_keys}
                          for r_label, r in zip(labels, results.get("serial") or results[modes[0]]) if r}
    write_json(args.out, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())

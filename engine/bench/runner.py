"""Run a benchmark: every system on every conversation of a dataset, pooled into one result file.

`run_benchmark(BenchConfig(...))` checks the input (dataset, file, engines, ablations) before anything
runs (`engine.bench.config`), builds one `BenchTask` per (conversation, system) — a system that differs from
another only in retrieval-only ablations rides on that one's replay (`engine.bench.tasks`) — runs them, and writes
`result.json` (docs/BENCHMARK_FORMAT.md, pooled by `engine.bench.result`) and `summary.md` into the output
folder, keeping each task's session database under `sessions/` so a miss can be reopened. `memwb bench`
and the Benchmark page both call it.
"""
from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from engine.bench.config import BenchConfig, System, check, system_schedule
from engine.bench.datasets import load_source
from engine.bench.result import assemble
from engine.bench.summary import summary_markdown
from engine.bench.sweep import TaskOutcome, run_tasks
from engine.bench.tasks import BenchTask, Rider, run_task
from engine.engines import engine_schema, known_engines
from engine.eval import reproduction
from engine.eval.answer import DEFAULT_CONTEXT_TOKENS

REPRODUCTION_FILE = "reproduction.json"


@dataclass(frozen=True)
class BenchProgress:
    done: int
    total: int
    label: str


def default_out() -> Path:
    from engine.store.workspace import workspace_dir

    stamp = datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S")
    base = workspace_dir() / "benchmarks"
    out, n = base / stamp, 1
    while out.exists():
        n += 1
        out = base / f"{stamp}-{n}"
    return out


def run_benchmark(config: BenchConfig, progress: Callable[[BenchProgress], None] | None = None) -> Path:
    """Run `config` and write result.json and summary.md; returns the result.json path."""
    spec, found, systems = check(config)
    out = Path(config.out).resolve() if config.out else default_out()     # absolute: a worker's cwd may differ
    sessions = out / "sessions"
    sessions.mkdir(parents=True, exist_ok=True)
    ks = tuple(config.ks)
    riders = riders_by_host(systems)
    # system by system: two workers then replay two conversations at once, never one conversation twice, so
    # whatever the engines embed alike is encoded once and read from the shared cache after; the longest
    # conversations first, so the last task to finish is a short one
    longest_first = sorted(found, key=lambda src: -len(load_source(src).turns))
    tasks = [BenchTask(dataset=spec.name, source=src.path, overlay=src.overlay, conversation=src.conversation,
                       system=s.label,
                       engine=s.engine, settings=s.settings, ablations=s.ablations, protocol=config.protocol,
                       rounds=config.rounds, ks=ks, schedule=system_schedule(config, spec, s.engine),
                       workdir=str(sessions), answer=config.answer, llm=config.llm,
                       answer_budget=config.answer_budget or DEFAULT_CONTEXT_TOKENS,
                       riders=tuple(Rider(r.label, r.settings, r.ablations) for r in riders.get(s.label, ())))
             for s in systems if s.label in riders for src in longest_first]
    if progress:
        progress(BenchProgress(0, len(tasks), "starting"))
    outcomes = run_tasks(tasks, run_task, ray=config.ray,
                          progress=(lambda d, t, label: progress(BenchProgress(d, t, label))) if progress else None)
    order = {s.label: i for i, s in enumerate(systems)}
    where = {(src.path, src.conversation): i for i, src in enumerate(found)}
    outcomes = sorted((one for o in outcomes for one in unpack_riders(o)),
                      key=lambda o: (where[(o.task.source, o.task.conversation)], order[o.task.system]))
    result = assemble(config, spec, found, systems, outcomes, out)
    path = out / "result.json"
    path.write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    (out / "summary.md").write_text(summary_markdown(result), encoding="utf-8")
    write_reproduction(result, out)
    return path


def riders_by_host(systems: list[System]) -> dict[str, list[System]]:
    """Each system that replays, with the systems that ride on its replay: a system whose ablations include
    retrieval-only ones rides on the system that has the same settings without them, when that one runs."""
    by_settings = {(s.engine, _key(s.settings)): s.label for s in systems}
    registered = set(known_engines())
    hosts: dict[str, list[System]] = {}
    for s in systems:
        declared = engine_schema(s.engine).retrieval_ablations if s.engine in registered else ()
        retrieval = set(s.ablations) & set(declared)
        host = None
        if retrieval:
            host = by_settings.get((s.engine, _key({**s.settings, "ablations": sorted(set(s.ablations) - retrieval)})))
        if host is None:
            hosts.setdefault(s.label, [])
        else:
            hosts.setdefault(host, []).append(s)
    return hosts


def _key(settings: dict) -> str:
    return json.dumps(settings, sort_keys=True)


def unpack_riders(outcome: TaskOutcome) -> list[TaskOutcome]:
    """A task's outcome, then one per rider as if it had run alone (a failed replay fails its riders too)."""
    task, result = outcome.task, outcome.result
    ridden = [task.ridden_by(r) for r in task.riders]
    if result is None:
        return [outcome, *(TaskOutcome(t, None, outcome.error, 0.0, outcome.worker) for t in ridden)]
    rides = result.pop("riders", [])
    seconds = [r.pop("seconds") for r in rides]
    host = TaskOutcome(task, result, None, outcome.seconds - sum(seconds), outcome.worker)
    return [host, *(TaskOutcome(t, r, None, sec, outcome.worker) for t, r, sec in zip(ridden, rides, seconds))]


def write_reproduction(result: dict, out: Path) -> dict | None:
    """reproduction.json and .md beside result.json when the run measures any paper row (docs/BENCHMARK_FORMAT.md)."""
    report = reproduction.compare(result)
    if not report["measured"]:
        return None
    (out / REPRODUCTION_FILE).write_text(json.dumps(report, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    (out / REPRODUCTION_FILE).with_suffix(".md").write_text(reproduction.markdown(report), encoding="utf-8")
    return report

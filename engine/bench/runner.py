"""Run a benchmark: every system on every conversation of a dataset, pooled into one result file.

`run_benchmark(BenchConfig(...))` checks the input (dataset, file, engines, ablations) before anything
runs (`engine.bench.config`), builds one `BenchTask` per (conversation, system), runs them, and writes
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

from engine.bench.config import BenchConfig, check, system_schedule
from engine.bench.result import assemble
from engine.bench.summary import summary_markdown
from engine.bench.sweep import run_tasks
from engine.bench.tasks import BenchTask, run_task
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
    tasks = [BenchTask(dataset=spec.name, source=src.path, conversation=src.conversation, system=s.label,
                       engine=s.engine, settings=s.settings, ablations=s.ablations, protocol=config.protocol,
                       rounds=config.rounds, ks=ks, schedule=system_schedule(config, spec, s.engine),
                       workdir=str(sessions), answer=config.answer, llm=config.llm,
                       answer_budget=config.answer_budget or DEFAULT_CONTEXT_TOKENS)
             for src in found for s in systems]
    if progress:
        progress(BenchProgress(0, len(tasks), "starting"))
    outcomes = run_tasks(tasks, run_task, ray=config.ray,
                          progress=(lambda d, t, label: progress(BenchProgress(d, t, label))) if progress else None)
    result = assemble(config, spec, found, systems, outcomes, out)
    path = out / "result.json"
    path.write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    (out / "summary.md").write_text(summary_markdown(result), encoding="utf-8")
    write_reproduction(result, out)
    return path


def write_reproduction(result: dict, out: Path) -> dict | None:
    """reproduction.json and .md beside result.json when the run measures any paper row (docs/BENCHMARK_FORMAT.md)."""
    report = reproduction.compare(result)
    if not report["measured"]:
        return None
    (out / REPRODUCTION_FILE).write_text(json.dumps(report, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    (out / REPRODUCTION_FILE).with_suffix(".md").write_text(reproduction.markdown(report), encoding="utf-8")
    return report

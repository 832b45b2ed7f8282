"""`memwb reproduce ENGINE`: the benchmark runs that measure an engine's paper rows, and one report over them.

Which runs: `engine.eval.reproduction.reproduction_plan` (per dataset, the engine and the ablations its paper's
rows name, and whether they score answers). Where the data is: LoCoMo dev-8 and QMSum test from the shared data
folder, the causal suite's test split from the bundled datasets. Retrieval is measured the paper's way, once the
whole conversation is in memory (the static protocol); QMSum scores the events at the end of each meeting either
way.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Callable

from engine.bench.config import BenchConfig
from engine.bench.datasets import BenchInputError
from engine.bench.runner import REPRODUCTION_FILE, BenchProgress, default_out, run_benchmark
from engine.eval import reproduction
from engine.store.data_paths import BUNDLED, shared_data


def dataset_source(name: str) -> Path:
    """Where `memwb reproduce` reads each dataset the paper rows use."""
    where = {"locomo": shared_data() / "locomo" / "locomo-dev8.json", "qmsum": shared_data() / "qmsum" / "test",
             "causal": BUNDLED / "causal" / "test.jsonl"}[name]
    if not where.exists():
        raise BenchInputError(f"the {name} data for the reproduction is not at {where} (set MEMWB_SHARED_DATA to "
                              "the folder holding locomo/ and qmsum/)")
    return where


def reproduce(engine: str, out: str | None = None, conversations: tuple[str, ...] | None = None,
              progress: Callable[[BenchProgress], None] | None = None, command: str | None = None) -> Path:
    """Run one benchmark per dataset into OUT/<dataset>/ and write OUT/reproduction.md over all of them;
    returns that path."""
    plan = reproduction.reproduction_plan(engine)
    if not plan:
        known = sorted({r.engine for r in reproduction.PAPER_ROWS})
        raise BenchInputError(f"no paper rows are recorded for engine {engine!r}; engines with rows: "
                              f"{', '.join(known)}")
    root = Path(out).resolve() if out else default_out()
    reports = []
    for name, need in plan.items():
        path = run_benchmark(BenchConfig(
            dataset=name, source=str(dataset_source(name)), engines=tuple(need["engines"]),
            ablations=tuple(need["ablations"]), protocol="static", out=str(root / name), command=command,
            answer=need["answer"],
            conversations=conversations if name == "locomo" else None), progress=progress)
        report_file = path.with_name(REPRODUCTION_FILE)
        if report_file.exists():
            reports.append(json.loads(report_file.read_text(encoding="utf-8")))
    text = "\n".join(reproduction.markdown(r) for r in reports)
    (root / "reproduction.md").write_text(text, encoding="utf-8")
    return root / "reproduction.md"

"""The Benchmark page's checks of a result: the paper rows it measures, and its systems against each other (each
ablation against its full system, or every system against one), each difference with its paired-bootstrap
interval (`engine.eval.significance`), so a researcher can tell a direction from noise before reading anything
into it."""
from __future__ import annotations

import pandas as pd

from engine.eval import reproduction
from engine.eval.reproduction import delta_text, direction_text, interval_text
from engine.eval.significance import ablation_references, compare_systems
from workbench.benchmark.result import BenchResult

FULL_SYSTEMS = "each ablation's full system"          # the comparison `paired_frame` makes by default


def against_choices(result: BenchResult) -> list[str]:
    """What the page offers to compare every system with: each ablation's full system (when the run has one)
    first, then any one system of the run."""
    return ([FULL_SYSTEMS] if ablation_references(result.data) else []) + result.systems


def paired_frame(result: BenchResult, metric: str, against: str = FULL_SYSTEMS) -> pd.DataFrame | None:
    """Systems against others on `metric`, paired over the questions (or meetings) both were scored on: each
    ablation against its engine's full system (`FULL_SYSTEMS`), or every other system against the one named;
    None when nothing pairs."""
    pairs = ablation_references(result.data) if against == FULL_SYSTEMS else \
        {s: against for s in result.systems if s != against}
    rows = []
    for system, reference in pairs.items():
        p = compare_systems(result.data, system, reference, metric)
        if p is None:
            continue
        rows.append({"system": system, "against": reference, f"Δ {metric}": p.delta,
                     "95% interval": interval_text([p.low, p.high]), "higher": p.gained, "lower": p.lost,
                     "same": p.tied, "verdict": p.verdict(reference)})
    return pd.DataFrame(rows) if rows else None


def _shown(value: float | None, row: dict) -> float | None:
    """A paper or project figure to the places the report shows it (a count's mean to one decimal)."""
    return None if value is None else round(value, row.get("decimals", 3))


def reproduction_frame(result: BenchResult) -> pd.DataFrame | None:
    """The paper rows this result measures (engine.eval.reproduction), one line per paper figure; None when
    the run measures none."""
    report = reproduction.compare(result.data)
    if not report["measured"]:
        return None
    rows = [{"paper table": r["table"], "variant": r["variant"], "system": r["system"],
             "metric": (r.get("label") or r["metric"]) + (" ↓" if r["lower_is_better"] else ""),
             "paper": _shown(r["paper"], r), "project": _shown(r["project"], r),
             "Δ vs full (paper / project)": delta_text(r) if r["reference"] is not None else None,
             "project Δ 95% interval": interval_text(r.get("project_interval")),
             "direction (paper / project)": direction_text(r)} for r in report["rows"]]
    return pd.DataFrame(rows)

"""The papers' own table rows beside this project's figures: a researcher's first check that an engine is faithful.

Each `PaperRow` is one cell of a seed paper's table that this machine can measure (a retrieval, answer,
boundary, structure or cost figure of one system on one dataset), with the `memwb bench` system label and
metric key that measure it here. A row without a reference is an absolute figure (how large GAM's graph is
after 3 sessions, what RecMem's construction costs): the paper's models and prompts are not this machine's,
so those are read as orders of magnitude. `compare` reads a bench result and puts every row whose dataset and
engine the result covers beside the project's value, with the difference and the direction: a row's
`reference` is the paper's full system, and the check that matters is whether the variant moves the same way
here as in the paper (an ablation that lost recall there should lose it here), not whether the absolute values
agree — the paper's models, prompts and data handling are not this machine's.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

from engine.eval.answer import ANSWER_METRICS
from engine.eval.significance import LEVEL, compare_systems

FORMAT = "memwb-reproduction/1"
CONSTRUCTION_K = "construction_k"        # the engine's own LLM tokens per conversation while building memory, in K
GROWTH = "growth"                        # growth/<sessions>/<kind or "edges">: the memory of the first sessions
ANSWERING_BACKEND = "offline"            # a row scored on answers: its run answers with the extractive answerer


def growth_metric(sessions: int, what: str) -> str:
    """The metric key of a node kind's count (or "edges") in the memory of the first `sessions` sessions."""
    return f"{GROWTH}/{sessions}/{what}"


def growth_of(metric: str) -> tuple[int, str] | None:
    """(sessions, node kind or "edges") of a `growth_metric` key; None for any other metric."""
    if not metric.startswith(f"{GROWTH}/"):
        return None
    _, sessions, what = metric.split("/")
    return int(sessions), what


@dataclass(frozen=True)
class PaperRow:
    engine: str                    # the engine whose paper it is
    table: str                     # where in the paper, e.g. "All-Mem Table 10"
    variant: str                   # the paper's row label, e.g. "w/o Split"
    dataset: str                   # the `memwb bench --dataset` that measures it
    system: str                    # the bench system label, e.g. "allmem-no-split" or "fixed-50"
    metric: str                    # a key of the system's summary "overall", or "visible_ratio"
    value: float                   # the paper's figure, on the bench's scale (fractions, not percent)
    reference: str | None = None   # the system label of the paper's full system (None: this row is it)
    lower_is_better: bool = False
    label: str = ""                # how the report names the metric ("" = the metric key)
    decimals: int = 3              # how the report shows the figures (1 for a count or a cost in thousands)


def _allmem(variant: str, system: str, r5: float, n5: float, visible: float | None) -> list[PaperRow]:
    ref = None if system == "allmem" else "allmem"
    rows = [PaperRow("allmem", "All-Mem Table 10", variant, "locomo", system, "r@5", r5 / 100, ref),
            PaperRow("allmem", "All-Mem Table 10", variant, "locomo", system, "n@5", n5 / 100, ref)]
    if visible is not None:
        rows.append(PaperRow("allmem", "All-Mem Table 11", variant, "locomo", system, "visible_ratio", visible, ref,
                             lower_is_better=True))
    return rows


def _memloom_boundaries(variant: str, system: str, pk: float, wd: float) -> list[PaperRow]:
    ref = None if system == "memloom" else "memloom"
    return [PaperRow("memloom", "MemLoom Table 2", variant, "qmsum", system, metric, value, ref, lower_is_better=True)
            for metric, value in (("pk", pk), ("window_diff", wd))]


def _gam_answers(variant: str, system: str, f1: float, bleu1: float) -> list[PaperRow]:
    """GAM Table 3 (LoCoMo, Qwen2.5-7B): answer F1 and BLEU-1. Here the answers come from `--answer offline`,
    the extractive answerer over each system's retrieved units, so only the variant's direction carries."""
    ref = None if system == "gam" else "gam"
    return [PaperRow("gam", "GAM Table 3", variant, "locomo", system, "f1", f1 / 100, ref),
            PaperRow("gam", "GAM Table 3", variant, "locomo", system, "bleu1", bleu1 / 100, ref)]


def _gam_growth(sessions: int, events: int, topics: int, edges: int) -> list[PaperRow]:
    """GAM Table 10: the dual-layer graph after `sessions` sessions of a LoCoMo conversation."""
    variant = f"after {sessions} sessions"
    return [PaperRow("gam", "GAM Table 10", variant, "locomo", "gam", growth_metric(sessions, what), float(value),
                     label=name, decimals=1)
            for what, name, value in (("event", "event nodes", events), ("topic", "topic nodes", topics),
                                      ("edges", "edges", edges))]


PAPER_ROWS: tuple[PaperRow, ...] = (
    *_allmem("All-Mem (full)", "allmem", 46.63, 41.02, 0.704),
    *_allmem("No-Visibility", "allmem-no-visibility", 41.84, 34.76, 1.000),
    *_allmem("w/o Split", "allmem-no-split", 45.12, 39.58, 0.674),
    *_allmem("w/o Merge", "allmem-no-merge", 43.96, 38.14, 0.862),
    *_allmem("w/o Update", "allmem-no-update", 44.41, 39.02, 0.795),
    *_allmem("Anchors-only", "allmem-anchors-only", 43.19, 36.54, None),
    *_allmem("No-recovery-links", "allmem-no-recovery-links", 44.07, 38.43, None),
    *_allmem("No-type-priority", "allmem-no-type-priority", 45.18, 39.66, None),
    *_memloom_boundaries("MemLoom (Ours)", "memloom", 0.375, 0.395),
    *_memloom_boundaries("Chunk-based (fixed windows)", "fixed-50", 0.604, 0.950),
    *_memloom_boundaries("w/o Steward (no timeline repair)", "memloom-no-repair", 0.513, 0.462),
    PaperRow("memloom", "MemLoom §5 (SCDS)", "MemLoom (Ours)", "causal", "memloom", "scr@5", 0.72),
    PaperRow("memloom", "MemLoom §5 (SCDS)", "MemLoom (Ours)", "causal", "memloom", "r@5", 0.85),
    PaperRow("memloom", "MemLoom Table 6 (SCDS)", "w/o logic track (no relations)", "causal",
             "memloom-no-relations", "scr@5", 0.39, "memloom"),
    *_gam_answers("GAM (Ours)", "gam", 40.00, 32.99),
    *_gam_answers("w/o MFR", "gam-no-mfr", 35.94, 29.28),
    *_gam_growth(3, 81, 8, 371),
    *_gam_growth(15, 363, 43, 1791),
    *_gam_growth(27, 657, 84, 3307),
    PaperRow("recmem", "RecMem Table 1 (GPT-4o-mini)", "RecMem (Ours)", "locomo", "recmem", CONSTRUCTION_K, 202.4,
             lower_is_better=True, label="construction tokens per conversation (K)", decimals=1),
    PaperRow("recmem", "RecMem Table 1 (GPT-4.1-mini)", "RecMem (Ours)", "locomo", "recmem", CONSTRUCTION_K, 193.2,
             lower_is_better=True, label="construction tokens per conversation (K)", decimals=1),
)


def paper_rows(engine: str | None = None, dataset: str | None = None) -> list[PaperRow]:
    return [r for r in PAPER_ROWS if engine in (None, r.engine) and dataset in (None, r.dataset)]


def reproduction_plan(engine: str) -> dict[str, dict]:
    """Per dataset, the engines and ablations one `memwb bench` run needs to measure `engine`'s paper rows."""
    plan: dict[str, dict] = {}
    for row in paper_rows(engine):
        need = plan.setdefault(row.dataset, {"engines": {engine}, "ablations": set(), "answer": None})
        for label in (row.system, row.reference):
            if label and label.startswith(f"{engine}-"):
                need["ablations"].add(label.removeprefix(f"{engine}-"))
        if row.metric in ANSWER_METRICS:
            need["answer"] = ANSWERING_BACKEND
    return {d: {"engines": sorted(p["engines"]), "ablations": sorted(p["ablations"]), "answer": p["answer"]}
            for d, p in plan.items()}


def measured(result: dict, system: str, metric: str) -> float | None:
    """The project's figure for one cell, or None when the run did not measure it."""
    summary = result.get("summary", {}).get(system)
    if summary is None:
        return None
    if metric == "visible_ratio":
        value = summary.get("structure", {}).get(metric)
    elif metric == CONSTRUCTION_K:
        total = ((summary.get("construction") or {}).get("per_conversation") or {}).get("total")
        value = None if total is None else total / 1000
    elif (key := growth_of(metric)) is not None:
        sessions, what = key
        grown = (summary.get("growth") or {}).get(str(sessions))
        value = None if grown is None else grown["edges"] if what == "edges" else grown["nodes"].get(what, 0)
    else:
        value = summary.get("overall", {}).get(metric)
    return None if value is None else float(value)


SAME_WITHIN = 5e-4            # half the last digit the report shows: a smaller difference is a tie, not a direction


def _direction(delta: float | None, lower_is_better: bool, tolerance: float = SAME_WITHIN) -> str | None:
    if delta is None:
        return None
    if abs(delta) <= tolerance:
        return "same"
    return "worse" if (delta > 0) == lower_is_better else "better"


def compare(result: dict, engine: str | None = None) -> dict:
    """The paper rows this result can speak to (its dataset), each with the project's value, both differences
    from the row's reference system and whether the directions agree."""
    rows = []
    present = {s.get("engine") for s in result.get("systems", {}).values()}
    for row in paper_rows(engine, result.get("dataset")):
        if row.engine not in present:           # another engine's paper: this run says nothing about it
            continue
        ours = measured(result, row.system, row.metric)
        entry = {**asdict(row), "paper": row.value, "project": ours, "paper_vs_reference": None,
                 "project_vs_reference": None, "project_interval": None, "within_noise": None,
                 "paper_direction": None, "project_direction": None, "agrees": None}
        del entry["value"]
        entry["role"] = "variant" if row.reference is not None else "reference" if any(
            r.reference == row.system and r.metric == row.metric for r in PAPER_ROWS) else "absolute"
        if row.reference is not None:
            ref = next((r for r in PAPER_ROWS if r.system == row.reference and r.metric == row.metric
                        and r.dataset == row.dataset), None)
            ours_ref = measured(result, row.reference, row.metric)
            paper_delta = row.value - ref.value if ref else None
            ours_delta = ours - ours_ref if ours is not None and ours_ref is not None else None
            entry.update(paper_vs_reference=_round(paper_delta), project_vs_reference=_round(ours_delta),
                         paper_direction=_direction(paper_delta, row.lower_is_better),
                         project_direction=_direction(ours_delta, row.lower_is_better))
            paired = compare_systems(result, row.system, row.reference, row.metric) if ours_delta is not None \
                else None
            if paired is not None:
                entry.update(project_interval=[paired.low, paired.high], within_noise=paired.within_noise)
            if entry["paper_direction"] and entry["project_direction"]:
                entry["agrees"] = entry["paper_direction"] == entry["project_direction"]
        rows.append(entry)
    measured_rows = [r for r in rows if r["project"] is not None]
    directed = [r for r in measured_rows if r["agrees"] is not None]
    return {"format": FORMAT, "dataset": result.get("dataset"), "command": result.get("command"), "rows": rows,
            "measured": len(measured_rows), "directions_checked": len(directed),
            "directions_agree": sum(r["agrees"] for r in directed),
            "directions_beyond_noise": sum(1 for r in directed if r["within_noise"] is False)}


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


def _cell(value: float | None, decimals: int = 3) -> str:
    return "–" if value is None else f"{value:,.{decimals}f}"


def _signed(value: float | None) -> str:
    return "–" if value is None else f"{value:+.3f}"


def direction_text(row: dict) -> str:
    """A compared row's directions as the report and the Benchmark page show them: paper / project, ✓ when they
    agree, and whether the project's difference is within noise; a row without a variant says what it is."""
    if row["reference"] is None:
        return "absolute figure" if row.get("role") == "absolute" else "reference (full system)"
    if row["agrees"] is None:
        return f"{row['paper_direction'] or '–'} / {row['project_direction'] or 'not measured'}"
    return f"{row['paper_direction']} / {row['project_direction']} " + ("✓" if row["agrees"] else "✗") + \
        (" (within noise)" if row.get("within_noise") else "")


def delta_text(row: dict) -> str:
    """Both differences from the full system, paper / project, as the Benchmark page shows them."""
    return f"{_signed(row['paper_vs_reference'])} / {_signed(row['project_vs_reference'])}"


def interval_text(interval: list[float] | None) -> str:
    """A paired difference's interval as the report and the Benchmark page show it."""
    return "–" if interval is None else f"[{interval[0]:+.3f}, {interval[1]:+.3f}]"


def markdown(report: dict) -> str:
    """The report as a table: one line per paper cell, the directions side by side."""
    lines = [f"# Paper reproduction · {report['dataset']}", "",
             f"{report['measured']} paper figures measured by this run; the variant moves the paper's way in "
             f"{report['directions_agree']} of {report['directions_checked']} that have a reference. "
             f"In {report.get('directions_beyond_noise', 0)} of those the project's difference is beyond noise: "
             f"its {LEVEL:.0%} paired-bootstrap interval (over the questions, or meetings, both systems were "
             "scored on) leaves out 0. A difference whose interval holds 0 is marked \"within noise\": this run "
             "cannot tell it from no difference." + (
                 " An absolute figure (a graph's size, a construction cost) has no variant to compare: this "
                 "machine's offline backend, prompts and data are not the paper's, so read it as an order of "
                 "magnitude." if any(r.get("role") == "absolute" for r in report["rows"]) else ""), "",
             "| paper table | variant | system | metric | paper | project | paper Δ vs full | project Δ vs full "
             f"| {LEVEL:.0%} interval of project Δ | direction (paper / project) |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in report["rows"]:
        places = r.get("decimals", 3)
        lines.append(f"| {r['table']} | {r['variant']} | `{r['system']}` | {r.get('label') or r['metric']}"
                     f"{' (lower is better)' if r['lower_is_better'] else ''} | {_cell(r['paper'], places)} | "
                     f"{_cell(r['project'], places)} | {_signed(r['paper_vs_reference'])} | "
                     f"{_signed(r['project_vs_reference'])} | {interval_text(r.get('project_interval'))} | "
                     f"{direction_text(r)} |")
    if report.get("command"):
        lines += ["", f"Measured by `{report['command']}`."]
    return "\n".join(lines) + "\n"

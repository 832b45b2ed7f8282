"""The result of a benchmark: every task's outcome pooled into result.json (docs/BENCHMARK_FORMAT.md).

Its own module because pooling is a concept apart from running: `assemble` turns the tasks' outcomes into
the per-round detail and per-system summary (scores overall, by category and for the first-round cohort,
misses, latency, LLM costs, construction cost, structure, growth by session) and, for a dataset of event
boundaries, adds the two baselines; `figures` strips what may differ between two runs of one command.
"""
from __future__ import annotations

import json
import statistics
from pathlib import Path

from engine.bench.config import BenchConfig, System, command_line, system_schedule
from engine.bench.datasets import DatasetSpec, dataset_version
from engine.bench.figures import boundary_figures
from engine.bench.protocol import STATIC
from engine.bench.tasks import FULL_HISTORY
from engine.eval.answer import ANSWER_METRICS
from engine.eval.chain_links import tally_links
from engine.eval.decisions import headline as decision_headline
from engine.eval.decisions import score as decision_score
from engine.eval.metrics import construction_cost, latency_summary, llm_cost_summary, pool_llm_costs
from engine.eval.misses import tally

FORMAT = "memwb-bench/1"
FIXED_WINDOW = 50


def figures(result: dict) -> dict:
    """A result without what may differ between two runs of one command (times, the command as typed):
    what "the same command gives the same figures" compares."""
    r = json.loads(json.dumps(result))
    r.pop("command")
    for task in r["tasks"]:
        task.pop("seconds")
    for item in [*r["rounds_detail"], *r["summary"].values()]:
        item.pop("latency_ms")
    for item in r["summary"].values():
        for role in item.get("llm_costs", {}).values():
            role.pop("latency_ms")
    return r


def assemble(config: BenchConfig, spec: DatasetSpec, found: list, systems: list[System], outcomes: list,
             out: Path) -> dict:
    from engine.llm.embedder import Embedder

    ks = list(config.ks)
    metrics = spec.metric_names(ks) + (ANSWER_METRICS if config.answer else [])
    rounds = 1 if (config.protocol == STATIC or not spec.questions) else config.rounds
    done = [o for o in outcomes if o.result is not None]
    questions = [{"system": o.task.system, **q} for o in done for q in o.result["questions"]]
    categories = _categories(spec, questions)
    task_rows = []
    for o in outcomes:
        error = None
        if o.error is not None:
            error = o.error.to_dict()
        db = o.result["db"] if o.result else str(Path(o.task.workdir) / o.task.db_name)
        task_rows.append({"conversation": o.task.conversation, "system": o.task.system,
                          "seconds": round(o.seconds, 2), "db": db and _relative(Path(db), out), "error": error,
                          "replayed_with": (o.result or {}).get("replayed_with")})
    labels = [s.label for s in systems]
    detail, summary = [], {}
    for label in labels:
        mine = [o.result for o in done if o.task.system == label]
        qs = [q for q in questions if q["system"] == label]
        for r in range(1, rounds + 1):
            recs = [rec for res in mine for rec in res["rounds"] if rec["round"] == r]
            asked = [q for q in qs if str(r) in q["by_round"]]
            detail.append({"system": label, "round": r, "questions": len(asked),
                           "turns_ingested": sum(rec["turns"] for rec in recs),
                           **_scores(asked, str(r), metrics, categories),
                           "memory": _sum_memory([rec["memory"] for rec in recs]),
                           "latency_ms": {"insert": _latency([rec["insert_ms"] for rec in recs]),
                                          "query": _latency([rec["query_ms"] for rec in recs])}})
        at_last = [q for q in qs if str(rounds) in q["by_round"]]
        last = _scores(at_last, str(rounds), metrics, categories)
        costs = pool_llm_costs(res["llm_costs"] for res in mine)
        summary[label] = {**last, "misses": _misses(at_last, ks[0]),
                          **({"chain_links": _chain_links(at_last, ks[0])} if spec.chains else {}),
                          "latency_ms": {"insert": _latency([res["latency_ms"]["insert"] for res in mine]),
                                         "query": _latency([res["latency_ms"]["query"] for res in mine])},
                          "llm_tokens": {role: {k: t[k] for k in ("calls", "prompt", "completion")}
                                         for role, t in costs.items()},
                          "llm_costs": llm_cost_summary(costs),
                          "construction": _construction(mine),
                          "structure": _mean_structure([res["structure"] for res in mine]),
                          "growth": _mean_growth([res.get("growth") or [] for res in mine])}
    boundaries = None
    systems_out = {s.label: {"engine": None if s.engine == FULL_HISTORY else s.engine, "settings": s.settings,
                             "ablations": list(s.ablations), "schedule": system_schedule(config, spec, s.engine)}
                   for s in systems}
    decisions = None
    if spec.decisions:
        decisions = {}
        for label in labels:
            rows = [o.result["decisions"] for o in done if o.task.system == label and o.result.get("decisions")]
            if not rows:
                continue
            table = decision_score([v for r in rows for v in r["verdicts"]], rows[0]["kinds"])
            decisions[label] = {"table": table, "unlabelled": sum(len(r["unlabelled"]) for r in rows),
                                "verdicts": [v for r in rows for v in r["verdicts"]],
                                "unlabelled_edits": [{"conversation": r["conversation"], **e} for r in rows
                                                     for e in r["unlabelled"]]}
            summary[label]["overall"] = decision_headline(table)
    if spec.boundaries:
        boundaries = [res["boundaries"] for res in (o.result for o in done)]
        from engine.core.segments import fixed_windows, no_boundaries

        # the two baselines: fixed windows, and no boundary at all (Pk alone rewards never cutting)
        baselines = {f"fixed-{FIXED_WINDOW}": (lambda n: fixed_windows(n, FIXED_WINDOW), {"window": FIXED_WINDOW}),
                     "no-boundary": (no_boundaries, {})}
        for src in found:
            n = _turns_of(done, src.conversation)
            if n is not None:
                for baseline, (cut, _) in baselines.items():
                    boundaries.append(boundary_figures(src.path, src.conversation, baseline, n, cut(n)))
        for baseline, (_, settings) in baselines.items():
            systems_out[baseline] = {"engine": None, "settings": settings, "ablations": []}
            summary[baseline] = {"overall": {}, "by_category": {}, "cohort": {},
                                 "latency_ms": {"insert": {}, "query": {}}, "llm_tokens": {}, "llm_costs": {},
                                 "construction": None, "structure": {}, "growth": {}}
        for label in summary:
            rows = [b for b in boundaries if b["system"] == label]
            summary[label]["overall"] = {m: _mean([b[m] for b in rows]) for m in metrics}
    return {
        "format": FORMAT, "command": config.command or command_line(config), "dataset": spec.name, "llm": config.llm,
        "source": str(Path(config.source).resolve()), "protocol": config.protocol, "ks": ks, "rounds": rounds,
        "schedule": config.schedule or spec.schedule, "embedder": Embedder(shared=None).label,
        "encoder": Embedder(shared=None).encoder,
        "systems": systems_out, "conversations": list(dict.fromkeys(s.conversation for s in found)),
        "metrics": metrics, "categories": categories, "tasks": task_rows, "rounds_detail": detail,
        "summary": summary, "questions": questions, "boundaries": boundaries, "decisions": decisions,
        "dataset_version": dataset_version([config.source, config.decisions]),
        **({"gold_overlay": _gold_overlay(config, spec, questions, ks)} if config.gold_overlay else {}),
    }


def _gold_overlay(config: BenchConfig, spec: DatasetSpec, questions: list[dict], ks: list[int]) -> dict:
    """The last round's figures on the original gold and on the overlay's corrected gold, per system."""
    from engine.eval.gold_audit import corrected_figures, load_overlay

    overlay = load_overlay(config.gold_overlay)
    return {"path": str(Path(config.gold_overlay).resolve()), "version": dataset_version([config.gold_overlay]),
            "corrections": len(overlay),
            "systems": corrected_figures(questions, overlay, spec.score, ks)}


def _relative(path: Path, out: Path) -> str:
    try:
        return path.resolve().relative_to(out.resolve()).as_posix()
    except ValueError:
        return str(path)


def _turns_of(done: list, conversation: str) -> int | None:
    return next((o.result["turns"] for o in done if o.task.conversation == conversation), None)


def _categories(spec: DatasetSpec, questions: list[dict]) -> dict[str, str]:
    seen = {q["category"] for q in questions}
    out = {key: label for key, label in spec.categories.items() if key in seen}
    out.update({key: key for key in sorted(seen - set(out))})
    return out


def _mean(values: list) -> float | None:
    values = [v for v in values if v is not None]
    return round(statistics.fmean(values), 4) if values else None


def _scores(asked: list[dict], round_key: str, metrics: list[str], categories: dict[str, str]) -> dict:
    """overall, by_category (with n) and cohort (with n) of the questions asked at a round."""
    def pool(qs: list[dict]) -> dict:
        return {m: _mean([q["by_round"][round_key].get(m) for q in qs]) for m in metrics if qs}

    cohort = [q for q in asked if q["first_round"] == 1]
    return {"overall": pool(asked),
            "by_category": {c: {"n": len(sub), **pool(sub)} for c in categories
                            if (sub := [q for q in asked if q["category"] == c])},
            "cohort": {"n": len(cohort), **pool(cohort)}}


def _misses(records: list[dict], k: int) -> dict:
    """Where the gold turns of the questions asked at the last round were lost (engine.eval.misses); {} for a
    system that ranks nothing (full-history) or a dataset without questions."""
    followed = [q for q in records if "misses" in q]
    return {"k": k, **tally(followed)} if followed else {}


def _chain_links(records: list[dict], k: int) -> dict:
    """How the memory held each link of the causal chains asked at the last round (engine.eval.chain_links), and
    how many chains held whole were whole in the top k; {} for a system that ranks nothing."""
    followed = [q for q in records if "chain_links" in q]
    return {"k": k, **tally_links(followed, lambda q: q["metrics"].get(f"scr@{k}") == 1.0)} if followed else {}


def _latency(samples: list[dict[str, list[float]]]) -> dict:
    """p50, p95, mean and n per stage, over every sample of every task given."""
    pooled: dict[str, list[float]] = {}
    for per_stage in samples:
        for stage, values in per_stage.items():
            pooled.setdefault(stage, []).extend(values)
    return {stage: latency_summary(values) for stage, values in sorted(pooled.items()) if values}


def _sum_memory(items: list[dict]) -> dict:
    nodes: dict[str, dict[str, int]] = {}
    edges: dict[str, int] = {}
    for m in items:
        for kind, statuses in m["nodes"].items():
            for status, n in statuses.items():
                nodes.setdefault(kind, {})[status] = nodes.get(kind, {}).get(status, 0) + n
        for etype, n in m["edges"].items():
            edges[etype] = edges.get(etype, 0) + n
    return {"nodes": nodes, "edges": edges}


def _construction(results: list[dict]) -> dict | None:
    """The engine's construction cost per conversation (`engine.eval.metrics.construction_cost`); None for a system
    that builds no memory (the full-history ceiling)."""
    tallies = {res["conversation"]: res["construction"] for res in results if res.get("construction") is not None}
    return construction_cost(tallies) if tallies else None


def _mean_growth(items: list[list[dict]]) -> dict:
    """Per count of sessions n: how many conversations reached it, and the mean nodes by kind and edges of their
    memory of the first n sessions (a kind a conversation lacks counts 0 there)."""
    by_n: dict[int, list[dict]] = {}
    for growth in items:
        for g in growth:
            by_n.setdefault(g["sessions"], []).append(g)
    out = {}
    for n, rows in sorted(by_n.items()):
        kinds = sorted({k for g in rows for k in g["nodes"]})
        out[str(n)] = {"conversations": len(rows), "nodes": {k: _mean([g["nodes"].get(k, 0) for g in rows])
                                                               for k in kinds},
                       "edges": _mean([g["edges"] for g in rows])}
    return out


def _mean_structure(items: list[dict]) -> dict:
    """Visible ratio and Cov(H) averaged over conversations; H0.95 the first H whose mean Cov reaches 0.95."""
    items = [s for s in items if s]          # the full-history system keeps no memory
    if not items:
        return {}
    cov = {h: _mean([s["cov"][h] for s in items]) for h in items[0]["cov"]}
    return {"visible_ratio": _mean([s["visible_ratio"] for s in items]), "cov": cov,
            "h95": next((int(h) for h, c in cov.items() if c is not None and c >= 0.95), None)}

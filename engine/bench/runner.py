"""Run a benchmark: every system on every conversation of a dataset, pooled into one result file.

`run_benchmark(BenchConfig(...))` checks the input (dataset, file, engines, ablations) before anything
runs, builds one `BenchTask` per (conversation, system), runs them, and writes `result.json`
(docs/BENCHMARK_FORMAT.md) and `summary.md` into the output folder, keeping each task's session database
under `sessions/` so a miss can be reopened. `memwb bench` and the Benchmark page both call it.
"""
from __future__ import annotations

import json
import statistics
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Sequence

from engine.bench.datasets import BenchInputError, DatasetSpec, dataset, sources
from engine.bench.protocol import PROTOCOLS, STATIC
from engine.bench.summary import summary_markdown
from engine.bench.sweep import run_tasks
from engine.bench.tasks import ANSWER_METRICS, FULL_HISTORY, BenchTask, boundary_figures, run_task
from engine.engines import UnknownEngine, engine_class, engine_schema, known_engines
from engine.eval import reproduction
from engine.eval.answer import DEFAULT_CONTEXT_TOKENS
from engine.eval.metrics import construction_cost, latency_summary, llm_cost_summary, pool_llm_costs
from engine.eval.misses import tally

FORMAT = "memwb-bench/1"
EVENT_KIND = "event"
FIXED_WINDOW = 50
REPRODUCTION_FILE = "reproduction.json"


@dataclass(frozen=True)
class BenchConfig:
    dataset: str
    source: str
    engines: tuple[str, ...] | None = None          # None: every registered engine (QMSum: every event engine)
    ablations: tuple[str, ...] = ()                 # ablation names, "a+b" for a combination, or ("all",)
    protocol: str = "streaming"
    rounds: int = 5
    ks: tuple[int, ...] = (5, 10)
    schedule: str | None = None                     # None: the dataset's default
    conversations: tuple[str, ...] | None = None
    out: str | None = None                          # None: a new folder under the workspace's benchmarks/
    ray: str | None = None
    settings: dict = field(default_factory=dict)    # engine -> settings overrides
    command: str | None = None                      # as typed (the CLI); None: rebuilt from the fields
    answer: str | None = None                       # LLM backend answering every question (adds full-history)
    llm: str = "offline"                            # LLM backend of the engines' own roles
    answer_budget: int | None = None                # None: engine.answer.DEFAULT_CONTEXT_TOKENS


@dataclass(frozen=True)
class BenchProgress:
    done: int
    total: int
    label: str


@dataclass(frozen=True)
class System:
    label: str
    engine: str
    settings: dict
    ablations: tuple[str, ...]


def is_event_engine(name: str) -> bool:
    """An engine that groups turns into events, whose boundaries QMSum scores."""
    return any(k.name == EVENT_KIND for k in engine_schema(name).node_kinds)


def resolve_systems(spec: DatasetSpec, engines: Sequence[str] | None, ablations: Sequence[str],
                    overrides: dict | None = None) -> list[System]:
    """The systems to run: each engine with its settings, then one per requested ablation of each engine
    that declares it (label engine-a or engine-a+b, names sorted)."""
    overrides = overrides or {}
    if engines is None:
        engines = [e for e in known_engines() if spec.questions or is_event_engine(e)]
    engines = list(dict.fromkeys(engines))
    if not engines:
        raise BenchInputError("no engine to run; name at least one with --engines")
    for name in engines:
        try:
            engine_class(name)
        except UnknownEngine as exc:
            raise BenchInputError(str(exc)) from None
        if not spec.questions and not is_event_engine(name):
            raise BenchInputError(f"--dataset {spec.name} scores event boundaries; engine {name!r} has no "
                                  f"{EVENT_KIND!r} node kind (event engines: "
                                  f"{', '.join(e for e in known_engines() if is_event_engine(e)) or 'none'})")
    combos: list[tuple[str, tuple[str, ...]]] = []
    wanted = [a.strip() for a in ablations if a.strip()]
    if wanted == ["all"]:
        combos = [(e, (a,)) for e in engines for a in engine_schema(e).ablations]
    elif wanted:
        for item in wanted:
            parts = tuple(sorted(set(item.split("+"))))
            owners = [e for e in engines if set(parts) <= set(engine_schema(e).ablations)]
            if not owners:
                known = sorted({a for e in engines for a in engine_schema(e).ablations})
                raise BenchInputError(f"unknown ablation {item!r} for engines {', '.join(engines)}; known: "
                                      f"{', '.join(known) or 'none'} (or all)")
            combos += [(e, parts) for e in owners]
    systems = [_system(e, e, (), overrides.get(e)) for e in engines]
    systems += [_system(f"{e}-{'+'.join(parts)}", e, parts, overrides.get(e))
                for e, parts in dict.fromkeys(combos)]
    return systems


def _system(label: str, engine: str, ablations: tuple[str, ...], overrides: dict | None) -> System:
    given = dict(overrides or {})
    if ablations:
        given["ablations"] = sorted(set(given.get("ablations", [])) | set(ablations))
    try:
        settings = engine_class(engine).Settings.from_dict(given).to_dict()
    except (TypeError, ValueError) as exc:
        raise BenchInputError(f"settings of {label}: {exc}") from None
    return System(label, engine, settings, tuple(sorted(given.get("ablations", []))))


def check(config: BenchConfig) -> tuple[DatasetSpec, list, list[System]]:
    """Everything wrong with `config`, raised as one `BenchInputError` before anything runs."""
    from engine.runtime.replay import Schedule

    spec = dataset(config.dataset)
    if config.protocol not in PROTOCOLS:
        raise BenchInputError(f"unknown protocol {config.protocol!r}; choose {' or '.join(PROTOCOLS)}")
    if config.rounds < 1:
        raise BenchInputError(f"--rounds must be at least 1, got {config.rounds}")
    if not config.ks or any(k < 1 for k in config.ks):
        raise BenchInputError(f"--k needs positive integers, got {','.join(map(str, config.ks)) or 'none'}")
    try:
        Schedule.parse(config.schedule or spec.schedule)
    except ValueError as exc:
        raise BenchInputError(str(exc)) from None
    from engine.session import LLM_BACKENDS

    if config.llm not in LLM_BACKENDS or config.llm == "recorded":
        raise BenchInputError(f"unknown LLM backend {config.llm!r} for the engines; choose "
                              f"{' or '.join(b for b in LLM_BACKENDS if b != 'recorded')}")
    if config.answer_budget is not None and config.answer_budget < 1:
        raise BenchInputError(f"--answer-budget must be a positive number of tokens, got {config.answer_budget}")
    if config.answer is not None:
        if not spec.questions:
            raise BenchInputError(f"--answer needs questions; --dataset {spec.name} scores event boundaries")
        if config.answer not in LLM_BACKENDS or config.answer == "recorded":
            raise BenchInputError(f"unknown answering LLM backend {config.answer!r}; choose "
                                  f"{' or '.join(b for b in LLM_BACKENDS if b != 'recorded')}")
    found = sources(spec, config.source, config.conversations)
    systems = resolve_systems(spec, config.engines, config.ablations, config.settings)
    if config.answer is not None:
        systems.append(System(FULL_HISTORY, FULL_HISTORY, {}, ()))
    return spec, found, systems


def system_schedule(config: BenchConfig, spec: DatasetSpec, engine: str) -> str:
    """`--schedule` when given, else the engine's own schedule (RecMem consolidates at the trigger), else the
    dataset's."""
    own = engine_schema(engine).schedule if engine in known_engines() else ""
    return config.schedule or own or spec.schedule


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


def command_line(config: BenchConfig) -> str:
    """The `memwb bench` command equivalent to `config`."""
    parts = ["memwb bench", "--dataset", config.dataset, config.source]
    if config.conversations:
        parts += ["--conversations", *config.conversations]
    if config.engines:
        parts += ["--engines", ",".join(config.engines)]
    if config.ablations:
        parts += ["--ablations", ",".join(config.ablations)]
    if config.answer:
        parts += ["--answer", config.answer]
    if config.llm != "offline":
        parts += ["--llm", config.llm]
    if config.answer_budget:
        parts += ["--answer-budget", str(config.answer_budget)]
    parts += ["--protocol", config.protocol, "--rounds", str(config.rounds), "--k", ",".join(map(str, config.ks))]
    if config.schedule:
        parts += ["--schedule", config.schedule]
    if config.out:
        parts += ["--out", config.out]
    return " ".join(parts)


# -- pooling the tasks into the result ---------------------------------------------------------------------

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
                          "seconds": round(o.seconds, 2), "db": db and _relative(Path(db), out), "error": error})
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
                          "latency_ms": {"insert": _latency([res["latency_ms"]["insert"] for res in mine]),
                                         "query": _latency([res["latency_ms"]["query"] for res in mine])},
                          "llm_tokens": {role: {k: t[k] for k in ("calls", "prompt", "completion")}
                                         for role, t in costs.items()},
                          "llm_costs": llm_cost_summary(costs),
                          "construction": _construction(mine),
                          "structure": _mean_structure([res["structure"] for res in mine])}
    boundaries = None
    systems_out = {s.label: {"engine": None if s.engine == FULL_HISTORY else s.engine, "settings": s.settings,
                             "ablations": list(s.ablations), "schedule": system_schedule(config, spec, s.engine)}
                   for s in systems}
    if not spec.questions:
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
                                 "construction": None, "structure": {}}
        for label in summary:
            rows = [b for b in boundaries if b["system"] == label]
            summary[label]["overall"] = {m: _mean([b[m] for b in rows]) for m in metrics}
    return {
        "format": FORMAT, "command": config.command or command_line(config), "dataset": spec.name, "llm": config.llm,
        "source": str(Path(config.source).resolve()), "protocol": config.protocol, "ks": ks, "rounds": rounds,
        "schedule": config.schedule or spec.schedule, "embedder": Embedder(shared=None).label,
        "systems": systems_out, "conversations": list(dict.fromkeys(s.conversation for s in found)),
        "metrics": metrics, "categories": categories, "tasks": task_rows, "rounds_detail": detail,
        "summary": summary, "questions": questions, "boundaries": boundaries,
    }


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


def _mean_structure(items: list[dict]) -> dict:
    """Visible ratio and Cov(H) averaged over conversations; H0.95 the first H whose mean Cov reaches 0.95."""
    items = [s for s in items if s]          # the full-history system keeps no memory
    if not items:
        return {}
    cov = {h: _mean([s["cov"][h] for s in items]) for h in items[0]["cov"]}
    return {"visible_ratio": _mean([s["visible_ratio"] for s in items]), "cov": cov,
            "h95": next((int(h) for h, c in cov.items() if c is not None and c >= 0.95), None)}

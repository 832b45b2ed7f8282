"""What a benchmark runs: its configuration, the systems it names, and every check before anything runs.

Its own module because resolving and checking a run is a concept apart from running it: `check` turns a
`BenchConfig` into the dataset, the conversation files and the `System`s (each engine with its settings and
ablations), or one `BenchInputError` naming what is wrong; `command_line` writes the config back as the
`memwb bench` command it stands for. The runner (`engine.bench.runner`) and the result
(`engine.bench.result`) take what it resolves.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from engine.bench.datasets import BenchInputError, DatasetSpec, dataset, sources
from engine.bench.protocol import PROTOCOLS
from engine.bench.talk import fit_schedule, fit_settings
from engine.bench.tasks import FULL_HISTORY
from engine.core.schema import SettingError, parse_settings, setting_text
from engine.engines import UnknownEngine, engine_class, engine_schema, known_engines

EVENT_KIND = "event"


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
    decisions: str | None = None                    # a decision overlay labelling the source's conversations
    gold_overlay: str | None = None                 # gold corrections (engine.eval.gold_audit): figures on both


@dataclass(frozen=True)
class System:
    label: str
    engine: str
    settings: dict
    ablations: tuple[str, ...]


def parse_engine_settings(items: Sequence[str]) -> dict[str, dict]:
    """`ENGINE.KEY=VALUE` items (`memwb bench --set`) -> {engine: {key: value}}: each engine's assignments read
    and checked as `memwb replay --set` reads them (`engine.core.schema.parse_settings`)."""
    assignments: dict[str, list[str]] = {}
    for item in items:
        name, dot, assignment = item.partition(".")
        if not dot or not name.strip() or "=" not in assignment:
            raise BenchInputError(f"--set {item!r}: expected ENGINE.KEY=VALUE, e.g. gam.depth_threshold=0.25")
        assignments.setdefault(name.strip(), []).append(assignment)
    out: dict[str, dict] = {}
    for name, given in assignments.items():
        try:
            out[name] = parse_settings(engine_class(name).Settings, given, name)
        except UnknownEngine as exc:
            raise BenchInputError(f"--set: {exc}") from None
        except SettingError as exc:
            raise BenchInputError(f"--set: {exc}") from None
    return out


def is_event_engine(name: str) -> bool:
    """An engine that groups turns into events, whose boundaries QMSum scores."""
    return any(k.name == EVENT_KIND for k in engine_schema(name).node_kinds)


def makes_decisions(name: str) -> bool:
    """An engine whose schema says which of its edits a decision set scores (`EngineSchema.decisions`)."""
    return bool(engine_schema(name).decisions)


def resolve_systems(spec: DatasetSpec, engines: Sequence[str] | None, ablations: Sequence[str],
                    overrides: dict | None = None) -> list[System]:
    """The systems to run: each engine with its settings (its fit for the dataset's kind of talk, if it has one,
    under `overrides`), then one per requested ablation of each engine that declares it (label engine-a or
    engine-a+b, names sorted)."""
    overrides = overrides or {}
    if engines is None:
        engines = [e for e in known_engines() if spec.questions or (makes_decisions(e) if spec.decisions
                                                                     else is_event_engine(e))]
    engines = list(dict.fromkeys(engines))
    if not engines:
        raise BenchInputError("no engine to run; name at least one with --engines")
    for name in engines:
        try:
            engine_class(name)
        except UnknownEngine as exc:
            raise BenchInputError(str(exc)) from None
        if spec.decisions and not makes_decisions(name):
            raise BenchInputError(f"--dataset {spec.name} scores consolidation decisions; engine {name!r} makes "
                                  f"none (engines that do: {', '.join(e for e in known_engines() if makes_decisions(e))})")
        if spec.boundaries and not is_event_engine(name):
            raise BenchInputError(f"--dataset {spec.name} scores event boundaries; engine {name!r} has no "
                                  f"{EVENT_KIND!r} node kind (event engines: "
                                  f"{', '.join(e for e in known_engines() if is_event_engine(e)) or 'none'})")
    for name in overrides:
        if name not in engines:
            raise BenchInputError(f"--set names engine {name!r}, which this run does not run (engines: "
                                  f"{', '.join(engines)})")
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
    given = {e: {**fit_settings(e, spec), **overrides.get(e, {})} for e in engines}
    systems = [_system(e, e, (), given[e]) for e in engines]
    systems += [_system(f"{e}-{'+'.join(parts)}", e, parts, given[e]) for e, parts in dict.fromkeys(combos)]
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
            raise BenchInputError(f"--answer needs questions; --dataset {spec.name} has none to answer")
        if config.answer not in LLM_BACKENDS or config.answer == "recorded":
            raise BenchInputError(f"unknown answering LLM backend {config.answer!r}; choose "
                                  f"{' or '.join(b for b in LLM_BACKENDS if b != 'recorded')}")
    if config.decisions and not spec.decisions:
        raise BenchInputError(f"--decisions labels a decision set; use it with --dataset decisions, not {spec.name}")
    found = sources(spec, config.source, config.conversations, config.decisions)
    if config.gold_overlay:
        if not spec.questions:
            raise BenchInputError(f"--gold-overlay corrects questions' gold; --dataset {spec.name} has no questions")
        from engine.eval.gold_audit import apply_overlay, load_overlay
        from engine.loaders import LoaderError, load_conversations

        try:
            apply_overlay(load_conversations(config.source), load_overlay(config.gold_overlay), config.gold_overlay)
        except (LoaderError, OSError) as exc:
            raise BenchInputError(str(exc)) from None
    systems = resolve_systems(spec, config.engines, config.ablations, config.settings)
    if config.answer is not None:
        systems.append(System(FULL_HISTORY, FULL_HISTORY, {}, ()))
    return spec, found, systems


def system_schedule(config: BenchConfig, spec: DatasetSpec, engine: str) -> str:
    """`--schedule` when given, else the engine's own schedule (RecMem consolidates at the trigger), else the
    dataset's."""
    return fit_schedule(engine, spec, config.schedule)


def command_line(config: BenchConfig) -> str:
    """The `memwb bench` command equivalent to `config`."""
    parts = ["memwb bench", "--dataset", config.dataset, config.source]
    if config.decisions:
        parts += ["--decisions", config.decisions]
    if config.gold_overlay:
        parts += ["--gold-overlay", config.gold_overlay]
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
    for engine, given in sorted(config.settings.items()):
        parts += [f"--set {engine}.{key}={setting_text(value)}" for key, value in sorted(given.items())]
    if config.out:
        parts += ["--out", config.out]
    return " ".join(parts)

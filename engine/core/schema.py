"""What an engine declares about itself, so the UI and CLI never need its package.

An `EngineSchema` names the engine's node kinds, lifecycle statuses (which of
them form the retrieval surface and which transitions are legal), edge types
(style, traversal priority, recovery links), offline processes and their
proposal operators, reason codes, retrieval stages and LLM roles. Pages draw
legends, filters, review cards and stage tabs from it; the fold uses it to
derive `visible` from a status and to refuse illegal transitions.
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

from engine.core.errors import WorkbenchError
from engine.core.node import TURN_KIND


@dataclass(frozen=True)
class KindSpec:
    """A node kind. `group` kinds hold other nodes in `members` (MemLoom's events, GAM's topics): a graph can
    fold the members into the group node and open it again."""

    name: str
    label: str
    color: str = "#17becf"
    description: str = ""
    group: bool = False


@dataclass(frozen=True)
class StatusSpec:
    """A lifecycle status; `surface` statuses are what Stage-1 style retrieval searches."""

    name: str
    label: str
    surface: bool
    description: str = ""
    color: str = ""            # how a graph draws a node in this status ("" = by kind)
    shape: str = ""            # vis-network shape ("" = dot on the surface, hollow square off it)


@dataclass(frozen=True)
class EdgeTypeSpec:
    """A typed, directed edge. Lower `priority` is expanded first; `recovery` links lead off the surface;
    `lineage` links are the ones every off-surface node must stay reachable along; a `weighted` edge's
    confidence is its weight; a `structural` one follows from the timeline alone (MemLoom's TEMPORAL_NEXT), so
    the review queue puts its proposals under one decision instead of a card each; a `query_time` one is never
    stored: retrieval finds it as it walks (a path may hold it, the graph never does). `cause_end` marks the
    edges a why-question's chain runs along, and which of their ends is the cause ("src" or "dst"): how a
    benchmark tells whether the memory holds a gold chain's link (`engine.eval.chain_links`)."""

    name: str
    label: str
    color: str
    dashes: bool = False
    width: float = 1.5
    opacity: float = 0.9
    priority: int = 100
    recovery: bool = False
    lineage: bool = False
    description: str = ""
    weighted: bool = False     # the edge's confidence is its weight: drawn wider the more confident (GAM's relations)
    structural: bool = False   # follows from the timeline: decided together in the review queue
    query_time: bool = False   # found by retrieval as it walks, never stored (MemLoom's logic links)
    cause_end: str = ""        # a causal relation: "src" (MemLoom: cause -> effect) or "dst" (GAM: effect -> cause)


@dataclass(frozen=True)
class PlanField:
    """One field of an operator's plan, with how to show it: text, list, ids (a list of node ids, shown as the
    pages write them: "u4, u7"), or segments (list of objects)."""

    name: str
    label: str
    shape: str = "text"
    item_fields: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class OperatorSpec:
    """A proposal operator. `target_roles` name each target; the last role repeats for longer lists."""

    name: str
    label: str
    process: str
    target_roles: tuple[str, ...]
    ordered_targets: bool = False
    plan_fields: tuple[PlanField, ...] = ()
    description: str = ""

    def role(self, i: int) -> str:
        return self.target_roles[min(i, len(self.target_roles) - 1)] if self.target_roles else "target"


@dataclass(frozen=True)
class ProcessSpec:
    """An offline process fed by a named buffer (All-Mem's ATC, MemLoom's steward, GAM's consolidation)."""

    name: str
    label: str
    buffer: str
    description: str = ""
    scheduled: bool = True


@dataclass(frozen=True)
class ReasonSpec:
    code: str
    description: str


def llm_reasons() -> tuple[ReasonSpec, ...]:
    """The reason codes of the LLM boundary, which every engine that calls an LLM declares."""
    from engine.core.proposal import LLMReason

    return (ReasonSpec(LLMReason.JSON_PARSE_FAIL, "the LLM's output is not JSON"),
            ReasonSpec(LLMReason.SCHEMA_FAIL, "the LLM's JSON does not fit the role's schema"),
            ReasonSpec(LLMReason.OUTPUT_TOO_LONG, "a field of the LLM's output is longer than its role allows"),
            ReasonSpec(LLMReason.DUPLICATE_SEGMENTS, "the Split plan repeats a segment"),
            ReasonSpec(LLMReason.LLM_FAIL, "the backend did not answer"))


@dataclass(frozen=True)
class DecisionSpec:
    """Which of an engine's edits is a labelled decision of `kind` (docs/DECISIONS.md): proposals of
    `operator` (with `relation` in their plan's `field`, when given), or stored edges of type `edge` (a
    decision an operator's plan holds among others, as RecMem's fact updates). A decision set scores an engine
    through these alone."""

    kind: str
    operator: str = ""
    field: str = "type"
    relation: str = ""
    edge: str = ""


@dataclass(frozen=True)
class StageSpec:
    """A retrieval stage. `shows` is what the stage produced: seeds, expansion, ranking or context.
    `help` may name settings fields in braces; pages format it with the engine's settings."""

    key: str
    label: str
    shows: str
    help: str = ""


@dataclass(frozen=True)
class EngineSchema:
    name: str
    label: str
    description: str
    node_kinds: tuple[KindSpec, ...]
    statuses: tuple[StatusSpec, ...]
    initial_status: str
    transitions: tuple[tuple[str, str], ...]
    edge_types: tuple[EdgeTypeSpec, ...] = ()
    processes: tuple[ProcessSpec, ...] = ()
    operators: tuple[OperatorSpec, ...] = ()
    reason_codes: tuple[ReasonSpec, ...] = ()
    stages: tuple[StageSpec, ...] = ()
    llm_roles: tuple[str, ...] = ()
    ablations: dict[str, str] = field(default_factory=dict)
    # the ablations that change retrieval only (the log a replay writes is the same with or without them): a
    # benchmark asks their questions on the replay of the system without them instead of replaying again
    retrieval_ablations: tuple[str, ...] = ()
    schedule: str = ""          # the offline schedule the engine's paper runs on ("" = the dataset's or the CLI's)
    turn_kind: str = TURN_KIND          # the kind an ingested dataset turn becomes (GAM: its `event` units)
    # settings fit on another kind of talk than the defaults were ({"meetings": {...}}): a dataset of that kind
    # (`DatasetSpec.talk`) runs the engine with them, under whatever `--set` gives
    fits: dict[str, dict] = field(default_factory=dict)
    decisions: tuple[DecisionSpec, ...] = ()      # its edits that a decision set scores (`DecisionSpec`)

    # -- look-ups ------------------------------------------------------------------
    @property
    def surface_statuses(self) -> frozenset[str]:
        return frozenset(s.name for s in self.statuses if s.surface)

    @property
    def off_surface_word(self) -> str:
        """What leaving the surface is called: the off-surface status's label when there is one ("archived",
        "superseded"), else "off surface"."""
        off = [s for s in self.statuses if not s.surface]
        return off[0].label if len(off) == 1 else "off surface"

    def status(self, name: str) -> StatusSpec | None:
        return next((s for s in self.statuses if s.name == name), None)

    def kind(self, name: str) -> KindSpec | None:
        return next((k for k in self.node_kinds if k.name == name), None)

    @property
    def group_kinds(self) -> tuple[str, ...]:
        """The kinds whose nodes hold members, in the schema's order."""
        return tuple(k.name for k in self.node_kinds if k.group)

    def edge_type(self, name: str) -> EdgeTypeSpec | None:
        return next((e for e in self.edge_types if e.name == name), None)

    def operator(self, name: str) -> OperatorSpec | None:
        return next((o for o in self.operators if o.name == name), None)

    def process(self, name: str) -> ProcessSpec | None:
        return next((p for p in self.processes if p.name == name), None)

    @property
    def expansion_order(self) -> list[str]:
        """Edge types in traversal priority order, then name."""
        return [e.name for e in sorted(self.edge_types, key=lambda e: (e.priority, e.name))]

    @property
    def recovery_types(self) -> tuple[str, ...]:
        return tuple(e.name for e in self.edge_types if e.recovery)

    @property
    def query_time_types(self) -> tuple[str, ...]:
        """Edge types retrieval finds as it walks and never stores (a path may hold them, the graph never does)."""
        return tuple(e.name for e in self.edge_types if e.query_time)

    @property
    def lineage_types(self) -> tuple[str, ...]:
        return tuple(e.name for e in self.edge_types if e.lineage)

    def problems(self) -> list[str]:
        """What does not hold together in this schema (empty when it does): names declared twice, and a status,
        kind or process referred to but never declared. The registry refuses a plugin whose schema has any
        (docs/WRITING_AN_ENGINE.md, rule "loads")."""
        out = []
        for what, names in (("node kind", [k.name for k in self.node_kinds]),
                            ("status", [s.name for s in self.statuses]),
                            ("edge type", [e.name for e in self.edge_types]),
                            ("process", [p.name for p in self.processes]),
                            ("operator", [o.name for o in self.operators]),
                            ("stage", [s.key for s in self.stages])):
            out += [f"{what} {n!r} is declared twice" for n in sorted({n for n in names if names.count(n) > 1})]
        if not self.node_kinds:
            out.append("no node kinds are declared")
        if not self.stages:
            out.append("no retrieval stages are declared")
        if not self.kind(self.turn_kind):
            out.append(f"turn_kind {self.turn_kind!r} is not a declared node kind")
        if not self.status(self.initial_status):
            out.append(f"initial_status {self.initial_status!r} is not a declared status")
        out += [f"transition {old!r} -> {new!r} names an undeclared status" for old, new in self.transitions
                if not (self.status(old) and self.status(new))]
        out += [f"operator {o.name!r} belongs to the undeclared process {o.process!r}" for o in self.operators
                if not self.process(o.process)]
        return out

    def legal(self, old: str, new: str) -> bool:
        return old == new or (old, new) in self.transitions

    def to_dict(self) -> dict:
        """A plain description (for `memwb schema` and docs)."""
        def plain(obj: Any) -> Any:
            if hasattr(obj, "__dataclass_fields__"):
                return {f.name: plain(getattr(obj, f.name)) for f in fields(obj)}
            if isinstance(obj, (list, tuple)):
                return [plain(x) for x in obj]
            if isinstance(obj, dict):
                return {k: plain(v) for k, v in obj.items()}
            return obj
        return plain(self)


def setting(default: Any = None, help: str = "", *, factory: Any = None, minimum: float | None = None,
            maximum: float | None = None, step: float | None = None, choices: tuple | dict | None = None,
            group: str = "", advanced: bool = False, label: str = ""):
    """A settings dataclass field with what a settings form needs: help text, bounds, choices, group, and the
    label a person reads (the paper's symbol and a plain name, "λ — recency decay"; "" = the field name)."""
    meta = {"help": help, "min": minimum, "max": maximum, "step": step, "choices": choices, "group": group,
            "advanced": advanced, "label": label}
    if factory is not None:
        return field(default_factory=factory, metadata=meta)
    return field(default=default, metadata=meta)


class SettingError(WorkbenchError, ValueError):
    """A setting that does not exist, or a value of the wrong type or out of its bounds; `code` is the reason
    code a record carries."""

    code = "SETTING_OUT_OF_RANGE"


def _kind(value: Any) -> str:
    return "bool" if isinstance(value, bool) else type(value).__name__


def settings_fields(settings_cls: type) -> list[dict]:
    """Every setting of an engine as plain values: name, type, default, help, bounds, choices, group (what
    `memwb schema` lists and `--set` checks against)."""
    defaults = settings_cls()
    return [_field_spec(f, getattr(defaults, f.name)) for f in fields(settings_cls)]


def _field_spec(f, value: Any) -> dict:
    m = f.metadata
    choices = m.get("choices")
    return {"name": f.name, "type": _kind(value), "default": value, "help": m.get("help", ""),
            "min": m.get("min"), "max": m.get("max"), "group": m.get("group", ""),
            "choices": list(choices) if choices else None}


def _parse_value(spec: dict, text: str) -> Any:
    """`text` as the setting's type: a number, a bool, a choice, a comma-separated list of choices, or for a
    dict setting `key:value,...` pairs over its default keys."""
    kind, name = spec["type"], spec["name"]
    text = text.strip()
    try:
        if kind == "bool":
            lowered = text.lower()
            if lowered not in ("true", "false", "1", "0", "yes", "no"):
                raise ValueError
            return lowered in ("true", "1", "yes")
        if kind == "int":
            return int(text)
        if kind == "float":
            return float(text)
        if kind == "list":
            return [x.strip() for x in text.split(",") if x.strip()]
        if kind == "dict":
            out = dict(spec["default"])
            for pair in (x for x in text.split(",") if x.strip()):
                key, sep, value = pair.partition(":")
                if not sep or key.strip() not in out:
                    raise SettingError(f"setting {name} takes key:value pairs with keys {', '.join(out)}; got "
                                       f"{pair.strip()!r}")
                out[key.strip()] = type(out[key.strip()])(value)
            return out
    except SettingError:
        raise
    except ValueError:
        raise SettingError(f"setting {name} takes a {kind} value, not {text!r}") from None
    return text


def setting_text(value: Any) -> str:
    """A setting's value as `--set NAME=VALUE` writes it, the text `_parse_value` reads back: a list comma-
    separated, a dict as key:value pairs, anything else as itself."""
    if isinstance(value, dict):
        return ",".join(f"{k}:{v}" for k, v in value.items())
    if isinstance(value, list):
        return ",".join(map(str, value))
    return str(value).lower() if isinstance(value, bool) else str(value)


def check_setting(spec: dict, value: Any) -> None:
    """Raise SettingError naming the setting when `value` is out of its bounds or not one of its choices."""
    name, low, high, choices = spec["name"], spec["min"], spec["max"], spec["choices"]
    items = value.values() if isinstance(value, dict) else [value] if isinstance(value, (int, float)) and \
        not isinstance(value, bool) else []
    for v in items:
        if (low is not None and v < low) or (high is not None and v > high):
            raise SettingError(f"{SettingError.code}: setting {name}={value} is out of range: it takes {low} to {high}")
    picked = value if isinstance(value, list) else [value] if isinstance(value, str) else []
    bad = [v for v in picked if choices and v not in choices]
    if bad:
        raise SettingError(f"{SettingError.code}: setting {name} takes {', '.join(map(str, choices))}, not "
                           f"{', '.join(map(str, bad))}")


def parse_settings(settings_cls: type, assignments: list[str], engine: str = "") -> dict:
    """`NAME=VALUE` assignments (the CLI's `--set`) as a settings dict, each checked against the setting's type,
    bounds and choices; an unknown name is refused with the valid names."""
    specs = {s["name"]: s for s in settings_fields(settings_cls)}
    out: dict[str, Any] = {}
    for item in assignments:
        name, sep, text = item.partition("=")
        name = name.strip()
        if not sep or not name:
            raise SettingError(f"--set takes NAME=VALUE, not {item!r}")
        if name not in specs:
            raise SettingError(f"unknown setting {name!r}{f' for engine {engine}' if engine else ''}; valid "
                               f"settings: {', '.join(specs)} (`memwb schema --engine {engine or 'NAME'}` describes "
                               f"them)")
        value = _parse_value(specs[name], text)
        check_setting(specs[name], value)
        out[name] = value
    return out


class EngineSettings:
    """Mixin for an engine's settings dataclass: dict round trip, ablation look-up and bounds."""

    ablations: list

    def has(self, ablation: str) -> bool:
        return ablation in getattr(self, "ablations", ())

    def to_dict(self) -> dict:
        from dataclasses import asdict
        return asdict(self)

    def changed(self) -> dict:
        """The fields that differ from the class defaults (what a header says beside "defaults")."""
        base = type(self)().to_dict()
        return {k: v for k, v in self.to_dict().items() if v != base.get(k)}

    @classmethod
    def from_dict(cls, data: dict):
        """Settings from a dict (stored, or from a form or `--set`); every value within its bounds."""
        names = {f.name for f in fields(cls)}
        given = {k: v for k, v in data.items() if k in names}
        for spec in settings_fields(cls):
            if spec["name"] in given:
                check_setting(spec, given[spec["name"]])
        return cls(**given)

    def check_bounds(self) -> None:
        """Raise `SettingError` naming the first field outside its `setting(...)` bounds or choices, or a number
        setting holding something else."""
        for f in fields(self):
            value = getattr(self, f.name)
            spec = _field_spec(f, value)
            numeric = spec["min"] is not None or spec["max"] is not None
            if numeric and not isinstance(value, (list, dict)) and (isinstance(value, bool)
                                                                    or not isinstance(value, (int, float))):
                raise SettingError(f"{SettingError.code}: {spec['name']} = {value!r} is not a number")
            check_setting(spec, value)

    def check_ablations(self, known: dict[str, str]) -> None:
        unknown = [a for a in getattr(self, "ablations", ()) if a not in known]
        if unknown:
            raise ValueError(f"unknown ablation(s) {unknown}; known: {sorted(known)}")

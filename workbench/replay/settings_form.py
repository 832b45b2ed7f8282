"""A settings form built from an engine's Settings dataclass, so a page never names an engine's knobs.

Every field of an engine's settings dataclass carries its help text, bounds,
step, choices, group and whether it is an advanced knob in its `metadata`
(`engine.core.schema.setting`). The form draws one widget per field from that:

- int / float: a number input with the field's min, max, step and help;
- dict (say All-Mem's gate θ per operator): one number input per key;
- list with `choices` (ablations): a multiselect whose help lists each choice's description;
- bool: a checkbox; str: a selectbox over `choices`, or a text input;

grouped by `group`, the `advanced` fields of every group in one expander
below the rest. Widget keys are `settings_key(prefix, engine, field[, item])`,
so each engine's choices survive switching the engine picker back and forth. A widget's label is the field's
declared `label` (the paper's symbol and a plain name, "λ — recency decay"), else its name in words.
"""
from __future__ import annotations

import dataclasses
from typing import Any

import streamlit as st

from engine.engines import settings_class

COLUMNS = 4


def settings_key(prefix: str, engine: str, name: str, item: str | None = None) -> str:
    return f"{prefix}:{engine}:{name}" + (f":{item}" if item is not None else "")


def field_label(f: dataclasses.Field) -> str:
    """The label the schema declares (the paper's symbol and a plain name), else the field name in words."""
    return f.metadata.get("label") or f.name.replace("_", " ")


def group_label(group: str) -> str:
    """A settings group's heading as declared ("HDRA" stays "HDRA"), first letter raised."""
    return group[:1].upper() + group[1:]


def defaults(settings_cls: type) -> dict[str, Any]:
    """The engine's default settings as a plain dict (dict and list defaults come from their factories)."""
    return dataclasses.asdict(settings_cls())


def _groups(fields: list[dataclasses.Field]) -> dict[str, list[dataclasses.Field]]:
    groups: dict[str, list[dataclasses.Field]] = {}
    for f in fields:
        groups.setdefault(f.metadata.get("group") or "settings", []).append(f)
    return groups


def _is_wide(f: dataclasses.Field, value: Any) -> bool:
    """Multiselects and per-key inputs take a whole row."""
    return isinstance(value, (list, dict))


def _number(where, label: str, value: int | float, meta: dict, key: str):
    is_int = isinstance(value, int) and not isinstance(value, bool)
    cast = int if is_int else float
    kwargs = {"help": meta.get("help") or None, "key": key}
    if meta.get("min") is not None:
        kwargs["min_value"] = cast(meta["min"])
    if meta.get("max") is not None:
        kwargs["max_value"] = cast(meta["max"])
    step = meta.get("step")
    kwargs["step"] = cast(step) if step is not None else (1 if is_int else 0.01)
    if not is_int:
        kwargs["format"] = "%.2f" if kwargs["step"] >= 0.01 else "%.4f"
    return cast(where.number_input(label, value=cast(value), **kwargs))


def _widget(where, f: dataclasses.Field, value: Any, prefix: str, engine: str) -> Any:
    """One field's widget(s) in `where`; returns the chosen value."""
    meta = dict(f.metadata)
    label = field_label(f)
    key = settings_key(prefix, engine, f.name)
    help_text = meta.get("help") or None
    if isinstance(value, bool):
        return bool(where.checkbox(label, value=value, help=help_text, key=key))
    if isinstance(value, (int, float)):
        return _number(where, label, value, meta, key)
    if isinstance(value, dict):
        where.markdown(f"**{label}**" + (f" · {help_text}" if help_text else ""))
        cols = where.columns(max(1, min(COLUMNS, len(value))))
        return {item: _number(cols[i % len(cols)], f"{label} · {item}", v, meta, settings_key(prefix, engine,
                                                                                               f.name, item))
                for i, (item, v) in enumerate(value.items())}
    if isinstance(value, list):
        choices = meta.get("choices") or {}
        options = list(choices)
        if not options:
            return list(value)
        described = isinstance(choices, dict)
        lines = "  \n".join(f"**{k}**: {v}" for k, v in choices.items()) if described else ""
        return list(where.multiselect(label, options, default=[v for v in value if v in options], key=key,
                                      help="  \n".join(x for x in (help_text, lines) if x) or None))
    if isinstance(value, str):
        choices = list(meta.get("choices") or [])
        if choices:
            return where.selectbox(label, choices, index=choices.index(value) if value in choices else 0,
                                   help=help_text, key=key)
        return where.text_input(label, value=value, help=help_text, key=key)
    return value          # a type the form does not know stays at its default


def _draw(fields: list[dataclasses.Field], values: dict, prefix: str, engine: str, out: dict, where) -> None:
    narrow = [f for f in fields if not _is_wide(f, values[f.name])]
    for start in range(0, len(narrow), COLUMNS):
        cols = where.columns(COLUMNS)
        for col, f in zip(cols, narrow[start:start + COLUMNS]):
            out[f.name] = _widget(col, f, values[f.name], prefix, engine)
    for f in fields:
        if _is_wide(f, values[f.name]):
            out[f.name] = _widget(where, f, values[f.name], prefix, engine)


def settings_form(engine: str, prefix: str = "settings", where=None) -> dict[str, Any]:
    """Widgets for every field of `engine`'s Settings; returns the chosen settings as a dict."""
    where = where or st
    settings_cls = settings_class(engine)
    fields = dataclasses.fields(settings_cls)
    values = defaults(settings_cls)
    out: dict[str, Any] = {}
    groups = _groups([f for f in fields if not f.metadata.get("advanced")])
    advanced = _groups([f for f in fields if f.metadata.get("advanced")])
    for group, members in groups.items():
        drawn = [f for f in members if not (isinstance(values[f.name], list) and not f.metadata.get("choices"))]
        if not drawn:
            out.update({f.name: values[f.name] for f in members})
            continue
        if not (len(drawn) == 1 and field_label(drawn[0]) == group):
            where.markdown(f"**{group_label(group)}**")
        _draw(drawn, values, prefix, engine, out, where)
        out.update({f.name: values[f.name] for f in members if f not in drawn})
    if advanced:
        count = sum(len(m) for m in advanced.values())
        with where.expander(f"Advanced settings ({count})", expanded=False):
            for group, members in advanced.items():
                st.markdown(f"**{group_label(group)}**")
                _draw(members, values, prefix, engine, out, st)
    return out

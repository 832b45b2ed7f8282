"""What a memory graph can collapse, and how a collapsed thing is drawn: sessions and group nodes.

Two kinds of grouping share one mechanism. Above `GROUP_ABOVE` nodes a drawing would be a hairball, so
sessions collapse into one group node each (session, unit count, date); above `FOLD_ABOVE` nodes a group
node (a node of a kind the schema declares `group`, holding `members`: MemLoom's events, GAM's topics) folds
its members into itself. Either way the page names what is drawn open (`expand`: session labels and group
node ids), a click opens a collapsed one, and the edges of what is hidden end on the node that stands for it
(see `workbench.graph.view`).
"""
from __future__ import annotations

import html
from collections.abc import Iterable

from engine.core.state import MemoryState
from workbench.graph.layout import SessionGroup
from workbench.graph.style import (
    GROUP_BORDER,
    GROUP_FILL,
    LABEL_HALO,
    NODE_FONT,
    OPENED,
    RING_COLOR,
    kind_label,
    off_surface_word,
)

GROUP_ABOVE = 300                # more nodes than this pass the filters: sessions collapse into group nodes
FOLD_ABOVE = 60                  # more nodes than this in the open sessions: group nodes fold their members in
GROUP_PREFIX, BAND_PREFIX = "group:", "session:"  # node ids of a collapsed session and of a band's title


def groups_sessions(passing: int, focus: Iterable[int] | None, group: bool | None) -> bool:
    """Group sessions when asked to, or by default above `GROUP_ABOVE` nodes unless a neighbourhood is drawn."""
    return group if group is not None else focus is None and passing > GROUP_ABOVE


def folds_members(candidates: int, focus: Iterable[int] | None, fold: bool | None) -> bool:
    """Fold group nodes' members when asked to, or by default above `FOLD_ABOVE` nodes (those of the sessions
    drawn unit by unit) unless a neighbourhood is drawn."""
    return fold if fold is not None else focus is None and candidates > FOLD_ABOVE


def is_group(state: MemoryState, unit) -> bool:
    """A node of a kind the schema declares as a group (it holds `members`)."""
    return state.schema is not None and unit.kind in state.schema.group_kinds


def holding(state: MemoryState, ids: Iterable[int]) -> set[int]:
    """The group nodes that list any of `ids` among their members."""
    ids = set(ids)
    return {u.id for u in state.units.values() if u.members and is_group(state, u) and ids & set(u.members)}


def fold_members(state: MemoryState, candidates: set[int], opened: set[int]) -> dict[int, int]:
    """member -> the group node it is folded into, among `candidates`: every group node not in `opened` takes
    its members (those on the surface first, then by id; a member claimed once stays with the first), except
    members of a group drawn open, which stay drawn."""
    groups = [u for u in candidates if u in state.units and is_group(state, state.units[u])]
    shown = {m for g in groups if g in opened for m in state.units[g].members}
    folded: dict[int, int] = {}
    for g in sorted((g for g in groups if g not in opened), key=lambda g: (not state.units[g].visible, g)):
        for m in state.units[g].members:
            if m in candidates and m != g and m not in folded and m not in shown:
                folded[m] = g
    return folded


def group_node_options(state: MemoryState, g: SessionGroup, ringed: bool = False) -> dict:
    """A collapsed session: its name, unit count (and how many are off the surface) and date; ringed when it
    holds a highlighted unit."""
    e = html.escape
    schema = state.schema
    units = [state.units[u] for u in g.units]
    off = sum(not u.visible for u in units)
    count = f"{len(units)} units" + (f" ({off} {off_surface_word(schema)})" if off else "")
    kinds: dict[str, int] = {}
    for u in units:
        kinds[u.kind] = kinds.get(u.kind, 0) + 1
    kind_text = ", ".join(f"{n} {e(kind_label(schema, k))}" for k, n in sorted(kinds.items()))
    first = min(units, key=lambda u: (u.created_turn, u.id))
    title = (f"<b>Session {e(g.session)}</b> · {e(g.date)}<br>{len(units)} units: {kind_text}<br>"
             f"<b>First</b> {e(first.label)}: {e(first.raw[:200] or first.summary[:200])}<br>"
             f"<i>Click to expand this session in place.</i>")
    return {"label": f"Session {g.session}\n{count}\n{g.date}", "title": title, "shape": "box", "margin": 12,
            "borderWidth": 5 if ringed else 2, "count": len(units),
            "widthConstraint": {"minimum": min(200, 120 + len(units))},
            "font": {"size": 24, "face": "sans-serif", "color": "#1a1a1a"},
            "color": {"background": GROUP_FILL, "border": RING_COLOR if ringed else GROUP_BORDER,
                      "highlight": {"background": "#d4e3f7", "border": "#000000"},
                      "hover": {"background": "#d4e3f7", "border": GROUP_BORDER}}}


def band_title_options(g: SessionGroup) -> dict:
    return {"label": f"{OPENED} Session {g.session} · {len(g.units)} units · {g.date}", "shape": "text",
            "title": "Click to collapse this session into one node.",
            "font": {"size": 24, "color": GROUP_BORDER, "face": "sans-serif", **LABEL_HALO}}


def row_title_options(session: str) -> dict:
    return {"label": f"Session {session}", "shape": "text",
            "font": {"size": NODE_FONT, "color": "#555555", "face": "sans-serif", **LABEL_HALO}}

"""Which units a graph drawing shows: the filters, the neighbourhood focus and the cap on how many.

Every page that draws memory hands its filters (edge types, statuses, surface only, sessions, search text,
focus and hops) to `select_units`, which keeps the nodes that pass and, above `max_nodes`, the pinned and
focused ones first and then the most recent. Kept apart from the drawing so the lifecycle timeline can
follow the same filters without building a graph.
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from engine.core.node import Node
from engine.core.state import MemoryState
from engine.core.walks import neighbourhood

Unit = Node


@dataclass
class Selection:
    """Which units a drawing shows: `shown` after aggregation, out of `matched` that pass the filters."""

    shown: list[int]
    matched: int
    pinned: set[int]

    @property
    def hidden(self) -> int:
        return self.matched - len(self.shown)


def session_order(state: MemoryState) -> dict[str, int]:
    """Session label -> 1-based number in time order (numeric labels such as LoCoMo's keep their number)."""
    first: dict[str, tuple[str, int]] = {}
    for u in state.units.values():
        key = (u.time, u.id)
        if u.session not in first or key < first[u.session]:
            first[u.session] = key
    labels = list(first)
    if labels and all(s.isdigit() for s in labels):
        return {s: int(s) for s in labels}
    return {s: i for i, s in enumerate(sorted(labels, key=first.__getitem__), start=1)}


def matches(unit: Unit, text: str) -> bool:
    """Case-insensitive search over raw evidence, summary, keywords and source ids."""
    needle = text.strip().lower()
    if not needle:
        return True
    haystack = " ".join([unit.raw, unit.summary, " ".join(unit.keywords), " ".join(unit.source_ids)])
    return needle in haystack.lower()


def select_units(state: MemoryState, *, edge_types: set[str] | None = None, visible_only: bool = False,
                 sessions: tuple[int, int] | None = None, search: str = "", focus: Iterable[int] | None = None,
                 pinned: Iterable[int] = (), max_nodes: int = 400, statuses: set[str] | None = None,
                 hops: int = 1) -> Selection:
    """Apply the filters, then keep at most `max_nodes`: pinned and focus nodes first, then the most recent.

    With `focus`, only the focus nodes and their neighbours up to `hops` edges away are candidates.

    `pinned` nodes (highlights, provenance paths) are drawn whatever the filters say, so a path through
    an archived node stays visible with "visible only" on. `statuses` keeps nodes with those statuses.
    """
    numbers = session_order(state)
    pinned = {u for u in pinned if u in state.units}
    focus_ids = {u for u in (focus or ()) if u in state.units}
    candidates: Iterable[int] = state.units
    if focus is not None:
        candidates = neighbourhood(state, focus_ids, hops, edge_types)

    def keep(uid: int) -> bool:
        u = state.units[uid]
        if visible_only and not u.visible:
            return False
        if statuses is not None and u.status not in statuses:
            return False
        if sessions is not None and not sessions[0] <= numbers[u.session] <= sessions[1]:
            return False
        return matches(u, search)

    passing = {uid for uid in candidates if keep(uid)} | focus_ids | pinned
    must = focus_ids | pinned
    return Selection(shown=cap_units(state, passing, must, max_nodes), matched=len(passing), pinned=must)


def cap_units(state: MemoryState, passing: set[int], must: set[int], max_nodes: int) -> list[int]:
    """At most `max_nodes` of `passing`: every `must` node, then the most recently created."""
    if len(passing) <= max_nodes:
        return sorted(passing)
    recent = sorted(passing - must, key=lambda i: (state.units[i].created_turn, i), reverse=True)
    return sorted(must | set(recent[: max(0, max_nodes - len(must))]))

"""Where the memory graph puts each node: fixed positions, not a simulation.

One row per session (top to bottom in time order) and, within a row, one column per turn in time order;
nodes made by an offline process stack just below the turn they come from. No physics means a 1,000-node
graph renders at once and a node keeps its place when the graph is re-drawn at another turn, so two turns
can be compared by eye. When sessions are grouped, collapsed sessions fill a grid in time order and an
expanded session opens in place as a band of its units.
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from engine.node import TURN_KIND, Node
from engine.state import MemoryState
from workbench.graph_select import session_order

Unit = Node
X_STEP, ROW_STEP, MIN_ROW_STEP, STACK_STEP = 120, 170, 70, 55
GROUP_COLUMNS, CELL_W, CELL_H = 6, 250, 170      # the grid of collapsed sessions
BAND_LINE = 110                  # height of one line of turns in an expanded session's band


def _anchor(state: MemoryState, unit: Unit) -> int:
    """The turn unit a unit is drawn with: itself, or for consolidation output the turn of its latest source.

    Turns often share a timestamp (LoCoMo dates a whole session), so columns follow turns, not times.
    """
    if unit.kind == TURN_KIND or not unit.source_ids:
        return unit.id
    return state.turn_units.get(unit.source_ids[-1], unit.id)


def _columns(state: MemoryState, units: Iterable[Unit]) -> list[list[Unit]]:
    """A session's units as columns in turn order, each a turn with the consolidation output it anchors."""
    stacks: dict[tuple[str, int], list[Unit]] = {}
    for u in sorted(units, key=lambda u: u.id):
        anchor = _anchor(state, u)
        stacks.setdefault((state.units[anchor].time if anchor in state.units else u.time, anchor), []).append(u)
    return [stacks[key] for key in sorted(stacks)]


def layout(state: MemoryState, ids: Iterable[int]) -> tuple[dict[int, tuple[int, int]], dict[str, int]]:
    """Fixed positions: a row per session, a column per turn, consolidation output stacked under its turn.

    Returns unit positions and the y of each session row that has units.
    """
    numbers = session_order(state)
    by_session: dict[str, list[Unit]] = {}
    for uid in ids:
        u = state.units[uid]
        by_session.setdefault(u.session, []).append(u)
    rows = [(session, _columns(state, by_session[session])) for session in sorted(by_session, key=numbers.__getitem__)]
    # many short sessions (LoCoMo has ~30 of ~20 turns) would make a tall sliver: squeeze rows towards 2:1
    widest = max((len(columns) for _, columns in rows), default=1)
    row_step = max(MIN_ROW_STEP, min(ROW_STEP, widest * X_STEP // (2 * max(1, len(rows)))))
    positions: dict[int, tuple[int, int]] = {}
    row_y: dict[str, int] = {}
    y = 0
    for session, columns in rows:
        for column, stack in enumerate(columns):
            for depth, u in enumerate(stack):
                positions[u.id] = (column * X_STEP + depth * 36, y + depth * STACK_STEP)
        row_y[session] = y
        y += row_step + (max(map(len, columns)) - 1) * STACK_STEP
    return positions, row_y


@dataclass
class SessionGroup:
    """One session of a grouped drawing: the units of it that pass the filters."""

    session: str
    number: int
    units: list[int]
    date: str


def session_groups(state: MemoryState, ids: Iterable[int]) -> list[SessionGroup]:
    """The sessions holding `ids`, in time order, each with its units and the date of its first unit."""
    numbers = session_order(state)
    by_session: dict[str, list[int]] = {}
    for uid in sorted(ids):
        by_session.setdefault(state.units[uid].session, []).append(uid)
    return [SessionGroup(session, numbers[session], units, date_text(min(state.units[u].time for u in units)))
            for session, units in sorted(by_session.items(), key=lambda kv: numbers[kv[0]])]


def date_text(time: str) -> str:
    """"8 May 2023" for an ISO time; the text itself when it is not one."""
    try:
        d = datetime.fromisoformat(time)
    except ValueError:
        return time[:10]
    return f"{d.day} {d:%b %Y}"


def grouped_layout(state: MemoryState, groups: list[SessionGroup], drawn: set[int], expanded: set[str]
                   ) -> tuple[dict[int, tuple[int, int]], dict[str, tuple[int, int]], dict[str, tuple[int, int]]]:
    """Collapsed sessions fill a grid in time order; an expanded session breaks the grid with a band of its
    units in place (turns left to right, wrapping, consolidation output under its turn).

    Returns unit positions, group node positions and band title positions, by session.
    """
    per_line = max(1, GROUP_COLUMNS * CELL_W // X_STEP)
    units: dict[int, tuple[int, int]] = {}
    group_at: dict[str, tuple[int, int]] = {}
    band_at: dict[str, tuple[int, int]] = {}
    col, y = 0, 0
    for g in groups:
        if g.session not in expanded:
            group_at[g.session] = (col * CELL_W, y)
            col += 1
            if col == GROUP_COLUMNS:
                col, y = 0, y + CELL_H
            continue
        if col:
            col, y = 0, y + CELL_H
        band_at[g.session] = (0, y - CELL_H // 4)
        columns = _columns(state, (state.units[u] for u in g.units if u in drawn))
        line_y = y + BAND_LINE // 3
        lines = -(-len(columns) // per_line)
        step = -(-len(columns) // max(1, lines))                # balanced lines: no lone turn on the last one
        for start in range(0, len(columns), step):
            line = columns[start:start + step]
            for column, stack in enumerate(line):
                for depth, u in enumerate(stack):
                    units[u.id] = (column * X_STEP + depth * 36, line_y + depth * STACK_STEP)
            line_y += BAND_LINE + (max(map(len, line)) - 1) * STACK_STEP
        y = line_y + CELL_H // 4
    return units, group_at, band_at

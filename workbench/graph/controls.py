"""The Memory graph page's controls and the state they keep: the turn drawn, filters, what is open, clicks.

Widgets remember their values across reruns, so every value that can go stale (another turn, another
session file, a node that no longer exists) is checked before the widget is drawn (`keep_valid`). What is
drawn open is one list per kind of group (sessions, and group nodes such as MemLoom's events) that a click
on the graph, the pickers and the node inspector all change, so the three always agree.
"""
from __future__ import annotations

from dataclasses import dataclass

import streamlit as st

from engine.core.state import MemoryState
from workbench.graph.canvas import clicked_node
from workbench.graph.groups import BAND_PREFIX, FOLD_ABOVE, GROUP_ABOVE, GROUP_PREFIX, holding, is_group
from workbench.graph.select import session_order
from workbench.graph.style import (
    edge_style,
    edge_types_of,
    kind_label,
    off_surface_word,
    status_label,
    statuses_of,
    visibility_text,
)
from workbench.model import Workbench
from workbench.text import MISSING

CACHED_TURNS = 16
CANVAS = "graph_canvas"
_CACHE = "graph_states"
MODES = {"auto": None, "always": True, "never": False}
SESSION_MODES = {"auto": f"above {GROUP_ABOVE} nodes", "always": "always", "never": "never"}
FOLD_MODES = {"auto": f"above {FOLD_ABOVE} nodes", "always": "always", "never": "never"}


@dataclass
class GraphChoice:
    """What the controls ask the graph for."""

    filters: dict                  # `select_units` keywords: edge types, statuses, surface only, search, max nodes
    expand: list                   # sessions (labels) and group nodes (ids) drawn open
    group: bool | None             # sessions as group nodes: yes, no, or by size
    fold: bool | None              # group nodes folding their members: yes, no, or by size
    hops: int
    inspected: int | None

    @property
    def focus(self) -> set[int] | None:
        """The inspected node, when only its neighbourhood is drawn."""
        return {self.inspected} if self.inspected is not None and st.session_state.get("graph_focus") else None


def state_at(wb: Workbench, turn: int) -> MemoryState:
    """Memory as of `turn`, folded from the log once per turn and kept until the log changes."""
    if turn >= wb.head:
        return wb.engine.state
    if turn == wb.cursor:
        return wb.view.state
    key = (str(wb.db_path), wb.engine.store.last_seq())
    cache = st.session_state.get(_CACHE)
    if cache is None or cache["key"] != key:
        cache = st.session_state[_CACHE] = {"key": key, "states": {}}
    states = cache["states"]
    if turn not in states:
        if len(states) >= CACHED_TURNS:
            states.pop(next(iter(states)))
        states[turn] = wb.engine.store.load_state(upto_turn=turn)      # a fold only: no index rebuild
    return states[turn]


def keep_valid(key: str, valid, default) -> None:
    """Reset a widget's remembered value when `valid(value)` fails (another turn, another file)."""
    if key in st.session_state and not valid(st.session_state[key]):
        st.session_state[key] = default
    st.session_state.setdefault(key, default)


def in_range(low: int, high: int):
    """Validity check for a (first, last) range widget over low..high."""
    return lambda v: isinstance(v, (tuple, list)) and len(v) == 2 and low <= v[0] <= v[1] <= high


def time_travel(wb: Workbench, where) -> int:
    """The turn the graph is drawn at; follows the Replay cursor until the slider is moved."""
    seen = (str(wb.db_path), wb.cursor)
    if st.session_state.get("graph_followed") != seen or st.session_state.get("graph_turn", wb.head + 1) > wb.head:
        # (a slider not drawn on the last run lost its state: coming back from another page follows the cursor)
        st.session_state["graph_turn"], st.session_state["graph_followed"] = wb.cursor, seen
    turn = where.slider("Graph as of turn", 0, wb.head, key="graph_turn",
                        help="Time travel: memory folded from the log up to this turn (the Replay cursor by default).")
    if turn != wb.cursor:
        where.caption(f"Showing memory as of turn {turn}; the Replay cursor is at turn {wb.cursor}.")
    return turn


def session_range(state: MemoryState, where) -> tuple[int, int] | None:
    numbers = session_order(state)
    by_number = {n: s for s, n in numbers.items()}
    ordered = sorted(by_number)
    if len(ordered) < 2:
        return None
    keep_valid("graph_sessions", lambda v: in_range(ordered[0], ordered[-1])(v) and set(v) <= set(ordered),
               (ordered[0], ordered[-1]))
    return where.select_slider("Sessions", ordered, key="graph_sessions",
                               format_func=lambda n: f"Session {by_number[n]}")


def group_words(state: MemoryState) -> str:
    """The schema's group kinds in the plural ("events", "topics and events")."""
    kinds = state.schema.group_kinds if state.schema is not None else ()
    return " and ".join(f"{kind_label(state.schema, k)}s" for k in kinds)


def _picker_row() -> list:
    """A mode picker wide enough for "above 300 nodes" beside a multiselect that takes the rest of the row."""
    row = st.container(horizontal=True, vertical_alignment="bottom", gap="small")
    return [row.container(width=190), row.container(width="stretch")]


def _open_pickers(wb: Workbench, state: MemoryState, current: int | None) -> tuple[list, bool | None, bool | None]:
    """How sessions and group nodes are grouped, and which are drawn open."""
    numbers = session_order(state)
    ordered = sorted(numbers, key=numbers.__getitem__)
    counts = {s: 0 for s in ordered}
    for u in state.units.values():
        counts[u.session] += 1
    c = _picker_row()
    grouping = c[0].selectbox("Group sessions", list(MODES), key="graph_grouping", format_func=SESSION_MODES.get,
                              help="Draw each session as one node (unit count, date) with summary edges between "
                                   "sessions; a click on a session expands it in place.")
    keep_valid("graph_expand", lambda v: isinstance(v, list) and set(v) <= set(ordered),
               [state.units[current].session] if current in state.units else [])
    sessions = c[1].multiselect("Expanded sessions", ordered, key="graph_expand",
                                format_func=lambda s: f"Session {s} · {counts[s]} units",
                                help="Sessions drawn unit by unit while the others stay grouped (or click a session "
                                     "on the graph; click an expanded session's title to collapse it).")
    words = group_words(state)
    groups = sorted(u for u, n in state.units.items() if is_group(state, n))
    if not words:
        return list(sessions), MODES[grouping], None
    c = _picker_row()
    folding = c[0].selectbox(f"Fold {words}", list(MODES), key="graph_fold", format_func=FOLD_MODES.get,
                             help=f"Draw {words} with their members folded into them (▸ n: n members inside) and "
                                  "their members' edges ending on them; a click opens one in place.")
    keep_valid("graph_open", lambda v: isinstance(v, list) and set(v) <= set(groups), [])
    opened = c[1].multiselect(
        f"Open {words}", groups, key="graph_open",
        format_func=lambda i: f"{state.units[i].label} · {state.units[i].status} · {len(state.units[i].members)} "
                              f"members · {state.units[i].summary[:60]}",
        help=f"{words.capitalize()} drawn with their members while the others stay folded (or click one on the "
             "graph, and click it again to fold it).")
    return list(sessions) + list(opened), MODES[grouping], MODES[folding]


def controls(wb: Workbench, state: MemoryState, sessions: tuple[int, int] | None) -> GraphChoice:
    """Filter widgets, what is drawn open and the inspected node."""
    schema = state.schema
    counts = state.edge_counts()
    types = edge_types_of(state)
    status_counts = state.status_counts()
    statuses = statuses_of(state)
    shown_types: list[str] = []
    if types:                       # a row of its own: engines declare up to a handful of edge types
        shown_types = st.pills("Edge types", types, selection_mode="multi", default=types,
                               key=f"graph_edge_types:{wb.engine_name}",
                               format_func=lambda t: f"{edge_style(t, schema)['label']} · {counts.get(t, 0)}")
    else:
        st.caption(f"{schema.label if schema else 'This engine'} keeps no edges: nodes only.")
    row = st.container(horizontal=True, vertical_alignment="bottom")
    c = [row.container(width="stretch"), row.container(width="content"), row.container(width=170)]
    shown_statuses = c[0].pills("Statuses", statuses, selection_mode="multi", default=statuses,
                                key=f"graph_statuses:{wb.engine_name}",
                                format_func=lambda s: f"{status_label(schema, s) or MISSING} · "
                                                      f"{status_counts.get(s, 0)}",
                                help="Lifecycle statuses of the engine; off-surface ones are hollow dashed squares.")
    visible_only = c[1].toggle("Surface only", key="graph_visible_only",
                               help=f"Hide nodes off the retrieval surface ({off_surface_word(schema)}).")
    max_nodes = c[2].number_input("Max nodes drawn", 50, 6000, 400, 50, key="graph_max_nodes",
                                  help="Above this, the most recent nodes are drawn and the rest counted as hidden.")
    current = state.turn_units.get(wb.current_turn.id) if wb.current_turn else None
    expand, group, fold = _open_pickers(wb, state, current)
    row = st.container(horizontal=True, vertical_alignment="bottom", gap="small")
    c = [row.container(width=260), row.container(width="stretch"), row.container(width="content"),
         row.container(width=130)]
    search = c[0].text_input("Search text", key="graph_search", placeholder="raw, summary, keywords or D5:4",
                             help="Case-insensitive; draws only the nodes whose text matches.")
    uid = None
    if state.units:
        keep_valid("graph_unit", state.units.__contains__, current if current in state.units else max(state.units))
        uid = c[1].selectbox("Inspect node (ringed on the graph; or click it there)", sorted(state.units),
                             key="graph_unit", on_change=open_inspected, args=(state,),
                             format_func=lambda i: f"{state.units[i].label} · {visibility_text(state.units[i])} · "
                                                   f"{state.units[i].summary[:90]}")
        c[2].toggle("Neighbourhood only", key="graph_focus",
                    help="Draw only the inspected node and its neighbours up to the given number of hops.")
        c[3].number_input("Hops", 1, 4, 1, key="graph_hops", disabled=not st.session_state.get("graph_focus"))
    hops = int(st.session_state.get("graph_hops", 1))
    filters = {"edge_types": set(shown_types) if types else None, "visible_only": visible_only, "search": search,
               "max_nodes": int(max_nodes), "statuses": set(shown_statuses or []), "sessions": sessions, "hops": hops}
    return GraphChoice(filters, expand, group, fold, hops, uid)


def _add(key: str, values) -> None:
    current = list(st.session_state.get(key) or [])
    st.session_state[key] = current + [v for v in values if v not in current]


def open_inspected(state: MemoryState) -> None:
    """Open the session and the group nodes holding the node just chosen for inspection, so its ring shows."""
    uid = st.session_state.get("graph_unit")
    if uid in state.units:
        _add("graph_expand", [state.units[uid].session])
        _add("graph_open", sorted(holding(state, {uid})))


def on_graph_click(state: MemoryState, folding: bool) -> None:
    """A node clicked on the graph: a unit is inspected (a group node also opens or folds, when group nodes
    fold), a session group expands, a band title collapses."""
    node = clicked_node(CANVAS)
    if isinstance(node, int) and node in state.units:
        st.session_state["graph_unit"] = node
        if folding and is_group(state, state.units[node]):
            opened = list(st.session_state.get("graph_open") or [])
            st.session_state["graph_open"] = [g for g in opened if g != node] if node in opened else opened + [node]
    elif isinstance(node, str) and node.startswith(GROUP_PREFIX):
        _add("graph_expand", [node.removeprefix(GROUP_PREFIX)])
    elif isinstance(node, str) and node.startswith(BAND_PREFIX):
        session = node.removeprefix(BAND_PREFIX)
        st.session_state["graph_expand"] = [s for s in st.session_state.get("graph_expand") or [] if s != session]

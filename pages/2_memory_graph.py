"""Memory graph: units and typed edges at any turn, filters, one unit's lineage, and a diff between turns."""
from __future__ import annotations

import pandas as pd
import streamlit as st

from engine.edge import EDGE_STYLE
from engine.state import MemoryState
from workbench.graph_view import (
    build_graph_html,
    diff_rows,
    diff_states,
    edge_rows,
    edge_style,
    lineage,
    select_units,
    session_order,
    visibility_text,
)
from workbench.model import Workbench
from workbench.state import get_workbench, header

HEIGHT = 640
CACHED_TURNS = 16
_CACHE = "graph_states"


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


def _keep_valid(key: str, valid, default) -> None:
    """Reset a widget's remembered value when `valid(value)` fails (another turn, another file)."""
    if key in st.session_state and not valid(st.session_state[key]):
        st.session_state[key] = default
    st.session_state.setdefault(key, default)


def _in_range(low: int, high: int):
    """Validity check for a (first, last) range widget over low..high."""
    return lambda v: isinstance(v, (tuple, list)) and len(v) == 2 and low <= v[0] <= v[1] <= high


def time_travel(wb: Workbench, where) -> int:
    """The turn the graph is drawn at; follows the Replay cursor until the slider is moved."""
    seen = (str(wb.db_path), wb.cursor)
    if st.session_state.get("graph_followed") != seen or st.session_state.get("graph_turn", 0) > wb.head:
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
    _keep_valid("graph_sessions", lambda v: _in_range(ordered[0], ordered[-1])(v) and set(v) <= set(ordered),
                (ordered[0], ordered[-1]))
    return where.select_slider("Sessions", ordered, key="graph_sessions",
                               format_func=lambda n: f"Session {by_number[n]}")


def controls(wb: Workbench, state: MemoryState) -> tuple[dict, int | None]:
    """Filter widgets and the inspected unit: keyword arguments for `build_graph_html` and the unit id."""
    counts = state.edge_counts()
    types = list(EDGE_STYLE) + sorted(set(counts) - set(EDGE_STYLE))
    c = st.columns([7, 2, 2], vertical_alignment="bottom")
    shown_types = c[0].pills("Edge types", types, selection_mode="multi", default=types, key="graph_edge_types",
                             format_func=lambda t: f"{edge_style(t)['label']} · {counts.get(t, 0)}")
    visible_only = c[1].toggle("Visible only", key="graph_visible_only", help="Hide archived units.")
    max_nodes = c[2].number_input("Max units drawn", 50, 3000, 400, 50, key="graph_max_nodes",
                                  help="Above this, the most recent units are drawn and the rest counted as hidden.")
    c = st.columns([3, 6, 3], vertical_alignment="bottom")
    search = c[0].text_input("Search text", key="graph_search", placeholder="raw, summary, keywords or D5:4",
                             help="Case-insensitive; draws only the units whose text matches.")
    uid = None
    if state.units:
        current = state.turn_units.get(wb.current_turn.id) if wb.current_turn else None
        _keep_valid("graph_unit", state.units.__contains__, current if current in state.units else max(state.units))
        uid = c[1].selectbox("Inspect unit (ringed on the graph)", sorted(state.units), key="graph_unit",
                             format_func=lambda i: f"{state.units[i].label} · {visibility_text(state.units[i])} · "
                                                   f"{state.units[i].summary[:90]}")
        c[2].toggle("Focus on it and its neighbours", key="graph_focus")
    return {"edge_types": set(shown_types), "visible_only": visible_only, "search": search,
            "max_nodes": int(max_nodes)}, uid


def unit_detail(state: MemoryState, uid: int) -> None:
    u = state.units[uid]
    st.markdown(f"#### {u.label} · {visibility_text(u)}")
    st.dataframe(pd.DataFrame([{"kind": u.kind, "time": u.time, "session": u.session,
                                "source ids": ", ".join(u.source_ids), "speakers": ", ".join(u.speakers),
                                "made by": u.made_by, "created at turn": u.created_turn}]),
                 hide_index=True, width="stretch")
    st.markdown("**Raw evidence** (never changes)")
    st.code(u.raw, language=None, wrap_lines=True)
    st.markdown("**Summary** (regenerable descriptor)")
    st.code(u.summary, language=None, wrap_lines=True)
    st.markdown("**Keywords** · " + (", ".join(f"`{k}`" for k in u.keywords) or "—"))
    lin = lineage(state, uid)
    st.markdown("**Version lineage**")
    rows = [{"relation": "supersedes (older)" if rel == "supersedes" else "superseded by (newer)", "steps": d,
             "unit": state.units[n].label, "is": visibility_text(state.units[n]), "summary": state.units[n].summary}
            for rel in ("superseded_by", "supersedes") for d, n in lin[rel]]
    if rows:
        st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch")
    else:
        st.caption("No version edges: nothing supersedes this unit and it supersedes nothing.")
    edges = edge_rows(state, uid)
    st.markdown(f"**Edges** · {sum(r['direction'] == 'out →' for r in edges)} out, "
                f"{sum(r['direction'] == '← in' for r in edges)} in")
    if edges:
        st.dataframe(pd.DataFrame(edges), hide_index=True, width="stretch")


def diff_panel(wb: Workbench) -> None:
    _keep_valid("graph_diff", _in_range(0, wb.head), (max(0, wb.cursor - 1), wb.cursor))
    first, last = st.slider("Diff between turns", 0, wb.head, key="graph_diff",
                            help="What changed in memory from the first turn to the second (ingests and runs).")
    st.toggle("Ring the units added or archived in this diff on the graph", key="graph_ring_diff")
    old, new = state_at(wb, first), state_at(wb, last)
    diff = diff_states(old, new)
    rows = diff_rows(diff, old, new)
    labels = {"added": "Units added", "archived": "Archived", "restored": "Restored", "removed": "Removed",
              "redescribed": "Re-described", "rewired": "Rewired (σ)", "edges added": "Edges added",
              "edges removed": "Edges removed"}
    cols = st.columns(len(labels))
    for col, (key, label) in zip(cols, labels.items()):
        col.metric(label, len(rows[key]))
    for key, label in labels.items():
        if rows[key]:
            st.markdown(f"**{label}** (turn {first} → {last})")
            st.dataframe(pd.DataFrame(rows[key]), hide_index=True, width="stretch")
    if not any(rows.values()):
        st.caption(f"Nothing changed between turn {first} and turn {last}.")


wb = get_workbench()
header(wb)
st.subheader("Memory graph")
if wb.head == 0:
    st.info("Memory is empty: step through the conversation on the **Replay** page first.")
    st.stop()

top = st.columns(2)
turn = time_travel(wb, top[0])
state = state_at(wb, turn)
sessions = session_range(state, top[1])
opts, uid = controls(wb, state)
opts["sessions"] = sessions
focus = {uid} if uid is not None and st.session_state.get("graph_focus") else None
rings = {uid} if uid is not None else set()
if st.session_state.get("graph_ring_diff") and st.session_state.get("graph_diff"):
    a, b = st.session_state["graph_diff"]
    changed = diff_states(state_at(wb, a), state_at(wb, b))
    rings |= {u for u in changed["added_units"] + changed["archived_units"] if u in state.units}

selection = select_units(state, focus=focus, pinned=rings, **opts)
if selection.hidden:
    st.warning(f"{selection.hidden:,} of {selection.matched:,} units that pass the filters are hidden: the graph "
               f"draws the {opts['max_nodes']:,} most recent plus the inspected unit. Narrow the session range, "
               "search for text, or focus on the inspected unit to see the rest.")
st.iframe(build_graph_html(state, highlight_units=rings, focus=focus, height_px=HEIGHT, **opts), height=HEIGHT + 20)
st.caption("Hover a unit for its raw evidence, summary, keywords, time and source ids; drag to pan, scroll to zoom. "
           "Rows are sessions, columns are time; units made by consolidation sit under their source.")

details, changes = st.tabs(["Unit details", "Diff between two turns"])
with details:
    if uid is not None:
        unit_detail(state, uid)
with changes:
    diff_panel(wb)

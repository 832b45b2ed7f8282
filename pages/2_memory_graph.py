"""Memory graph: nodes and typed edges at any turn, filters, one node's lineage, and a diff between turns.

Edge types, node kinds and statuses (and their colours, dashes, labels) come from the engine's schema. Above
`GROUP_ABOVE` nodes sessions are drawn as group nodes; a click on a group expands it, a click on a node
inspects it (the graph is a custom component that sends the click back)."""
from __future__ import annotations

import pandas as pd
import streamlit as st

from engine.core.state import MemoryState
from workbench.graph_canvas import clicked_node, graph_canvas
from workbench.graph_view import (
    BAND_PREFIX,
    GROUP_ABOVE,
    GROUP_PREFIX,
    build_graph_html,
    diff_default,
    diff_rows,
    diff_states,
    edge_rows,
    edge_style,
    edge_types_of,
    groups_sessions,
    lineage,
    off_surface_word,
    select_units,
    session_order,
    status_label,
    statuses_of,
    visibility_text,
)
from workbench.lifecycle_view import (
    LIFECYCLE_KINDS,
    MAX_LANES,
    attrs_frame,
    default_kind,
    kinds_with_transitions,
    lifecycle_figure,
    lifecycle_lanes,
    select_lanes,
    transitions_frame,
)
from workbench.model import Workbench
from workbench.state import get_workbench, header
from workbench.topic_view import has_network, network_label, render_network
from workbench.text import MISSING, md_code, table

HEIGHT = 640
CACHED_TURNS = 16
_CACHE = "graph_states"
CANVAS = "graph_canvas"
GROUPING = {"auto": None, "always": True, "never": False}
GROUPING_LABELS = {"auto": f"above {GROUP_ABOVE} nodes", "always": "always", "never": "never"}


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
    _keep_valid("graph_sessions", lambda v: _in_range(ordered[0], ordered[-1])(v) and set(v) <= set(ordered),
                (ordered[0], ordered[-1]))
    return where.select_slider("Sessions", ordered, key="graph_sessions",
                               format_func=lambda n: f"Session {by_number[n]}")


def controls(wb: Workbench, state: MemoryState) -> tuple[dict, int | None]:
    """Filter widgets and the inspected node: keyword arguments for `build_graph_html` and the node id."""
    schema = state.schema
    counts = state.edge_counts()
    types = edge_types_of(state)
    status_counts = state.status_counts()
    statuses = statuses_of(state)
    off = off_surface_word(schema)
    shown_types: list[str] = []
    if types:                       # a row of its own: engines declare up to a handful of edge types
        shown_types = st.pills("Edge types", types, selection_mode="multi", default=types,
                               key=f"graph_edge_types:{wb.engine_name}",
                               format_func=lambda t: f"{edge_style(t, schema)['label']} · {counts.get(t, 0)}")
    else:
        st.caption(f"{schema.label if schema else 'This engine'} keeps no edges: nodes only.")
    c = st.columns([7, 2, 2], vertical_alignment="bottom")
    shown_statuses = c[0].pills("Statuses", statuses, selection_mode="multi", default=statuses,
                                key=f"graph_statuses:{wb.engine_name}",
                                format_func=lambda s: f"{status_label(schema, s) or MISSING} · "
                                                      f"{status_counts.get(s, 0)}",
                                help="Lifecycle statuses of the engine; off-surface ones are hollow dashed squares.")
    visible_only = c[1].toggle("Surface only", key="graph_visible_only",
                               help=f"Hide nodes off the retrieval surface ({off}).")
    max_nodes = c[2].number_input("Max nodes drawn", 50, 6000, 400, 50, key="graph_max_nodes",
                                  help="Above this, the most recent nodes are drawn and the rest counted as hidden.")
    numbers = session_order(state)
    ordered = sorted(numbers, key=numbers.__getitem__)
    counts_by_session = {s: 0 for s in ordered}
    for u in state.units.values():
        counts_by_session[u.session] += 1
    c = st.columns([2, 10], vertical_alignment="bottom")
    grouping = c[0].selectbox("Group sessions", list(GROUPING), key="graph_grouping",
                              format_func=GROUPING_LABELS.__getitem__,
                              help="Draw each session as one node (unit count, date) with summary edges between "
                                   "sessions; a click on a session expands it in place.")
    current = state.turn_units.get(wb.current_turn.id) if wb.current_turn else None
    _keep_valid("graph_expand", lambda v: isinstance(v, list) and set(v) <= set(ordered),
                [state.units[current].session] if current in state.units else [])
    expand = c[1].multiselect("Expanded sessions", ordered, key="graph_expand",
                              format_func=lambda s: f"Session {s} · {counts_by_session[s]} units",
                              help="Sessions drawn unit by unit while the others stay grouped (or click a session "
                                   "on the graph; click an expanded session's title to collapse it).")
    c = st.columns([3, 5, 2.4, 1.6], vertical_alignment="bottom")
    search = c[0].text_input("Search text", key="graph_search", placeholder="raw, summary, keywords or D5:4",
                             help="Case-insensitive; draws only the nodes whose text matches.")
    uid = None
    if state.units:
        _keep_valid("graph_unit", state.units.__contains__, current if current in state.units else max(state.units))
        uid = c[1].selectbox("Inspect node (ringed on the graph; or click it there)", sorted(state.units),
                             key="graph_unit", on_change=_expand_inspected, args=(state,),
                             format_func=lambda i: f"{state.units[i].label} · {visibility_text(state.units[i])} · "
                                                   f"{state.units[i].summary[:90]}")
        c[2].toggle("Neighbourhood only", key="graph_focus",
                    help="Draw only the inspected node and its neighbours up to the given number of hops.")
        c[3].number_input("Hops", 1, 4, 1, key="graph_hops", disabled=not st.session_state.get("graph_focus"))
    return {"edge_types": set(shown_types) if types else None, "visible_only": visible_only, "search": search,
            "max_nodes": int(max_nodes), "statuses": set(shown_statuses or []), "expand": expand,
            "group": GROUPING[grouping], "hops": int(st.session_state.get("graph_hops", 1))}, uid


def _expand_inspected(state: MemoryState) -> None:
    """Open the session of the node just chosen for inspection, so its ring shows."""
    uid = st.session_state.get("graph_unit")
    if uid in state.units:
        expanded = list(st.session_state.get("graph_expand") or [])
        if state.units[uid].session not in expanded:
            st.session_state["graph_expand"] = expanded + [state.units[uid].session]


def _on_graph_click(state: MemoryState) -> None:
    """A node clicked on the graph: a unit is inspected, a session group expands, a band title collapses."""
    node = clicked_node(CANVAS)
    expanded = list(st.session_state.get("graph_expand") or [])
    if isinstance(node, int) and node in state.units:
        st.session_state["graph_unit"] = node
    elif isinstance(node, str) and node.startswith(GROUP_PREFIX):
        session = node.removeprefix(GROUP_PREFIX)
        st.session_state["graph_expand"] = expanded + [session] * (session not in expanded)
    elif isinstance(node, str) and node.startswith(BAND_PREFIX):
        st.session_state["graph_expand"] = [s for s in expanded if s != node.removeprefix(BAND_PREFIX)]


def unit_detail(state: MemoryState, uid: int) -> None:
    schema = state.schema
    u = state.units[uid]
    kind = schema.kind(u.kind) if schema else None
    status = schema.status(u.status) if schema else None
    st.markdown(f"#### {u.label} · {visibility_text(u)}")
    if status is not None and status.description:
        st.caption(f"Status **{status.label}**: {status.description}")
    st.dataframe(table(pd.DataFrame([{"kind": kind.label if kind else u.kind, "status": u.status, "time": u.time,
                                      "session": u.session, "source ids": ", ".join(u.source_ids),
                                      "speakers": ", ".join(u.speakers), "made by": u.made_by,
                                      "created at turn": u.created_turn,
                                      **({"members": ", ".join(f"u{m}" for m in u.members)} if u.members else {})}])),
                 hide_index=True, width="stretch")
    if u.raw or not u.members:
        st.markdown("**Raw evidence** (never changes)")
        st.code(u.raw, language=None, wrap_lines=True)
    if u.members:
        st.markdown(f"**Records** · {len(u.members)} member(s), each an immutable record with its raw evidence")
        st.dataframe(table(pd.DataFrame([{"record": state.units[m].label, "is": visibility_text(state.units[m]),
                                          "source ids": ", ".join(state.units[m].source_ids),
                                          "raw evidence": state.units[m].raw}
                                         for m in u.members if m in state.units])), hide_index=True, width="stretch")
    if u.attrs:
        st.markdown("**Figures** (the engine's statistics of this node)")
        st.dataframe(table(attrs_frame(u.attrs)), hide_index=True, width="stretch")
    st.markdown("**Summary** (regenerable descriptor)")
    st.code(u.summary, language=None, wrap_lines=True)
    st.markdown("**Keywords** · " + (", ".join(md_code(k) for k in u.keywords) or MISSING))
    lineage_names = [edge_style(t, schema)["label"] for t in (schema.lineage_types if schema else ())]
    if lineage_names:
        lin = lineage(state, uid)
        st.markdown(f"**Version lineage** (along {', '.join(lineage_names)} edges)")
        rows = [{"relation": "supersedes (older)" if rel == "supersedes" else "superseded by (newer)", "steps": d,
                 "unit": state.units[n].label, "is": visibility_text(state.units[n]),
                 "summary": state.units[n].summary}
                for rel in ("superseded_by", "supersedes") for d, n in lin[rel]]
        if rows:
            st.dataframe(table(pd.DataFrame(rows)), hide_index=True, width="stretch")
        else:
            st.caption("No lineage edges: nothing supersedes this node and it supersedes nothing.")
    edges = edge_rows(state, uid)
    st.markdown(f"**Edges** · {sum(r['direction'] == 'out →' for r in edges)} out, "
                f"{sum(r['direction'] == '← in' for r in edges)} in")
    if edges:
        st.dataframe(table(pd.DataFrame(edges)), hide_index=True, width="stretch")


def diff_panel(wb: Workbench) -> None:
    _keep_valid("graph_diff", _in_range(0, wb.head), diff_default(wb.cursor, wb.head))
    first, last = st.slider("Diff between turns", 0, wb.head, key="graph_diff",
                            help="What changed in memory from the first turn to the second (ingests and runs).")
    st.toggle("Ring the nodes added or taken off the surface in this diff", key="graph_ring_diff")
    old, new = state_at(wb, first), state_at(wb, last)
    diff = diff_states(old, new)
    rows = diff_rows(diff, old, new)
    off = off_surface_word(new.schema)
    labels = {"added": "Nodes added", "archived": off.capitalize(), "restored": "Back on the surface",
              "removed": "Removed", "redescribed": "Re-described", "status changes": "Status changes",
              "rewired": "Rewired", "edges added": "Edges added", "edges removed": "Edges removed"}
    cols = st.columns(len(labels))
    for col, (key, label) in zip(cols, labels.items()):
        col.metric(label, len(rows[key]))
    for key, label in labels.items():
        if rows[key]:
            st.markdown(f"**{label}** (turn {first} → {last})")
            st.dataframe(table(pd.DataFrame(rows[key])), hide_index=True, width="stretch")
    if not any(rows.values()):
        st.caption(f"Nothing changed between turn {first} and turn {last}.")


def lifecycle_panel(wb: Workbench, state: MemoryState, opts: dict, focus, uid: int | None) -> None:
    """A swimlane per node of one kind over turns, from the log's status changes up to the drawn turn; the
    lanes follow the graph's filters (sessions, statuses, search, surface only, focus)."""
    schema = state.schema
    lanes = lifecycle_lanes(wb.engine.store.ops(upto_seq=state.seq, kinds=LIFECYCLE_KINDS))
    kinds = kinds_with_transitions(lanes)
    if not kinds:
        st.caption("No node has changed status up to this turn: nothing to draw yet.")
        return

    def kind_label(k: str) -> str:
        spec = schema.kind(k) if schema is not None else None
        return spec.label if spec else k

    _keep_valid("graph_lane_kind", kinds.__contains__, default_kind(state, kinds))
    c = st.columns([3, 2], vertical_alignment="bottom")
    kind = c[0].selectbox("Lanes for", kinds, key="graph_lane_kind",
                          format_func=lambda k: f"{kind_label(k)} · {sum(ln.kind == k for ln in lanes.values())}",
                          help="One lane per node of this kind (kinds whose nodes change status).")
    cap = c[1].number_input("Max lanes drawn", 1, 500, MAX_LANES, 5, key="graph_max_lanes",
                            help="Above this, the most recently created nodes are drawn (plus the inspected one).")
    filters = {k: v for k, v in opts.items() if k not in ("expand", "group")}
    keep = select_units(state, focus=focus, **{**filters, "max_nodes": max(1, len(state.units))}).shown
    chosen = select_lanes({i: ln for i, ln in lanes.items() if ln.kind == kind}, keep, int(cap),
                          pinned=[uid] if uid is not None else [])
    noun = f"{kind_label(kind)}s"
    if chosen.hidden:
        st.warning(f"Showing {len(chosen.lanes)} of {chosen.matched} {noun} that pass the filters (the most "
                   "recent, plus the inspected node): narrow by session, status or search to see the others.")
    else:
        st.caption(f"Showing {len(chosen.lanes)} of {chosen.matched} {noun} that pass the filters. Colour = status "
                   "(as on the graph), ◆ = a transition: hover it for its cause and figures. Transitions an "
                   "offline run made sit half a turn after the turn it ran at.")
    if not chosen.lanes:
        return
    now = max([float(state.turn)] + [t.x for ln in chosen.lanes for t in ln.transitions])
    st.plotly_chart(lifecycle_figure(state, chosen.lanes, now), width="stretch", key="graph_lifecycle")
    with st.expander(f"Transitions of these {noun} (table)"):
        st.dataframe(table(transitions_frame(chosen.lanes, schema)), hide_index=True, width="stretch")


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

draw = {k: opts[k] for k in ("expand", "group", "hops")}
filters = {k: v for k, v in opts.items() if k not in draw}
selection = select_units(state, focus=focus, pinned=rings, hops=draw["hops"], **filters)
grouped = groups_sessions(selection.matched, focus, draw["group"])
if selection.hidden and not grouped:
    st.warning(f"{selection.hidden:,} of {selection.matched:,} nodes that pass the filters are hidden: the graph "
               f"draws the {opts['max_nodes']:,} most recent plus the inspected node. Narrow the session range, "
               "search for text, or focus on the inspected node to see the rest.")
graph_canvas(build_graph_html(state, highlight_units=rings, focus=focus, height_px=HEIGHT, expand_highlighted=False,
                              **opts), HEIGHT + 20, CANVAS, lambda: _on_graph_click(state))
st.caption("Click a node to inspect it below; hover it for its raw evidence, summary, keywords, time and source ids; "
           "drag to pan, scroll to zoom. " + (
               "Sessions are drawn as groups in time order (click one to expand it in place, click its title to "
               "collapse it); edges between groups stand for all the edges between their units."
               if grouped else "Rows are sessions, columns are time; nodes made by an offline process sit under "
                               "their source."))

network = [network_label(state)] if has_network(state) else []
details, timeline, changes, *rest = st.tabs(["Node details", "Lifecycle timeline", "Diff between two turns", *network])
for tab in rest:
    with tab:
        render_network(state)
with details:
    if uid is not None:
        unit_detail(state, uid)
with timeline:
    lifecycle_panel(wb, state, opts, focus, uid)
with changes:
    diff_panel(wb)

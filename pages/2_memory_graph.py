"""Memory graph: nodes and typed edges at any turn, filters, one node's lineage, and a diff between turns.

Edge types, node kinds and statuses (and their colours, dashes, labels) come from the engine's schema. Above
`GROUP_ABOVE` nodes sessions are drawn as group nodes, and above `FOLD_ABOVE` group nodes (MemLoom's events)
fold their members in; a click on a collapsed one opens it, a click on a node inspects it (the graph is a
custom component that sends the click back)."""
from __future__ import annotations

import streamlit as st

from engine.core.diff import diff_states
from workbench.graph.canvas import graph_canvas
from workbench.graph.controls import CANVAS, controls, group_words, on_graph_click, session_range, state_at, time_travel
from workbench.graph.layers import layer_kinds, render_layers
from workbench.graph.panels import diff_panel, lifecycle_panel, unit_detail
from workbench.graph.style import FOLDED, OPENED
from workbench.graph.topics import has_network, network_label, render_network
from workbench.graph.view import draw_graph
from workbench.state import get_workbench, header

HEIGHT = 720

wb = get_workbench()
header(wb)
st.subheader("Memory graph")
if wb.head == 0:
    st.info("Memory is empty: step through the conversation on the **Replay** page first.")
    st.stop()

top = st.columns(2)
turn = time_travel(wb, top[0])
state = state_at(wb, turn)
choice = controls(wb, state, session_range(state, top[1]))
rings = {choice.inspected} if choice.inspected is not None else set()
if st.session_state.get("graph_ring_diff") and st.session_state.get("graph_diff"):
    a, b = st.session_state["graph_diff"]
    changed = diff_states(state_at(wb, a), state_at(wb, b))
    rings |= {u for u in changed["added_units"] + changed["archived_units"] if u in state.units}

document, drawing = draw_graph(state, highlight_units=rings, focus=choice.focus, height_px=HEIGHT,
                               expand_highlighted=False, expand=choice.expand, group=choice.group, fold=choice.fold,
                               **choice.filters)
if drawing.selection.hidden and not drawing.grouped:
    st.warning(f"{drawing.selection.hidden:,} of {drawing.selection.matched:,} nodes that pass the filters are hidden: "
               f"the graph draws the {choice.filters['max_nodes']:,} most recent plus the inspected node. Narrow the "
               "session range, search for text, or focus on the inspected node to see the rest.")
graph_canvas(document, HEIGHT + 20, CANVAS, lambda: on_graph_click(state, drawing.folding))
st.caption("Click a node to inspect it below; hover it for its raw evidence, summary, keywords, time and source ids; "
           "drag to pan, scroll to zoom. " + (
               "Sessions are drawn as groups in time order (click one to expand it in place, click its title to "
               "collapse it); edges between groups stand for all the edges between their units."
               if drawing.grouped else "Rows are sessions, columns are time; nodes made by an offline process sit "
                                       "under their source.")
           + (f" {group_words(state).capitalize()} marked {FOLDED} n hold their n members (click one to open it, "
              f"click an open one, {OPENED}, to fold it); the members' edges end on them."
              if drawing.folding else ""))

layered = layer_kinds(state)          # kinds that lineage links join into layers (RecMem: fact, episode, unit, ...)
network = [network_label(state)] if has_network(state) else []
layers = ["Layers"] if len(layered) >= 3 else []
details, timeline, changes, *rest = st.tabs(["Node details", "Lifecycle timeline", "Diff between two turns",
                                             *network, *layers])
network_tabs, layer_tabs = rest[:len(network)], rest[len(network):]
for tab in layer_tabs:
    with tab:
        render_layers(state, layered, choice.inspected)
with details:
    if choice.inspected is not None:
        unit_detail(state, choice.inspected)
with timeline:
    lifecycle_panel(wb, state, choice)
with changes:
    diff_panel(wb)
for tab in network_tabs:
    with tab:
        render_network(state)

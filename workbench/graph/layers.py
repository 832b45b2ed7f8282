"""The Layers view of the Memory graph page: node kinds linked by lineage edges, drawn as stacked bands.

For an engine whose lineage links run across kinds (RecMem: fact → episode → unit → message along
`derived_from`) the kinds are ordered from those nothing derives from (facts) down to those that derive from
nothing (messages), each a band; a node sits at the conversation position of what it derives from (a unit at
its first message, an episode and a fact at the mean of their members or cited units), so a link runs almost
straight down. One marker per node (colour by status, as on the graph), one line per lineage edge; the inspected
node's chain up and down is drawn thicker. A whole LoCoMo conversation (about 800 nodes) stays readable: the
bands keep the layers apart, and the message band can be left out.
"""
from __future__ import annotations

import html
from collections import defaultdict

import plotly.graph_objects as go
import streamlit as st

from engine.core.state import MemoryState
from workbench.chart_style import LEGEND_ABOVE
from workbench.graph.style import kind_color, status_style

JITTER = 0.12               # nodes of one band alternate this far above and below its line
TEXT = 240                  # characters of a node's text in its hover


def layer_kinds(state: MemoryState) -> list[str]:
    """Kinds joined by lineage edges across kinds, top (derived from others, nothing derived from it) to bottom."""
    schema = state.schema
    lineage = set(schema.lineage_types) if schema is not None else set()
    pairs = {(state.nodes[s].kind, state.nodes[d].kind) for (s, d, t) in state.edges if t in lineage
             and s in state.nodes and d in state.nodes and state.nodes[s].kind != state.nodes[d].kind}
    kinds = {k for pair in pairs for k in pair}
    depth = {k: 0 for k in kinds}
    for _ in range(len(kinds)):                      # longest path from a top kind (no cycles in a lineage)
        for a, b in pairs:
            depth[b] = max(depth[b], depth[a] + 1)
    order = [k.name for k in schema.node_kinds] if schema is not None else sorted(kinds)
    return sorted(kinds, key=lambda k: (depth[k], order.index(k) if k in order else len(order)))


def positions(state: MemoryState, kinds: list[str]) -> dict[int, tuple[float, float]]:
    """(x, y) of every node of `kinds`: x its conversation position, y its band (top kind highest)."""
    lineage = set(state.schema.lineage_types) if state.schema is not None else set()
    turn_pos = {tid: i + 1 for i, tid in enumerate(state.turn_ids)}
    x: dict[int, float] = {}
    for u in state.nodes.values():
        places = [turn_pos[s] for s in u.source_ids if s in turn_pos]
        if places:
            x[u.id] = min(places) if u.kind in kinds[-2:] else sum(places) / len(places)
    for e in state.edges.values():           # a fact sits over the units it cites, not over all of its episode
        if e.type in lineage and e.evidence and e.src in x:
            cited = [x[c] for c in e.evidence if c in x]
            if cited:
                x[e.src] = sum(cited) / len(cited)
    out = {}
    band = {k: len(kinds) - 1 - i for i, k in enumerate(kinds)}
    for k in kinds:
        ids = sorted((u.id for u in state.nodes.values() if u.kind == k and u.id in x), key=lambda i: (x[i], i))
        for n, uid in enumerate(ids):
            out[uid] = (x[uid], band[k] + (JITTER if n % 2 else -JITTER) * (k not in kinds[-1:]))
    return out


def chain(state: MemoryState, uid: int) -> set[tuple[int, int, str]]:
    """The lineage edges up from and down from one node."""
    lineage = set(state.schema.lineage_types) if state.schema is not None else set()
    found: set[tuple[int, int, str]] = set()
    for step in (state.out_edges, state.in_edges):
        todo = [uid]
        seen = {uid}
        while todo:
            node = todo.pop()
            for e in step(node):
                if e.type in lineage:
                    found.add(e.key)
                    nxt = e.dst if step == state.out_edges else e.src
                    if nxt not in seen:
                        seen.add(nxt)
                        todo.append(nxt)
    return found


def layers_figure(state: MemoryState, kinds: list[str], inspected: int | None = None) -> go.Figure:
    schema = state.schema
    pos = positions(state, kinds)
    lineage = set(schema.lineage_types) if schema is not None else set()
    bold = chain(state, inspected) if inspected is not None else set()
    fig = go.Figure()
    lines: dict[str, list] = defaultdict(list)
    for (s, d, t), e in state.edges.items():
        if t in lineage and s in pos and d in pos:
            lines["bold" if (s, d, t) in bold else "thin"] += [pos[s], pos[d], (None, None)]
    for name, points in (("thin", lines["thin"]), ("bold", lines["bold"])):
        if points:
            fig.add_trace(go.Scattergl(x=[p[0] for p in points], y=[p[1] for p in points], mode="lines",
                                       hoverinfo="skip", showlegend=False,
                                       line={"color": "#2ca02c" if name == "bold" else "rgba(120,120,120,0.25)",
                                             "width": 2.5 if name == "bold" else 0.8}))
    for k in kinds:
        nodes = [u for u in state.nodes.values() if u.kind == k and u.id in pos]
        spec = schema.kind(k) if schema is not None else None
        by_status: dict[str, list] = defaultdict(list)
        for u in nodes:
            by_status[u.status].append(u)
        for status, members in by_status.items():
            color, _ = status_style(schema, status)
            fig.add_trace(go.Scattergl(
                x=[pos[u.id][0] for u in members], y=[pos[u.id][1] for u in members], mode="markers",
                name=html.escape(f"{spec.label if spec else k} · {status}"), customdata=[u.id for u in members],
                marker={"color": color or kind_color(schema, k), "size": [14 if u.id == inspected else 7
                                                                           for u in members],
                        "line": {"color": "#e6a100", "width": [3 if u.id == inspected else 0 for u in members]},
                        "symbol": "circle" if members[0].visible else "square-open"},
                hovertext=[_hover(u) for u in members], hoverinfo="text"))
    band = {k: len(kinds) - 1 - i for i, k in enumerate(kinds)}
    labels = [(schema.kind(k).label if schema is not None and schema.kind(k) else k) for k in kinds]
    fig.update_layout(height=170 + 110 * len(kinds), margin={"l": 10, "r": 10, "t": 70, "b": 10},
                      yaxis={"tickvals": [band[k] for k in kinds], "ticktext": [html.escape(x) for x in labels],
                             "range": [-0.6, len(kinds) - 0.4], "zeroline": False},
                      xaxis={"title": "position in the conversation (turn)", "zeroline": False},
                      legend=LEGEND_ABOVE, plot_bgcolor="#ffffff", dragmode="pan",
                      title="Layers along lineage links (click a node to inspect it)")
    return fig


def _hover(u) -> str:
    text = (u.raw or u.summary).replace("\n", " ")
    text = text if len(text) <= TEXT else text[: TEXT - 1] + "…"
    return html.escape(f"{u.label} · {u.kind} · {u.status} · {', '.join(u.source_ids[:6])}"
                       f"{' …' if len(u.source_ids) > 6 else ''}") + "<br>" + html.escape(text)


def _inspect_clicked(state: MemoryState) -> None:
    """A node clicked on the layers figure becomes the inspected node (its session expanded on the graph)."""
    event = st.session_state.get("graph_layers")
    points = getattr(getattr(event, "selection", None), "points", None) or []
    ids = [p.get("customdata") for p in points if isinstance(p.get("customdata"), int)]
    if ids and ids[0] in state.nodes:
        st.session_state["graph_unit"] = ids[0]
        expanded = list(st.session_state.get("graph_expand") or [])
        session = state.nodes[ids[0]].session
        st.session_state["graph_expand"] = expanded + [session] * (session not in expanded)


def render_layers(state: MemoryState, kinds: list[str], inspected: int | None) -> None:
    bottom = kinds[-1]
    label = state.schema.kind(bottom).label if state.schema is not None and state.schema.kind(bottom) else bottom
    keep = st.toggle(f"Draw the {label} band", key="graph_layers_bottom", value=len(state.nodes) <= 300,
                     help=f"The bottom band holds every {label}; leave it out to read the layers above it.")
    shown = kinds if keep else kinds[:-1]
    counts = ", ".join(f"{sum(u.kind == k for u in state.nodes.values())} {k}" for k in kinds)
    st.caption(f"{counts}. Each link is a lineage edge; the inspected node's chain is green and thick. Hover a "
               "node for its text, drag to pan, scroll to zoom.")
    st.plotly_chart(layers_figure(state, shown, inspected), width="stretch", key="graph_layers",
                    on_select=lambda: _inspect_clicked(state), selection_mode="points")

"""The Graph page's network of group nodes joined by weighted relations (GAM's topic associative network).

An engine that declares `weighted` edge types (GAM's support / contradict / coreference / causal / semantic)
gets this view: every group node (a node with members) that such an edge touches or that is on the surface,
the weighted edges between them drawn by type colour and as wide as they are confident, in time order; a
click on a group node expands it into its members (GAM: the archived event graph a topic's cross edges lead
to) and the edges among them, a second click folds it again. At LoCoMo scale a conversation has tens of
topics, so the whole network stays readable where the full graph is thousands of nodes.
"""
from __future__ import annotations

import html

import streamlit as st
from pyvis.network import Network

from engine.core.state import MemoryState
from workbench.graph.canvas import clicked_node, graph_canvas
from workbench.graph.document import document_html
from workbench.graph.legend import Seen, legend_html
from workbench.graph.style import (
    ARCHIVED_GREY,
    LABEL_HALO,
    edge_style,
    edge_title,
    kind_color,
    status_style,
    unit_title,
    weighted_width,
)

X_GAP, ROWS, ROW_GAP = 170, 3, 110          # group nodes in time order, zig-zagging over three rows
MEMBER_COLUMNS, MEMBER_GAP = 4, 46          # an expanded group's members, in a small grid below it


def weighted_types(state: MemoryState) -> set[str]:
    return {t.name for t in state.schema.edge_types if t.weighted} if state.schema is not None else set()


def has_network(state: MemoryState) -> bool:
    """Whether the engine declares weighted relations between group nodes."""
    return bool(weighted_types(state))


def groups(state: MemoryState) -> list[int]:
    """The group nodes of the network, in time order: every node with members on the surface or touched by a
    weighted edge."""
    kinds = weighted_types(state)
    touched = {u for (a, b, t) in state.edges if t in kinds for u in (a, b)}
    found = [n for n in state.nodes.values() if n.members and (n.visible or n.id in touched)]
    return [n.id for n in sorted(found, key=lambda n: (n.time, n.id))]


def network_stats(state: MemoryState) -> dict[str, int]:
    kinds = weighted_types(state)
    counts = {t: 0 for t in sorted(kinds)}
    for (_, _, t) in state.edges:
        if t in kinds:
            counts[t] += 1
    return counts


def build_network_html(state: MemoryState, expanded: set[int] = frozenset(), height_px: int = 560,
                       highlight: int | None = None) -> str:
    """The network document for `workbench.graph.canvas` (or `st.iframe`): group nodes, weighted edges, and the members
    and inner edges of the `expanded` groups."""
    schema, kinds = state.schema, weighted_types(state)
    order = groups(state)
    net = Network(directed=True)
    seen = Seen()
    at: dict[int, tuple[int, int]] = {}
    for i, gid in enumerate(order):
        g = state.nodes[gid]
        x, y = i * X_GAP, (i % ROWS) * ROW_GAP
        at[gid] = (x, y)
        colour, shape = status_style(schema, g.status)
        words = ", ".join(g.keywords[:3])
        look = {"shape": shape or "dot", "color": {"background": colour or kind_color(schema, g.kind),
                                                   "border": "#1a1a1a"}}
        seen.node(g.kind, g.status, look)
        net.add_node(gid, label=f"u{gid}{' ▾' if gid in expanded else ''}\n{words}", title=unit_title(g, schema),
                     x=x, y=y, physics=False, shape=look["shape"], size=12 + min(18, len(g.members) // 2),
                     borderWidth=4 if gid == highlight else 2,
                     color={**look["color"], "border": "#e6a100" if gid == highlight else "#1a1a1a"},
                     font={"size": 15, "face": "sans-serif", **LABEL_HALO})
    drawn = set(order)
    for gid in order:
        if gid not in expanded:
            continue
        gx, _ = at[gid]
        for j, mid in enumerate(m for m in state.nodes[gid].members if m in state.nodes):
            member = state.nodes[mid]
            x = gx + (j % MEMBER_COLUMNS - (MEMBER_COLUMNS - 1) / 2) * MEMBER_GAP
            y = ROWS * ROW_GAP + 60 + (j // MEMBER_COLUMNS) * MEMBER_GAP
            colour, shape = status_style(schema, member.status)
            look = {"shape": shape or "square",
                    "color": {"background": colour or kind_color(schema, member.kind), "border": ARCHIVED_GREY}}
            seen.node(member.kind, member.status, look)
            net.add_node(mid, label=f"u{mid}", title=unit_title(member, schema), x=x, y=y, physics=False,
                         shape=look["shape"], size=8, color=look["color"],
                         font={"size": 11, "face": "sans-serif", "color": "#555555", **LABEL_HALO})
            drawn.add(mid)
    opened = {m for gid in expanded if gid in state.nodes for m in state.nodes[gid].members}
    drawn_edges = 0
    for (a, b, t), edge in sorted(state.edges.items()):
        if a not in drawn or b not in drawn:
            continue
        inside = t not in kinds                     # a group's link to its members, or among them
        if inside and not ((a in expanded or a in opened) and b in opened):
            continue
        style = edge_style(t, schema)
        width = weighted_width(style["width"] * 1.6, edge.confidence) if t in kinds and edge.confidence is not None \
            else style["width"]
        net.add_edge(a, b, title=edge_title(edge, schema), width=width, dashes=bool(style["dashes"]),
                     color={"color": style["color"], "opacity": style["opacity"]},
                     smooth={"enabled": True, "type": "curvedCW", "roundness": 0.2} if not inside else False)
        seen.edge_types.add(t)
        drawn_edges += 1
    counts = network_stats(state)
    summary = (f"{len(order)} group nodes, {drawn_edges} edges drawn ("
               + ", ".join(f"{n} {t}" for t, n in counts.items()) + " relations in all); "
               + (f"{len(expanded)} expanded. " if expanded else "")
               + "Edge width grows with confidence. Click a node to expand it into its members, again to fold it.")
    net.options = {"physics": {"enabled": False}, "layout": {"improvedLayout": False},
                   "interaction": {"hover": True, "tooltipDelay": 150},
                   "edges": {"arrows": {"to": {"enabled": True, "scaleFactor": 0.5}}}}
    seen.ringed = highlight in drawn
    return document_html(net, height_px, summary, legend_html(schema, seen))


def network_caption(state: MemoryState) -> str:
    counts = network_stats(state)
    label = ", ".join(f"{html.escape(t)} {n}" for t, n in counts.items())
    return f"{len(groups(state))} group nodes; weighted relations: {label or 'none yet'}."


# -- the panel ---------------------------------------------------------------------------------------
EXPANDED_KEY, NETWORK_CANVAS = "graph_network_expand", "graph_network_canvas"


def network_label(state: MemoryState) -> str:
    """"Topic network": named after the kind of the group nodes (the schema's label)."""
    kinds = {state.nodes[g].kind for g in groups(state)}
    spec = state.schema.kind(next(iter(kinds))) if len(kinds) == 1 and state.schema is not None else None
    return f"{spec.label.capitalize()} network" if spec else "Relation network"


def _toggle(state: MemoryState) -> None:
    node = clicked_node(NETWORK_CANVAS)
    opened = set(st.session_state.get(EXPANDED_KEY) or [])
    if isinstance(node, int) and node in state.nodes and state.nodes[node].members:
        st.session_state[EXPANDED_KEY] = sorted(opened ^ {node})


def render_network(state: MemoryState, height_px: int = 560) -> None:
    """The network with its expand control (a multiselect, or a click on a group node)."""
    order = groups(state)
    if not order:
        st.info("No group node yet: the network fills as the engine consolidates.")
        return
    known = [g for g in (st.session_state.get(EXPANDED_KEY) or []) if g in order]
    st.session_state[EXPANDED_KEY] = known
    st.multiselect("Expanded (drawn with their members)", order, key=EXPANDED_KEY,
                   format_func=lambda g: f"u{g} · {', '.join(state.nodes[g].keywords[:4])} · "
                                         f"{len(state.nodes[g].members)} members")
    st.caption(network_caption(state))
    graph_canvas(build_network_html(state, set(st.session_state[EXPANDED_KEY]), height_px), height_px + 20,
                 NETWORK_CANVAS, lambda: _toggle(state))

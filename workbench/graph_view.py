"""The memory graph as a self-contained pyvis / vis-network HTML document.

Used by every page that draws memory (graph, retrieval provenance, consolidation diffs), so it is plain
Python over an engine `MemoryState` with no Streamlit. This module decides what is drawn and how edges are
carried: units one by one, sessions collapsed into group nodes, edges drawn, summarised or thinned. The
looks come from `graph_style`, the positions from `graph_layout`, the filters from `graph_select`, the
legend from `graph_legend` and the HTML around the network from `graph_document`.

Above `GROUP_ABOVE` nodes a drawing would be a hairball, so sessions collapse into one group node each
(session, unit count, date) laid out in a grid in time order, and the edges between groups are summarised:
one edge per pair and type, its width growing with the count it stands for. An expanded session opens in
place as a band of its units. Whatever the mode, an edge type with more than `EDGE_TYPE_LIMIT` edges among
the drawn units and more than `HAIRBALL_DENSITY` per unit (similarity links, typically; never a chain) is
thinned: only the edges touching highlighted units are drawn one by one, and between groups each group keeps
its strongest links. Highlighted nodes get a thick ring and highlighted edges are drawn thick while the rest
fade.
"""
from __future__ import annotations

import html
import math
from collections.abc import Iterable
from dataclasses import dataclass, field

from pyvis.edge import Edge
from pyvis.network import Network

from engine.state import MemoryState
from engine.walks import lineage_types
from workbench.graph_document import document_html, vis_options
from workbench.graph_layout import X_STEP, SessionGroup, grouped_layout, layout, session_groups
from workbench.graph_legend import legend_html
from workbench.graph_select import Selection, cap_units, select_units
from workbench.graph_style import (
    GROUP_BORDER,
    GROUP_FILL,
    LABEL_HALO,
    RING_COLOR,
    edge_dashes,
    edge_style,
    edge_title,
    edge_types_of,
    node_label,
    node_options,
    off_surface_word,
    readable,
    unit_title,
)

GROUP_ABOVE = 300                # more nodes than this pass the filters: sessions collapse into group nodes
EDGE_TYPE_LIMIT = 400            # more drawn edges of one type than this (and denser than HAIRBALL_DENSITY
HAIRBALL_DENSITY = 1.5           # per node): only the highlighted ones are drawn, similarity links typically
SUMMARY_PER_GROUP = 2            # of a thinned type, each group keeps its strongest links to this many others
GROUP_PREFIX, BAND_PREFIX = "group:", "session:"  # node ids of a collapsed session and of a band's title


@dataclass
class Drawing:
    """What a document draws: units one by one, collapsed sessions, and edges drawn or summarised."""

    selection: Selection                    # the units drawn one by one, out of those that may be
    grouped: bool = False
    groups: list[SessionGroup] = field(default_factory=list)      # collapsed sessions
    expanded: list[str] = field(default_factory=list)            # sessions drawn unit by unit (grouped only)
    edges: int = 0                          # edges drawn one by one
    summary_edges: int = 0                  # edges standing for several (between groups)
    summarised: int = 0                     # real edges the summary edges stand for
    inner: int = 0                          # edges inside collapsed sessions (counted in their tooltips)
    thinned: dict[str, int] = field(default_factory=dict)        # type -> edges over EDGE_TYPE_LIMIT not drawn


def groups_sessions(passing: int, focus: Iterable[int] | None, group: bool | None) -> bool:
    """Group sessions when asked to, or by default above `GROUP_ABOVE` nodes unless a neighbourhood is drawn."""
    return group if group is not None else focus is None and passing > GROUP_ABOVE


def build_graph_html(state: MemoryState, *, highlight_edges: Iterable[tuple[int, int, str]] = (),
                     highlight_units: Iterable[int] = (), edge_types: set[str] | None = None,
                     visible_only: bool = False, sessions: tuple[int, int] | None = None, search: str = "",
                     focus: Iterable[int] | None = None, max_nodes: int = 400, height_px: int = 600,
                     statuses: set[str] | None = None, edge_labels: dict | None = None,
                     expand: Iterable[str] = (), group: bool | None = None, hops: int = 1,
                     expand_highlighted: bool = True) -> str:
    """A full HTML document for `st.iframe(html, height=height_px + 20)` or `workbench.graph_canvas`.

    `highlight_edges` are stored edge keys (src, dst, type); a key given against the stored direction is
    matched to the stored edge. `edge_labels` writes a label on edges (e.g. "hop 1 (reverse)" on a path).
    `group` forces sessions into group nodes (True) or not (False); by default they are grouped above
    `GROUP_ABOVE` nodes. `expand` names sessions drawn unit by unit when grouped; sessions holding a
    highlighted unit or path are expanded too unless `expand_highlighted` is off (then their group is
    ringed). `hops` is how far `focus` reaches.
    """
    net, drawing = _network(state, highlight_edges=highlight_edges, highlight_units=highlight_units,
                            edge_types=edge_types, visible_only=visible_only, sessions=sessions, search=search,
                            focus=focus, max_nodes=max_nodes, statuses=statuses, edge_labels=edge_labels,
                            expand=expand, group=group, hops=hops, expand_highlighted=expand_highlighted)
    return document_html(net, height_px, _summary_line(drawing, max_nodes, off_surface_word(state.schema)),
                     legend_html(state.schema, grouped=drawing.grouped))


def _network(state: MemoryState, *, highlight_edges, highlight_units, edge_types, visible_only, sessions, search,
             focus, max_nodes, statuses, edge_labels, expand, group, hops,
             expand_highlighted) -> tuple[Network, Drawing]:
    path = {_stored_key(state, tuple(k)) for k in highlight_edges}
    labels = {_stored_key(state, tuple(k)): str(v) for k, v in (edge_labels or {}).items()}
    ringed = {u for u in highlight_units if u in state.units}
    pinned = ringed | {u for s, d, _ in path for u in (s, d)}
    filters = {"edge_types": edge_types, "visible_only": visible_only, "sessions": sessions, "search": search,
               "focus": focus, "statuses": statuses, "hops": hops}
    passing = set(select_units(state, pinned=pinned, max_nodes=max(1, len(state.units)), **filters).shown)
    schema = state.schema
    net = Network(directed=True)
    collapsed: set[str] = set()
    if groups_sessions(len(passing), focus, group):
        groups = session_groups(state, passing)
        pinned_sessions = {state.units[u].session for u in pinned if u in passing}
        opened = set(expand) | (pinned_sessions if expand_highlighted else set())
        opened = {g.session for g in groups if g.session in opened}
        in_open = [u for g in groups if g.session in opened for u in g.units]
        shown = cap_units(state, set(in_open), pinned & set(in_open), max_nodes)
        selection = Selection(shown=shown, matched=len(in_open), pinned=pinned & set(in_open))
        drawing = Drawing(selection, grouped=True, groups=[g for g in groups if g.session not in opened],
                          expanded=[g.session for g in groups if g.session in opened])
        collapsed = {g.session for g in drawing.groups}
        positions, group_at, band_at = grouped_layout(state, groups, set(shown), opened)
        by_session = {g.session: g for g in groups}
        for session, (x, y) in band_at.items():
            _add_band_title(net, by_session[session], x, y)
        for g in drawing.groups:
            _add_group(net, state, g, *group_at[g.session], ringed=bool(pinned & set(g.units)))
    else:
        selection = select_units(state, pinned=pinned, max_nodes=max_nodes, **filters)
        drawing = Drawing(selection)
        positions, row_y = layout(state, selection.shown)
        for session, y in row_y.items():
            net.add_node(f"{BAND_PREFIX}{session}", label=f"Session {session}", shape="text", x=-X_STEP * 1.4, y=y,
                         font={"size": 18, "color": "#555555", "face": "sans-serif", **LABEL_HALO}, physics=False)
    drawn = set(selection.shown)
    for uid in selection.shown:
        unit = state.units[uid]
        x, y = positions[uid]
        net.add_node(uid, label=node_label(unit), title=unit_title(unit, schema), x=x, y=y, physics=False,
                     **readable(node_options(unit, uid in ringed, schema), unit))

    def end(uid: int) -> int | str | None:
        """Where an edge's end is drawn: the unit, the group of its collapsed session, or nowhere."""
        if uid in drawn:
            return uid
        session = state.units[uid].session if uid in passing else None
        return f"{GROUP_PREFIX}{session}" if session in collapsed else None

    one_by_one: dict[str, list] = {}
    summary: dict[tuple, int] = {}
    for key, edge in state.edges.items():
        if key not in path and edge_types is not None and edge.type not in edge_types:
            continue
        a, b = end(edge.src), end(edge.dst)
        if a is None or b is None:
            continue
        if isinstance(a, int) and isinstance(b, int):
            one_by_one.setdefault(edge.type, []).append((key, edge))
        elif a == b:
            drawing.inner += 1
        else:
            pair = (a, b) if str(a) <= str(b) else (b, a)
            summary[(*pair, edge.type)] = summary.get((*pair, edge.type), 0) + 1
    lineage = set(lineage_types(state))
    totals: dict[str, int] = {}
    for etype, items in one_by_one.items():
        totals[etype] = totals.get(etype, 0) + len(items)
    for (_, _, etype), count in summary.items():
        totals[etype] = totals.get(etype, 0) + count
    hairy = {t for t, n in totals.items() if _hairball(n, len(passing)) and t not in lineage}
    large = len(drawn) > 150
    for etype, items in one_by_one.items():
        if etype in hairy and _hairball(len(items), len(drawn)):     # a similarity hairball: only what matters
            kept = [(k, e) for k, e in items if k in path or e.src in ringed or e.dst in ringed]
            drawing.thinned[etype] = len(items) - len(kept)
            items = kept
        for key, edge in items:
            _add_edge(net, _edge_options(state, key, edge, positions, path, labels, large))
            drawing.edges += 1
    order = {t: i for i, t in enumerate(edge_types_of(state))}
    for (a, b, etype), count in _strongest(summary, hairy, drawing.thinned):
        style = edge_style(etype, schema)
        _add_edge(net, {"from": a, "to": b, "count": count, "title": _summary_title(a, b, style, count),
                        "dashes": edge_dashes(style), "width": round(style["width"] + 1.6 * math.log2(count), 2),
                        "color": {"color": style["color"], "opacity": style["opacity"]},
                        "arrows": {"to": {"enabled": False}},
                        "smooth": {"enabled": True, "type": "curvedCW", "roundness": 0.06 + 0.06 * order.get(etype, 0)}})
        drawing.summary_edges += 1
        drawing.summarised += count
    net.options = vis_options(large)
    return net, drawing


def _hairball(edges: int, nodes: int) -> bool:
    """Too many edges of one type to draw one by one: more than `EDGE_TYPE_LIMIT` and more than
    `HAIRBALL_DENSITY` per node (a chain or tree, such as temporal or lineage links, never is one)."""
    return edges > EDGE_TYPE_LIMIT and edges > HAIRBALL_DENSITY * nodes


def _strongest(summary: dict[tuple, int], hairy: set[str], thinned: dict[str, int]) -> list[tuple[tuple, int]]:
    """Summary edges to draw, in a stable order: all of them, except that of a hairball type each end keeps
    only its `SUMMARY_PER_GROUP` strongest links; what is dropped is counted in `thinned`."""
    ordered = sorted(summary.items(), key=lambda kv: (str(kv[0][0]), str(kv[0][1]), kv[0][2]))
    keep: set[tuple] = set()
    for etype in hairy:
        ranked: dict = {}
        for key, count in ordered:
            if key[2] == etype:
                for end in key[:2]:
                    ranked.setdefault(end, []).append((-count, key))
        for links in ranked.values():
            keep.update(key for _, key in sorted(links, key=lambda cl: (cl[0], str(cl[1])))[:SUMMARY_PER_GROUP])
    drawn = []
    for key, count in ordered:
        if key[2] in hairy and key not in keep:
            thinned[key[2]] = thinned.get(key[2], 0) + count
        else:
            drawn.append((key, count))
    return drawn


def _add_edge(net: Network, options: dict) -> None:
    """pyvis's edge record, without `add_edge`'s linear scan of every node per edge (quadratic at 5,000)."""
    net.edges.append(Edge(options.pop("from"), options.pop("to"), True, **options).options)


def _edge_options(state: MemoryState, key, edge, positions, path, labels, large: bool) -> dict:
    style = edge_style(edge.type, state.schema)
    width, opacity = style["width"], style["opacity"]
    if path:
        width, opacity = (5, 1.0) if key in path else (width, 0.2)
    (x1, y1), (x2, y2) = positions[edge.src], positions[edge.dst]
    neighbours = y1 == y2 and abs(x1 - x2) <= X_STEP          # next to each other in a row: a straight line
    options = {"from": edge.src, "to": edge.dst, "title": edge_title(edge, state.schema), "dashes": edge_dashes(style),
               "width": width, "color": {"color": style["color"], "opacity": opacity},
               "smooth": False if large or neighbours else {"enabled": True, "type": "curvedCW", "roundness": 0.18}}
    if key in labels:
        options |= {"label": labels[key], "font": {"size": 13, "color": "#1a1a1a", "strokeWidth": 4,
                                                    "strokeColor": "#ffffff", "align": "top"}}
    return options


def _group_name(end: int | str) -> str:
    return f"u{end}" if isinstance(end, int) else f"Session {end.removeprefix(GROUP_PREFIX)}"


def _summary_title(a, b, style: dict, count: int) -> str:
    e = html.escape
    return (f"<b>{e(style['label'])}</b> × {count}<br>between {e(_group_name(a))} and {e(_group_name(b))} "
            f"(both directions)<br>Expand a session to see these edges one by one.")


def _add_group(net: Network, state: MemoryState, g: SessionGroup, x: int, y: int, ringed: bool = False) -> None:
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
    kind_text = ", ".join(f"{n} {e(schema.kind(k).label if schema and schema.kind(k) else k)}"
                          for k, n in sorted(kinds.items()))
    first = min(units, key=lambda u: (u.created_turn, u.id))
    title = (f"<b>Session {e(g.session)}</b> · {e(g.date)}<br>{len(units)} units: {kind_text}<br>"
             f"<b>First</b> {e(first.label)}: {e(first.raw[:200] or first.summary[:200])}<br>"
             f"<i>Click to expand this session in place.</i>")
    net.add_node(f"{GROUP_PREFIX}{g.session}", label=f"Session {g.session}\n{count}\n{g.date}", title=title,
                 x=x, y=y, physics=False, shape="box", margin=12, borderWidth=5 if ringed else 2, count=len(units),
                 widthConstraint={"minimum": min(200, 120 + len(units))},
                 font={"size": 24, "face": "sans-serif", "color": "#1a1a1a"},
                 color={"background": GROUP_FILL, "border": RING_COLOR if ringed else GROUP_BORDER,
                        "highlight": {"background": "#d4e3f7", "border": "#000000"},
                        "hover": {"background": "#d4e3f7", "border": GROUP_BORDER}})


def _add_band_title(net: Network, g: SessionGroup, x: int, y: int) -> None:
    label = f"▾ Session {g.session} · {len(g.units)} units · {g.date}"
    net.add_node(f"{BAND_PREFIX}{g.session}", label=label, shape="text", x=x - X_STEP // 2 + len(label) * 6, y=y,
                 physics=False, title="Click to collapse this session into one node.",
                 font={"size": 24, "color": GROUP_BORDER, "face": "sans-serif", **LABEL_HALO})


def _stored_key(state: MemoryState, key: tuple[int, int, str]) -> tuple[int, int, str]:
    """A path hop may walk an edge against its direction (e.g. from an archived node to its representative)."""
    src, dst, etype = key
    return (dst, src, etype) if key not in state.edges and (dst, src, etype) in state.edges else key


def _summary_line(drawing: Drawing, max_nodes: int, off_word: str) -> str:
    selection = drawing.selection
    line = f"Showing {len(selection.shown):,} nodes and {drawing.edges:,} edges"
    if drawing.grouped:
        held = sum(len(g.units) for g in drawing.groups)
        line += (f"; {len(drawing.groups):,} sessions collapsed into group nodes hold {held:,} more nodes, their "
                 f"{drawing.summarised:,} edges to other sessions drawn as {drawing.summary_edges:,} summary edges "
                 f"(width by count) and {drawing.inner:,} edges inside them in their tooltips. Click a session to "
                 f"expand it, its title to collapse it")
    for etype, n in drawing.thinned.items():
        line += (f"; {n:,} {etype} edges not drawn (more than {EDGE_TYPE_LIMIT:,} of one type: each session "
                 f"keeps its {SUMMARY_PER_GROUP} strongest links to others, units only the highlighted ones' "
                 f"edges): inspect a node or draw its neighbourhood to see its own")
    if selection.hidden:
        return (f"{line} of {selection.matched:,} nodes that pass the filters: the {max_nodes:,} most recent "
                f"plus highlighted and focused ones. {selection.hidden:,} hidden; narrow the session range, "
                f"search for text or focus on a node to see them.")
    return f"{line}."

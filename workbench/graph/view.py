"""The memory graph as a self-contained pyvis / vis-network HTML document.

Used by every page that draws memory (graph, retrieval provenance, consolidation diffs), so it is plain
Python over an engine `MemoryState` with no Streamlit. This module decides what is drawn and how edges are
carried: units one by one, collapsed sessions and folded group nodes standing for what they hold (what
collapses: `workbench.graph.groups`), edges drawn, summarised or thinned. The looks come from `workbench.graph.style`, the
positions from `workbench.graph.layout`, the filters from `workbench.graph.select`, the legend (of what was drawn) from
`workbench.graph.legend` and the HTML around the network from `workbench.graph.document`.

An edge whose end is hidden in a collapsed session or folded into a group node is carried to the node that
stands for that end: between two such nodes (or one and a unit) the edges are summarised, one edge per pair
and type whose width grows with the count it stands for, and edges with both ends in one are counted inside
it. Whatever the mode, an edge type with more than `EDGE_TYPE_LIMIT` edges among the drawn units and more
than `HAIRBALL_DENSITY` per unit (similarity links, typically; never a chain) is thinned: only the edges
touching highlighted units are drawn one by one, and between groups each group keeps its strongest links.
Highlighted nodes get a thick ring and highlighted edges are drawn thick while the rest fade.
"""
from __future__ import annotations

import html
import math
from collections.abc import Iterable
from dataclasses import dataclass, field

from pyvis.edge import Edge
from pyvis.network import Network

from engine.core.state import MemoryState
from engine.core.walks import lineage_types
from workbench.graph.document import document_html, vis_options
from workbench.graph.edges import edge_options, query_time_hops, query_time_options, stored_key
from workbench.graph.groups import (
    BAND_PREFIX,
    GROUP_PREFIX,
    band_title_options,
    fold_members,
    folds_members,
    group_node_options,
    groups_sessions,
    holding,
    is_group,
    row_title_options,
)
from workbench.graph.layout import SessionGroup, canvas_aspect, grouped_layout, layout, node_box, session_groups
from workbench.graph.legend import Seen, legend_html
from workbench.graph.select import Selection, cap_units, select_units, session_order
from workbench.graph.style import (
    FOLDED,
    OPENED,
    edge_dashes,
    edge_style,
    edge_types_of,
    fold_mark,
    kind_label,
    node_label,
    node_options,
    readable,
    unit_title,
)

EDGE_TYPE_LIMIT = 400            # more drawn edges of one type than this (and denser than HAIRBALL_DENSITY
HAIRBALL_DENSITY = 1.5           # per node): only the highlighted ones are drawn, similarity links typically
SUMMARY_PER_GROUP = 2            # of a thinned type, each group keeps its strongest links to this many others


@dataclass
class Drawing:
    """What a document draws: units one by one, collapsed sessions, group nodes with their members folded in,
    and edges drawn or summarised."""

    selection: Selection                    # the units drawn one by one, out of those that may be
    grouped: bool = False
    groups: list[SessionGroup] = field(default_factory=list)      # collapsed sessions
    expanded: list[str] = field(default_factory=list)            # sessions drawn unit by unit (grouped only)
    folding: bool = False                   # group nodes fold their members (unless opened)
    folded: dict[int, list[int]] = field(default_factory=dict)   # group node drawn folded -> the members in it
    opened: list[int] = field(default_factory=list)              # group nodes drawn open (folding only)
    edges: int = 0                          # edges drawn one by one
    summary_edges: int = 0                  # edges standing for several (to or between collapsed sessions)
    summarised: int = 0                     # real edges those summary edges stand for
    inner: int = 0                          # edges inside collapsed sessions (counted in their tooltips)
    fold_summary_edges: int = 0             # edges standing for several, to or between folded group nodes
    fold_summarised: int = 0                # real edges those stand for
    fold_inner: int = 0                     # edges inside folded group nodes (to or between their members)
    thinned: dict[str, int] = field(default_factory=dict)        # type -> edges over EDGE_TYPE_LIMIT not drawn
    seen: Seen = field(default_factory=Seen)                     # what the legend lists


def draw_graph(state: MemoryState, *, highlight_edges: Iterable[tuple[int, int, str]] = (),
               highlight_units: Iterable[int] = (), edge_types: set[str] | None = None,
               visible_only: bool = False, sessions: tuple[int, int] | None = None, search: str = "",
               focus: Iterable[int] | None = None, max_nodes: int = 400, height_px: int = 600,
               statuses: set[str] | None = None, edge_labels: dict | None = None,
               expand: Iterable[str | int] = (), group: bool | None = None, fold: bool | None = None,
               hops: int = 1, expand_highlighted: bool = True) -> tuple[str, Drawing]:
    """A full HTML document for `st.iframe(html, height=height_px + 20)` or `workbench.graph.canvas`, and
    what it draws.

    `highlight_edges` are stored edge keys (src, dst, type); a key given against the stored direction is
    matched to the stored edge. `edge_labels` writes a label on edges (e.g. "hop 1 (reverse)" on a path).
    `group` forces sessions into group nodes (True) or not (False); by default they are grouped above
    `GROUP_ABOVE` nodes. `fold` does the same for group nodes (kinds the schema declares `group`, e.g.
    MemLoom's events): folded, a group node stands for its members, by default above `FOLD_ABOVE` nodes.
    `expand` names what is drawn open: sessions (by label) and group nodes (by id). Sessions and group nodes
    holding a highlighted unit or path are opened too unless `expand_highlighted` is off (then they are
    ringed). `hops` is how far `focus` reaches.
    """
    net, drawing = _network(state, highlight_edges=highlight_edges, highlight_units=highlight_units,
                            edge_types=edge_types, visible_only=visible_only, sessions=sessions, search=search,
                            focus=focus, max_nodes=max_nodes, statuses=statuses, edge_labels=edge_labels,
                            expand=expand, group=group, fold=fold, hops=hops, expand_highlighted=expand_highlighted,
                            aspect=canvas_aspect(height_px))
    return document_html(net, height_px, _summary_line(state, drawing, max_nodes),
                         legend_html(state.schema, drawing.seen)), drawing


def build_graph_html(state: MemoryState, **options) -> str:
    """The document of `draw_graph` alone."""
    return draw_graph(state, **options)[0]


def _network(state: MemoryState, *, highlight_edges, highlight_units, edge_types, visible_only, sessions, search,
             focus, max_nodes, statuses, edge_labels, expand, group, fold, hops, expand_highlighted,
             aspect) -> tuple[Network, Drawing]:
    path = {stored_key(state, tuple(k)) for k in highlight_edges}
    labels = {stored_key(state, tuple(k)): str(v) for k, v in (edge_labels or {}).items()}
    ringed = {u for u in highlight_units if u in state.units}
    pinned = ringed | {u for s, d, _ in path for u in (s, d)}
    filters = {"edge_types": edge_types, "visible_only": visible_only, "sessions": sessions, "search": search,
               "focus": focus, "statuses": statuses, "hops": hops}
    base = select_units(state, pinned=pinned, max_nodes=max(1, len(state.units)), **filters)
    passing = set(base.shown)
    schema = state.schema
    open_sessions = {x for x in expand if isinstance(x, str)}
    open_groups = {x for x in expand if isinstance(x, int)}
    if expand_highlighted:
        open_sessions |= {state.units[u].session for u in pinned & passing}
        open_groups |= holding(state, pinned & passing)
    drawing = Drawing(Selection(shown=[], matched=0, pinned=set()))
    candidates, session_list = passing, []
    if groups_sessions(len(passing), focus, group):
        session_list = session_groups(state, passing)
        drawing.grouped = True
        drawing.groups = [g for g in session_list if g.session not in open_sessions]
        drawing.expanded = [g.session for g in session_list if g.session in open_sessions]
        candidates = {u for g in session_list if g.session in open_sessions for u in g.units}
    folded: dict[int, int] = {}
    if schema is not None and schema.group_kinds and folds_members(len(candidates), focus, fold):
        drawing.folding = True
        folded = fold_members(state, candidates, open_groups)
    rest = candidates - folded.keys()
    must = base.pinned & rest
    drawing.selection = Selection(shown=cap_units(state, rest, must, max_nodes), matched=len(rest), pinned=must)
    drawn = set(drawing.selection.shown)

    def root(uid: int) -> int | None:
        """The drawn group node a folded member stands in (through nested groups), if any."""
        seen: set[int] = set()
        while uid not in drawn and uid in folded and uid not in seen:
            seen.add(uid)
            uid = folded[uid]
        return uid if uid in drawn else None

    for member in folded:
        if (g := root(member)) is not None:
            drawing.folded.setdefault(g, []).append(member)
    ringed_groups = {root(u) for u in pinned if u in folded} - {None}
    net = Network(directed=True)
    options: dict[int, dict] = {}
    for uid in drawing.selection.shown:
        unit = state.units[uid]
        mark = fold_mark(unit, uid not in open_groups) if drawing.folding and is_group(state, unit) else ""
        options[uid] = {**readable(node_options(unit, uid in ringed or uid in ringed_groups, schema), unit),
                        "label": node_label(unit, mark), "title": _node_title(state, unit, mark, drawing)}
        drawing.seen.node(unit.kind, unit.status, readable(node_options(unit, False, schema), unit))
        if mark and uid in open_groups:
            drawing.seen.opened.add(unit.kind)
        elif mark:
            drawing.seen.folded.setdefault(unit.kind, set()).update(
                state.units[m].kind for m in unit.members if m in state.units)
    if drawing.folding:
        drawing.opened = sorted(u for u in drawn if u in open_groups and is_group(state, state.units[u]))
    boxes = {uid: node_box(o) for uid, o in options.items()}
    if drawing.grouped:
        by_session = {g.session: g for g in session_list}
        group_nodes = {g.session: group_node_options(state, g, ringed=bool(pinned & set(g.units)))
                       for g in drawing.groups}
        titles = {s: band_title_options(by_session[s]) for s in drawing.expanded}
        placed = grouped_layout(state, session_list, drawn, set(drawing.expanded), boxes,
                                {s: node_box(o) for s, o in group_nodes.items()},
                                {s: node_box(o) for s, o in titles.items()})
        for session, o in group_nodes.items():
            _add_node(net, f"{GROUP_PREFIX}{session}", placed.groups[session], o)
        drawing.seen.session_groups = bool(group_nodes)
        drawing.seen.ringed |= any(pinned & set(g.units) for g in drawing.groups)
    else:
        numbers = session_order(state)
        titles = {s: row_title_options(s) for s in sorted({state.units[u].session for u in drawn}, key=numbers.get)}
        placed = layout(state, drawn, boxes, {s: node_box(o) for s, o in titles.items()}, aspect)
    for session, o in titles.items():
        _add_node(net, f"{BAND_PREFIX}{session}", placed.titles[session], o)
    positions = placed.units
    for uid in drawing.selection.shown:
        _add_node(net, uid, positions[uid], options[uid])
    drawing.seen.ringed |= bool(ringed & drawn) or bool(ringed_groups)
    collapsed = {g.session for g in drawing.groups}

    def end(uid: int) -> int | str | None:
        """Where an edge's end is drawn: the unit, the group of its collapsed session, the group node its
        member is folded into, or nowhere."""
        if uid in drawn:
            return uid
        if uid not in passing:
            return None
        if state.units[uid].session in collapsed:
            return f"{GROUP_PREFIX}{state.units[uid].session}"
        return root(uid)

    one_by_one: dict[str, list] = {}
    summary: dict[tuple, int] = {}
    for key, edge in state.edges.items():
        if key not in path and edge_types is not None and edge.type not in edge_types:
            continue
        a, b = end(edge.src), end(edge.dst)
        if a is None or b is None:
            continue
        if a == edge.src and b == edge.dst:
            one_by_one.setdefault(edge.type, []).append((key, edge))
        elif a == b:
            if isinstance(a, str):
                drawing.inner += 1
            else:
                drawing.fold_inner += 1
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
            _add_edge(net, edge_options(state, key, edge, positions, path, labels, large))
            drawing.edges += 1
            drawing.seen.edge_types.add(etype)
            drawing.seen.path |= key in path
    for key in query_time_hops(state, path):
        if key[0] in drawn and key[1] in drawn:
            _add_edge(net, query_time_options(state, key, positions, path, labels, large))
            drawing.edges += 1
            drawing.seen.edge_types.add(key[2])
            drawing.seen.path = True
    order = {t: i for i, t in enumerate(edge_types_of(state))}
    for (a, b, etype), count in _strongest(summary, hairy, drawing.thinned):
        style = edge_style(etype, schema)
        _add_edge(net, {"from": a, "to": b, "count": count, "title": _summary_title(state, a, b, style, count),
                        "dashes": edge_dashes(style), "width": round(style["width"] + 1.6 * math.log2(count), 2),
                        "color": {"color": style["color"], "opacity": style["opacity"]},
                        "arrows": {"to": {"enabled": False}},
                        "smooth": {"enabled": True, "type": "curvedCW", "roundness": 0.06 + 0.06 * order.get(etype, 0)}})
        if isinstance(a, str) or isinstance(b, str):
            drawing.summary_edges += 1
            drawing.summarised += count
        else:
            drawing.fold_summary_edges += 1
            drawing.fold_summarised += count
        drawing.seen.edge_types.add(etype)
        drawing.seen.summary_edges = True
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


def _add_node(net: Network, n_id: int | str, at: tuple[int, int], options: dict) -> None:
    """pyvis's node record (what `Network.add_node` appends, id, label and shape last), without its linear scan
    of every node per node (quadratic at 5,000)."""
    record = {"x": at[0], "y": at[1], "physics": False, "color": "#97c2fc", **options}
    label, shape = record.pop("label", None) or n_id, record.pop("shape", "dot")
    record |= {"id": n_id, "label": label, "shape": shape}
    net.nodes.append(record)
    net.node_ids.append(n_id)
    net.node_map[n_id] = record


def _add_edge(net: Network, options: dict) -> None:
    """pyvis's edge record, without `add_edge`'s linear scan of every node per edge (quadratic at 5,000)."""
    net.edges.append(Edge(options.pop("from"), options.pop("to"), True, **options).options)


def _group_name(state: MemoryState, end: int | str) -> str:
    if isinstance(end, str):
        return f"Session {end.removeprefix(GROUP_PREFIX)}"
    unit = state.units.get(end)
    return f"{kind_label(state.schema, unit.kind)} u{end}" if unit is not None else f"u{end}"


def _summary_title(state: MemoryState, a, b, style: dict, count: int) -> str:
    e = html.escape
    return (f"<b>{e(style['label'])}</b> × {count}<br>between {e(_group_name(state, a))} and "
            f"{e(_group_name(state, b))} (both directions)<br>Open a session or a group node to see these edges one "
            f"by one.")


def _node_title(state: MemoryState, unit, mark: str, drawing: Drawing) -> str:
    """A node's tooltip; a group node's says whether its members are folded into it and how to change that."""
    title = unit_title(unit, state.schema)
    if not mark:
        return title
    inside = len(drawing.folded.get(unit.id, []))
    if mark.startswith(f" {OPENED}"):
        return f"{title}<br><i>Drawn open with its members: click it to fold them into it.</i>"
    return (f"{title}<br><i>Folded: {inside} of its {len(unit.members)} members drawn into it (their edges end "
            f"here). Click it to open it.</i>")


def _plural(words: Iterable[str]) -> str:
    return " and ".join(f"{w}s" for w in sorted(set(words)))


def _summary_line(state: MemoryState, drawing: Drawing, max_nodes: int) -> str:
    selection = drawing.selection
    line = f"Showing {len(selection.shown):,} nodes and {drawing.edges:,} edges"
    if drawing.grouped:
        held = sum(len(g.units) for g in drawing.groups)
        line += (f"; {len(drawing.groups):,} sessions collapsed into group nodes hold {held:,} more nodes, their "
                 f"{drawing.summarised:,} edges to other sessions drawn as {drawing.summary_edges:,} summary edges "
                 f"(width by count) and {drawing.inner:,} edges inside them in their tooltips. Click a session to "
                 f"expand it, its title to collapse it")
    if drawing.folded:
        kinds = _plural(kind_label(state.schema, state.units[g].kind) for g in drawing.folded)
        held = sum(len(m) for m in drawing.folded.values())
        line += (f"; {len(drawing.folded):,} {kinds} drawn folded hold {held:,} more nodes, their "
                 f"{drawing.fold_summarised:,} edges to other nodes drawn as {drawing.fold_summary_edges:,} summary "
                 f"edges and {drawing.fold_inner:,} edges inside them. Click one ({FOLDED}) to open it, an open "
                 f"one ({OPENED}) to fold it")
    for etype, n in drawing.thinned.items():
        line += (f"; {n:,} {etype} edges not drawn (more than {EDGE_TYPE_LIMIT:,} of one type: each session "
                 f"keeps its {SUMMARY_PER_GROUP} strongest links to others, units only the highlighted ones' "
                 f"edges): inspect a node or draw its neighbourhood to see its own")
    if selection.hidden:
        return (f"{line} of {selection.matched:,} nodes that pass the filters: the {max_nodes:,} most recent "
                f"plus highlighted and focused ones. {selection.hidden:,} hidden; narrow the session range, "
                f"search for text or focus on a node to see them.")
    return f"{line}."

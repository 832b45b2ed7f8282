"""The memory graph as a self-contained pyvis / vis-network HTML document.

Used by every page that draws memory (graph, retrieval provenance, consolidation
diffs), so it is plain Python over an engine `MemoryState` with no Streamlit.
Everything engine-specific comes from the state's `EngineSchema`: edge colour,
dash, width, opacity and label per edge type; fill colour per node kind; the
lifecycle statuses and which of them are on the retrieval surface.

Encodings never rely on colour alone: nodes on the surface are filled dots,
nodes off it are hollow grey squares with a dashed border and their status in
their label ("u7 [archived]"); each edge type has its own colour *and* dash
pattern; highlighted nodes get a thick ring and highlighted edges are drawn
thick while the rest fade.

The layout is fixed, not simulated: one row per session (top to bottom in time
order) and, within a row, one column per turn in time order. Nodes made by an
offline process stack just below the turn they come from. No physics
means a 1,000-node graph renders at once and a node keeps its place when the
graph is re-drawn at another turn, so two turns can be compared by eye.

Above `GROUP_ABOVE` nodes a drawing would be a hairball, so sessions collapse
into one group node each (session, unit count, date) laid out in a grid in time
order, and the edges between groups are summarised: one edge per pair and type,
its width growing with the count it stands for. An expanded session opens in
place as a band of its units. Whatever the mode, an edge type with more than
`EDGE_TYPE_LIMIT` edges among the drawn units and more than `HAIRBALL_DENSITY`
per unit (similarity links, typically; never a chain) is thinned: only the
edges touching highlighted units are drawn one by one, and between groups each
group keeps its strongest links.

A click on a node is posted to the parent window (`{memwbGraph: node id}`), so a
page that embeds the document through `workbench.graph_canvas` learns which node
was clicked.

vis-network 9 shows string tooltips as plain text, so tooltips are sent as
escaped HTML strings and turned into DOM elements in the page; every piece of
conversation text is `html.escape`d before it gets there.
"""
from __future__ import annotations

import html
import json
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from functools import lru_cache
from pathlib import Path

import pyvis
from pyvis.edge import Edge
from pyvis.network import Network

from engine.core.node import Node
from engine.core.schema import EngineSchema
from engine.core.state import MemoryState
from workbench.text import MISSING, missing

Unit = Node
_VIS_LIB = Path(pyvis.__file__).parent / "lib" / "vis-9.1.2"
OTHER_KIND_COLOR = "#17becf"
ARCHIVED_GREY = "#8c8c8c"
RING_COLOR = "#e6a100"
UNKNOWN_EDGE_STYLE = {"color": "#bcbd22", "dashes": [2, 4], "label": "other", "width": 1.5, "opacity": 0.8}
DASH_PATTERN = [6, 4]            # what `dashes: True` looks like in vis-network, reused by the legend
X_STEP, ROW_STEP, MIN_ROW_STEP, STACK_STEP = 120, 170, 70, 55
TEXT_LIMIT = 600                 # characters of raw evidence in a tooltip
GROUP_ABOVE = 300                # more nodes than this pass the filters: sessions collapse into group nodes
EDGE_TYPE_LIMIT = 400            # more drawn edges of one type than this (and denser than HAIRBALL_DENSITY
HAIRBALL_DENSITY = 1.5           # per node): only the highlighted ones are drawn, similarity links typically
GROUP_COLUMNS, CELL_W, CELL_H = 6, 250, 170      # the grid of collapsed sessions
SUMMARY_PER_GROUP = 2            # of a thinned type, each group keeps its strongest links to this many others
BAND_LINE = 110                  # height of one line of turns in an expanded session's band
GROUP_PREFIX, BAND_PREFIX = "group:", "session:"  # node ids of a collapsed session and of a band's title
GROUP_FILL, GROUP_BORDER = "#eaf1fb", "#4a6fa5"
LABEL_HALO = {"strokeWidth": 4, "strokeColor": "#ffffff"}       # edges never run through a node's label


# -- what the schema says ------------------------------------------------------------------
def edge_style(etype: str, schema: EngineSchema | None = None) -> dict:
    """Colour, dashes, width, opacity and label of an edge type as the engine's schema declares it."""
    spec = schema.edge_type(etype) if schema is not None else None
    if spec is None:
        return {**UNKNOWN_EDGE_STYLE, "label": etype or UNKNOWN_EDGE_STYLE["label"]}
    return {"color": spec.color, "dashes": spec.dashes, "width": spec.width, "opacity": spec.opacity,
            "label": spec.label, "weighted": spec.weighted}


def edge_types_of(state: MemoryState) -> list[str]:
    """The schema's edge types in its order, then any other type the state holds."""
    declared = [e.name for e in state.schema.edge_types] if state.schema else []
    return declared + sorted(set(state.edge_counts()) - set(declared))


def statuses_of(state: MemoryState) -> list[str]:
    """The schema's statuses in its order, then any other status a node has."""
    declared = [s.name for s in state.schema.statuses] if state.schema else []
    return declared + sorted({u.status for u in state.nodes.values()} - set(declared))


def status_label(schema: EngineSchema | None, status: str) -> str:
    spec = schema.status(status) if schema is not None and status else None
    return spec.label if spec else status


def kind_color(schema: EngineSchema | None, kind: str) -> str:
    spec = schema.kind(kind) if schema is not None else None
    return spec.color if spec else OTHER_KIND_COLOR


def off_surface_word(schema: EngineSchema | None) -> str:
    """What leaving the surface is called: the off-surface status's label when there is one ("archived")."""
    off = [s for s in schema.statuses if not s.surface] if schema is not None else []
    return off[0].label if len(off) == 1 else "off surface"


def lineage_types(state: MemoryState) -> tuple[str, ...]:
    return state.schema.lineage_types if state.schema else ()


# -- selection ---------------------------------------------------------------------------
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
    return Selection(shown=_cap(state, passing, must, max_nodes), matched=len(passing), pinned=must)


def _neighbours(state: MemoryState, uid: int, edge_types: set[str] | None) -> set[int]:
    edges = state.out_edges(uid) + state.in_edges(uid)
    return {e.dst if e.src == uid else e.src for e in edges if edge_types is None or e.type in edge_types}


def neighbourhood(state: MemoryState, start: Iterable[int], hops: int = 1,
                  edge_types: set[str] | None = None) -> set[int]:
    """`start` and every node at most `hops` edges away (either direction, of the given types)."""
    seen = set(start)
    frontier = set(seen)
    for _ in range(max(0, hops)):
        frontier = {n for u in frontier for n in _neighbours(state, u, edge_types)} - seen
        seen |= frontier
    return seen


# -- layout ----------------------------------------------------------------------------------
def _anchor(state: MemoryState, unit: Unit) -> int:
    """The turn unit a unit is drawn with: itself, or for consolidation output the turn of its latest source.

    Turns often share a timestamp (LoCoMo dates a whole session), so columns follow turns, not times.
    """
    if unit.kind == state.turn_kind or not unit.source_ids:
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


# -- encodings ---------------------------------------------------------------------------------
def _dashes(style: dict) -> bool | list[int]:
    return DASH_PATTERN if style["dashes"] is True else style["dashes"]


def status_tag(unit: Unit) -> str:
    """" [archived]" for a node off the surface (its status, in words), "" on the surface."""
    return "" if unit.visible else f" [{unit.status or 'off surface'}]"


def node_label(unit: Unit) -> str:
    return f"{unit.label}{status_tag(unit)}"


def visibility_text(unit: Unit) -> str:
    """"● visible" / "◌ archived": the node's status with a filled or hollow mark for on or off the surface."""
    return f"{'●' if unit.visible else '◌'} {unit.status or ('visible' if unit.visible else 'archived')}"


def unit_title(unit: Unit, schema: EngineSchema | None = None) -> str:
    """Tooltip HTML for a node; every field from the data is escaped."""
    e = html.escape
    raw = unit.raw if len(unit.raw) <= TEXT_LIMIT else unit.raw[:TEXT_LIMIT] + "…"
    kind = schema.kind(unit.kind) if schema is not None else None
    rows = [
        f"<b>{e(unit.label)}</b> · {e(visibility_text(unit))} · {e(kind.label if kind else unit.kind)} · "
        f"made by {e(unit.made_by)}",
        f"<b>Time</b> {e(unit.time)} · <b>Session</b> {e(unit.session)} · <b>Created at turn</b> {unit.created_turn}",
        f"<b>Source ids</b> {e(', '.join(unit.source_ids)) or MISSING}",
        f"<b>Raw evidence</b><br>{e(raw)}",
        f"<b>Summary</b><br>{e(unit.summary)}",
        f"<b>Keywords</b> {e(', '.join(unit.keywords)) or MISSING}",
    ]
    if unit.members:
        rows.append(f"<b>Members</b> {e(', '.join(f'u{m}' for m in unit.members))}")
    return "<br>".join(rows)


def cosine_text(value: float | None) -> str:
    return missing(value, "{:.3f}")


def edge_title(edge, schema: EngineSchema | None = None) -> str:
    e = html.escape
    conf = "" if edge.confidence is None else f" · cosine {cosine_text(edge.confidence)}"
    weighted = getattr(edge, "evidence", None) or edge_style(edge.type, schema).get("weighted")
    if edge.confidence is not None and weighted:        # a synthesised relation, or a weight
        conf = f" · confidence {cosine_text(edge.confidence)}"
    cited = getattr(edge, "evidence", None) or []
    cites = f"<br>cites {e(', '.join(f'u{c}' for c in cited))}" if cited else ""
    return (f"<b>{e(edge_style(edge.type, schema)['label'])}</b> u{edge.src} → u{edge.dst}<br>"
            f"made by {e(str(edge.made_by))} at turn {edge.created_turn}{conf}{cites}")


def weighted_width(width: float, confidence: float) -> float:
    """A weighted edge's width: its type's width at confidence 0.5, up to twice that at 1."""
    return round(width * (0.25 + 1.5 * max(0.0, min(1.0, confidence))), 2)


def status_style(schema: EngineSchema | None, status: str) -> tuple[str, str]:
    """(colour, vis-network shape) a status declares in the schema ("" where it declares none)."""
    spec = schema.status(status) if schema is not None and status else None
    return (spec.color, spec.shape) if spec is not None else ("", "")


def _dark(color: str) -> bool:
    """Is a #rrggbb colour dark enough to need white text on it?"""
    try:
        r, g, b = (int(color.lstrip("#")[i:i + 2], 16) for i in (0, 2, 4))
    except ValueError:
        return False
    return 0.299 * r + 0.587 * g + 0.114 * b < 150


def _node_options(unit: Unit, ringed: bool, schema: EngineSchema | None) -> dict:
    fill = kind_color(schema, unit.kind)
    ring = {"borderWidth": 5, "borderWidthSelected": 6} if ringed else {"borderWidth": 2}
    color, shape = status_style(schema, unit.status)
    if color or shape:              # a lifecycle status with its own look (MemLoom's event FSM)
        fill = color or fill
        border = RING_COLOR if ringed else ("#1a1a1a" if unit.visible else ARCHIVED_GREY)
        options = {"shape": shape or ("dot" if unit.visible else "square"), "size": 14 if unit.visible else 12,
                   "font": {"color": "#1a1a1a" if unit.visible else "#6b6b6b"},
                   "color": {"background": fill, "border": border,
                             "highlight": {"background": fill, "border": "#000000"}}, **ring}
        if not unit.visible:        # off the surface: dashed border and the status in the label, not colour alone
            options["shapeProperties"] = {"borderDashes": [4, 3]}
            options["opacity"] = 0.85
        if options["shape"] in ("box", "ellipse", "circle", "database"):      # the label sits inside the shape
            options["font"] = {"size": 13, "color": "#ffffff" if _dark(fill) else "#1a1a1a"}
        return options
    if unit.visible:
        return {"shape": "dot", "size": 14, "font": {"color": "#1a1a1a"},
                "color": {"background": fill, "border": RING_COLOR if ringed else "#1a1a1a",
                          "highlight": {"background": fill, "border": "#000000"}},
                **ring}
    return {"shape": "square", "size": 11, "font": {"color": "#6b6b6b"},
            "shapeProperties": {"borderDashes": [4, 3]},
            "color": {"background": "#ffffff", "border": RING_COLOR if ringed else ARCHIVED_GREY,
                      "highlight": {"background": "#f2f2f2", "border": "#000000"}},
            **ring}


# -- the document --------------------------------------------------------------------------------
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
    return graph_document(net, height_px, _summary_line(drawing, max_nodes, off_surface_word(state.schema)),
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
        shown = _cap(state, set(in_open), pinned & set(in_open), max_nodes)
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
                     **_readable(_node_options(unit, uid in ringed, schema), unit))

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
                        "dashes": _dashes(style), "width": round(style["width"] + 1.6 * math.log2(count), 2),
                        "color": {"color": style["color"], "opacity": style["opacity"]},
                        "arrows": {"to": {"enabled": False}},
                        "smooth": {"enabled": True, "type": "curvedCW", "roundness": 0.06 + 0.06 * order.get(etype, 0)}})
        drawing.summary_edges += 1
        drawing.summarised += count
    net.options = _options(large)
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


def _cap(state: MemoryState, passing: set[int], must: set[int], max_nodes: int) -> list[int]:
    """At most `max_nodes` of `passing`: every `must` node, then the most recently created."""
    if len(passing) <= max_nodes:
        return sorted(passing)
    recent = sorted(passing - must, key=lambda i: (state.units[i].created_turn, i), reverse=True)
    return sorted(must | set(recent[: max(0, max_nodes - len(must))]))


def _add_edge(net: Network, options: dict) -> None:
    """pyvis's edge record, without `add_edge`'s linear scan of every node per edge (quadratic at 5,000)."""
    net.edges.append(Edge(options.pop("from"), options.pop("to"), True, **options).options)


def _edge_options(state: MemoryState, key, edge, positions, path, labels, large: bool) -> dict:
    style = edge_style(edge.type, state.schema)
    width, opacity = style["width"], style["opacity"]
    if style.get("weighted") and edge.confidence is not None:
        width = weighted_width(width, edge.confidence)
    if path:
        width, opacity = (5, 1.0) if key in path else (width, 0.2)
    (x1, y1), (x2, y2) = positions[edge.src], positions[edge.dst]
    neighbours = y1 == y2 and abs(x1 - x2) <= X_STEP          # next to each other in a row: a straight line
    options = {"from": edge.src, "to": edge.dst, "title": edge_title(edge, state.schema), "dashes": _dashes(style),
               "width": width, "color": {"color": style["color"], "opacity": opacity},
               "smooth": False if large or neighbours else {"enabled": True, "type": "curvedCW", "roundness": 0.18}}
    if key in labels:
        options |= {"label": labels[key], "font": {"size": 13, "color": "#1a1a1a", "strokeWidth": 4,
                                                    "strokeColor": "#ffffff", "align": "top"}}
    return options


def _readable(options: dict, unit: Unit) -> dict:
    """A white halo round every label, and an off-surface label above its node, where the lineage edge from
    its successor (stacked below) cannot run through it."""
    font = {**LABEL_HALO, **options.get("font", {})}
    if not unit.visible and options["shape"] not in ("box", "ellipse", "circle", "database"):
        font["vadjust"] = -(2 * options.get("size", 12) + 26)
    return {**options, "font": font}


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


def _options(large: bool) -> dict:
    return {
        "physics": {"enabled": False},
        "layout": {"improvedLayout": False},
        "interaction": {"hover": True, "tooltipDelay": 150, "hideEdgesOnDrag": large,
                        "multiselect": False, "navigationButtons": False},
        "edges": {"arrows": {"to": {"enabled": True, "scaleFactor": 0.5}}},
        "nodes": {"font": {"size": 18, "face": "sans-serif"}},
    }


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


def legend_html(schema: EngineSchema | None = None, grouped: bool = False) -> str:
    """Edge colour and dash per type, node colour per kind and the status encodings, as an HTML fragment
    (with the group node and summary edge when sessions are grouped)."""
    e = html.escape

    def line(style: dict) -> str:
        dash = _dashes(style)
        dasharray = f' stroke-dasharray="{",".join(map(str, dash))}"' if dash else ""
        return (f'<svg width="42" height="10" aria-hidden="true"><line x1="1" y1="5" x2="41" y2="5" '
                f'stroke="{e(style["color"])}" stroke-width="2.5"{dasharray}/></svg>')

    def dot(color: str, stroke: str = "#1a1a1a", width: float = 1.5) -> str:
        return (f'<svg width="42" height="16" aria-hidden="true"><circle cx="21" cy="8" r="6" fill="{e(color)}" '
                f'stroke="{stroke}" stroke-width="{width}"/></svg>')

    edge_specs = schema.edge_types if schema is not None else ()
    edges = "".join(f'<div class="lg-row" title="{e(t.description)}">{line(edge_style(t.name, schema))}'
                    f'<span>{e(t.label)}</span></div>' for t in edge_specs) or \
        '<div class="lg-row"><span>none (this engine keeps no links)</span></div>'
    kinds = "".join(f'<div class="lg-row" title="{e(k.description)}">{dot(k.color)}<span>{e(k.label)}</span></div>'
                    for k in (schema.node_kinds if schema is not None else ()))
    statuses = schema.statuses if schema is not None else ()
    styled = [s for s in statuses if s.color or s.shape]
    plain = [s for s in statuses if not (s.color or s.shape)]
    surface = [s.label for s in plain if s.surface] or ([] if styled else ["visible"])
    first = schema.node_kinds[0].color if schema is not None and schema.node_kinds else OTHER_KIND_COLOR
    on = (f'<div class="lg-row">{dot(first)}<span>{e(" / ".join(surface))}: filled dot '
          f'(on the retrieval surface)</span></div>') if surface else ""
    off = "".join(
        f'<div class="lg-row" title="{e(s.description)}"><svg width="42" height="16" aria-hidden="true">'
        f'<rect x="15" y="2" width="12" height="12" fill="#ffffff" stroke="{ARCHIVED_GREY}" stroke-width="1.5" '
        f'stroke-dasharray="3,2"/></svg><span>{e(s.label)} (hollow dashed square, “[{e(s.name)}]”)</span></div>'
        for s in plain if not s.surface)
    own = "".join(
        f'<div class="lg-row" title="{e(s.description)}">{shape_svg(s.shape, s.color or first, s.surface)}'
        f'<span>{e(s.label)} ({e(s.shape or ("dot" if s.surface else "square"))}, '
        f'{"on the surface" if s.surface else f"off the surface: dashed, “[{e(s.name)}]”"})</span></div>'
        for s in styled)
    on = own + on
    ring = f'<div class="lg-row">{dot(first, RING_COLOR, 3.5)}<span>highlighted node (thick ring)</span></div>'
    if edge_specs:
        ring += ('<div class="lg-row"><svg width="42" height="10" aria-hidden="true"><line x1="1" y1="5" x2="41" '
                 'y2="5" stroke="#555" stroke-width="5"/></svg><span>highlighted edge (path)</span></div>')
    if grouped:
        ring += (f'<div class="lg-row"><svg width="42" height="16" aria-hidden="true"><rect x="9" y="2" width="24" '
                 f'height="12" rx="3" fill="{GROUP_FILL}" stroke="{GROUP_BORDER}" stroke-width="1.5"/></svg>'
                 f'<span>collapsed session (click to expand)</span></div><div class="lg-row"><svg width="42" '
                 f'height="10" aria-hidden="true"><line x1="1" y1="5" x2="41" y2="5" stroke="#555" stroke-width="1"/>'
                 f'</svg><svg width="42" height="10" aria-hidden="true"><line x1="1" y1="5" x2="41" y2="5" '
                 f'stroke="#555" stroke-width="6"/></svg><span>summary edge: width grows with the count</span></div>')
    return (f'<div class="mw-legend"><span class="lg-head">Edges</span>{edges}'
            f'<span class="lg-head">Node kinds</span>{kinds}<span class="lg-head">Statuses</span>{on}{off}{ring}'
            f'</div>')


def shape_svg(shape: str, color: str, surface: bool = True) -> str:
    """A small SVG of a vis-network node shape for legends: filled with `color`, dashed border off the surface."""
    e = html.escape
    stroke = "#1a1a1a" if surface else ARCHIVED_GREY
    dash = "" if surface else ' stroke-dasharray="3,2"'
    paint = f'fill="{e(color)}" stroke="{stroke}" stroke-width="1.5"{dash}'
    body = {
        "triangle": f'<polygon points="21,1 28,14 14,14" {paint}/>',
        "triangleDown": f'<polygon points="14,2 28,2 21,15" {paint}/>',
        "diamond": f'<polygon points="21,1 28,8 21,15 14,8" {paint}/>',
        "square": f'<rect x="15" y="2" width="12" height="12" {paint}/>',
        "box": f'<rect x="11" y="3" width="20" height="11" rx="3" {paint}/>',
        "star": f'<polygon points="21,1 23,6 28,6 24,9 26,15 21,11 16,15 18,9 14,6 19,6" {paint}/>',
        "hexagon": f'<polygon points="17,2 25,2 29,8 25,14 17,14 13,8" {paint}/>',
        "ellipse": f'<ellipse cx="21" cy="8" rx="9" ry="5" {paint}/>',
    }.get(shape, f'<circle cx="21" cy="8" r="6" {paint}/>')
    return f'<svg width="42" height="16" aria-hidden="true">{body}</svg>'


_CSS = """
html, body { margin: 0; font-family: sans-serif; font-size: 12px; color: #262730; }
#wrap { display: flex; flex-direction: column; height: %(total)spx; }
#graph { flex: 1 1 auto; min-height: 120px; border: 1px solid #d9d9d9; border-radius: 4px; background: #ffffff; }
#summary { padding: 3px 2px 0; }
.mw-legend { display: flex; flex-wrap: wrap; align-items: center; gap: 2px 14px; padding: 0 2px 4px; }
.mw-legend .lg-head { font-weight: bold; }
.mw-legend .lg-row { display: flex; align-items: center; gap: 4px; white-space: nowrap; }
div.vis-tooltip { max-width: 460px; white-space: normal !important; font-family: sans-serif; font-size: 12px;
                  line-height: 1.35; padding: 6px 8px; }
"""

_SCRIPT = """
function asElement(markup) { var d = document.createElement('div'); d.innerHTML = markup; return d; }
var nodeData = %(nodes)s, edgeData = %(edges)s;
nodeData.forEach(function (n) { if (n.title) { n.title = asElement(n.title); } });
edgeData.forEach(function (e) { if (e.title) { e.title = asElement(e.title); } });
var network = new vis.Network(document.getElementById('graph'),
    {nodes: new vis.DataSet(nodeData), edges: new vis.DataSet(edgeData)}, %(options)s);
network.once('afterDrawing', function () {
    document.body.setAttribute('data-drawn-ms', performance.now().toFixed(1));
});
network.on('click', function (p) {
    if (p.nodes.length && window.parent !== window) { window.parent.postMessage({memwbGraph: p.nodes[0]}, '*'); }
});
"""


@lru_cache(maxsize=1)
def _vis_assets() -> str:
    """vis-network as shipped with pyvis, inlined so the graph works offline."""
    css = (_VIS_LIB / "vis-network.css").read_text(encoding="utf-8")
    js = (_VIS_LIB / "vis-network.min.js").read_text(encoding="utf-8")
    return f"<style>{css}</style><script>{js}</script>"


def graph_document(net: Network, height_px: int, summary: str, legend: str) -> str:
    """The self-contained HTML page of a vis-network drawing (vis-network inlined), its legend and summary line."""
    nodes, edges, _, _, _, options = net.get_network_data()
    script = _SCRIPT % {"nodes": _json(nodes), "edges": _json(edges), "options": options}
    return (
        f"<!DOCTYPE html><html><head><meta charset=\"utf-8\">{_vis_assets()}"
        f"<style>{_CSS % {'total': height_px + 12}}</style></head><body><div id=\"wrap\">"
        f"{legend}<div id=\"graph\"></div><div id=\"summary\">{html.escape(summary)}</div></div>"
        f"<script>{script}</script></body></html>"
    )


def _json(value) -> str:
    """JSON safe to put inside a <script> element."""
    return json.dumps(value).replace("</", "<\\/")


# -- diffs ---------------------------------------------------------------------------------------
def diff_default(cursor: int, head: int) -> tuple[int, int]:
    """Two distinct turns a tenth of the log apart (at least one) ending at the cursor, so a range slider's
    two thumbs never start on top of each other."""
    gap = max(1, head // 10)
    last = min(head, max(cursor, gap))
    return max(0, last - gap), last


def diff_states(old_state: MemoryState, new_state: MemoryState) -> dict:
    """What changed between two states: nodes added/removed/taken off or put back on the surface,
    re-described, status changes, edges, and rewiring.

    A rewired edge is one redirected to a representative: p -> x removed, p -> r of the same type added,
    where r now has a lineage edge (All-Mem: version) to x (redirect-to-representative).
    """
    old_u, new_u = old_state.units, new_state.units
    common = old_u.keys() & new_u.keys()
    added_edges = sorted(new_state.edges.keys() - old_state.edges.keys())
    removed_edges = sorted(old_state.edges.keys() - new_state.edges.keys())
    added = set(added_edges)
    lineage = lineage_types(new_state)
    rewired = sorted({(s, x, r) for s, x, t in removed_edges for lt in lineage
                      for r in new_state.inc(x, lt) if (s, r, t) in added and r != s})
    return {
        "added_units": sorted(new_u.keys() - old_u.keys()),
        "removed_units": sorted(old_u.keys() - new_u.keys()),
        "archived_units": sorted(u for u in common if old_u[u].visible and not new_u[u].visible),
        "restored_units": sorted(u for u in common if not old_u[u].visible and new_u[u].visible),
        "redescribed_units": sorted(u for u in common if (old_u[u].summary, old_u[u].keywords)
                                    != (new_u[u].summary, new_u[u].keywords)),
        "status_changes": sorted((u, old_u[u].status, new_u[u].status) for u in common
                                 if old_u[u].status != new_u[u].status),
        "added_edges": added_edges,
        "removed_edges": removed_edges,
        "rewired": rewired,
    }


def diff_rows(diff: dict, old_state: MemoryState, new_state: MemoryState) -> dict[str, list[dict]]:
    """Table rows for a `diff_states` result, with the text a reader needs to recognise each node."""
    schema = new_state.schema

    def unit_row(state: MemoryState, uid: int) -> dict:
        u = state.units[uid]
        kind = schema.kind(u.kind) if schema is not None else None
        return {"unit": u.label, "visibility": visibility_text(u), "kind": kind.label if kind else u.kind,
                "session": u.session, "sources": ", ".join(u.source_ids), "made by": u.made_by,
                "summary": u.summary}

    def label(uid: int) -> str:
        return f"u{uid}"

    def edge_row(key: tuple[int, int, str]) -> dict:
        src, dst, etype = key
        return {"type": edge_style(etype, schema)["label"], "from": label(src), "to": label(dst)}

    lineage = lineage_types(new_state)
    archived = [{**unit_row(new_state, u),
                 "superseded by": ", ".join(map(label, sorted({r for t in lineage for r in new_state.inc(u, t)})))
                 or MISSING}
                for u in diff["archived_units"]]
    return {
        "added": [unit_row(new_state, u) for u in diff["added_units"]],
        "archived": archived,
        "restored": [unit_row(new_state, u) for u in diff["restored_units"]],
        "removed": [unit_row(old_state, u) for u in diff["removed_units"]],
        "redescribed": [{**unit_row(new_state, u), "summary before": old_state.units[u].summary}
                        for u in diff["redescribed_units"]],
        "status changes": [{"unit": label(u), "from": status_label(schema, a), "to": status_label(schema, b),
                            "summary": new_state.units[u].summary}
                           for u, a, b in diff.get("status_changes", [])],
        "rewired": [{"from": label(s), "old target": label(x), "new target": label(r),
                     "new target summary": new_state.units[r].summary} for s, x, r in diff["rewired"]],
        "edges added": [edge_row(k) for k in diff["added_edges"]],
        "edges removed": [edge_row(k) for k in diff["removed_edges"]],
    }


# -- one node ----------------------------------------------------------------------------------
def lineage(state: MemoryState, uid: int) -> dict[str, list[tuple[int, int]]]:
    """Lineage edges (All-Mem: version) walked both ways: (depth, node) it supersedes (older) and that
    superseded it (newer)."""
    types = lineage_types(state)

    def walk(step) -> list[tuple[int, int]]:
        seen, frontier, out = {uid}, [uid], []
        depth = 0
        while frontier:
            depth += 1
            nxt = sorted({n for f in frontier for t in types for n in step(f, t)} - seen)
            seen.update(nxt)
            out += [(depth, n) for n in nxt]
            frontier = nxt
        return out

    return {"supersedes": walk(state.out), "superseded_by": walk(state.inc)}


def edge_rows(state: MemoryState, uid: int) -> list[dict]:
    """A node's out- and in-edges with the node at the other end."""
    rows = []
    for direction, edges in (("out →", state.out_edges(uid)), ("← in", state.in_edges(uid))):
        for edge in sorted(edges, key=lambda e: (e.type, e.src, e.dst)):
            other = state.units.get(edge.dst if direction == "out →" else edge.src)
            rows.append({"direction": direction, "type": edge_style(edge.type, state.schema)["label"],
                         "other unit": other.label if other else "?",
                         "other is": visibility_text(other) if other else "",
                         "made by": edge.made_by, "cosine": cosine_text(edge.confidence),
                         "created at turn": edge.created_turn, "other summary": other.summary if other else ""})
    return rows

"""The legend above the memory graph, built from what the drawing actually drew.

A legend that lists every kind and status the schema declares shows looks the picture never uses (MemLoom's
events are drawn by their lifecycle status, never as a red dot of their kind), so the drawing records what it
draws (`Seen`: the edge types, each kind · status pair with the options its first node was drawn with, rings,
paths, collapsed sessions, folded group nodes and summary edges) and the legend draws one swatch per entry,
in the same shape, fill, border and dash as on the canvas.
"""
from __future__ import annotations

import html
from dataclasses import dataclass, field

from engine.core.schema import EngineSchema
from workbench.graph.style import (
    ARCHIVED_GREY,
    FOLDED,
    GROUP_BORDER,
    GROUP_FILL,
    OPENED,
    RING_COLOR,
    edge_dashes,
    edge_style,
    kind_label,
    status_label,
)


@dataclass
class Seen:
    """What one drawing drew, for its legend."""

    edge_types: set[str] = field(default_factory=set)
    nodes: dict[tuple[str, str], dict] = field(default_factory=dict)  # (kind, status) -> vis options, unringed
    folded: dict[str, set[str]] = field(default_factory=dict)         # group kind -> its folded members' kinds
    opened: set[str] = field(default_factory=set)                     # group kinds drawn open
    ringed: bool = False
    path: bool = False
    session_groups: bool = False
    summary_edges: bool = False

    def node(self, kind: str, status: str, options: dict) -> None:
        self.nodes.setdefault((kind, status), options)


def shape_svg(shape: str, fill: str, border: str = "#1a1a1a", dashed: bool = False, width: float = 1.5) -> str:
    """A small SVG of a vis-network node shape, in the fill, border and dash it is drawn with."""
    e = html.escape
    dash = ' stroke-dasharray="3,2"' if dashed else ""
    paint = f'fill="{e(fill)}" stroke="{e(border)}" stroke-width="{width}"{dash}'
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


def _line(style: dict, width: float = 2.5) -> str:
    dash = edge_dashes(style)
    dasharray = f' stroke-dasharray="{",".join(map(str, dash))}"' if dash else ""
    return (f'<svg width="42" height="10" aria-hidden="true"><line x1="1" y1="5" x2="41" y2="5" '
            f'stroke="{html.escape(style["color"])}" stroke-width="{width}"{dasharray}/></svg>')


def _shape_word(options: dict, plain: bool) -> str:
    """How a node looks, in words: "filled dot" and "hollow dashed square" for the default looks, else the
    vis-network shape the status declares."""
    shape = options.get("shape", "dot")
    if plain:
        return "filled dot" if shape == "dot" else "hollow dashed square"
    return shape


def _node_row(schema: EngineSchema | None, kind: str, status: str, options: dict) -> str:
    e = html.escape
    spec = schema.status(status) if schema is not None and status else None
    surface = spec.surface if spec is not None else "shapeProperties" not in options
    plain = spec is None or not (spec.color or spec.shape)
    color = options.get("color", {})
    dashed = bool(options.get("shapeProperties", {}).get("borderDashes"))
    swatch = shape_svg(options.get("shape", "dot"), color.get("background", "#ffffff"),
                       color.get("border", ARCHIVED_GREY), dashed)
    where = "on the surface" if surface else f"off the surface: dashed, “[{e(status or 'off surface')}]”"
    return (f'<div class="lg-row" title="{e(spec.description if spec else "")}">{swatch}'
            f'<span>{e(kind_label(schema, kind))} · '
            f'{e(status_label(schema, status) or "no status")} ({e(_shape_word(options, plain))}, {where})'
            f'</span></div>')


def _a(word: str) -> str:
    return f"{'an' if word[:1].lower() in 'aeiou' else 'a'} {word}"


def legend_html(schema: EngineSchema | None, seen: Seen) -> str:
    """Edge colour and dash per type drawn, one swatch per kind · status drawn, and the marks the drawing
    uses (rings, path, collapsed sessions, folded group nodes, summary edges), as an HTML fragment."""
    e = html.escape
    declared = [t.name for t in schema.edge_types] if schema is not None else []
    drawn_types = [t for t in declared if t in seen.edge_types] + sorted(seen.edge_types - set(declared))
    described = {t.name: t.description for t in schema.edge_types} if schema is not None else {}
    edges = "".join(f'<div class="lg-row" title="{e(described.get(t, ""))}">{_line(edge_style(t, schema))}'
                    f'<span>{e(edge_style(t, schema)["label"])}</span></div>' for t in drawn_types)
    if not edges:
        edges = ('<div class="lg-row"><span>none (this engine keeps no links)</span></div>' if not declared else
                 '<div class="lg-row"><span>none drawn</span></div>')
    kinds = [k.name for k in schema.node_kinds] if schema is not None else []
    statuses = [s.name for s in schema.statuses] if schema is not None else []

    def order(key: tuple[str, str]) -> tuple:
        kind, status = key
        return (kinds.index(kind) if kind in kinds else len(kinds), kind,
                statuses.index(status) if status in statuses else len(statuses), status)

    nodes = "".join(_node_row(schema, kind, status, seen.nodes[(kind, status)]) for kind, status in
                    sorted(seen.nodes, key=order))
    marks = ""
    for kind in [k for k in kinds if k in seen.folded] + sorted(set(seen.folded) - set(kinds)):
        members = " and ".join(sorted(kind_label(schema, m) for m in seen.folded[kind])) or "members"
        marks += (f'<div class="lg-row"><span><b>{FOLDED} n</b> on {e(_a(kind_label(schema, kind)))}: its n '
                  f'{e(members)}s folded into it (click it to open it)</span></div>')
    for kind in sorted(seen.opened):
        marks += (f'<div class="lg-row"><span><b>{OPENED} n</b> on {e(_a(kind_label(schema, kind)))}: drawn open '
                  f'with its n members (click it to fold them)</span></div>')
    if seen.ringed:
        marks += (f'<div class="lg-row">{shape_svg("dot", "#ffffff", RING_COLOR, width=3.5)}'
                  f'<span>highlighted node (thick ring)</span></div>')
    if seen.path:
        marks += (f'<div class="lg-row">{_line({"color": "#555", "dashes": False}, 5)}'
                  f'<span>highlighted edge (path)</span></div>')
    if seen.session_groups:
        marks += (f'<div class="lg-row">{shape_svg("box", GROUP_FILL, GROUP_BORDER)}'
                  f'<span>collapsed session (click to expand)</span></div>')
    if seen.summary_edges:
        marks += (f'<div class="lg-row">{_line({"color": "#555", "dashes": False}, 1)}'
                  f'{_line({"color": "#555", "dashes": False}, 6)}'
                  f'<span>summary edge: width grows with the count</span></div>')
    return (f'<div class="mw-legend"><span class="lg-head">Edges</span>{edges}'
            f'<span class="lg-head">Nodes</span>{nodes}{marks}</div>')

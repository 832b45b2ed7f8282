"""The legend above the memory graph: what each edge colour and dash, node colour and shape, ring and group
means, as an HTML fragment with small SVG swatches drawn in the graph's own colours and shapes.
"""
from __future__ import annotations

import html

from engine.schema import EngineSchema
from workbench.graph_style import (
    ARCHIVED_GREY,
    GROUP_BORDER,
    GROUP_FILL,
    OTHER_KIND_COLOR,
    RING_COLOR,
    edge_dashes,
    edge_style,
)


def legend_html(schema: EngineSchema | None = None, grouped: bool = False) -> str:
    """Edge colour and dash per type, node colour per kind and the status encodings, as an HTML fragment
    (with the group node and summary edge when sessions are grouped)."""
    e = html.escape

    def line(style: dict) -> str:
        dash = edge_dashes(style)
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

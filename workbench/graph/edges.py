"""How one edge of a drawn memory is set: a stored edge's vis-network options (its type's style, its width by
confidence, a path's emphasis and hop label), the key of a path hop walked against a stored edge's direction,
and a path's hops over links the engine finds at query time (no stored edge holds them)."""
from __future__ import annotations

import html

from engine.core.edge import Edge as MemoryEdge
from engine.core.state import MemoryState
from workbench.graph.style import edge_dashes, edge_style, edge_title, weighted_width

NEIGHBOUR_DX = 260               # two nodes on one line at most this far apart are joined by a straight edge


def edge_options(state: MemoryState, key, edge, positions, path, labels, large: bool) -> dict:
    style = edge_style(edge.type, state.schema)
    width, opacity = style["width"], style["opacity"]
    if style.get("weighted") and edge.confidence is not None:
        width = weighted_width(width, edge.confidence)
    if path:
        width, opacity = (5, 1.0) if key in path else (width, 0.2)
    (x1, y1), (x2, y2) = positions[edge.src], positions[edge.dst]
    neighbours = y1 == y2 and abs(x1 - x2) <= NEIGHBOUR_DX    # next to each other in a line: a straight line
    options = {"from": edge.src, "to": edge.dst, "title": edge_title(edge, state.schema), "dashes": edge_dashes(style),
               "width": width, "color": {"color": style["color"], "opacity": opacity},
               "smooth": False if large or neighbours else {"enabled": True, "type": "curvedCW", "roundness": 0.18}}
    if key in labels:
        # vis-network draws a "top"-aligned label of a level edge pointing left at the canvas origin (it skips
        # the move to the edge when the label's angle is 0), so a level edge's label is set horizontally
        options |= {"label": labels[key], "font": {"size": 13, "color": "#1a1a1a", "strokeWidth": 4,
                                                    "strokeColor": "#ffffff", "align": "horizontal" if y1 == y2
                                                    else "top"}}
    return options


def query_time_hops(state: MemoryState, path: set[tuple[int, int, str]]) -> list[tuple[int, int, str]]:
    """The path's hops over a link the engine finds at query time (MemLoom's logic links): no stored edge holds
    them, so the path would break there if only stored edges were drawn."""
    kinds = state.schema.query_time_types if state.schema is not None else ()
    return sorted(k for k in path if k not in state.edges and k[2] in kinds)


def query_time_options(state: MemoryState, key: tuple[int, int, str], positions, path, labels, large: bool) -> dict:
    """A query-time hop drawn like a stored edge of its type (cause -> effect), titled as found, not stored."""
    src, dst, etype = key
    options = edge_options(state, key, MemoryEdge(src, dst, etype), positions, path, labels, large)
    label = html.escape(edge_style(etype, state.schema)["label"])
    return options | {"title": f"<b>{label}</b> u{src} → u{dst}<br>found at query time, not stored: the engine "
                               f"scored this link while answering the question"}


def stored_key(state: MemoryState, key: tuple[int, int, str]) -> tuple[int, int, str]:
    """A path hop may walk an edge against its direction (e.g. from an archived node to its representative)."""
    src, dst, etype = key
    return (dst, src, etype) if key not in state.edges and (dst, src, etype) in state.edges else key

"""How the memory graph encodes memory: the look of each node and edge, and the words beside them.

Everything engine-specific comes from the state's `EngineSchema`: edge colour, dash, width, opacity and
label per edge type; fill colour per node kind; the lifecycle statuses, the look a status declares and which
statuses are on the retrieval surface. Encodings never rely on colour alone: nodes on the surface are filled
dots, nodes off it are hollow grey squares with a dashed border and their status in their label ("u7
[archived]"); each edge type has its own colour *and* dash pattern. The graph document, its legend, the
node inspector and the other pages' tables all take their looks and words from here, so a node reads the
same everywhere.
"""
from __future__ import annotations

import html

from engine.core.node import Node
from engine.core.schema import EngineSchema
from engine.core.state import MemoryState
from workbench.text import MISSING, confidence_text, missing

Unit = Node
OTHER_KIND_COLOR = "#17becf"
ARCHIVED_GREY = "#8c8c8c"
RING_COLOR = "#e6a100"
UNKNOWN_EDGE_STYLE = {"color": "#bcbd22", "dashes": [2, 4], "label": "other", "width": 1.5, "opacity": 0.8}
DASH_PATTERN = [6, 4]            # what `dashes: True` looks like in vis-network, reused by the legend
TEXT_LIMIT = 600                 # characters of raw evidence in a tooltip
GROUP_FILL, GROUP_BORDER = "#eaf1fb", "#4a6fa5"
LABEL_HALO = {"strokeWidth": 4, "strokeColor": "#ffffff"}       # a white halo round each letter
LABEL_GROUND = "rgba(255,255,255,0.92)"   # and a white box behind a label under or above its node: an edge that
                                          # crosses it (MemLoom's causal curves) passes behind the text
NODE_FONT, INSIDE_FONT = 18, 16  # label size under a node, and inside a shape that holds its label (a box)
INSIDE_SHAPES = ("box", "ellipse", "circle", "database", "text")  # vis-network shapes that draw the label inside
LINE_EM = 1.15                   # a label line's height in font sizes (vis-network: one font size, plus margin)
FOLDED, OPENED = "▸", "▾"        # a group node with its members folded into it, or drawn open


# -- what the schema says ------------------------------------------------------------------
def edge_style(etype: str, schema: EngineSchema | None = None) -> dict:
    """Colour, dashes, width, opacity and label of an edge type as the engine's schema declares it."""
    spec = schema.edge_type(etype) if schema is not None else None
    if spec is None:
        return {**UNKNOWN_EDGE_STYLE, "label": etype or UNKNOWN_EDGE_STYLE["label"]}
    return {"color": spec.color, "dashes": spec.dashes, "width": spec.width, "opacity": spec.opacity,
            "label": spec.label, "weighted": spec.weighted}


def edge_types_of(state: MemoryState) -> list[str]:
    """The schema's stored edge types in its order (not the query-time ones: the graph never holds them), then
    any other type the state holds."""
    declared = [e.name for e in state.schema.edge_types if not e.query_time] if state.schema else []
    return declared + sorted(set(state.edge_counts()) - set(declared))


def statuses_of(state: MemoryState) -> list[str]:
    """The schema's statuses in its order, then any other status a node has."""
    declared = [s.name for s in state.schema.statuses] if state.schema else []
    return declared + sorted({u.status for u in state.nodes.values()} - set(declared))


def status_label(schema: EngineSchema | None, status: str) -> str:
    spec = schema.status(status) if schema is not None and status else None
    return spec.label if spec else status


def kind_label(schema: EngineSchema | None, kind: str) -> str:
    spec = schema.kind(kind) if schema is not None else None
    return spec.label if spec else kind


def kind_field(schema: EngineSchema | None, kind: str) -> str:
    """A node's kind where a page states it as a field: the schema's label, with the stored name beside it when
    they differ ("sentence record (turn)"), so the page says what `memwb export --json` says."""
    label = kind_label(schema, kind)
    return label if label == kind else f"{label} ({kind})"


def kind_color(schema: EngineSchema | None, kind: str) -> str:
    spec = schema.kind(kind) if schema is not None else None
    return spec.color if spec else OTHER_KIND_COLOR


def off_surface_word(schema: EngineSchema | None) -> str:
    """What leaving the surface is called (`EngineSchema.off_surface_word`; "off surface" without a schema)."""
    return schema.off_surface_word if schema is not None else "off surface"


def moved_edges_word(schema: EngineSchema | None) -> str:
    """What a page calls the edges a run moved off a node leaving the surface onto the node whose lineage link
    leads to it (All-Mem's redirect to a Merge's representative), named by the schema's lineage edge types
    ("Edges moved along version (ν)"); "" for an engine that declares none, which can move no edge so."""
    labels = [e.label for e in schema.edge_types if e.lineage] if schema is not None else []
    return f"Edges moved along {' / '.join(labels)}" if labels else ""


# -- encodings ---------------------------------------------------------------------------------
def edge_dashes(style: dict) -> bool | list[int]:
    return DASH_PATTERN if style["dashes"] is True else style["dashes"]


def status_tag(unit: Unit) -> str:
    """" [archived]" for a node off the surface (its status, in words), "" on the surface."""
    return "" if unit.visible else f" [{unit.status or 'off surface'}]"


def fold_mark(unit: Unit, folded: bool) -> str:
    """" ▸ 5" on a group node whose 5 members are folded into it, " ▾ 5" on one drawn open."""
    return f" {FOLDED if folded else OPENED} {len(unit.members)}"


def node_label(unit: Unit, fold: str = "") -> str:
    """"u7", "u7 [archived]" off the surface, "u33 ▸ 5" for a group node with `fold_mark`."""
    return f"{unit.label}{fold}{status_tag(unit)}"


def visibility_text(unit: Unit) -> str:
    """"● visible" / "◌ archived": the node's status with a filled or hollow mark for on or off the surface."""
    return f"{'●' if unit.visible else '◌'} {unit.status or ('visible' if unit.visible else 'archived')}"


def unit_title(unit: Unit, schema: EngineSchema | None = None) -> str:
    """Tooltip HTML for a node; every field from the data is escaped."""
    e = html.escape
    raw = unit.raw if len(unit.raw) <= TEXT_LIMIT else unit.raw[:TEXT_LIMIT] + "…"
    rows = [
        f"<b>{e(unit.label)}</b> · {e(visibility_text(unit))} · {e(kind_field(schema, unit.kind))} · "
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
        conf = f" · confidence {confidence_text(edge.confidence)}"
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


def node_options(unit: Unit, ringed: bool, schema: EngineSchema | None) -> dict:
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
        if options["shape"] in INSIDE_SHAPES:      # the label sits inside the shape, on its fill
            options["font"] = {"size": INSIDE_FONT, "color": "#ffffff" if _dark(fill) else "#1a1a1a"}
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


def label_top(size: float, font_size: float) -> float:
    """Where vis-network puts the top of a label drawn under a shape of `size`, from the node's centre."""
    return size + font_size / 2 + 4


def label_above(size: float, font_size: float, lines: int = 1) -> float:
    """The `vadjust` that moves a label from under a shape of `size` to just above it."""
    return -(label_top(size, font_size) + size + lines * LINE_EM * font_size + 3)


def readable(options: dict, unit: Unit) -> dict:
    """A white halo and ground behind every label drawn on the canvas (none inside a shape, where white would
    smear white text into its fill), and an off-surface label above its node, where the lineage edge from
    its successor (stacked below) cannot run through it."""
    if options["shape"] in INSIDE_SHAPES:
        return {**options, "font": {"size": INSIDE_FONT, "strokeWidth": 0, **options.get("font", {})}}
    font = {**LABEL_HALO, "background": LABEL_GROUND, "size": NODE_FONT, **options.get("font", {})}
    if not unit.visible:
        font["vadjust"] = round(label_above(options.get("size", 12), font["size"]))
    return {**options, "font": font}

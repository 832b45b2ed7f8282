"""Where the memory graph puts each node: fixed positions, not a simulation, and room for every label.

Sessions in time order, each its title and then one column per turn in time order; nodes made by an offline
process (a merged unit, an event) stack just below the turn they come from. No physics means a 1,000-node
graph renders at once and a node keeps its column order and session when the graph is re-drawn at another
turn, so two turns can be compared by eye.

Every node takes the room its shape and label need (`node_box`, estimated from the label's text and font),
so columns are as wide as their widest label and stacked nodes sit below the label above them: no two
labels overlap. Sessions flow into rows like words in a paragraph (short ones side by side, a long one
wrapped onto rows of its own) at the row width that lets the whole drawing fill a canvas of the given
aspect, so the text is as large as the canvas allows. When sessions are grouped, collapsed sessions fill a
grid in time order and an expanded session opens in place as a band of its units under a title.
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime

from engine.core.node import Node
from engine.core.state import MemoryState
from workbench.graph.select import session_order
from workbench.graph.style import INSIDE_SHAPES, LINE_EM, NODE_FONT, label_top

Unit = Node
CHAR_EM = 0.56                   # a label character's width in font sizes (sans-serif; vis-network draws
                                 # "u26 [grounded]" at 18 px 121 px wide, 0.48 em a character)
H_GAP, V_GAP = 22, 12            # free space between two columns, and between a label and the node below it
DEPTH_DX = 18                    # each node stacked under a turn sits a little to the right (edges between them show)
LINE_GAP, BAND_GAP = 30, 56      # between two lines of one session, and between two rows of sessions
BLOCK_GAP = 64                   # between two sessions side by side in one row
GROUP_COLUMNS = 6                # collapsed sessions per row of the grid
ASPECT = 1.5                     # canvas width / height the drawing is fitted to by default


@dataclass(frozen=True)
class Box:
    """The room a drawn node takes around its position: half its width, and how far it reaches up and down."""

    half: float
    up: float
    down: float

    @property
    def width(self) -> float:
        return 2 * self.half


def text_size(label: str, font_size: float) -> tuple[float, float]:
    """(width, height) a label takes: its longest line, and its lines."""
    lines = str(label).split("\n")
    return max(len(line) for line in lines) * CHAR_EM * font_size, len(lines) * LINE_EM * font_size


def node_box(options: dict) -> Box:
    """The room of a node drawn with vis-network `options`: a shape with the label inside it (box, text), or a
    shape of `size` with the label under it (or above it, moved up by the font's `vadjust`)."""
    font = options.get("font", {})
    text_w, text_h = text_size(options.get("label", ""), font.get("size", NODE_FONT))
    if options.get("shape") in INSIDE_SHAPES:
        margin = 0 if options.get("shape") == "text" else options.get("margin", 5)
        width = max(text_w + 2 * margin, options.get("widthConstraint", {}).get("minimum", 0))
        return Box(width / 2, text_h / 2 + margin, text_h / 2 + margin)
    size = options.get("size", 25)
    top = label_top(size, font.get("size", NODE_FONT)) + font.get("vadjust", 0)    # from the node's centre
    return Box(max(size, text_w / 2), max(size, -top), max(size, top + text_h))


@dataclass
class Column:
    """One turn and the nodes stacked under it, placed relative to the turn's position."""

    units: list[int]
    offsets: list[tuple[float, float]]
    left: float
    right: float
    up: float
    down: float

    @property
    def width(self) -> float:
        return self.left + self.right


def _anchor(state: MemoryState, unit: Unit) -> int:
    """The turn unit a unit is drawn with: itself, or for consolidation output the turn of its latest source.

    Turns often share a timestamp (LoCoMo dates a whole session), so columns follow turns, not times.
    """
    if unit.kind == state.turn_kind or not unit.source_ids:
        return unit.id
    return state.turn_units.get(unit.source_ids[-1], unit.id)


def _stacks(state: MemoryState, units: Iterable[Unit]) -> list[list[Unit]]:
    """A session's units as stacks in turn order, each a turn with the consolidation output it anchors."""
    stacks: dict[tuple[str, int], list[Unit]] = {}
    for u in sorted(units, key=lambda u: u.id):
        anchor = _anchor(state, u)
        stacks.setdefault((state.units[anchor].time if anchor in state.units else u.time, anchor), []).append(u)
    return [stacks[key] for key in sorted(stacks)]


def _column(stack: list[Unit], boxes: dict[int, Box]) -> Column:
    offsets: list[tuple[float, float]] = []
    y = 0.0
    for depth, u in enumerate(stack):
        if depth:
            y += boxes[stack[depth - 1].id].down + V_GAP + boxes[u.id].up
        offsets.append((depth * DEPTH_DX, y))
    first, last = boxes[stack[0].id], boxes[stack[-1].id]
    return Column([u.id for u in stack], offsets,
                  left=max(boxes[u.id].half - dx for u, (dx, _) in zip(stack, offsets)),
                  right=max(dx + boxes[u.id].half for u, (dx, _) in zip(stack, offsets)),
                  up=first.up, down=offsets[-1][1] + last.down)


def _lines(columns: list[Column], width: float) -> list[list[Column]]:
    """Columns cut into lines no wider than `width` (one line at least per column), then evened out so the
    last line is not a lone turn."""
    total = sum(c.width for c in columns) + H_GAP * max(0, len(columns) - 1)
    count = 1
    used = 0.0
    for c in columns:
        if used and used + H_GAP + c.width > width:
            count, used = count + 1, c.width
        else:
            used += (H_GAP if used else 0) + c.width
    target = total / count
    lines: list[list[Column]] = [[]]
    used = 0.0
    for i, c in enumerate(columns):
        left = len(columns) - i
        if lines[-1] and used + H_GAP + c.width / 2 > target and len(lines) < count and left >= count - len(lines):
            lines.append([])
            used = 0.0
        lines[-1].append(c)
        used += (H_GAP if used else 0) + c.width
    return lines


def _place(lines: list[list[Column]], x0: float, y0: float, positions: dict[int, tuple[int, int]] | None
           ) -> tuple[float, float, float]:
    """Put lines of columns from (x0, y0) down: every turn of a line on one baseline (into `positions`, unless
    only the extent is wanted). Returns the baseline of the first line, the bottom of the last and the widest
    line's width."""
    y, first, widest = y0, None, 0.0
    for line in lines:
        base = y + max(c.up for c in line)
        first = base if first is None else first
        x = x0
        for c in line:
            x += c.left
            if positions is not None:
                for uid, (dx, dy) in zip(c.units, c.offsets):
                    positions[uid] = (round(x + dx), round(base + dy))
            x += c.right + H_GAP
        widest = max(widest, x - H_GAP - x0)
        y = base + max(c.down for c in line) + LINE_GAP
    return first if first is not None else y0, y - LINE_GAP, widest


@dataclass
class Layout:
    """Positions of everything a drawing holds: units, session titles and collapsed session groups."""

    units: dict[int, tuple[int, int]] = field(default_factory=dict)
    titles: dict[str, tuple[int, int]] = field(default_factory=dict)
    groups: dict[str, tuple[int, int]] = field(default_factory=dict)


def _by_session(state: MemoryState, ids: Iterable[int]) -> dict[str, list[Unit]]:
    by_session: dict[str, list[Unit]] = {}
    for uid in ids:
        u = state.units[uid]
        by_session.setdefault(u.session, []).append(u)
    return by_session


@dataclass
class Band:
    """One session's columns, with its title before them, and its width drawn on one line."""

    session: str
    title: Box
    columns: list[Column]
    one_line: float = 0.0

    def __post_init__(self) -> None:
        self.one_line = self.title.width + H_GAP + sum(c.width for c in self.columns) + H_GAP * (len(self.columns) - 1)


def _arrange(bands: list[Band], width: float, out: Layout | None = None) -> tuple[float, float]:
    """Sessions flow into rows at most `width` wide, in time order like words in a paragraph: a session that
    fits on one line shares its row with its neighbours; a longer one takes rows of its own, its columns
    wrapped beside its title. Places everything into `out` when given; returns the (width, height) taken."""
    units = out.units if out is not None else None
    y, widest, used = 0.0, 0.0, 0.0
    row: list[Band] = []

    def close_row() -> None:
        nonlocal y, widest, used, row
        if not row:
            return
        base = y + max(max([b.title.up] + [c.up for c in b.columns]) for b in row)
        x = 0.0
        for b in row:
            if out is not None:
                out.titles[b.session] = (round(x + b.title.half), round(base))
            x += b.title.width + H_GAP
            if units is None:
                x += b.one_line - b.title.width
            else:
                for c in b.columns:
                    x += c.left
                    for uid, (dx, dy) in zip(c.units, c.offsets):
                        units[uid] = (round(x + dx), round(base + dy))
                    x += c.right + H_GAP
            x += BLOCK_GAP - H_GAP
        widest = max(widest, x - BLOCK_GAP)
        y = base + max(max([b.title.down] + [c.down for c in b.columns]) for b in row) + BAND_GAP
        row, used = [], 0.0

    for band in bands:
        if band.one_line <= width:
            if row and used + BLOCK_GAP + band.one_line > width:
                close_row()
            row.append(band)
            used += (BLOCK_GAP if used else 0.0) + band.one_line
            continue
        close_row()
        left = band.title.width + H_GAP
        lines = _lines(band.columns, max(width - left, max(c.width for c in band.columns)))
        base, bottom, w = _place(lines, left, y, units)
        if out is not None:
            out.titles[band.session] = (round(band.title.half), round(base))
        widest = max(widest, left + w)
        y = bottom + BAND_GAP
    close_row()
    return widest, y - BAND_GAP


def fitted_width(bands: list[Band], aspect: float) -> float:
    """The row width at which `bands` can be drawn largest on a canvas of `aspect` (width / height): the one
    that maximises the zoom fitting both ways. A coarse pass over widths from the widest title and column to
    every band on one row, then a fine pass around the best; ties keep the wider rows."""
    if not bands:
        return 0.0
    low = max(b.title.width + H_GAP + max(c.width for c in b.columns) for b in bands)
    high = max(low, sum(b.one_line for b in bands) + BLOCK_GAP * (len(bands) - 1))

    def zoom(width: float) -> float:
        w, h = _arrange(bands, width)
        return min(aspect / max(w, 1.0), 1.0 / max(h, 1.0))

    def best_of(widths: list[float]) -> float:
        scored = [(zoom(w), w) for w in widths]
        top = max(z for z, _ in scored)
        return max(w for z, w in scored if z >= top * (1 - 1e-9))

    steps = 12
    coarse = [low * (high / low) ** (i / steps) for i in range(steps + 1)]
    best = best_of(coarse)
    i = coarse.index(best)
    below, above = coarse[max(0, i - 1)], coarse[min(steps, i + 1)]
    return best_of([best] + [below * (above / below) ** (j / 8) for j in range(9)])


def layout(state: MemoryState, ids: Iterable[int], boxes: dict[int, Box], title_boxes: dict[str, Box],
           aspect: float = ASPECT) -> Layout:
    """Sessions in time order, each its title then its columns, flowing into rows at the fitted width."""
    numbers = session_order(state)
    by_session = _by_session(state, ids)
    bands = [Band(s, title_boxes[s], [_column(stack, boxes) for stack in _stacks(state, by_session[s])])
             for s in sorted(by_session, key=numbers.__getitem__)]
    out = Layout()
    _arrange(bands, fitted_width(bands, aspect), out)
    return out


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


def grouped_layout(state: MemoryState, groups: list[SessionGroup], drawn: set[int], expanded: set[str],
                   boxes: dict[int, Box], group_boxes: dict[str, Box], title_boxes: dict[str, Box]) -> Layout:
    """Collapsed sessions fill a grid in time order, each cell as wide and tall as the largest group node; an
    expanded session breaks the grid with its title and a band of its units in place, as wide as the grid."""
    cell_w = max((b.width for b in group_boxes.values()), default=0.0) + 2 * H_GAP
    cell_h = max((b.up + b.down for b in group_boxes.values()), default=0.0) + 2 * V_GAP + LINE_GAP
    grid = GROUP_COLUMNS * cell_w
    out = Layout()
    col, y = 0, 0.0
    for g in groups:
        if g.session not in expanded:
            out.groups[g.session] = (round(col * cell_w + cell_w / 2), round(y + cell_h / 2))
            col += 1
            if col == GROUP_COLUMNS:
                col, y = 0, y + cell_h
            continue
        if col:
            col, y = 0, y + cell_h
        title = title_boxes[g.session]
        out.titles[g.session] = (round(title.half), round(y + title.up))
        y += title.up + title.down + V_GAP
        columns = [_column(stack, boxes) for stack in _stacks(state, (state.units[u] for u in g.units if u in drawn))]
        if columns:
            _, bottom, _ = _place(_lines(columns, max(grid, max(c.width for c in columns))), 0.0, y, out.units)
            y = bottom
        y += BAND_GAP
    return out


def canvas_aspect(height_px: int, width_px: int = 1100) -> float:
    """The shape of the canvas a page gives the graph: its usual width over the height it asks for."""
    return width_px / max(1, height_px)

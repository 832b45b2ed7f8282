"""Read and click the memory graph in the browser: vis-network draws on a canvas, so the drawn nodes, their
positions and their labels are read from the page's network object rather than from the DOM.
"""
from __future__ import annotations

import re
import time

from workbench.driver.browser import wait_idle


def graph_frame(page, timeout_ms: int = 120_000):
    """The frame of the drawn memory graph (its body is marked once vis-network has drawn)."""
    deadline = time.time() + timeout_ms / 1000
    while time.time() < deadline:
        for frame in page.frames:
            try:
                if frame.evaluate("() => !!document.body && document.body.hasAttribute('data-drawn-ms') "
                                  "&& typeof network !== 'undefined'"):
                    return frame
            except Exception:                               # a frame replaced by a rerun while we looked
                continue
        page.wait_for_timeout(250)
    raise RuntimeError("no drawn memory graph on the page")


def graph_nodes(frame) -> list:
    """The ids of the nodes the graph draws (units are numbers, groups and titles "group:…" / "session:…")."""
    return frame.evaluate("() => nodeData.map(n => n.id)")


def folded_groups(frame) -> dict[int, int]:
    """Group nodes drawn with their members folded in ("u88 ▸ 7"): node id -> the member count on its label."""
    labels = frame.evaluate("() => nodeData.map(n => [n.id, n.label || ''])")
    return {i: int(m.group(1)) for i, label in labels if isinstance(i, int) and (m := re.search(r"▸ (\d+)", label))}


def redrawn_frame(page, before: list, timeout_ms: int = 60_000):
    """The graph's frame once it draws another set of nodes than `before` (a click's rerun has replaced it)."""
    deadline = time.time() + timeout_ms / 1000
    while time.time() < deadline:
        frame = graph_frame(page, timeout_ms)
        try:
            if graph_nodes(frame) != before:
                return frame
        except Exception:                                   # replaced while we read it
            pass
        page.wait_for_timeout(250)
    raise RuntimeError("the graph did not change")


def click_graph_node(page, frame, node) -> None:
    """Click node `node` on the vis-network canvas, where it is drawn now, and wait for the rerun."""
    at = frame.evaluate("(id) => network.canvasToDOM(network.getPositions([id])[id])", node)
    frame.locator("#graph canvas").click(position={"x": at["x"], "y": at["y"]})
    wait_idle(page, 1500)


_LABEL_BOXES = """() => {
    const scale = network.getScale(), ids = new Set(nodeData.map(n => n.id));
    return Object.values(network.body.nodes).filter(n => ids.has(n.id) && n.options.label).map(n => {
        const s = n.labelModule.size, font = n.labelModule.fontOptions.size;
        const lift = n.labelModule.fontOptions.vadjust || 0;      // applied when drawn, not in the size
        const threshold = n.options.scaling.label.drawThreshold;
        return {id: n.id, label: n.options.label, shape: n.options.shape, x: n.x, y: n.y,
                left: s.left, top: s.top + lift, width: s.width, height: s.height,
                screen_font: font * scale, drawn: font * scale >= threshold - 1};
    });
}"""


def graph_label_boxes(frame) -> list[dict]:
    """Every drawn node's label as vis-network laid it out on the canvas (canvas coordinates): its text, box
    (`left`, `top`, `width`, `height`), font size on screen at the current zoom and whether it is drawn at all
    (vis-network skips a label smaller than its draw threshold)."""
    return frame.evaluate(_LABEL_BOXES)


def overlapping_labels(boxes: list[dict], margin: float = 0.0) -> list[tuple[dict, dict]]:
    """Pairs of label boxes that overlap (by more than `margin` canvas pixels each way)."""
    ordered = sorted(boxes, key=lambda b: b["left"])
    pairs = []
    for i, a in enumerate(ordered):
        for b in ordered[i + 1:]:
            if b["left"] >= a["left"] + a["width"] - margin:
                break
            if (min(a["top"] + a["height"], b["top"] + b["height"]) - max(a["top"], b["top"]) > margin
                    and min(a["left"] + a["width"], b["left"] + b["width"]) - max(a["left"], b["left"]) > margin):
                pairs.append((a, b))
    return pairs

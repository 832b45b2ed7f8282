"""Read and click the memory graph in the browser: vis-network draws on a canvas, so the drawn nodes, their
positions and their labels are read from the page's network object rather than from the DOM.
"""
from __future__ import annotations

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


def click_graph_node(page, frame, node) -> None:
    """Click node `node` on the vis-network canvas, where it is drawn now, and wait for the rerun."""
    at = frame.evaluate("(id) => network.canvasToDOM(network.getPositions([id])[id])", node)
    frame.locator("#graph canvas").click(position={"x": at["x"], "y": at["y"]})
    wait_idle(page, 1500)

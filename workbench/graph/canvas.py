"""The memory graph as a clickable Streamlit element: a node clicked in the drawing comes back to Python.

`st.iframe` is one-way, so the graph page mounts the same self-contained document
(`workbench.graph.view.build_graph_html`) through a Streamlit custom component v2 instead.
The component's script puts the document in an iframe of its own (vis-network
stays inlined from pyvis, nothing is fetched) and listens for the message the
document posts on a click (`{memwbGraph: node id}`), which it hands to Python as
the one-rerun trigger value `clicked`. The iframe is only re-filled when the
document changes, so a rerun that draws the same graph keeps the user's zoom.
"""
from __future__ import annotations

import hashlib
from collections.abc import Callable

import streamlit as st

_JS = """
export default function ({ data, parentElement, setTriggerValue }) {
    let frame = parentElement.querySelector('iframe');
    if (!frame) {
        frame = document.createElement('iframe');
        frame.title = 'Memory graph';
        frame.style.cssText = 'width: 100%; border: 0; display: block;';
        parentElement.appendChild(frame);
    }
    frame.style.height = data.height + 'px';
    if (frame.dataset.digest !== data.digest) {
        frame.dataset.digest = data.digest;
        frame.srcdoc = data.html;
    }
    const listen = (event) => {
        if (event.source === frame.contentWindow && event.data && event.data.memwbGraph !== undefined) {
            setTriggerValue('clicked', event.data.memwbGraph);
        }
    };
    window.addEventListener('message', listen);
    return () => window.removeEventListener('message', listen);
}
"""

_component = st.components.v2.component("memwb.graph_canvas", js=_JS)


def graph_canvas(document: str, height: int, key: str, on_click: Callable[[], None]) -> None:
    """Draw `document`; a click on a node calls `on_click`, which reads the node id from
    `clicked_node(key)` (a unit id, or a "group:…" / "session:…" id)."""
    digest = hashlib.sha256(document.encode("utf-8")).hexdigest()[:16]
    _component(key=key, data={"html": document, "height": height, "digest": digest}, height=height + 8,
               on_clicked_change=on_click)


def clicked_node(key: str) -> int | str | None:
    """The node clicked in the canvas mounted under `key`, during the rerun its click started."""
    state = st.session_state.get(key)
    return state.get("clicked") if state is not None else None

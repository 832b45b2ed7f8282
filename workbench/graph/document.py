"""The HTML document around a drawn network: vis-network inlined, the legend, the canvas and the summary line.

The document is self-contained (vis-network as shipped with pyvis is inlined, nothing is fetched), so it
works offline in `st.iframe` and in `workbench.graph.canvas`. A click on a node is posted to the parent
window (`{memwbGraph: node id}`). vis-network 9 shows string tooltips as plain text, so tooltips are sent as
escaped HTML strings and turned into DOM elements in the page; every piece of conversation text is
`html.escape`d before it gets there.
"""
from __future__ import annotations

import html
import json
from functools import lru_cache
from pathlib import Path

import pyvis
from pyvis.network import Network

_VIS_LIB = Path(pyvis.__file__).parent / "lib" / "vis-9.1.2"


def vis_options(large: bool) -> dict:
    return {
        "physics": {"enabled": False},
        "layout": {"improvedLayout": False},
        "interaction": {"hover": True, "tooltipDelay": 150, "hideEdgesOnDrag": large,
                        "multiselect": False, "navigationButtons": False},
        "edges": {"arrows": {"to": {"enabled": True, "scaleFactor": 0.5}}},
        "nodes": {"font": {"size": 18, "face": "sans-serif"}},
    }


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


def document_html(net: Network, height_px: int, summary: str, legend: str) -> str:
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

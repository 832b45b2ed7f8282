"""What the workbench's plotly charts share: where a legend goes.

A horizontal legend placed below the plot at a fixed fraction of its height lands on the x-axis title when the
plot is short (one lifecycle lane, two layers), so charts with an x title put their legend above the plot,
anchored at its top edge, where plotly grows the top margin to fit it.
"""
from __future__ import annotations

LEGEND_ABOVE = {"orientation": "h", "x": 0, "y": 1.02, "yanchor": "bottom"}

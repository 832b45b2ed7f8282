"""The Memory graph page's parts: the drawing (pyvis canvas, layout, groups, style, legend), its controls and panels, and the graph's other views (layers, lifecycle timeline, GAM topics)."""

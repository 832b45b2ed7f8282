"""What one offline run changed, as tables: its proposals, the units it touched, the edges it added or
removed and the edges it moved onto a representative.

The Consolidation page shows these under the queue once a run has applied something; edges may come as
`Edge` objects, dicts or (src, dst, type) keys, whichever the run's report holds.
"""
from __future__ import annotations

from collections.abc import Iterable

import pandas as pd

from engine.schema import EngineSchema
from engine.state import MemoryState
from workbench.graph_style import edge_style, visibility_text
from workbench.proposal_text import op_label, targets_label
from workbench.review_view import sort_queue


def units_frame(state: MemoryState, ids: Iterable[int]) -> pd.DataFrame:
    rows = [{"unit": f"u{u.id}", "state": visibility_text(u), "kind": u.kind,
             "time": u.time, "source ids": ", ".join(u.source_ids), "text": u.raw}
            for u in (state.units[i] for i in sorted(ids) if i in state.units)]
    return pd.DataFrame(rows, columns=["unit", "state", "kind", "time", "source ids", "text"])


def edges_frame(edges: Iterable, schema: EngineSchema | None = None, state: MemoryState | None = None
                ) -> pd.DataFrame:
    """Edges given as Edge objects, dicts or (src, dst, type) keys; with `state`, also each edge's confidence and
    the records it cites (a synthesised relation's evidence) as that state holds them."""
    rows = []
    for e in edges:
        src, dst, etype = edge_key(e)
        row = {"edge": f"u{src} —{etype}→ u{dst}", "type": edge_style(etype, schema)["label"]}
        if state is not None:
            stored = state.edges.get((src, dst, etype))
            row["confidence"] = None if stored is None or stored.confidence is None else round(stored.confidence, 3)
            row["cites"] = ", ".join(f"u{c}" for c in (getattr(stored, "evidence", None) or []))
        rows.append(row)
    return pd.DataFrame(rows, columns=["edge", "type", *(["confidence", "cites"] if state is not None else [])])


def edge_key(e) -> tuple[int, int, str]:
    if isinstance(e, dict):
        return e["src"], e["dst"], e["type"]
    if isinstance(e, (tuple, list)):
        return e[0], e[1], e[2]
    return e.src, e.dst, e.type


def rewired_frame(rewired: Iterable) -> pd.DataFrame:
    """Edges moved off a node that left the surface onto its representative: (src, old dst, new dst)."""
    rows = []
    for r in rewired:
        src, old, new = (r["src"], r["old_dst"], r["new_dst"]) if isinstance(r, dict) else r
        rows.append({"source": f"u{src}", "was → archived": f"u{old}", "now → representative": f"u{new}"})
    return pd.DataFrame(rows, columns=["source", "was → archived", "now → representative"])


def run_proposals_frame(state: MemoryState, run_id: str) -> pd.DataFrame:
    schema = state.schema
    rows = [{"#": p.id, "operator": op_label(schema, p.op), "targets": targets_label(schema, p),
             "confidence": round(p.confidence, 3), "gate": p.gate, "status": p.status,
             "decided by": p.decided_by or "", "reason code": p.reason_code or "", "note": p.note}
            for p in sort_queue(p for p in state.proposals.values() if p.run_id == run_id)]
    return pd.DataFrame(rows, columns=["#", "operator", "targets", "confidence", "gate", "status", "decided by",
                                       "reason code", "note"])

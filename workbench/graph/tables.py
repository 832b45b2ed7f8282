"""Tables beside the memory graph: one node's edges and what changed between two turns, as rows to show.

The comparison itself (`engine.core.diff.diff_states`) and the lineage walk (`engine.core.walks`) are the library's;
these functions only put their results into the words and columns a reader scans.
"""
from __future__ import annotations

from engine.core.state import MemoryState
from engine.core.walks import lineage_types
from workbench.graph.style import cosine_text, edge_style, kind_field, status_label, visibility_text
from workbench.text import MISSING


def diff_default(cursor: int, head: int) -> tuple[int, int]:
    """Two distinct turns a tenth of the log apart (at least one) ending at the cursor, so a range slider's
    two thumbs never start on top of each other."""
    gap = max(1, head // 10)
    last = min(head, max(cursor, gap))
    return max(0, last - gap), last


def diff_rows(diff: dict, old_state: MemoryState, new_state: MemoryState) -> dict[str, list[dict]]:
    """Table rows for a `diff_states` result, with the text a reader needs to recognise each node."""
    schema = new_state.schema

    def unit_row(state: MemoryState, uid: int) -> dict:
        u = state.units[uid]
        return {"unit": u.label, "visibility": visibility_text(u), "kind": kind_field(schema, u.kind),
                "session": u.session, "sources": ", ".join(u.source_ids), "made by": u.made_by,
                "summary": u.summary}

    def label(uid: int) -> str:
        return f"u{uid}"

    def edge_row(key: tuple[int, int, str]) -> dict:
        src, dst, etype = key
        return {"type": edge_style(etype, schema)["label"], "from": label(src), "to": label(dst)}

    lineage = lineage_types(new_state)
    archived = [{**unit_row(new_state, u),
                 "superseded by": ", ".join(map(label, sorted({r for t in lineage for r in new_state.inc(u, t)})))
                 or MISSING}
                for u in diff["archived_units"]]
    return {
        "added": [unit_row(new_state, u) for u in diff["added_units"]],
        "archived": archived,
        "restored": [unit_row(new_state, u) for u in diff["restored_units"]],
        "removed": [unit_row(old_state, u) for u in diff["removed_units"]],
        "redescribed": [{**unit_row(new_state, u), "summary before": old_state.units[u].summary}
                        for u in diff["redescribed_units"]],
        "status changes": [{"unit": label(u), "from": status_label(schema, a), "to": status_label(schema, b),
                            "summary": new_state.units[u].summary}
                           for u, a, b in diff.get("status_changes", [])],
        "rewired": [{"from": label(s), "old target": label(x), "new target": label(r),
                     "new target summary": new_state.units[r].summary} for s, x, r in diff["rewired"]],
        "edges added": [edge_row(k) for k in diff["added_edges"]],
        "edges removed": [edge_row(k) for k in diff["removed_edges"]],
    }


def edge_rows(state: MemoryState, uid: int) -> list[dict]:
    """A node's out- and in-edges with the node at the other end."""
    rows = []
    for direction, edges in (("out →", state.out_edges(uid)), ("← in", state.in_edges(uid))):
        for edge in sorted(edges, key=lambda e: (e.type, e.src, e.dst)):
            other = state.units.get(edge.dst if direction == "out →" else edge.src)
            rows.append({"direction": direction, "type": edge_style(edge.type, state.schema)["label"],
                         "other unit": other.label if other else "?",
                         "other is": visibility_text(other) if other else "",
                         "made by": edge.made_by, "cosine": cosine_text(edge.confidence),
                         "created at turn": edge.created_turn, "other summary": other.summary if other else ""})
    return rows

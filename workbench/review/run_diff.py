"""What one offline run changed, as tables: its proposals, the units it touched, the edges it added or
removed and the edges it moved along a lineage link (All-Mem: onto a Merge's representative), each worded from
the engine's schema.

The Consolidation page shows these under the queue once a run has applied something; edges may come as
`Edge` objects, dicts or (src, dst, type) keys, whichever the run's report holds.
"""
from __future__ import annotations

from collections.abc import Iterable

import pandas as pd
import streamlit as st

from engine.core.access import Action
from engine.core.diff import diff_states
from engine.core.oplog import RunStatus
from engine.core.proposal import ProposalCounts
from engine.core.schema import EngineSchema
from engine.core.state import MemoryState
from workbench import access
from workbench.graph.style import edge_style, moved_edges_word, off_surface_word, visibility_text
from workbench.graph.view import build_graph_html
from workbench.model import Workbench
from workbench.review import actions
from workbench.review.proposal_text import op_label, run_label, targets_label, threshold
from workbench.review.queue import sort_queue
from workbench.text import confidence_text, full_height, md_escape, table

RUN_ROWS = 200          # a run's proposals are read whole: no scroll box inside the page up to this many


def skipped_help(counts: ProposalCounts) -> str:
    """What the Skipped count holds, with how many of them routing closed at diagnosis."""
    return (f"Closed without being executed: {counts.skipped_at_diagnosis} by routing at diagnosis, before any "
            "decision (a duplicate, an overlap, a filtered or disabled operator), the rest deferred by a reviewer "
            "(with a note saying who) or accepted but no longer applicable when the run applied.")


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
            row["confidence"] = None if stored is None or stored.confidence is None else \
                confidence_text(stored.confidence)
            row["cites"] = ", ".join(f"u{c}" for c in (getattr(stored, "evidence", None) or []))
        rows.append(row)
    return pd.DataFrame(rows, columns=["edge", "type", *(["confidence", "cites"] if state is not None else [])])


def edge_key(e) -> tuple[int, int, str]:
    if isinstance(e, dict):
        return e["src"], e["dst"], e["type"]
    if isinstance(e, (tuple, list)):
        return e[0], e[1], e[2]
    return e.src, e.dst, e.type


def rewired_frame(rewired: Iterable, off: str = "off surface") -> pd.DataFrame:
    """Edges moved off a node that left the surface onto the node whose lineage link leads to it: (src, old dst,
    new dst); `off` is what the engine calls leaving the surface."""
    was, now = f"was → ({off})", "now → (its lineage link's source)"
    rows = []
    for r in rewired:
        src, old, new = (r["src"], r["old_dst"], r["new_dst"]) if isinstance(r, dict) else r
        rows.append({"source": f"u{src}", was: f"u{old}", now: f"u{new}"})
    return pd.DataFrame(rows, columns=["source", was, now])


def run_proposals_frame(state: MemoryState, run_id: str) -> pd.DataFrame:
    schema = state.schema
    rows = [{"#": p.id, "operator": op_label(schema, p.op), "targets": targets_label(schema, p),
             "confidence": confidence_text(p.confidence), "gate θ": confidence_text(threshold(p)), "gate": p.gate,
             "status": p.status, "decided by": p.decided_by or "", "reason code": p.reason_code or "",
             "reason": p.reason, "note": p.note}
            for p in sort_queue(p for p in state.proposals.values() if p.run_id == run_id)]
    return pd.DataFrame(rows, columns=["#", "operator", "targets", "confidence", "gate θ", "gate", "status",
                                       "decided by", "reason code", "reason", "note"])


def run_status(run) -> str:
    """A run's status; an open run is only listed once part of it is applied."""
    return "open (partly applied)" if run.status == RunStatus.OPEN else run.status


def run_diff(wb: Workbench, view, state: MemoryState) -> None:
    """A committed or undone run, or the open run once part of it is applied: what it changed, and undo."""
    shown_runs = sorted((r for r in state.runs.values() if r.status != RunStatus.OPEN or any(
        p.run_id == r.run_id and p.decided_by for p in state.proposals.values())), key=lambda r: r.first_seq)
    if not shown_runs:
        st.info("No applied run yet.")
    else:
        names = [r.run_id for r in shown_runs]
        default = st.session_state.get("diff_run")
        run_id = st.selectbox("Run", names, index=names.index(default) if default in names else len(names) - 1,
                              format_func=lambda r: run_label(state.schema, state.runs[r], run_status(state.runs[r])))
        run = state.runs[run_id]
        after = state if run.status == RunStatus.OPEN else view.store.load_state(upto_seq=run.last_seq)
        before = view.store.load_state(upto_seq=run.first_seq - 1)
        diff = diff_states(before, after)
        counts = ProposalCounts.of(state.proposals.values(), run_id)
        off, moved = off_surface_word(state.schema), moved_edges_word(state.schema)
        metrics = [("Applied", counts.applied), ("Rejected", counts.rejected), ("Skipped", counts.skipped),
                   ("Failed", counts.failed),
                   (f"Nodes created / {off}", f"{len(diff['added_units'])} / {len(diff['archived_units'])}"),
                   *([(moved, len(diff["rewired"]))] if moved else [])]
        if run.status == "open":
            metrics.insert(4, ("Still pending", counts.pending))
        with st.container(horizontal=True):           # each label whole: a metric as wide as its label
            for label, value in metrics:
                st.metric(label, value, width="content",
                          help=skipped_help(counts) if label == "Skipped" else None)
        deciders = sorted({p.decided_by for p in state.proposals.values() if p.run_id == run_id and p.decided_by})
        st.caption(f"Status **{run_status(run)}** · decided by "
                   f"**{md_escape(', '.join(deciders)) or 'nobody'}**"
                   + (f" · {counts.skipped_at_diagnosis} of the {counts.skipped} skipped were closed at diagnosis, "
                      "before any decision" if counts.skipped_at_diagnosis else "")
                   + (" · the tables show what the run changed before it was undone" if run.status == "undone"
                      else "")
                   + (" · the tables show what the applied part changed so far; decide or defer the rest on the "
                      "Review queue" if run.status == RunStatus.OPEN else ""))
        left, right = st.columns(2)
        with left:
            for title, key in [("Nodes created", "added_units"), (f"Nodes {off}", "archived_units"),
                               ("Nodes re-described (their descriptor refreshed)", "redescribed_units"),
                               ("Nodes back on the surface", "restored_units"),
                               ("Nodes retracted", "removed_units")]:
                if diff[key] or key in ("added_units", "archived_units"):
                    st.markdown(f"**{title}**")
                    frame_state = after if key != "removed_units" else before
                    st.dataframe(table(units_frame(frame_state, diff[key])), hide_index=True, width="stretch")
        with right:
            st.markdown("**Edges added**")
            st.dataframe(table(edges_frame(diff["added_edges"], state.schema, after)), hide_index=True,
                         width="stretch")
            if moved:
                st.markdown(f"**{moved}**: from a node now {off} onto the node whose link leads to it")
                st.dataframe(table(rewired_frame(diff["rewired"], off)), hide_index=True, width="stretch")
            st.markdown("**Edges removed**")
            st.dataframe(table(edges_frame(diff["removed_edges"], state.schema, before)), hide_index=True,
                         width="stretch")
        st.markdown("**The run's proposals**")
        n = sum(p.run_id == run_id for p in state.proposals.values())
        st.dataframe(table(run_proposals_frame(state, run_id)), hide_index=True, width="stretch",
                     height=full_height(n, cap=RUN_ROWS))
        touched = sorted(set(diff["added_units"]) | set(diff["archived_units"]) | set(diff["redescribed_units"]))
        if touched and st.checkbox("Show the run's edits on the graph", key="diff_graph"):
            st.iframe(build_graph_html(after, highlight_units=touched, highlight_edges=diff["added_edges"],
                                       focus=touched, height_px=520), height=540)

    st.divider()
    last = state.last_committed_run()
    if state.open_runs():
        st.caption(f"{state.open_runs()[-1].run_id} is open: decide or defer its proposals before undoing a run.")
    elif last is None:
        st.caption("No committed run to undo.")
    elif not st.session_state.get("confirm_undo"):
        st.button(f"Undo last run ({last.run_id})…", key="undo_start", on_click=actions.set_confirm_undo, args=(True,),
                  disabled=not access.can(Action.UNDO))
    else:
        st.warning(f"Undo {last.run_id}? Compensating records are appended to the log (nothing is deleted): nodes "
                   "it created are retracted, status changes it made are reversed, its edge changes are reverted.")
        with st.container(horizontal=True):
            st.button("Yes, undo", type="primary", key="undo_confirm", on_click=actions.undo_last_run, args=(wb,),
                      disabled=not access.can(Action.UNDO))
            st.button("Cancel", key="undo_cancel", on_click=actions.set_confirm_undo, args=(False,))

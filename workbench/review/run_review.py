"""A past run reviewed read-only: each proposal of a committed (or undone) run with its decision, who decided,
confidence against the gate, reason code and reason, the evidence it cited and why a skipped one was skipped.

The review queue shows this when no run is open, so what a reviewer or the gate decided stays readable after the
run is closed; nothing here changes the run (undo lives on the Run diff & undo tab).
"""
from __future__ import annotations

import streamlit as st

from engine.core.oplog import RunInfo, RunStatus
from engine.core.proposal import ProposalCounts
from engine.core.state import MemoryState
from workbench.review.proposal_text import counts_text, run_label
from workbench.review.queue import PAGE_SIZE, proposal_card, sort_queue
from workbench.review.run_diff import RUN_ROWS, run_proposals_frame
from workbench.text import full_height, md_escape, table


def past_runs(state: MemoryState) -> list[RunInfo]:
    """The runs no longer open, the latest first."""
    return sorted((r for r in state.runs.values() if r.status != RunStatus.OPEN), key=lambda r: -r.first_seq)


def past_run_review(state: MemoryState) -> None:
    """Pick a closed run and read its proposals: a table of all of them, then their cards (read-only)."""
    runs = past_runs(state)
    if not runs:
        return
    st.markdown("#### Past runs (read-only)")
    names = [r.run_id for r in runs]
    if st.session_state.get("review_past_run") not in names:          # the latest run that proposed anything
        made = {p.run_id for p in state.proposals.values()}
        st.session_state["review_past_run"] = next((n for n in names if n in made), names[0])
    run_id = st.selectbox("Past run", names, key="review_past_run",
                          format_func=lambda r: run_label(state.schema, state.runs[r]))
    proposals = sort_queue(p for p in state.proposals.values() if p.run_id == run_id)
    counts = ProposalCounts.of(proposals)
    deciders = sorted({p.decided_by for p in proposals if p.decided_by})
    st.caption(f"**{run_id}** ({state.runs[run_id].status}): {counts.total} proposals: {counts_text(counts)} · "
               f"decided by **{md_escape(', '.join(deciders)) or 'nobody'}**. Read-only: the decisions are stored; "
               "undo the last run on the Run diff & undo tab.")
    if not proposals:
        return
    st.dataframe(table(run_proposals_frame(state, run_id)), hide_index=True, width="stretch",
                 height=full_height(len(proposals), cap=RUN_ROWS), key="review_past_table")
    pages = max(1, -(-len(proposals) // PAGE_SIZE))
    page = st.selectbox(f"Cards page ({PAGE_SIZE} per page)", range(1, pages + 1), key="review_past_page",
                        format_func=lambda n: f"{n} of {pages}") if pages > 1 else 1
    for p in proposals[(page - 1) * PAGE_SIZE: page * PAGE_SIZE]:
        proposal_card(state, p, f"past:{run_id}", gate_mode=False, on_plan=None)

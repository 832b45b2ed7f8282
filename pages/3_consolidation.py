"""Consolidation: run an engine's offline process on its buffer, review each proposed edit, apply, diff, audit, undo.

Operators, target roles, plans and reason codes come from the engine's schema; an engine with no offline
process (naive or hybrid RAG) gets the audit log only."""
from __future__ import annotations

import streamlit as st

from engine.core.access import Action
from engine.core.oplog import RunStatus
from workbench import access
from workbench.review import actions
from workbench.review.audit import audit_log
from workbench.review.backend_compare import compare_panel
from workbench.review.queue import review_queue
from workbench.review.run_diff import run_diff
from workbench.review.run_review import past_run_review
from workbench.state import get_workbench, header, queued_label

wb = get_workbench()
header(wb)
st.subheader("Consolidation")

view = wb.view
state = view.state
schema = wb.schema
processes = view.processes()
if not processes:
    st.info(f"The {schema.label} engine has no offline process: nothing to consolidate. Its memory only grows "
            "as turns are ingested; the audit log below lists every record it wrote.")
    st.markdown("#### Audit log")
    audit_log(view, state)
    st.stop()

if not wb.at_head:
    st.warning(f"The cursor is at turn {wb.cursor} but the log runs to turn {wb.head}. Running diagnosis (or any "
               f"other edit on this page) will **branch the log** at turn {wb.cursor}: the edit goes into a new "
               f"database and the original history after turn {wb.cursor} stays untouched in the old one.")
access.read_only_note(Action.REVIEW, "the review queue, run diffs and the audit log")
if actions.FLASH in st.session_state:
    kind, message = st.session_state.pop(actions.FLASH)
    getattr(st, kind)(message)

names = list(processes)
if len(names) > 1:
    if st.session_state.get("consolidation_process") not in names:
        st.session_state["consolidation_process"] = names[0]
    chosen = st.selectbox("Offline process", names, key="consolidation_process",
                          format_func=lambda n: f"{processes[n].spec.label} (buffer {processes[n].spec.buffer})")
else:
    chosen = names[0]
process = processes[chosen]
st.caption(f"Offline process **{process.spec.label}**" + (f": {process.spec.description}"
                                                          if process.spec.description else ""))
waiting = process.pending()
open_run = view.open_run()
row = st.container(horizontal=True, vertical_alignment="bottom")      # each label whole, wrapping when narrow
cols = [row.container(width="content") for _ in range(3)] + [row.container(width="stretch")]
cols[0].metric("Queued nodes", waiting,
               help=f"Nodes queued in the `{process.spec.buffer}` buffer for {process.spec.label} (the header's "
                    f"**{queued_label(process.spec)}**).")
cols[1].metric("Open run", open_run or "none")
cols[2].metric("Runs (committed / undone)", f"{sum(r.status == RunStatus.COMMITTED for r in state.runs.values())} / "
                                            f"{sum(r.status == RunStatus.UNDONE for r in state.runs.values())}")
with cols[3]:
    st.button(f"Run diagnosis · {process.spec.label}", type="primary", key="run_diagnosis",
              on_click=actions.run_diagnosis, args=(wb, chosen),
              disabled=bool(open_run) or not waiting or not access.can(Action.REVIEW),
              help=f"{process.spec.description or process.spec.label}: diagnose every buffered node; proposals "
                   "wait for review.")
    if open_run:
        st.caption(f"{open_run} is still open: decide or defer its proposals before diagnosing again.")
    elif not waiting:
        st.caption("The buffer is empty: step the replay forward to add nodes.")

queue_tab, diff_tab, audit_tab, compare_tab = st.tabs([actions.QUEUE_TAB, actions.DIFF_TAB, actions.AUDIT_TAB,
                                                      actions.COMPARE_TAB], key=actions.TAB_KEY, on_change="rerun")
if queue_tab.open:
    with queue_tab:
        review_queue(wb, state, open_run)
        if open_run is None:
            past_run_review(state)
if diff_tab.open:
    with diff_tab:
        run_diff(wb, view, state)
if audit_tab.open:
    with audit_tab:
        audit_log(view, state)
if compare_tab.open:
    with compare_tab:
        compare_panel(wb)

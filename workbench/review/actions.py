"""What the Consolidation page's buttons do: run a diagnosis, preview a plan, apply the decisions, undo a run.

Each action is a Streamlit callback, run before the page redraws: it branches the log if the cursor is behind,
calls the engine, refreshes the cached views and leaves a message (`flash`) for the redraw to show. An error the
engine raises becomes that message instead of a traceback, and nothing already stored is lost.
"""
from __future__ import annotations

import streamlit as st

from engine.core.access import Action
from engine.core.errors import WorkbenchError
from engine.core.proposal import ProposalCounts, Status
from workbench import access
from workbench.model import Workbench
from workbench.review import decisions as review_decisions
from workbench.review.proposal_text import counts_text
from workbench.text import md_escape

QUEUE_TAB, DIFF_TAB, AUDIT_TAB, COMPARE_TAB = "Review queue", "Run diff & undo", "Audit log", "Compare backends"
TAB_KEY = "consolidation_tab"
FLASH = "consolidation_flash"


def flash(kind: str, message: str) -> None:
    """Messages from callbacks survive into the rerun that draws the page."""
    st.session_state[FLASH] = (kind, message)


def edit(wb: Workbench, action, need: Action = Action.REVIEW) -> None:
    """Every edit checks the signed-in role (here, where it is done: a hidden button is no check), branches the
    log if the cursor is behind, then refreshes the cached views."""
    try:
        access.require(need)
        wb.ensure_head()
        action()
    except WorkbenchError as exc:          # what the library refuses on purpose; anything else is a bug, shown as one
        flash("error", md_escape(exc))
    finally:
        wb.reload()


def run_diagnosis(wb: Workbench, process: str | None) -> None:
    def act():
        counts = ProposalCounts.of(wb.engine.propose(manual=True, process=process))
        run_id = wb.engine.open_run() or list(wb.engine.state.runs)[-1]
        closed = [f"{n} {status}" for status, n in (("skipped", counts.skipped_at_diagnosis), ("failed", counts.failed))
                  if n]                                  # nobody has decided yet: every closed one closed at diagnosis
        flash("success", f"{run_id}: {counts.total} proposals, {counts.pending} waiting for a decision"
                         + (f"; {', '.join(closed)} at diagnosis (each with its note on the {DIFF_TAB} tab)"
                            if closed else "")
                         + "." + ("" if counts.pending else " Nothing to decide, so the run is closed."))
        st.session_state[TAB_KEY] = QUEUE_TAB
    edit(wb, act)


def show_plan(wb: Workbench, pid: int) -> None:
    edit(wb, lambda: wb.engine.preview_plan(pid))


def apply_decisions(wb: Workbench, run_key: str, gate_mode: bool, defer_rest: bool = False) -> None:
    """Apply exactly the stored decisions (or the gate's verdicts); undecided proposals stay pending unless
    `defer_rest` closes them, and the run stays open while any is pending."""
    def act():
        state = wb.engine.state
        run_id = wb.engine.open_run()
        waiting = [p.id for p in state.proposals.values() if p.run_id == run_id and p.status == Status.PENDING]
        chosen = {pid: accept for pid, accept in review_decisions.decisions(run_key).items()
                  if pid in waiting}                       # a failed plan preview closes a proposal
        report = wb.engine.apply(None if gate_mode else chosen, decided_by=access.who(), defer_rest=defer_rest)
        wb.last_run = report
        now = wb.engine.state.proposals
        done = [now[pid] for pid in waiting if now[pid].status != Status.PENDING]
        count = ProposalCounts.of(p for p in done if gate_mode or p.id in chosen)
        deferred = ProposalCounts.of(p for p in done if not gate_mode and p.id not in chosen).skipped
        said = (f"{count.applied} applied, {count.rejected} rejected"
                + (f", {count.skipped} skipped (accepted but no longer applicable)" if count.skipped else "")
                + (f", {count.failed} failed" if count.failed else "")
                + (f", {deferred} skipped (deferred with a note)" if deferred else ""))
        total = ProposalCounts.of(now.values(), report.run_id)
        if total.pending:
            flash("success", f"{report.run_id}: {said}. {total.pending} proposal(s) still pending: the run stays "
                             "open until you decide them or defer them.")
            return
        flash("success", f"{report.run_id} committed: {said}. The run's proposals in all: {counts_text(total)}.")
        st.session_state["diff_run"] = report.run_id
        st.session_state[TAB_KEY] = DIFF_TAB
    edit(wb, act)


def undo_last_run(wb: Workbench) -> None:
    def act():
        undone = wb.engine.undo_last_run(actor=access.who())
        wb.last_run = None
        flash("success", f"{undone} undone: compensating records appended to the log.")
        st.session_state["diff_run"] = undone
    st.session_state["confirm_undo"] = False
    edit(wb, act, Action.UNDO)


def set_confirm_undo(value: bool) -> None:
    st.session_state["confirm_undo"] = value

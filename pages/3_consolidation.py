"""Consolidation: diagnose the buffer, review each proposed edit, apply, diff, audit, undo."""
from __future__ import annotations

import streamlit as st

from engine.allmem.engine import UndoError
from engine.proposal import GateVerdict, Status
from workbench import review_view as rv
from workbench.graph_view import build_graph_html, diff_states
from workbench.state import get_workbench, header

PAGE_SIZE = 10
GATE_MODE, MANUAL_MODE = "Let the gate decide", "I decide each proposal"

wb = get_workbench()
header(wb)
st.subheader("Consolidation")


def flash(kind: str, message: str) -> None:
    """Messages from callbacks survive into the rerun that draws the page."""
    st.session_state["consolidation_flash"] = (kind, message)


def edit(action) -> None:
    """Every edit branches the log if the cursor is behind, then refreshes the cached views."""
    wb.ensure_head()
    try:
        action()
    except (RuntimeError, ValueError, UndoError) as exc:
        flash("error", str(exc))
    finally:
        wb.reload()


def run_diagnosis() -> None:
    def act():
        props = wb.engine.propose(manual=True)
        pending = sum(p.status == Status.PENDING for p in props)
        flash("success", f"{wb.engine.open_run()}: {len(props)} proposals, {pending} waiting for a decision.")
    edit(act)


def show_plan(pid: int) -> None:
    edit(lambda: wb.engine.preview_plan(pid))


def apply_decisions(run_key: str, gate_mode: bool) -> None:
    def act():
        chosen = rv.decisions(run_key)
        report = wb.engine.apply(None, decided_by="gate") if gate_mode else \
            wb.engine.apply(dict(chosen), decided_by="human")
        wb.last_run = report
        counts = ", ".join(f"{n} {status}" for status, n in sorted(report.counts.items()))
        flash("success", f"{report.run_id} applied: {counts}.")
        st.session_state["diff_run"] = report.run_id
    edit(act)


def undo_last_run() -> None:
    def act():
        undone = wb.engine.undo_last_run()
        wb.last_run = None
        flash("success", f"{undone} undone: compensating records appended to the log.")
    st.session_state["confirm_undo"] = False
    edit(act)


view = wb.view
state = view.state
if not wb.at_head:
    st.warning(f"The cursor is at turn {wb.cursor} but the log runs to turn {wb.head}. Running diagnosis (or any "
               f"other edit on this page) will **branch the log** at turn {wb.cursor}: the edit goes into a new "
               f"database and the original history after turn {wb.cursor} stays untouched in the old one.")
if "consolidation_flash" in st.session_state:
    kind, message = st.session_state.pop("consolidation_flash")
    getattr(st, kind)(message)

open_run = view.open_run()
committed = [r for r in state.runs.values() if r.status == "committed"]
cols = st.columns([1, 1, 1, 2])
cols[0].metric("Buffer (units awaiting diagnosis)", len(state.buffer))
cols[1].metric("Open run", open_run or "none")
cols[2].metric("Runs (committed / undone)",
               f"{len(committed)} / {sum(r.status == 'undone' for r in state.runs.values())}")
with cols[3]:
    st.button("Run diagnosis", type="primary", on_click=run_diagnosis, disabled=bool(open_run) or not state.buffer,
              help="Diagnose every buffered unit against its anchor neighbourhood; proposals wait for review.")
    if open_run:
        st.caption(f"{open_run} is still open: apply its decisions before diagnosing again.")
    elif not state.buffer:
        st.caption("The buffer is empty: step the replay forward to add units.")

queue_tab, diff_tab, audit_tab = st.tabs(["Review queue", "Run diff & undo", "Audit log"])

# -- review queue --------------------------------------------------------------------------------
with queue_tab:
    if open_run is None:
        st.info("No open run. Press **Run diagnosis** to fill the review queue from the buffer.")
    else:
        run_key = rv.run_key(wb.db_path.name, open_run)
        proposals = [p for p in state.proposals.values() if p.run_id == open_run]
        pending = [p for p in proposals if p.status == Status.PENDING]
        mode = st.radio("Who decides", [MANUAL_MODE, GATE_MODE], horizontal=True, key="decision_mode",
                        help="The gate accepts a proposal iff its confidence reaches the operator's θ "
                             "(and a merge is coherent enough).")
        gate_mode = mode == GATE_MODE
        chosen = rv.decisions(run_key)
        live = {p.id for p in pending}
        for pid in [pid for pid in chosen if pid not in live]:
            chosen.pop(pid)

        f1, f2, f3 = st.columns([2, 2, 2])
        ops = f1.multiselect("Operator", sorted({rv.OP_LABEL.get(p.op, p.op) for p in proposals}),
                             key="queue_ops", placeholder="all operators")
        gates = f2.multiselect("Gate verdict", [GateVerdict.PASS, GateVerdict.FAIL], key="queue_gates",
                               placeholder="pass and fail")
        show_closed = f3.checkbox("Show closed proposals", key="queue_closed",
                                  help="Proposals routing already closed: duplicates, merge overlaps, Norm "
                                       "filter, disabled operators.")
        shown = rv.sort_queue(p for p in proposals
                              if (show_closed or p.status == Status.PENDING)
                              and (not ops or rv.OP_LABEL.get(p.op, p.op) in ops)
                              and (not gates or p.gate in gates))

        if not gate_mode:
            b1, b2, b3 = st.columns(3)
            b1.button("Accept gate passes, reject the rest (shown)", on_click=rv.set_decisions,
                      args=(run_key, {p.id: p.gate == GateVerdict.PASS for p in shown
                                      if p.status == Status.PENDING}))
            b2.button("Reject all shown", on_click=rv.set_decisions,
                      args=(run_key, {p.id: False for p in shown if p.status == Status.PENDING}))
            b3.button("Clear all decisions", on_click=rv.set_decisions,
                      args=(run_key, {p.id: None for p in pending}))
        st.dataframe(rv.queue_frame(shown, chosen, gate_mode), hide_index=True, width="stretch",
                     height=min(36 * (len(shown) + 1) + 4, 300))

        pages = max(1, -(-len(shown) // PAGE_SIZE))
        page = st.selectbox(f"Cards page ({PAGE_SIZE} per page)", range(1, pages + 1), key="queue_page",
                            format_func=lambda n: f"{n} of {pages}") if pages > 1 else 1
        for p in shown[(page - 1) * PAGE_SIZE: page * PAGE_SIZE]:
            rv.proposal_card(state, p, run_key, wb.engine.settings.theta.get(p.op), gate_mode, show_plan)

        accepted = sum(chosen.get(p.id) is True for p in pending)
        rejected = sum(chosen.get(p.id) is False for p in pending)
        if gate_mode:
            passes = sum(p.gate == GateVerdict.PASS for p in pending)
            label = f"Apply gate verdicts ({passes} accept, {len(pending) - passes} reject)"
        else:
            label = (f"Apply decisions ({accepted} accept, {rejected} reject, "
                     f"{len(pending) - accepted - rejected} undecided → skipped)")
        st.button(label, type="primary", key="apply_run", on_click=apply_decisions, args=(run_key, gate_mode))
        st.caption("Applying executes accepted proposals in the fixed order Split → Merge → Update, in one "
                   "transaction; decisions are recorded with who made them (" +
                   ("gate" if gate_mode else "human") + ").")

# -- run diff and undo ---------------------------------------------------------------------------
with diff_tab:
    closed_runs = sorted((r for r in state.runs.values() if r.status != "open"), key=lambda r: r.first_seq)
    if not closed_runs:
        st.info("No applied run yet.")
    else:
        names = [r.run_id for r in closed_runs]
        default = st.session_state.get("diff_run")
        run_id = st.selectbox("Run", names, index=names.index(default) if default in names else len(names) - 1,
                              format_func=lambda r: f"{r} ({state.runs[r].status}, {state.runs[r].mode}, "
                                                    f"turn {state.runs[r].turn})")
        run = state.runs[run_id]
        before = view.store.load_state(upto_seq=run.first_seq - 1)
        after = view.store.load_state(upto_seq=run.last_seq)
        diff = diff_states(before, after)
        s = run.summary
        m = st.columns(6)
        for col, (label, value) in zip(m, [("Proposals applied", s.get("applied", 0)),
                                           ("Rejected", s.get("rejected", 0)), ("Skipped", s.get("skipped", 0)),
                                           ("Failed", s.get("failed", 0)),
                                           ("Units created / archived", f"{len(diff['added_units'])} / "
                                                                        f"{len(diff['archived_units'])}"),
                                           ("Semantic edges rewired", len(diff["rewired"]))]):
            col.metric(label, value)
        st.caption(f"Status **{run.status}** · decided by: "
                   + (", ".join(sorted({p.decided_by for p in state.proposals.values()
                                        if p.run_id == run_id and p.decided_by})) or "nobody (all skipped)"))
        left, right = st.columns(2)
        with left:
            for title, key in [("Units created", "added_units"), ("Units archived", "archived_units"),
                               ("Units re-described (Update refreshes the current unit)", "redescribed_units"),
                               ("Units made visible again", "restored_units")]:
                if diff[key] or key in ("added_units", "archived_units"):
                    st.markdown(f"**{title}**")
                    st.dataframe(rv.units_frame(after, diff[key]), hide_index=True, width="stretch")
        with right:
            st.markdown("**Edges added** (version, sibling, semantic)")
            st.dataframe(rv.edges_frame(diff["added_edges"]), hide_index=True, width="stretch")
            st.markdown("**Semantic edges rewired** to a representative")
            st.dataframe(rv.rewired_frame(diff["rewired"]), hide_index=True, width="stretch")
            st.markdown("**Edges removed** (rewired away or pruned by the degree cap)")
            st.dataframe(rv.edges_frame(diff["removed_edges"]), hide_index=True, width="stretch")
        if run.status == "undone":
            st.info(f"{run_id} was undone: the tables show what it changed before the undo.")
        st.markdown("**The run's proposals**")
        st.dataframe(rv.run_proposals_frame(state, run_id), hide_index=True, width="stretch", height=240)
        touched = set(diff["added_units"]) | set(diff["archived_units"])
        if touched and st.checkbox("Show the run's edits on the graph", key="diff_graph"):
            st.iframe(build_graph_html(after, highlight_units=sorted(touched),
                                             highlight_edges=diff["added_edges"], focus=sorted(touched),
                                             height_px=520), height=540)

    st.divider()
    last = state.last_committed_run()
    if last is None:
        st.caption("Nothing to undo.")
    elif not st.session_state.get("confirm_undo"):
        st.button(f"Undo last run ({last.run_id})…", key="undo_start",
                  on_click=lambda: st.session_state.update(confirm_undo=True))
    else:
        st.warning(f"Undo {last.run_id}? Compensating records are appended to the log (nothing is deleted): "
                   f"units it created are retracted, archived units become visible, edges are restored.")
        c1, c2 = st.columns([1, 5])
        c1.button("Yes, undo", type="primary", key="undo_confirm", on_click=undo_last_run)
        c2.button("Cancel", key="undo_cancel", on_click=lambda: st.session_state.update(confirm_undo=False))

# -- audit log -----------------------------------------------------------------------------------
with audit_tab:
    frame = rv.oplog_frame(view.store.ops(upto_seq=state.seq))
    a1, a2, a3, a4 = st.columns(4)
    kinds = a1.multiselect("Kind", sorted(frame["kind"].unique()), key="audit_kinds", placeholder="all kinds")
    runs = a2.multiselect("Run", sorted(r for r in frame["run"].unique() if r), key="audit_runs",
                          placeholder="all runs (and online writes)")
    actors = a3.multiselect("Actor", sorted(frame["actor"].unique()), key="audit_actors", placeholder="all actors")
    needle = a4.text_input("Summary contains", key="audit_search")
    rows = frame
    if kinds:
        rows = rows[rows["kind"].isin(kinds)]
    if runs:
        rows = rows[rows["run"].isin(runs)]
    if actors:
        rows = rows[rows["actor"].isin(actors)]
    if needle:
        rows = rows[rows["summary"].str.contains(needle, case=False, regex=False)]
    rows = rows.sort_values("seq", ascending=False)
    st.caption(f"{len(rows)} of {len(frame)} records, newest first. Select a row to see its full payload.")
    event = st.dataframe(rows, hide_index=True, width="stretch", height=360, on_select="rerun",
                         selection_mode="single-row", key="audit_table")
    selected = event.selection.rows if event else []
    if selected:
        seq = int(rows.iloc[selected[0]]["seq"])
        record = next(op for op in view.store.ops(upto_seq=seq) if op.seq == seq)
        st.json(record.to_dict(), expanded=1)
    if state.proposals:
        st.plotly_chart(rv.reason_chart(rv.reason_breakdown(state.proposals.values())), width="stretch")
    else:
        st.caption("No proposals yet: the reason-code breakdown appears after the first diagnosis.")

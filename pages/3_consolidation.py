"""Consolidation: run an engine's offline process on its buffer, review each proposed edit, apply, diff, audit, undo.

Operators, target roles, plans and reason codes come from the engine's schema; an engine with no offline
process (naive or hybrid RAG) gets the audit log only."""
from __future__ import annotations

import streamlit as st

from engine.core.proposal import GateVerdict, Status
from engine.runtime.errors import RunError, UndoError
from engine.store.log_store import StoreError
from workbench import review_view as rv
from workbench.backend_compare_view import compare_panel
from workbench.graph_view import build_graph_html, diff_states, off_surface_word
from workbench.state import get_workbench, header
from workbench.text import md_escape, table

PAGE_SIZE = 10
GATE_MODE, MANUAL_MODE = "Let the gate decide", "I decide each proposal"
QUEUE_TAB, DIFF_TAB, AUDIT_TAB, COMPARE_TAB = "Review queue", "Run diff & undo", "Audit log", "Compare backends"
TAB_KEY = "consolidation_tab"

wb = get_workbench()
header(wb)
st.subheader("Consolidation")


# -- edits (callbacks run before the page redraws) ---------------------------------------------
def flash(kind: str, message: str) -> None:
    """Messages from callbacks survive into the rerun that draws the page."""
    st.session_state["consolidation_flash"] = (kind, message)


def edit(action) -> None:
    """Every edit branches the log if the cursor is behind, then refreshes the cached views."""
    try:
        wb.ensure_head()
        action()
    except (RuntimeError, ValueError, UndoError, RunError, StoreError) as exc:
        flash("error", md_escape(exc))
    finally:
        wb.reload()


def run_diagnosis(process: str | None) -> None:
    def act():
        props = wb.engine.propose(manual=True, process=process)
        pending = sum(p.status == Status.PENDING for p in props)
        run_id = wb.engine.open_run() or list(wb.engine.state.runs)[-1]
        flash("success", f"{run_id}: {len(props)} proposals, {pending} waiting for a decision."
                         + ("" if pending else " Nothing to decide, so the run is closed."))
        st.session_state[TAB_KEY] = QUEUE_TAB
    edit(act)


def show_plan(pid: int) -> None:
    edit(lambda: wb.engine.preview_plan(pid))


def apply_decisions(run_key: str, gate_mode: bool, defer_rest: bool = False) -> None:
    """Apply exactly the stored decisions (or the gate's verdicts); undecided proposals stay pending unless
    `defer_rest` closes them, and the run stays open while any is pending."""
    def act():
        state = wb.engine.state
        run_id = wb.engine.open_run()
        waiting = [p.id for p in state.proposals.values() if p.run_id == run_id and p.status == Status.PENDING]
        chosen = {pid: accept for pid, accept in rv.decisions(run_key).items()
                  if pid in waiting}                       # a failed plan preview closes a proposal
        who = "gate" if gate_mode else (st.session_state.get("reviewer") or "human").strip() or "human"
        report = wb.engine.apply(None if gate_mode else chosen, decided_by=who, defer_rest=defer_rest)
        wb.last_run = report
        now = wb.engine.state.proposals
        done = [now[pid] for pid in waiting if now[pid].status != Status.PENDING]
        left = len(waiting) - len(done)
        deferred = sum(p.id not in chosen for p in done) if not gate_mode else 0
        count = {s: sum(p.status == s and (gate_mode or p.id in chosen) for p in done)
                 for s in (Status.APPLIED, Status.REJECTED, Status.SKIPPED, Status.FAILED)}
        said = (f"{count[Status.APPLIED]} applied, {count[Status.REJECTED]} rejected"
                + (f", {count[Status.SKIPPED]} accepted but no longer applicable" if count[Status.SKIPPED] else "")
                + (f", {count[Status.FAILED]} failed" if count[Status.FAILED] else "")
                + (f", {deferred} deferred with a note" if deferred else ""))
        if left:
            flash("success", f"{report.run_id}: {said}. {left} proposal(s) still pending: the run stays open until "
                             "you decide them or defer them.")
            return
        total = wb.engine.state.runs[report.run_id].summary
        earlier = (total.get("applied", 0), total.get("rejected", 0)) != (count[Status.APPLIED], count[Status.REJECTED])
        flash("success", f"{report.run_id} committed: {said}."
                         + (f" With its earlier applies the run applied {total.get('applied', 0)} and rejected "
                            f"{total.get('rejected', 0)}." if earlier else ""))
        st.session_state["diff_run"] = report.run_id
        st.session_state[TAB_KEY] = DIFF_TAB
    edit(act)


def undo_last_run() -> None:
    def act():
        undone = wb.engine.undo_last_run()
        wb.last_run = None
        flash("success", f"{undone} undone: compensating records appended to the log.")
        st.session_state["diff_run"] = undone
    st.session_state["confirm_undo"] = False
    edit(act)


def set_confirm_undo(value: bool) -> None:
    st.session_state["confirm_undo"] = value


# -- tabs ----------------------------------------------------------------------------------------
def review_queue(state, open_run: str | None) -> None:
    schema = state.schema
    if open_run is None:
        st.info("No open run. Press **Run diagnosis** to fill the review queue from the buffer.")
        return
    run_key = rv.run_key(wb.db_path.name, open_run)
    proposals = [p for p in state.proposals.values() if p.run_id == open_run]
    pending = [p for p in proposals if p.status == Status.PENDING]
    who, name = st.columns([3, 2])
    gate_mode = who.radio("Who decides", [MANUAL_MODE, GATE_MODE], horizontal=True, key="decision_mode",
                          help="The gate accepts a proposal iff its confidence reaches the gate θ of its operator "
                               "(and any other check the engine makes, such as All-Mem's merge coherence)."
                          ) == GATE_MODE
    name.text_input("Reviewer (stored with each decision)", value="human", key="reviewer", disabled=gate_mode)
    chosen = rv.decisions(run_key)

    labels = sorted({v for p in proposals for v in rv.detail_labels(p)})
    cols = st.columns([3, 3, 3, 2] if labels else [3, 3, 2])
    f1, f2, f3 = cols[0], cols[1], cols[-1]
    ops = f1.multiselect("Operator", sorted({rv.op_label(schema, p.op) for p in proposals}), key="queue_ops",
                         placeholder="all operators")
    gates = f2.multiselect("Gate verdict", [GateVerdict.PASS, GateVerdict.FAIL], key="queue_gates",
                           placeholder="pass and fail")
    kinds = cols[2].multiselect("Type", labels, key="queue_types", placeholder="all types",
                           help="The proposal's own kind, e.g. a relation's type.") if labels else []
    show_closed = f3.checkbox("Show closed proposals", key="queue_closed",
                              help="Proposals routing already closed: duplicates, overlaps, filtered or disabled ones.")
    shown = rv.sort_queue(p for p in proposals
                          if (show_closed or p.status == Status.PENDING)
                          and (not ops or rv.op_label(schema, p.op) in ops) and (not gates or p.gate in gates)
                          and (not kinds or set(rv.detail_labels(p)) & set(kinds)))
    shown_pending = [p for p in shown if p.status == Status.PENDING]
    if not gate_mode:
        b1, b2, b3 = st.columns(3)
        b1.button("Accept gate passes, reject the rest (shown)", on_click=rv.set_decisions,
                  args=(run_key, {p.id: p.gate == GateVerdict.PASS for p in shown_pending}))
        b2.button("Reject all shown", on_click=rv.set_decisions, args=(run_key, {p.id: False for p in shown_pending}))
        b3.button("Clear all decisions", on_click=rv.set_decisions, args=(run_key, {p.id: None for p in pending}))
    st.dataframe(table(rv.queue_frame(schema, shown, chosen, gate_mode)), hide_index=True, width="stretch",
                 height=min(35 * (len(shown) + 1) + 3, 300))

    pages = max(1, -(-len(shown) // PAGE_SIZE))
    page = st.selectbox(f"Cards page ({PAGE_SIZE} per page)", range(1, pages + 1), key="queue_page",
                        format_func=lambda n: f"{n} of {pages}") if pages > 1 else 1
    for p in shown[(page - 1) * PAGE_SIZE: page * PAGE_SIZE]:
        rv.proposal_card(state, p, run_key, gate_mode, show_plan)

    run = state.runs.get(open_run)
    order = " → ".join(o.label for o in rv.process_operators(schema, run.process if run else None))
    in_order = f", operators in the order {order}" if order else ""
    if gate_mode:
        passes = sum(p.gate == GateVerdict.PASS for p in pending)
        st.button(f"Apply gate verdicts ({passes} accept, {len(pending) - passes} reject)", type="primary",
                  key="apply_run", on_click=apply_decisions, args=(run_key, True))
        st.caption(f"Accepted proposals are executed in one transaction{in_order}; each decision is stored as "
                   "made by the **gate**, and the run is committed.")
        return
    accepted, rejected, undecided = rv.tally(pending, chosen)
    hidden = sum(p.id in chosen for p in pending) - sum(p.id in chosen for p in shown_pending)
    with st.container(horizontal=True):
        st.button(f"Apply decisions ({accepted} accept, {rejected} reject"
                  + (f"; {undecided} undecided stay pending)" if undecided else ")"), type="primary",
                  key="apply_run", on_click=apply_decisions, args=(run_key, False), disabled=not accepted + rejected)
        if undecided:
            st.button(f"{'Apply and defer' if accepted + rejected else 'Defer'} the {undecided} undecided",
                      key="apply_defer", on_click=apply_decisions, args=(run_key, False, True),
                      help="Closes the run: every undecided proposal is closed as skipped, never executed, with a "
                           "note saying who deferred it.")
    st.caption(f"Accepted proposals are executed in one transaction{in_order}; each decision is stored with who "
               f"made it (**{md_escape(st.session_state.get('reviewer') or 'human')}**). Undecided proposals stay "
               "pending: the run stays open (the replay cannot ingest further) until each is decided, or deferred."
               + (f" The counts include {hidden} decision(s) on proposals the filters hide." if hidden else ""))


def run_status(run) -> str:
    """A run's status; an open run is only listed once part of it is applied."""
    return "open (partly applied)" if run.status == "open" else run.status


def run_diff(view, state) -> None:
    """A committed or undone run, or the open run once part of it is applied: what it changed, and undo."""
    shown_runs = sorted((r for r in state.runs.values() if r.status != "open" or any(
        p.run_id == r.run_id and p.decided_by for p in state.proposals.values())), key=lambda r: r.first_seq)
    if not shown_runs:
        st.info("No applied run yet.")
    else:
        names = [r.run_id for r in shown_runs]
        default = st.session_state.get("diff_run")
        run_id = st.selectbox("Run", names, index=names.index(default) if default in names else len(names) - 1,
                              format_func=lambda r: f"{r} · {run_status(state.runs[r])} · {state.runs[r].mode} "
                                                    f"diagnosis at turn {state.runs[r].turn}")
        run = state.runs[run_id]
        after = state if run.status == "open" else view.store.load_state(upto_seq=run.last_seq)
        before = view.store.load_state(upto_seq=run.first_seq - 1)
        diff = diff_states(before, after)
        summary = run.summary if run.status != "open" else \
            rv.decided_counts(p for p in state.proposals.values() if p.run_id == run_id)
        off = off_surface_word(state.schema)
        metrics = [("Applied", summary.get("applied", 0)), ("Rejected", summary.get("rejected", 0)),
                   ("Deferred or skipped", summary.get("skipped", 0)), ("Failed", summary.get("failed", 0)),
                   (f"Nodes created / {off}", f"{len(diff['added_units'])} / {len(diff['archived_units'])}"),
                   ("Edges rewired", len(diff["rewired"]))]
        if run.status == "open":
            metrics.insert(4, ("Still pending", summary.get("pending", 0)))
        for col, (label, value) in zip(st.columns(len(metrics)), metrics):
            col.metric(label, value)
        deciders = sorted({p.decided_by for p in state.proposals.values() if p.run_id == run_id and p.decided_by})
        st.caption(f"Status **{run_status(run)}** · decided by "
                   f"**{md_escape(', '.join(deciders)) or 'nobody'}**"
                   + (" · the tables show what the run changed before it was undone" if run.status == "undone"
                      else "")
                   + (" · the tables show what the applied part changed so far; decide or defer the rest on the "
                      "Review queue" if run.status == "open" else ""))
        left, right = st.columns(2)
        with left:
            for title, key in [("Nodes created", "added_units"), (f"Nodes {off}", "archived_units"),
                               ("Nodes re-described (their descriptor refreshed)", "redescribed_units"),
                               ("Nodes back on the surface", "restored_units"),
                               ("Nodes retracted", "removed_units")]:
                if diff[key] or key in ("added_units", "archived_units"):
                    st.markdown(f"**{title}**")
                    frame_state = after if key != "removed_units" else before
                    st.dataframe(table(rv.units_frame(frame_state, diff[key])), hide_index=True, width="stretch")
        with right:
            st.markdown("**Edges added**")
            st.dataframe(table(rv.edges_frame(diff["added_edges"], state.schema, after)), hide_index=True,
                         width="stretch")
            st.markdown("**Edges rewired** to a representative")
            st.dataframe(table(rv.rewired_frame(diff["rewired"])), hide_index=True, width="stretch")
            st.markdown("**Edges removed** (rewired away or over a degree cap)")
            st.dataframe(table(rv.edges_frame(diff["removed_edges"], state.schema, before)), hide_index=True,
                         width="stretch")
        st.markdown("**The run's proposals**")
        st.dataframe(table(rv.run_proposals_frame(state, run_id)), hide_index=True, width="stretch", height=240)
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
        st.button(f"Undo last run ({last.run_id})…", key="undo_start", on_click=set_confirm_undo, args=(True,))
    else:
        st.warning(f"Undo {last.run_id}? Compensating records are appended to the log (nothing is deleted): nodes "
                   "it created are retracted, status changes it made are reversed, its edge changes are reverted.")
        with st.container(horizontal=True):
            st.button("Yes, undo", type="primary", key="undo_confirm", on_click=undo_last_run)
            st.button("Cancel", key="undo_cancel", on_click=set_confirm_undo, args=(False,))


def audit_log(view, state) -> None:
    frame = rv.oplog_frame(view.store.ops(upto_seq=state.seq))
    if not (frame["kind"] == "llm_call").any():          # an engine without LLM calls: no LLM columns
        frame = frame.drop(columns=list(rv.LLM_COLUMNS))
    a1, a2, a3, a4 = st.columns(4)
    kinds = a1.multiselect("Kind", sorted(frame["kind"].unique()), key="audit_kinds", placeholder="all kinds")
    runs = a2.multiselect("Run", sorted(r for r in frame["run"].unique() if r), key="audit_runs",
                          placeholder="all runs and online writes")
    actors = a3.multiselect("Actor", sorted(frame["actor"].unique()), key="audit_actors", placeholder="all actors")
    needle = a4.text_input("Summary contains", key="audit_search")
    rows = frame
    for column, picked in (("kind", kinds), ("run", runs), ("actor", actors)):
        if picked:
            rows = rows[rows[column].isin(picked)]
    if needle:
        rows = rows[rows["summary"].str.contains(needle, case=False, regex=False)]
    rows = rows.sort_values("seq", ascending=False)
    st.caption(f"{len(rows)} of {len(frame)} records, newest first. Select a row to see its full payload.")
    event = st.dataframe(table(rows), hide_index=True, width="stretch", height=360, on_select="rerun",
                         selection_mode="single-row", key="audit_table")
    if event and event.selection.rows:
        seq = int(rows.iloc[event.selection.rows[0]]["seq"])
        st.json(next(view.store.ops(seq=seq)).to_dict(), expanded=1)
    if not state.schema.processes:
        return
    if state.proposals:
        st.plotly_chart(rv.reason_chart(rv.reason_breakdown(state.proposals.values(), state.schema)),
                        width="stretch")
    else:
        st.caption("No proposals yet: the reason-code breakdown appears after the first diagnosis.")
    codes = rv.reason_codes_frame(state.schema)
    if not codes.empty:
        with st.expander(f"The {state.schema.label} reason codes"):
            st.dataframe(table(codes), hide_index=True, width="stretch")


# -- the page ------------------------------------------------------------------------------------
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
if "consolidation_flash" in st.session_state:
    kind, message = st.session_state.pop("consolidation_flash")
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
cols = st.columns([1, 1, 1, 2])
cols[0].metric("Buffered nodes", waiting,
               help=f"Nodes waiting in the `{process.spec.buffer}` buffer for {process.spec.label}.")
cols[1].metric("Open run", open_run or "none")
cols[2].metric("Runs (committed / undone)", f"{sum(r.status == 'committed' for r in state.runs.values())} / "
                                            f"{sum(r.status == 'undone' for r in state.runs.values())}")
with cols[3]:
    st.button("Run diagnosis", type="primary", key="run_diagnosis", on_click=run_diagnosis, args=(chosen,),
              disabled=bool(open_run) or not waiting,
              help=f"{process.spec.description or process.spec.label}: diagnose every buffered node; proposals "
                   "wait for review.")
    if open_run:
        st.caption(f"{open_run} is still open: decide or defer its proposals before diagnosing again.")
    elif not waiting:
        st.caption("The buffer is empty: step the replay forward to add nodes.")

queue_tab, diff_tab, audit_tab, compare_tab = st.tabs([QUEUE_TAB, DIFF_TAB, AUDIT_TAB, COMPARE_TAB], key=TAB_KEY,
                                                      on_change="rerun")
if queue_tab.open:
    with queue_tab:
        review_queue(state, open_run)
if diff_tab.open:
    with diff_tab:
        run_diff(view, state)
if audit_tab.open:
    with audit_tab:
        audit_log(view, state)
if compare_tab.open:
    with compare_tab:
        compare_panel(wb)

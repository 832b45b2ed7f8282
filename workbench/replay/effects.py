"""UI helpers for the Replay page: the "what this turn caused" panel.

What a turn caused (`workbench.replay.turn_effects`) is read back from the op log rather than kept from the last
step, so it is the same whether the cursor is at the head of the log (just ingested) or behind it (after
Back or a jump); this module draws it: the nodes created, anchors, edges, routing decision, status changes
and the offline runs around the turn. The transcript is drawn by `workbench.replay.transcript`.
"""
from __future__ import annotations

import html

import pandas as pd
import streamlit as st

from engine.core.oplog import RunInfo, RunStatus
from engine.core.proposal import ProposalCounts
from engine.core.state import MemoryState
from workbench.graph.lifecycle import (
    attrs_frame,
    cause_text,
    joined_candidate,
    routing_figure,
    routing_frame,
    routing_sentence,
)
from workbench.graph.style import cosine_text, edge_style, kind_field, moved_edges_word, visibility_text
from workbench.replay.phases import has_phases, render_phases
from workbench.replay.turn_effects import TurnEffects
from workbench.review.gate import render_gate
from workbench.review.proposal_text import counts_text, process_label
from workbench.state import queued_label
from workbench.text import MISSING, md_escape, missing, table

RUN_ICON = ":material/cleaning_services:"


def run_sentence(state: MemoryState, run: RunInfo, moment: str, schedule_text: str) -> str:
    """One line saying an offline run happened around the step, with its proposals counted as every page counts
    them."""
    who = f"on schedule ({schedule_text})" if run.mode == "auto" and schedule_text != "manual" else f"{run.mode} run"
    what = process_label(state.schema, run)
    s = run.summary
    if run.status == RunStatus.OPEN or not s:
        return f"{what} {run.run_id} was opened {moment}, {who}; its proposals await decisions."
    counts = counts_text(ProposalCounts.of(state.proposals.values(), run.run_id))
    moved = moved_edges_word(state.schema)
    made = (f"{len(s.get('created', []))} nodes created, {len(s.get('archived', []))} taken off the surface"
            + (f", {s.get('rewired', 0)} {moved[0].lower()}{moved[1:]}" if moved else ""))
    undone = " It was undone later." if run.status == RunStatus.UNDONE else ""
    return f"{what} {run.run_id} ran {moment}, {who}. Proposals: {counts}; {made}.{undone}"


def _unit_text(state, uid: int) -> str:
    u = state.units.get(uid)
    return "(no longer in memory)" if u is None else u.summary


def _status_label(schema, status: str) -> str:
    spec = schema.status(status) if schema is not None else None
    return spec.label if spec else (status or MISSING)


CANDIDATE_HELP = {"score S_j": "the candidate's routing score, compared with the threshold τ_new",
                  "cosine": "cosine of the new record with the candidate's centroid",
                  "Δ days": "days since the candidate's last evidence",
                  "B_sw": "1 when the candidate took evidence within the short window of turns",
                  "vs τ_new": "the score against the routing threshold",
                  "status now": "the candidate's status at the cursor"}


def transitions_table(schema, state, transitions: list[dict]) -> pd.DataFrame:
    """One row per status change: node, from, to, the rule that fired and its figures."""
    return pd.DataFrame([
        {"node": f"u{t['node']}", "from": _status_label(schema, t["was"]), "to": _status_label(schema, t["status"]),
         "rule": str((t.get("cause") or {}).get("rule", "")).replace("_", " "),
         "cause": cause_text(t.get("cause")), "summary": _unit_text(state, t["node"])} for t in transitions],
        columns=["node", "from", "to", "rule", "cause", "summary"])


def render_routing(wb, effects: TurnEffects) -> None:
    """The routing decision the ingest logged: candidates scored against the threshold, the chosen (or new)
    group node, its figures after the turn and the transitions it went through."""
    routing = effects.routing or {}
    state, schema = wb.view.state, wb.schema
    st.markdown("**Routing decision** (from the turn's log record)")
    (st.success if joined_candidate(routing) else st.info)(routing_sentence(routing), icon=":material/alt_route:")
    frame = table(routing_frame(routing, state))
    if frame.empty:
        st.caption("No joinable candidate when the turn arrived.")
    else:
        config = {c: st.column_config.NumberColumn(c, format="%.3f", help=CANDIDATE_HELP.get(c))
                  for c in frame.columns if pd.api.types.is_float_dtype(frame[c])}
        config.update({c: st.column_config.Column(c, help=CANDIDATE_HELP[c]) for c in frame.columns
                       if c in CANDIDATE_HELP and c not in config})
        st.dataframe(frame, hide_index=True, width="stretch", column_config=config)
        st.plotly_chart(routing_figure(routing), width="stretch", key=f"routing_chart:{effects.turn_no}")
    chosen = routing.get("chosen")
    if isinstance(chosen, int):
        node = state.units.get(chosen)
        now = f" · {visibility_text(node)} at the cursor" if node is not None else ""
        moves = [t for t in effects.transitions if t["node"] == chosen]
        path = " → ".join([_status_label(schema, moves[0]["was"])] + [_status_label(schema, t["status"])
                                                                       for t in moves]) if moves else "no transition"
        st.markdown(f"**u{chosen} after this turn**{now} · lifecycle this turn: {path}")
        figures = effects.attrs.get(chosen)
        if figures:
            st.dataframe(table(attrs_frame(figures)), hide_index=True, width="stretch")


def render_effects(wb, effects: TurnEffects | None) -> None:
    """The "what this turn caused" panel for the turn at the cursor."""
    if effects is None:
        st.info("Nothing ingested yet: press **Next** to ingest the first turn.")
        return
    state = wb.view.state
    schema = wb.schema
    st.subheader(f"What turn {md_escape(effects.turn_id)} caused")
    if not wb.at_head:
        st.info(f"The cursor (turn {wb.cursor}) is behind the log head (turn {wb.head}). Everything here is "
                f"memory **as of turn {wb.cursor}**: a fold of the log, nothing was re-run. **Next** moves the "
                "cursor forward through the log without ingesting again.")
    schedule = wb.schedule_text
    for run_id in effects.runs_before:
        st.success(run_sentence(state, state.runs[run_id], "before this turn was ingested", schedule), icon=RUN_ICON)
    e = html.escape
    for uid in effects.created:
        unit = state.units.get(uid)
        if unit is None:
            continue
        keywords = " ".join(f'<code>{e(k)}</code>' for k in unit.keywords) or MISSING
        st.html(f'<div style="border:1px solid #e0e0e0;border-radius:6px;padding:8px 10px;margin-bottom:4px">'
                f'<b>Node created</b> · <code>{e(unit.label)}</code> · {e(visibility_text(unit))} now · '
                f'kind {e(kind_field(schema, unit.kind))} · sources {e(missing(", ".join(unit.source_ids)))}<br>'
                f'<b>Summary</b>: {e(missing(unit.summary))}<br><b>Keywords</b>: {keywords}</div>')
    metrics = [("Nodes created", len(effects.created), "Nodes the ingest wrote (the turn's own node first)"),
               ("Edges added", len(effects.edges), "Online edges from the new node(s)")]
    if effects.anchors:
        metrics.insert(1, ("Anchors found", len(effects.anchors),
                           "Nearest nodes on the retrieval surface when the turn arrived"))
    if wb.has_processes:
        names = ", ".join(f"{n} {c}" for n, c in effects.buffers.items()) or "empty"
        for process in schema.processes:           # the header's count, as it stood right after this ingest
            metrics.append((queued_label(process), effects.buffers.get(process.buffer, 0),
                            f"Nodes in the `{process.buffer}` buffer for {process.label} just after this turn was "
                            f"ingested (before any run that followed), as the header counts them; every buffer "
                            f"then: {names}"))
    with st.container(horizontal=True):               # each label whole: a metric as wide as its label
        for label, value, help_text in metrics:
            st.metric(label, value, help=help_text, width="content")
    if has_phases(effects):
        render_phases(wb, effects)
    if effects.anchors:
        st.markdown("**Anchors** (nodes on the retrieval surface nearest to the new node when it arrived)")
        st.dataframe(pd.DataFrame([
            {"anchor": f"u{a}", "cosine": cosine_text(c),
             "now": visibility_text(state.units[a]) if a in state.units else "gone",
             "summary": _unit_text(state, a)} for a, c in effects.anchors]), hide_index=True, width="stretch")
    if effects.routing:
        render_routing(wb, effects)
    if effects.gate is not None:
        render_gate(wb, effects)
    if effects.edges:
        st.markdown("**Edges added**")
        st.dataframe(table(pd.DataFrame([
            {"type": edge_style(e_.type, schema)["label"], "from": f"u{e_.src}", "to": f"u{e_.dst}",
             "cosine": cosine_text(e_.confidence),
             "target summary": _unit_text(state, e_.dst)} for e_ in effects.edges])),
            hide_index=True, width="stretch")
    if effects.transitions:
        st.markdown("**Status changes** (lifecycle transitions this ingest made, with their cause)")
        st.dataframe(table(transitions_table(schema, state, effects.transitions)), hide_index=True, width="stretch")
    report = wb.last_ingest
    if report is not None and wb.at_head and report.turn_id == effects.turn_id and report.details:
        with st.expander(f"{schema.label} figures for this turn"):
            st.json(report.details, expanded=1)
    for run_id in effects.runs_after:
        if run_id in state.runs:
            st.success(run_sentence(state, state.runs[run_id], "after this turn was ingested", schedule),
                       icon=RUN_ICON)

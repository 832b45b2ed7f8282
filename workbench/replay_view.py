"""UI helpers for the Replay page: the transcript window and the "what this turn caused" panel.

What a turn caused is read back from the op log rather than kept from the
last step, so it is the same whether the cursor is at the head of the log
(just ingested) or behind it (after Back or a jump): the log is the truth,
the view at the cursor is a fold of it.
"""
from __future__ import annotations

import html
import time
from dataclasses import dataclass, field
from datetime import datetime
from typing import Callable

import pandas as pd
import streamlit as st

from engine.core.conversation import Turn
from engine.core.edge import Edge
from engine.core.oplog import OpKind, RunInfo
from engine.core.state import MemoryState
from engine.core.text import seconds_text
from workbench.gate_view import render_gate
from workbench.graph_style import cosine_text, edge_style, kind_field, status_tag, visibility_text
from workbench.lifecycle_view import (
    attrs_frame,
    cause_text,
    joined_candidate,
    routing_figure,
    routing_frame,
    routing_sentence,
)
from workbench.phase_view import has_phases, render_phases
from workbench.text import MISSING, md_escape, missing, table

RUN_ICON = ":material/cleaning_services:"
_EFFECT_KINDS = (OpKind.TURN_INGESTED, OpKind.NODE_CREATED, OpKind.NODE_UPDATED, OpKind.EDGE_ADDED,
                 OpKind.STATUS_CHANGED, OpKind.BUFFER_PUSHED, OpKind.BUFFER_FLUSHED, OpKind.NODE_RETRACTED,
                 OpKind.RUN_STARTED, OpKind.ENGINE_STATE_SET)
_BUFFER_KINDS = (OpKind.BUFFER_PUSHED, OpKind.BUFFER_FLUSHED, OpKind.NODE_RETRACTED)


# -- a long jump's progress ------------------------------------------------------------------------
class JumpClock:
    """Times a jump for its progress bar: elapsed time, an estimate from the current phase's rate, and whether
    the page should redraw now (at most every `every` seconds, and always at the start and end of a phase)."""

    def __init__(self, every: float = 0.25, now: Callable[[], float] = time.monotonic):
        self.now, self.every = now, every
        self.start = self.previous = now()
        self.last_drawn: float | None = None
        self.phase, self.phase_start = "", self.start

    def due(self, progress) -> bool:
        t = self.now()
        new_phase = progress.phase != self.phase
        if new_phase:                              # a phase starts where the previous one's last step ended
            self.phase, self.phase_start = progress.phase, self.previous
        self.previous = t
        if new_phase or self.last_drawn is None or t - self.last_drawn >= self.every or \
                progress.done >= progress.total:
            self.last_drawn = t
            return True
        return False

    def left(self, progress) -> float | None:
        """Seconds the current phase still needs at its rate so far (None before its first step)."""
        if progress.done <= 0:
            return None
        return (self.previous - self.phase_start) / progress.done * (progress.total - progress.done)

    def text(self, progress) -> str:
        elapsed = f"{seconds_text(self.previous - self.start)} elapsed"
        left = self.left(progress)
        if progress.phase == "embedding":
            eta = "" if left is None else f" · about {seconds_text(left)} left for the texts"
            return (f"Jump to turn {progress.target}: embedding its turn texts {progress.done} / {progress.total}"
                    f" · {elapsed}{eta}")
        eta = "" if left is None else f" · about {seconds_text(left)} left"
        return (f"Turn {progress.cursor} / {progress.target} · {progress.done} of {progress.total} turns ingested"
                f" · {elapsed}{eta}")


# -- transcript ------------------------------------------------------------------------------------
def when(iso: str) -> str:
    """Dataset time for people: '2024-05-11 19:34' (the ISO string itself if it does not parse)."""
    try:
        return datetime.fromisoformat(iso).strftime("%Y-%m-%d %H:%M")
    except ValueError:
        return iso


def transcript_window(total: int, cursor: int, before: int, after: int) -> tuple[int, int]:
    """Slice [start, stop) of turns to show: `before` seen turns up to the cursor and `after` upcoming ones."""
    start = max(0, cursor - 1 - before)
    return start, min(total, max(cursor, 1) + after)


_TRANSCRIPT_CSS = """<style>
.mw-tr { max-height: 470px; overflow-y: auto; display: flex; flex-direction: column-reverse;
         border: 1px solid #e0e0e0; border-radius: 6px; padding: 4px 8px; font-size: 0.92rem; }
.mw-tr .sess { margin: 8px 0 2px; font-weight: 600; color: #555; border-bottom: 1px solid #e6e6e6; }
.mw-next { max-height: 220px; overflow-y: auto; border: 1px dashed #e0e0e0; border-top: none;
           border-radius: 0 0 6px 6px; padding: 2px 8px; font-size: 0.92rem; }
.mw-tr .row, .mw-next .row { padding: 4px 6px; margin: 2px 0; border-left: 4px solid transparent; border-radius: 3px; }
.mw-tr .row.cur { background: #fff4cf; border-left-color: #e6a100; }
.mw-next .row.future { opacity: 0.55; }
.mw-next .sess { margin: 8px 0 2px; font-weight: 600; color: #555; border-bottom: 1px solid #e6e6e6; }
.mw-tr .meta, .mw-next .meta { font-size: 0.78rem; color: #666; }
.mw-tr .tag { font-weight: 700; color: #8a5a00; }
</style>"""


def transcript_html(turns: list[Turn], cursor: int, head: int, state: MemoryState, before: int = 10,
                    after: int = 4) -> str:
    """The turns around the cursor as escaped HTML, the current one marked and the upcoming ones dimmed.

    Seen turns name the node they became in `state` (the view at the cursor) and its status when off the surface;
    upcoming turns say whether the log already holds them (cursor behind the head) or not.
    """
    e = html.escape
    start, stop = transcript_window(len(turns), cursor, before, after)
    seen, upcoming, session = [], [], None
    for i in range(start, stop):
        t = turns[i]
        rows = seen if i < cursor else upcoming
        if t.session != session:
            session = t.session
            rows.append(f'<div class="sess">Session {e(t.session)} · {e(t.time[:10])}</div>')
        if i == cursor - 1:
            css, tag = "cur", '<span class="tag">▶ current turn</span> · '
        elif i >= cursor:
            css, tag = "future", "in the log, ahead of the cursor · " if i < head else "not yet ingested · "
        else:
            css, tag = "seen", ""
        u = state.units.get(state.turn_units.get(t.id, -1))
        unit = "" if u is None else f" · → {e(u.label)}{e(status_tag(u))}"
        caption = f" <i>[shares an image: {e(t.image_caption)}]</i>" if t.image_caption else ""
        rows.append(
            f'<div class="row {css}"><div class="meta">{tag}#{i + 1} · {e(t.id)} · session {e(t.session)} · '
            f'{e(when(t.time))}{unit}</div><div><b>{e(t.speaker)}</b>: {e(t.text)}{caption}</div></div>')
    shown = f"turns {start + 1}–{stop} of {len(turns)}" if stop > start else "no turns"
    # Seen turns scroll in a box anchored at its bottom, which is the current turn; the upcoming ones sit below
    # it, outside that box, so however long they are the current turn stays in view.
    ahead = f'<div class="mw-next">{"".join(upcoming)}</div>' if upcoming else ""
    return (f'{_TRANSCRIPT_CSS}<div class="meta" style="color:#666;font-size:0.8rem">Showing {shown}</div>'
            f'<div class="mw-tr"><div>{"".join(seen)}</div></div>{ahead}')


# -- what a turn caused ------------------------------------------------------------------------------
@dataclass
class TurnEffects:
    """One ingested turn as the log tells it; nodes are looked up in the view at the cursor."""

    turn_no: int
    turn_id: str
    unit_id: int | None = None                               # the turn's own node
    created: list[int] = field(default_factory=list)         # every node the ingest made, the turn's first
    anchors: list[tuple[int, float | None]] = field(default_factory=list)
    edges: list[Edge] = field(default_factory=list)
    transitions: list[dict] = field(default_factory=list)    # online status changes: node, was, status, cause
    routing: dict | None = None                              # the turn_ingested record's `routing`, if any
    gate: list[dict] | None = None                           # its `gate` traces (RecMem's recurrence gate), if any
    attrs: dict[int, dict] = field(default_factory=dict)     # node -> figures (attrs) the ingest wrote
    buffers: dict[str, int] = field(default_factory=dict)    # buffer name -> size right after the ingest
    buffer_size: int = 0                                     # nodes waiting in any buffer right after it
    runs_before: list[str] = field(default_factory=list)    # started after the previous turn's ingest
    runs_after: list[str] = field(default_factory=list)     # started after this turn's ingest
    buffer: dict | None = None                               # the turn_ingested record's `buffer` (GAM's tokens)
    variables: list[dict] = field(default_factory=list)      # engine variables set around it: key, value, seq, when


def turn_effects(view, turn_no: int, report=None) -> TurnEffects | None:
    """What ingesting turn number `turn_no` (1-based) did, read from the op log of `view`'s store.

    Works for any engine: it reads node_created, node_updated, edge_added, status_changed and
    buffer_pushed records the ingest wrote (actor "online"), and the `routing` payload of the
    turn_ingested record when the engine writes one (MemLoom's event routing), which comes first.
    Anchor cosines come from `report` (an IngestReport of that turn) when it names the same anchors as
    the log, else they are recomputed from the view's vectors, which are the same unless a later run
    re-described an anchor.
    """
    if turn_no < 1:
        return None
    effects, runs_before, turn_node, pushed_at = None, [], False, None
    turn_kind = view.state.turn_kind
    variables_before: list[dict] = []
    for op in view.store.ops(kinds=_EFFECT_KINDS, turns=(turn_no - 1, turn_no)):   # only this turn's window
        if op.turn > turn_no:
            break
        p = op.payload
        online = effects is not None and op.actor == "online"
        if op.kind == OpKind.TURN_INGESTED:
            if op.turn == turn_no:
                effects = TurnEffects(turn_no=turn_no, turn_id=p["turn_id"], runs_before=runs_before,
                                      routing=p.get("routing"), gate=p.get("gate"), buffer=p.get("buffer"),
                                      variables=variables_before)
        elif op.kind == OpKind.ENGINE_STATE_SET:
            if op.actor != "online":
                record = {"key": p["key"], "value": p["value"], "seq": op.seq,
                          "when": "after" if effects is not None else "before"}
                if effects is not None:
                    effects.variables.append(record)
                elif op.turn == turn_no - 1:
                    variables_before.append(record)
        elif op.kind == OpKind.RUN_STARTED:
            if effects is not None:
                effects.runs_after.append(op.run_id)
            elif op.turn == turn_no - 1:       # state.turn is turn_no - 1 only after that turn's ingest
                runs_before.append(op.run_id)
        elif online and op.kind == OpKind.BUFFER_PUSHED:
            pushed_at = op.seq
            for uid, anchors in p["entries"]:      # (a gate's queued cluster is shown with the gate instead)
                if uid in effects.created and not effects.anchors and effects.gate is None:
                    effects.anchors = [(a, None) for a in anchors]
        elif online and op.kind == OpKind.NODE_CREATED:
            node = p["node"]
            effects.created.append(node["id"])
            if node.get("attrs"):
                effects.attrs[node["id"]] = dict(node["attrs"])
            if effects.unit_id is None or (node.get("kind") == turn_kind and not turn_node):
                effects.unit_id, turn_node = node["id"], node.get("kind") == turn_kind
        elif online and op.kind == OpKind.EDGE_ADDED:
            effects.edges.append(Edge(**p["edge"]))
        elif online and op.kind == OpKind.NODE_UPDATED and isinstance(p.get("changes", {}).get("attrs"), dict):
            effects.attrs[p["node"]] = dict(p["changes"]["attrs"])
        elif online and op.kind == OpKind.STATUS_CHANGED:
            effects.transitions.append(_transition(p))
    if effects is not None and pushed_at is not None:
        effects.buffers = _buffers_at(view.store, pushed_at)
    if effects is not None:
        effects.buffer_size = sum(effects.buffers.values())
        if effects.unit_id in effects.created:
            effects.created.remove(effects.unit_id)
            effects.created.insert(0, effects.unit_id)
        effects.anchors = _cosines(view, effects, report)
    return effects


def _buffers_at(store, seq: int) -> dict[str, int]:
    """Each buffer's size right after record `seq`: a forward scan of the buffer records alone (small ones)."""
    buffers: dict[str, set[int]] = {}
    for op in store.ops(kinds=_BUFFER_KINDS, upto_seq=seq):
        p = op.payload
        if op.kind == OpKind.BUFFER_PUSHED:
            buffers.setdefault(p["buffer"], set()).update(uid for uid, _ in p["entries"])
        elif op.kind == OpKind.BUFFER_FLUSHED:
            buffers.setdefault(p["buffer"], set()).difference_update(uid for uid, _ in p["entries"])
        else:
            for ids in buffers.values():
                ids.discard(p["node"])
    return {name: len(ids) for name, ids in buffers.items()}


def _transition(p: dict) -> dict:
    return {"node": p["node"], "was": p.get("was", ""), "status": p["status"], "cause": dict(p.get("cause") or {})}


def _cosines(view, effects: TurnEffects, report) -> list[tuple[int, float | None]]:
    if report is not None and report.unit_id == effects.unit_id and \
            [a for a, _ in report.anchors] == [a for a, _ in effects.anchors]:
        return [(a, float(c)) for a, c in report.anchors]
    vecs = view.vectors
    own = vecs.get(effects.unit_id)
    return [(a, None if own is None or a not in vecs else float(own @ vecs[a])) for a, _ in effects.anchors]


def process_label(schema, run: RunInfo) -> str:
    """The name of the offline process a run belongs to ("Consolidation (ATC)"), from the schema."""
    spec = schema.process(run.process) if schema is not None and run.process else None
    return spec.label if spec else "Consolidation"


def run_sentence(run: RunInfo, moment: str, schedule_text: str, schema=None) -> str:
    """One line saying an offline run happened around the step, with its counts."""
    who = f"on schedule ({schedule_text})" if run.mode == "auto" and schedule_text != "manual" else f"{run.mode} run"
    what = process_label(schema, run)
    s = run.summary
    if run.status == "open" or not s:
        return f"{what} {run.run_id} was opened {moment}, {who}; its proposals await decisions."
    counts = ", ".join(f"{s.get(k, 0)} {k}" for k in ("applied", "rejected", "skipped", "failed"))
    made = (f"{len(s.get('created', []))} nodes created, {len(s.get('archived', []))} taken off the surface, "
            f"{s.get('rewired', 0)} edges rewired")
    undone = " It was undone later." if run.status == "undone" else ""
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
        st.success(run_sentence(state.runs[run_id], "before this turn was ingested", schedule, schema), icon=RUN_ICON)
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
        metrics.append(("Queued after ingest", effects.buffer_size,
                        f"Nodes queued for an offline process just after this turn was ingested (before any run "
                        f"that followed); per buffer: {names}"))
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
            st.success(run_sentence(state.runs[run_id], "after this turn was ingested", schedule, schema),
                       icon=RUN_ICON)

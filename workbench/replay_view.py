"""UI helpers for the Replay page: the transcript window and the "what this turn caused" panel.

What a turn caused is read back from the op log rather than kept from the
last step, so it is the same whether the cursor is at the head of the log
(just ingested) or behind it (after Back or a jump): the log is the truth,
the view at the cursor is a fold of it.
"""
from __future__ import annotations

import html
from dataclasses import dataclass, field
from datetime import datetime

import pandas as pd
import streamlit as st

from engine.conversation import Turn
from engine.edge import Edge
from engine.oplog import OpKind, RunInfo
from engine.state import MemoryState
from workbench.graph_view import cosine_text, edge_style, visibility_text

RUN_ICON = ":material/cleaning_services:"
_EFFECT_KINDS = (OpKind.TURN_INGESTED, OpKind.UNIT_CREATED, OpKind.EDGE_ADDED, OpKind.BUFFER_PUSHED,
                 OpKind.BUFFER_FLUSHED, OpKind.UNIT_RETRACTED, OpKind.RUN_STARTED)


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
.mw-tr .row { padding: 4px 6px; margin: 2px 0; border-left: 4px solid transparent; border-radius: 3px; }
.mw-tr .row.cur { background: #fff4cf; border-left-color: #e6a100; }
.mw-tr .row.future { opacity: 0.55; }
.mw-tr .meta { font-size: 0.78rem; color: #666; }
.mw-tr .tag { font-weight: 700; color: #8a5a00; }
</style>"""


def transcript_html(turns: list[Turn], cursor: int, head: int, state: MemoryState, before: int = 10,
                    after: int = 4) -> str:
    """The turns around the cursor as escaped HTML, the current one marked and the upcoming ones dimmed.

    Seen turns name the unit they became in `state` (the view at the cursor) and whether it is archived;
    upcoming turns say whether the log already holds them (cursor behind the head) or not.
    """
    e = html.escape
    start, stop = transcript_window(len(turns), cursor, before, after)
    rows, session = [], None
    for i in range(start, stop):
        t = turns[i]
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
        unit = "" if u is None else f" · → {e(u.label)}{'' if u.visible else ' [archived]'}"
        caption = f" <i>[shares an image: {e(t.image_caption)}]</i>" if t.image_caption else ""
        rows.append(
            f'<div class="row {css}"><div class="meta">{tag}#{i + 1} · {e(t.id)} · session {e(t.session)} · '
            f'{e(when(t.time))}{unit}</div><div><b>{e(t.speaker)}</b>: {e(t.text)}{caption}</div></div>')
    shown = f"turns {start + 1}–{stop} of {len(turns)}" if stop > start else "no turns"
    return (f'{_TRANSCRIPT_CSS}<div class="meta" style="color:#666;font-size:0.8rem">Showing {shown}</div>'
            f'<div class="mw-tr"><div>{"".join(rows)}</div></div>')


# -- what a turn caused ------------------------------------------------------------------------------
@dataclass
class TurnEffects:
    """One ingested turn as the log tells it; units are looked up in the view at the cursor."""

    turn_no: int
    turn_id: str
    unit_id: int | None = None
    anchors: list[tuple[int, float | None]] = field(default_factory=list)
    edges: list[Edge] = field(default_factory=list)
    buffer_size: int = 0
    runs_before: list[str] = field(default_factory=list)    # started after the previous turn's ingest
    runs_after: list[str] = field(default_factory=list)     # started after this turn's ingest


def turn_effects(view, turn_no: int, report=None) -> TurnEffects | None:
    """What ingesting turn number `turn_no` (1-based) did, read from the op log of `view`'s store.

    Anchor cosines come from `report` (an IngestReport of that turn) when given, else they are
    recomputed from the view's vectors, which are the same unless a later run re-described an anchor.
    """
    if turn_no < 1:
        return None
    effects, buffer, runs_before = None, set(), []
    for op in view.store.ops(kinds=_EFFECT_KINDS):
        if op.turn > turn_no:
            break
        p = op.payload
        if op.kind == OpKind.TURN_INGESTED:
            if op.turn == turn_no:
                effects = TurnEffects(turn_no=turn_no, turn_id=p["turn_id"], runs_before=runs_before)
        elif op.kind == OpKind.RUN_STARTED:
            if effects is not None:
                effects.runs_after.append(op.run_id)
            elif op.turn == turn_no - 1:       # state.turn is turn_no - 1 only after that turn's ingest
                runs_before.append(op.run_id)
        elif op.kind == OpKind.BUFFER_PUSHED:
            buffer.add(p["unit"])
            if effects is not None and op.actor == "online":
                effects.anchors = [(a, None) for a in p["anchors"]]
                effects.buffer_size = len(buffer)
        elif op.kind == OpKind.BUFFER_FLUSHED:
            buffer.difference_update(p["units"])
        elif op.kind == OpKind.UNIT_RETRACTED:
            buffer.discard(p["unit"])
        elif effects is not None and op.actor == "online":
            if op.kind == OpKind.UNIT_CREATED:
                effects.unit_id = p["unit"]["id"]
            elif op.kind == OpKind.EDGE_ADDED:
                effects.edges.append(Edge(**p["edge"]))
    if effects is not None:
        effects.anchors = _cosines(view, effects, report)
    return effects


def _cosines(view, effects: TurnEffects, report) -> list[tuple[int, float | None]]:
    if report is not None and report.unit_id == effects.unit_id:
        return [(a, float(c)) for a, c in report.anchors]
    vecs = view.vectors
    own = vecs.get(effects.unit_id)
    return [(a, None if own is None or a not in vecs else float(own @ vecs[a])) for a, _ in effects.anchors]


def run_sentence(run: RunInfo, moment: str, schedule_text: str) -> str:
    """One line saying a consolidation run happened around the step, with its counts."""
    who = f"on schedule ({schedule_text})" if run.mode == "auto" and schedule_text != "manual" else f"{run.mode} run"
    s = run.summary
    if run.status == "open" or not s:
        return f"Consolidation {run.run_id} was opened {moment}, {who}; its proposals await decisions."
    counts = ", ".join(f"{s.get(k, 0)} {k}" for k in ("applied", "rejected", "skipped", "failed"))
    made = (f"{len(s.get('created', []))} units created, {len(s.get('archived', []))} archived, "
            f"{s.get('rewired', 0)} semantic edges rewired")
    undone = " It was undone later." if run.status == "undone" else ""
    return f"Consolidation {run.run_id} ran {moment}, {who}. Proposals: {counts}; {made}.{undone}"


def _unit_text(state, uid: int) -> str:
    u = state.units.get(uid)
    return "(no longer in memory)" if u is None else u.summary


def render_effects(wb, effects: TurnEffects | None) -> None:
    """The "what this turn caused" panel for the turn at the cursor."""
    if effects is None:
        st.info("Nothing ingested yet: press **Next** to ingest the first turn.")
        return
    state = wb.view.state
    st.subheader(f"What turn {effects.turn_id} caused")
    if not wb.at_head:
        st.info(f"The cursor (turn {wb.cursor}) is behind the log head (turn {wb.head}). Everything here is "
                f"memory **as of turn {wb.cursor}**: a fold of the log, nothing was re-run. **Next** moves the "
                "cursor forward through the log without ingesting again.")
    schedule = wb.schedule.kind if wb.schedule.kind == "manual" else f"every {wb.schedule.every} {wb.schedule.kind}"
    for run_id in effects.runs_before:
        st.success(run_sentence(state.runs[run_id], "before this turn was ingested", schedule), icon=RUN_ICON)
    unit = state.units.get(effects.unit_id)
    if unit is not None:
        e = html.escape
        keywords = " ".join(f'<code>{e(k)}</code>' for k in unit.keywords) or "—"
        st.html(f'<div style="border:1px solid #e0e0e0;border-radius:6px;padding:8px 10px">'
                f'<b>Unit created</b> · <code>{e(unit.label)}</code> · {e(visibility_text(unit))} now · '
                f'kind {e(unit.kind)} · sources {e(", ".join(unit.source_ids))}<br>'
                f'<b>Summary</b>: {e(unit.summary)}<br><b>Keywords</b>: {keywords}</div>')
    c1, c2, c3 = st.columns(3)
    c1.metric("Anchors found", len(effects.anchors), help="Top visible units by cosine when the turn arrived")
    c2.metric("Edges added", len(effects.edges), help="Online edges from the new unit")
    c3.metric("Buffer right after ingest", effects.buffer_size,
              help="Units waiting for consolidation just after this turn was ingested (before any run that followed)")
    if effects.anchors:
        st.markdown("**Anchors** (visible units nearest to the new unit when it arrived)")
        st.dataframe(pd.DataFrame([
            {"anchor": f"u{a}", "cosine": c, "now": visibility_text(state.units[a]) if a in state.units else "gone",
             "summary": _unit_text(state, a)} for a, c in effects.anchors]),
            hide_index=True, width="stretch",
            column_config={"cosine": st.column_config.NumberColumn("cosine", format="%.3f")})
    if effects.edges:
        st.markdown("**Edges added**")
        st.dataframe(pd.DataFrame([
            {"type": edge_style(e.type)["label"], "from": f"u{e.src}", "to": f"u{e.dst}",
             "cosine": cosine_text(e.confidence),
             "target summary": _unit_text(state, e.dst)} for e in effects.edges]),
            hide_index=True, width="stretch")
    for run_id in effects.runs_after:
        if run_id in state.runs:
            st.success(run_sentence(state.runs[run_id], "after this turn was ingested", schedule), icon=RUN_ICON)

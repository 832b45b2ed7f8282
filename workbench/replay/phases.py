"""The Replay page's view of a two-state engine (GAM): its phase, the episodic buffer against its capacity, and
on a trigger the detector's boundaries over the buffer.

Everything is read from the log records around the turn (`workbench.replay.turn_effects.TurnEffects`): the `buffer` of the
turn_ingested record (tokens, T_max, tokenizer), and the `phase` and `trigger` engine variables a consolidation
wrote (the trigger's cause, the buffer it saw, the detector's answer and boundaries, the reason code when that
answer was refused, the tail policy, the segments consolidated and the utterances kept). An engine that writes
none of these gets nothing drawn.
"""
from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from engine.core.state import MemoryState
from workbench.text import md_escape, table

PHASE_LABELS = {"episodic": "episodic buffering", "consolidating": "semantic consolidation"}
KEPT, OUTSIDE = "kept in the buffer", "not consolidated"
SEGMENT_COLOURS = ("#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#ff9da7")


def has_phases(effects) -> bool:
    """Whether the turn's records describe a buffer with a capacity or a phase switch."""
    return bool((effects.buffer and "t_max" in effects.buffer) or phase_records(effects) or trigger_records(effects))


def phase_records(effects) -> list[dict]:
    return [v for v in effects.variables if v["key"] == "phase" and isinstance(v["value"], dict)]


def trigger_records(effects) -> list[dict]:
    return [v for v in effects.variables if v["key"] == "trigger" and isinstance(v["value"], dict)]


def phase_text(value: dict) -> str:
    return PHASE_LABELS.get(value.get("phase", ""), value.get("phase", "?"))


def phase_lines(effects) -> list[str]:
    """One line per phase switch around the turn, with its cause."""
    lines = []
    for v in phase_records(effects):
        value = v["value"]
        when = "after the turn" if v["when"] == "after" else "before the turn"
        cause = value.get("cause", "")
        trigger = str(value.get("trigger", "")).replace("_", " ")
        head = f"→ **{phase_text(value)}** ({when}"
        head += f", trigger **{trigger}**" if trigger and value.get("phase") == "consolidating" else ""
        lines.append(head + ")" + (f": {md_escape(cause)}" if cause else ""))
    return lines


def gauge_figure(tokens: int, t_max: int, tokenizer: str) -> go.Figure:
    """The buffer's tokens against T_max."""
    top = max(t_max, tokens) * 1.1
    fig = go.Figure(go.Indicator(
        mode="gauge+number", value=tokens, number={"suffix": f" / {t_max} tokens"},
        title={"text": f"Episodic buffer ({tokenizer})", "font": {"size": 14}},
        gauge={"axis": {"range": [0, top]}, "bar": {"color": "#e15759" if tokens > t_max else "#4e79a7"},
               "threshold": {"line": {"color": "#222", "width": 3}, "thickness": 0.9, "value": t_max},
               "steps": [{"range": [t_max, top], "color": "#f6d5d5"}]}))
    fig.update_layout(height=190, margin={"l": 20, "r": 20, "t": 40, "b": 5})
    return fig


def segment_of(trigger: dict) -> dict[int, str]:
    """Each buffered utterance's fate in a trigger: `segment k` (consolidated) or kept."""
    buffer = list(trigger.get("buffer", []))
    out = {uid: OUTSIDE for uid in buffer}
    for k, (first, last) in enumerate(trigger.get("segments", []), 1):
        inside = buffer[buffer.index(first):buffer.index(last) + 1] if first in out and last in out else []
        out.update({uid: f"segment {k}" for uid in inside})
    out.update({uid: KEPT for uid in trigger.get("kept", [])})
    return out


def trigger_frame(state: MemoryState, trigger: dict) -> pd.DataFrame:
    """The buffer the detector saw: position, node, turn, speaker, tokens, its fate, a boundary after it."""
    fate = segment_of(trigger)
    after = set(trigger.get("boundaries", []))
    rows = []
    for i, uid in enumerate(trigger.get("buffer", [])):
        node = state.nodes.get(uid)
        rows.append({"index": i, "node": f"u{uid}", "turn": ", ".join(node.source_ids) if node else "",
                     "speaker": (node.speakers or [""])[0] if node else "",
                     "tokens": int(node.attrs.get("tokens", 0)) if node else 0, "fate": fate.get(uid, OUTSIDE),
                     "boundary after": "◆" if i in after else "",
                     "text": (node.raw if node else "")[:160]})
    return pd.DataFrame(rows, columns=["index", "node", "turn", "speaker", "tokens", "fate", "boundary after", "text"])


def boundary_figure(state: MemoryState, trigger: dict) -> go.Figure:
    """The buffer as bars of tokens per utterance, coloured by the segment each went to, with the detector's
    boundaries as dashed lines between utterance i and i+1."""
    frame = trigger_frame(state, trigger)
    fates = list(dict.fromkeys(frame["fate"]))
    fig = go.Figure()
    for j, fate in enumerate(fates):
        part = frame[frame["fate"] == fate]
        colour = "#bdbdbd" if fate in (KEPT, OUTSIDE) else SEGMENT_COLOURS[j % len(SEGMENT_COLOURS)]
        fig.add_bar(x=part["index"], y=part["tokens"], name=fate, marker_color=colour,
                    customdata=part[["node", "turn", "speaker"]].values,
                    hovertemplate="#%{x} %{customdata[0]} (%{customdata[1]}, %{customdata[2]}): %{y} tokens"
                                  "<extra>%{fullData.name}</extra>")
    for b in trigger.get("boundaries", []):
        fig.add_vline(x=b + 0.5, line_dash="dash", line_color="#222")
    fig.update_layout(height=240, margin={"l": 10, "r": 10, "t": 30, "b": 10}, bargap=0.1, barmode="overlay",
                      xaxis_title="utterance in the buffer (0-based)", yaxis_title="tokens",
                      legend={"orientation": "h", "y": 1.15},
                      title={"text": f"Detector boundaries over the {len(frame)}-utterance buffer",
                             "font": {"size": 13}})
    return fig


def trigger_sentence(trigger: dict) -> str:
    what = str(trigger.get("trigger", "")).replace("_", " ")
    said = trigger.get("boundaries") or []
    if trigger.get("reason_code"):
        detector = (f"the detector's answer {trigger.get('answer')} was **refused** "
                    f"({trigger['reason_code']}: {trigger.get('message', '')}), so the buffer was one segment")
    else:
        detector = f"the detector put boundaries after {said}" if said else "the detector found no boundary"
    kept = len(trigger.get("kept", []))
    return (f"**{what.capitalize()}** trigger ({md_escape(trigger.get('cause', ''))}) over "
            f"{len(trigger.get('buffer', []))} utterances, {trigger.get('tokens', 0)} tokens: {md_escape(detector)}; "
            f"{len(trigger.get('segments', []))} segment(s) consolidated, {kept} utterance(s) kept "
            f"({md_escape(trigger.get('policy', ''))}).")


def render_phases(wb, effects) -> None:
    """The phase panel of the Replay page for the turn at the cursor."""
    state = wb.view.state
    now = state.engine_state.get("phase") or {"phase": "episodic"}
    st.markdown(f"**Phase** after this turn: **{phase_text(now)}**")
    for line in phase_lines(effects):
        st.markdown(line)
    buffer = effects.buffer or {}
    if "t_max" in buffer:
        left, right = st.columns([3, 2])
        left.plotly_chart(gauge_figure(int(buffer["tokens"]), int(buffer["t_max"]), str(buffer.get("tokenizer", ""))),
                          width="stretch", key=f"buffer_gauge:{effects.turn_no}")
        left_now = state.engine_state.get("buffer_tokens")
        right.metric("Events in the active graph", buffer.get("events", 0),
                     help="Utterances in the episodic buffer just after this turn was ingested")
        right.metric("Tokens now", left_now if left_now is not None else buffer["tokens"],
                     help="After any consolidation this turn caused")
        right.caption(f"This utterance: {buffer.get('turn_tokens', 0)} tokens.")
    for v in trigger_records(effects):
        trigger = v["value"]
        st.info(trigger_sentence(trigger), icon=":material/content_cut:")
        st.plotly_chart(boundary_figure(state, trigger), width="stretch", key=f"boundaries:{v['seq']}")
        with st.expander(f"The buffer the detector saw ({len(trigger.get('buffer', []))} utterances)"):
            st.dataframe(table(trigger_frame(state, trigger)), hide_index=True, width="stretch")

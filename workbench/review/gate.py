"""The recurrence gate on the Replay page (RecMem): what the gate saw for the turn, and the threshold sweep.

A turn whose record carries `gate` traces (the engine logs one per exchange unit the turn completed) gets a
panel per unit: merge-first (the nearest episode's cosine against θ_merge), the recurrence check (each nearest
subconscious unit's cosine against θ_sim, the count |R| against θ_count) and what fired, with the cluster a
trigger queued. The sweep asks the engine what each (θ_sim, θ_count) pair would do to the whole loaded
conversation without any LLM, and draws it as a heatmap. Everything is read from the log record and the engine's
methods; nothing here imports an engine.
"""
from __future__ import annotations

import html

import pandas as pd
import plotly.graph_objects as go
import streamlit as st
from plotly.subplots import make_subplots

from engine.core.state import MemoryState
from workbench.text import md_code, md_escape, table

PASS, FAIL = "✓ passes", "✗ below"
FIRED = {"merge": "merge-first: queued for the merge role",
         "consolidate": "recurrence trigger: the cluster is queued for consolidation",
         "none": "nothing fired: the unit stays in the subconscious store (no LLM call)"}
FIRED_SHORT = {"merge": "merge", "consolidate": "trigger", "none": "none"}
SWEEP_METRICS = {"calls": "estimated LLM calls", "triggers": "gate triggers", "merges": "merge-first hits",
                 "consolidated_share": "share of units consolidated", "mean_cluster": "mean cluster size",
                 "prompt_tokens": "estimated prompt tokens"}
SWEEP_SIMS = [round(0.45 + 0.05 * i, 2) for i in range(8)]       # 0.45 … 0.80
SWEEP_COUNTS = list(range(2, 9))


def _passes(cosine: float, threshold: float) -> bool:
    return round(cosine, 9) >= threshold


def gate_sentence(trace: dict) -> str:
    """The gate's decision for one unit in words, from the figures the record holds."""
    unit = f"u{trace['unit']}"
    parts = []
    cos, theta_merge = trace.get("episode_cosine"), trace.get("theta_merge")
    if trace.get("episode") is None:
        parts.append("merge-first: no episode yet")
    else:
        rel = "≥" if _passes(cos, theta_merge) else "<"
        parts.append(f"merge-first: nearest episode u{trace['episode']} at cosine {cos:.3f} {rel} θ_merge "
                     f"{theta_merge:.2f}")
    if trace["fired"] != "merge":
        n = len(trace.get("neighbours") or [])
        rel = "≥" if trace["count"] >= trace["theta_count"] else "<"
        parts.append(f"recurrence: {trace['count'] - 1} of its {n} nearest subconscious units pass θ_sim "
                     f"{trace['theta_sim']:.2f}, |R| = {trace['count']} (with {unit}) {rel} θ_count "
                     f"{trace['theta_count']}")
    return f"{unit}: " + "; ".join(parts) + f". {FIRED.get(trace['fired'], trace['fired']).capitalize()}."


def neighbours_frame(trace: dict, state: MemoryState) -> pd.DataFrame:
    """The gate's N_i (the new unit aside), nearest first: cosine against θ_sim, whether it joined the cluster,
    its status now and its text."""
    cluster = set(trace.get("cluster") or [])
    rows = []
    for rank, (uid, cos) in enumerate(trace.get("neighbours") or [], 1):
        node = state.nodes.get(uid)
        rows.append({"rank": rank, "unit": f"u{uid}", "cosine": round(cos, 4),
                     "vs θ_sim": PASS if _passes(cos, trace["theta_sim"]) else FAIL,
                     "in cluster": "◀ cluster" if uid in cluster else "",
                     "status now": "gone" if node is None else node.status,
                     "text": "" if node is None else node.raw})
    return pd.DataFrame(rows, columns=["rank", "unit", "cosine", "vs θ_sim", "in cluster", "status now", "text"])


def gate_figure(trace: dict) -> go.Figure:
    """Neighbour cosines as bars against θ_sim (orange: in the cluster) and the nearest episode's cosine against
    θ_merge, each threshold a dashed line."""
    neighbours = trace.get("neighbours") or []
    cluster = set(trace.get("cluster") or [])
    fig = make_subplots(rows=1, cols=2, column_widths=[0.82, 0.18], horizontal_spacing=0.06,
                        subplot_titles=(f"nearest subconscious units vs θ_sim {trace['theta_sim']:.2f}",
                                        "nearest episode vs θ_merge"))
    labels = [f"u{u}" for u, _ in neighbours]
    fig.add_trace(go.Bar(x=labels, y=[c for _, c in neighbours], name="neighbour cosine",
                         marker_color=["#e6a100" if u in cluster else
                                       "#4e79a7" if _passes(c, trace["theta_sim"]) else "#b8c7dc"
                                       for u, c in neighbours],
                         hovertemplate="%{x}: cosine %{y:.3f}<extra></extra>"), row=1, col=1)
    fig.add_hline(y=trace["theta_sim"], line={"color": "#d62728", "dash": "dash"}, row=1, col=1)
    if trace.get("episode") is not None:
        fig.add_trace(go.Bar(x=[f"u{trace['episode']}"], y=[trace["episode_cosine"]], name="episode cosine",
                             marker_color="#e15759" if trace["fired"] == "merge" else "#f0b5b6",
                             hovertemplate="%{x}: cosine %{y:.3f}<extra></extra>"), row=1, col=2)
        fig.add_hline(y=trace["theta_merge"], line={"color": "#d62728", "dash": "dash"}, row=1, col=2)
    fig.update_yaxes(range=[0, 1], title_text="cosine", row=1, col=1)
    fig.update_yaxes(range=[0, 1], row=1, col=2)
    fig.update_layout(height=280, showlegend=False, margin={"l": 10, "r": 10, "t": 40, "b": 10},
                      plot_bgcolor="#ffffff")
    return fig


def render_gate(wb, effects) -> None:
    """The gate panel for the turn at the cursor (RecMem), then the threshold sweep."""
    state = wb.view.state
    st.markdown("**Recurrence gate** (from the turn's log record)")
    traces = effects.gate or []
    if not traces:
        st.info("This message waits for its reply: no exchange unit is complete yet, so no gate ran and no LLM was "
                "called. The message is searched in the subconscious layer meanwhile.", icon=":material/hourglass:")
    for trace in traces:
        messages = ", ".join(f"u{m}" for m in trace.get("messages") or [])
        st.markdown(f"Unit **u{trace['unit']}** (messages {md_escape(messages)}, closed by "
                    f"{md_escape(trace.get('closed_by', '?'))})")
        (st.success if trace["fired"] != "none" else st.info)(md_escape(gate_sentence(trace)),
                                                              icon=":material/filter_alt:")
        cols = st.columns(3)
        cols[0].metric("|R| vs θ_count", f"{trace['count']} / {trace['theta_count']}",
                       help="Units at cosine ≥ θ_sim with the new one, itself included, against the count that "
                            "triggers consolidation.")
        cols[1].metric("Nearest episode cosine", "—" if trace.get("episode") is None else
                       f"{trace['episode_cosine']:.3f}", help=f"Against θ_merge {trace['theta_merge']:.2f}: at or "
                                                              "above it the unit goes to the merge role first.")
        cols[2].metric("Fired", FIRED_SHORT.get(trace["fired"], trace["fired"]), help=FIRED.get(trace["fired"], ""))
        if trace.get("neighbours"):
            st.dataframe(table(neighbours_frame(trace, state)), hide_index=True, width="stretch",
                         column_config={"text": st.column_config.TextColumn("text", width="large")})
        st.plotly_chart(gate_figure(trace), width="stretch", key=f"gate_chart:{effects.turn_no}:{trace['unit']}")
        if trace["fired"] == "consolidate":
            st.caption("Cluster C_i in time order: " + ", ".join(md_code(f"u{u}") for u in trace["cluster"]))
    counters = state.engine_state.get("recurrence")
    if isinstance(counters, dict):
        st.caption(f"So far (at the cursor): {counters.get('units', 0)} units gated, {counters.get('triggers', 0)} "
                   f"recurrence triggers, {counters.get('merges', 0)} merge-first hits.")
    render_sweep(wb)


# -- the threshold sweep -----------------------------------------------------------------------------------
def sweep_frame(cells) -> pd.DataFrame:
    return pd.DataFrame([{"θ_sim": c.theta_sim, "θ_count": c.theta_count, "θ_merge": c.theta_merge,
                          "units": c.units, "triggers": c.triggers, "merges": c.merges,
                          "mean cluster": round(c.mean_cluster, 2), "max cluster": c.max_cluster,
                          "consolidated": c.consolidated, "share consolidated": round(c.consolidated_share, 3),
                          "est. LLM calls": c.calls, "est. prompt tokens": c.prompt_tokens} for c in cells])


def sweep_figure(cells, metric: str, current: tuple[float, int] | None = None) -> go.Figure:
    """A heatmap of one sweep figure over θ_sim (rows) × θ_count (columns), each cell labelled with its value;
    the engine's own setting outlined."""
    sims = sorted({c.theta_sim for c in cells})
    counts = sorted({c.theta_count for c in cells})
    by = {(c.theta_sim, c.theta_count): c for c in cells}

    def value(c):
        v = getattr(c, metric)
        return round(v, 3) if isinstance(v, float) else v

    z = [[value(by[(s, n)]) for n in counts] for s in sims]
    hover = [[html.escape(f"θ_sim {s:g}, θ_count {n}: {by[(s, n)].triggers} triggers (mean cluster "
                          f"{by[(s, n)].mean_cluster:.1f}), {by[(s, n)].merges} merges, {by[(s, n)].consolidated} of "
                          f"{by[(s, n)].units} units consolidated, ~{by[(s, n)].calls} LLM calls, "
                          f"~{by[(s, n)].prompt_tokens:,} prompt tokens") for n in counts] for s in sims]
    fig = go.Figure(go.Heatmap(z=z, x=[str(n) for n in counts], y=[f"{s:.2f}" for s in sims], colorscale="Blues",
                               text=z, texttemplate="%{text}", hovertext=hover, hoverinfo="text",
                               colorbar={"title": {"text": SWEEP_METRICS[metric]}}))
    if current is not None and current in by:
        x, y = counts.index(current[1]), sims.index(current[0])
        fig.add_shape(type="rect", x0=x - 0.5, x1=x + 0.5, y0=y - 0.5, y1=y + 0.5,
                      line={"color": "#e6a100", "width": 3})
    fig.update_layout(height=110 + 34 * len(sims), margin={"l": 10, "r": 10, "t": 40, "b": 10},
                      xaxis={"title": "θ_count", "type": "category"}, yaxis={"title": "θ_sim", "type": "category"},
                      title=f"{SWEEP_METRICS[metric]} per (θ_sim, θ_count), no LLM (outlined: this session's)")
    return fig


def render_sweep(wb) -> None:
    sweep = getattr(wb.engine, "threshold_sweep", None)
    if not callable(sweep):
        return
    with st.expander("Threshold sweep: what each (θ_sim, θ_count) would do to this conversation, without an LLM"):
        c = st.columns([3, 3, 3])
        sims = c[0].multiselect("θ_sim values", SWEEP_SIMS, default=SWEEP_SIMS, key="sweep_sims")
        counts = c[1].multiselect("θ_count values", SWEEP_COUNTS, default=SWEEP_COUNTS, key="sweep_counts")
        metric = c[2].selectbox("Figure", list(SWEEP_METRICS), format_func=SWEEP_METRICS.get, key="sweep_metric")
        if not sims or not counts:
            st.caption("Pick at least one value of each.")
            return
        key = (str(wb.db_path), len(wb.conversation.turns), tuple(sorted(sims)), tuple(sorted(counts)))
        cached = st.session_state.get("sweep_cells")
        if cached is None or cached[0] != key:
            with st.spinner("Replaying every exchange of the conversation through the gate…"):
                cells = sweep(sorted(sims), sorted(counts), turns=wb.conversation.turns)
            st.session_state["sweep_cells"] = cached = (key, cells)
        cells = cached[1]
        s = wb.engine.settings
        st.caption(f"All {cells[0].units} exchange units of the loaded conversation, replayed through the same gate "
                   "ingest runs; an episode's embedding is estimated as its latest unit's, one episode per "
                   "trigger, every merge accepted (the estimates are explained in docs/RECMEM.md).")
        st.plotly_chart(sweep_figure(cells, metric, (s.theta_sim, s.theta_count)), width="stretch",
                        key="sweep_heatmap")
        st.dataframe(table(sweep_frame(cells)), hide_index=True, width="stretch")

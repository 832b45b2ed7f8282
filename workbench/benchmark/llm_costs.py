"""What each LLM role cost, for the Replay page (the open session) and the Benchmark page (per system).

The figures come from the engine library (`engine.eval.llm_costs`, `engine.eval.metrics.llm_cost_summary`): calls,
prompt and completion tokens (the server's usage), latency p50/p95, the schema-valid rate and how often the
offline rules decide otherwise on the same input. Asking the offline backend again costs embedding time, so
the Replay page does it only on request.
"""
from __future__ import annotations

import html

import pandas as pd
import plotly.graph_objects as go
import streamlit as st
from plotly.subplots import make_subplots

from engine.eval.llm_costs import MODEL_NOTE, cost_rows, session_costs
from workbench.text import md_escape, table

_LAYOUT = dict(margin=dict(l=10, r=10, t=50, b=10), legend=dict(orientation="h", y=-0.2), height=330)


def costs_frame(costs: dict[str, dict]) -> pd.DataFrame:
    return pd.DataFrame(cost_rows(costs))


def costs_figure(costs: dict[str, dict], title: str = "") -> go.Figure:
    """Three panels per role: tokens (prompt and completion, stacked), latency p50 and p95, and the
    schema-valid and differs-from-offline rates."""
    roles = list(costs)
    names = [html.escape(r) for r in roles]
    fig = make_subplots(rows=1, cols=3, subplot_titles=("tokens", "latency (ms)", "rates"))
    fig.add_bar(x=names, y=[costs[r]["prompt"] for r in roles], name="prompt tokens", row=1, col=1)
    fig.add_bar(x=names, y=[costs[r]["completion"] for r in roles], name="completion tokens", row=1, col=1)
    fig.add_bar(x=names, y=[costs[r]["latency_ms"]["p50"] for r in roles], name="p50", row=1, col=2)
    fig.add_bar(x=names, y=[costs[r]["latency_ms"]["p95"] for r in roles], name="p95", row=1, col=2)
    fig.add_bar(x=names, y=[costs[r]["valid_rate"] for r in roles], name="schema-valid", row=1, col=3)
    fig.add_bar(x=names, y=[costs[r]["differ_rate"] for r in roles], name="differs from offline", row=1, col=3)
    fig.update_layout(barmode="group", title=html.escape(title), **_LAYOUT)
    fig.update_yaxes(range=[0, 1], tickformat=".0%", row=1, col=3)
    return fig


def _models(engine) -> str:
    """The models that answered the session's calls, as the calls recorded them."""
    from engine.eval.metrics import llm_calls

    seen = {(c.get("backend"), c.get("model")) for c in llm_calls(engine.store)}
    return ", ".join(f"{b}: {m}" for b, m in sorted(seen, key=str)) or "none"


def show_costs(costs: dict[str, dict], key: str, title: str = "") -> None:
    """A role table and its figure; a note on the bundled model's quality when it answered."""
    if not costs:
        st.caption("No LLM calls.")
        return
    st.dataframe(table(costs_frame(costs)), hide_index=True, width="stretch",
                 column_config={"p50 ms": st.column_config.NumberColumn(format="%.0f"),
                                "p95 ms": st.column_config.NumberColumn(format="%.0f"),
                                "schema-valid": st.column_config.NumberColumn(format="percent"),
                                "differs from offline": st.column_config.NumberColumn(format="percent")})
    st.plotly_chart(costs_figure(costs, title), width="stretch", key=key)


def session_costs_panel(wb) -> None:
    """Replay page: the open session's calls per role; the comparison with the offline rules on request."""
    box = st.expander("LLM calls: what each role cost", key="replay_costs_open", on_change="rerun")
    if not box.open:                 # reading every logged call costs time: only while the box is open
        return
    with box:
        models = _models(wb.engine)
        st.caption(f"Every call this session logged, per role. Answered by {md_escape(models)}. Tokens are the "
                   "server's reported usage (the offline rules' are estimates). Schema-valid: the reply parsed, "
                   "validated against the role's schema and kept within its caps.")
        if "SmolLM2" in models:
            st.info(f"SmolLM2-135M answered these calls: {MODEL_NOTE}.", icon=":material/info:")
        compare = st.checkbox("Also ask the offline rules the same inputs (differs-from-offline rate)",
                              key="replay_costs_compare",
                              help="Re-asks every deciding call (diagnosis, plans, router, relations, merges, "
                                   "answers) of the offline backend; takes a few seconds per hundred calls.")
        try:
            costs = session_costs(wb.engine, compare="offline" if compare else None)
        except ValueError as exc:
            st.error(f"Could not read the session's calls: {md_escape(exc)}")
            return
        show_costs(costs, key=f"replay_costs:{wb.db_path}:{compare}")


def bench_costs_section(result) -> None:
    """Benchmark page: per system, what each role cost (shown when a model, not only the rules, answered)."""
    summary = result.data.get("summary", {})
    online = {label: s["llm_costs"] for label, s in summary.items() if s.get("llm_costs")
              and any(set(c["structured"]) - {"offline"} for c in s["llm_costs"].values())}
    if not online:
        return
    st.markdown("#### LLM costs per role")
    st.caption(f"Engine roles answered by `{md_escape(result.data.get('llm', 'offline'))}`. With the bundled "
               f"SmolLM2-135M: {MODEL_NOTE}.")
    for label, costs in online.items():
        st.markdown(f"##### {md_escape(label)}")
        show_costs(costs, key=f"bench_costs:{label}", title=label)

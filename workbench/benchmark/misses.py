"""Where each system's gold turns went at the last round (engine.eval.misses), drawn for the Benchmark page: a
stacked bar per system and a table with the signal that held the missed ones back; and, on the causal suite,
how each system's memory held the links of the chains (engine.eval.chain_links). No Streamlit."""
from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

from engine.eval.chain_links import LINK_FATE_LABELS, LinkFate
from engine.eval.misses import FATE_LABELS, Fate
from workbench.benchmark.result import BenchResult
from workbench.benchmark.view import SYSTEM_BARS, esc

FATE_COLORS = {Fate.FOUND: "#59a14f", Fate.NOT_STORED: "#7f7f7f", Fate.OFF_SURFACE: "#e15759",
               Fate.NOT_REACHED: "#f28e2b", Fate.BELOW_K: "#edc948"}
ALL_CATEGORIES = ""


def misses_figure(result: BenchResult, systems: list[str], category: str = ALL_CATEGORIES) -> go.Figure:
    """Where each system's gold turns went at the last round (engine.eval.misses): one stacked bar per system,
    the share of gold turns found in the top k, never stored, consolidated off the surface and not recovered,
    on the surface but not reached, or a candidate ranked below k. `category` limits it to one category."""
    shown = [s for s in systems if (result.summary.get(s) or {}).get("misses")]
    counts = {}
    for s in shown:
        m = result.summary[s]["misses"]
        counts[s] = (m.get("by_category") or {}).get(category) or {} if category else m.get("fates") or {}
    fig = go.Figure()
    for fate in Fate:
        totals = [sum(counts[s].values()) or 1 for s in shown]
        ys = [counts[s].get(fate, 0) / t for s, t in zip(shown, totals)]
        fig.add_trace(go.Bar(x=[esc(s) for s in shown], y=ys, name=esc(FATE_LABELS[fate]),
                             marker_color=FATE_COLORS[fate], customdata=[counts[s].get(fate, 0) for s in shown],
                             hovertemplate=f"%{{x}} · {esc(FATE_LABELS[fate])}<br>%{{y:.1%}} of gold turns "
                                           "(%{customdata})<extra></extra>"))
    k = next((result.summary[s]["misses"].get("k") for s in shown), None)
    fig.update_layout(barmode="stack", height=380, yaxis=dict(range=[0, 1], tickformat=".0%",
                                                              title=f"gold turns (k = {k})"), **SYSTEM_BARS)
    return fig


def misses_frame(result: BenchResult, systems: list[str]) -> pd.DataFrame:
    """Per system: gold turns by fate, then which signal held back the turns that were on the surface or
    candidates but missed the top k, and the engine's drop codes of the missed ones."""
    rows = []
    for s in systems:
        m = (result.summary.get(s) or {}).get("misses")
        if not m:
            continue
        row = {"system": s, **{FATE_LABELS[Fate(f)]: n for f, n in (m.get("fates") or {}).items()}}
        row["held back by"] = ", ".join(f"{k} {v}" for k, v in (m.get("signals") or {}).items()) or "–"
        row["drops"] = ", ".join(f"{k} {v}" for k, v in (m.get("drops") or {}).items()) or "–"
        rows.append(row)
    return pd.DataFrame(rows)


def chain_links_frame(result: BenchResult, systems: list[str]) -> pd.DataFrame:
    """Per system: the causal chains' links (cause turn -> effect turn) by how the memory held them at the last
    round, the chains it held whole (every link a relation citing both turns), and how many of those the ranking
    kept whole in the top k."""
    rows = []
    for s in systems:
        c = (result.summary.get(s) or {}).get("chain_links")
        if c:
            rows.append({"system": s, "chains held whole": f"{c['held_whole']} of {c['questions']}",
                         f"of them whole in the top {c.get('k')}": c.get("held_whole_ranked_whole"),
                         **{LINK_FATE_LABELS[f]: c["fates"].get(str(f), 0) for f in LinkFate}})
    return pd.DataFrame(rows)

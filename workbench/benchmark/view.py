"""The Benchmark page's tables and plotly figures, built from a `BenchResult` (no engine work here).

Every system keeps one colour across the figures. Plotly reads a subset of HTML in trace names, tick labels
and hover text, so every name that comes from the file (systems, categories, stages, statuses, edge types)
goes through `html.escape` before it reaches a figure.
"""
from __future__ import annotations

import functools
import html
import json
import math
from pathlib import Path

import pandas as pd
import plotly.graph_objects as go
from plotly.colors import qualitative
from plotly.subplots import make_subplots

from workbench.benchmark.result import BenchResult
from workbench.chart_style import LEGEND_ABOVE
from workbench.text import md_code, md_escape

PALETTE = qualitative.Plotly + qualitative.D3
STACK = qualitative.Set2 + qualitative.Pastel1
MEMORY_COLUMNS = 4                   # systems per row of the memory-growth grid
_LAYOUT = dict(margin=dict(l=10, r=10, t=40, b=10), legend=dict(orientation="h", y=-0.18))
# bars with a system's name under each: names an ablation long slant down, so the legend goes above the plot
# (under the title) and the bottom margin grows with the names
SYSTEM_BARS = dict(margin=dict(l=10, r=10, t=90, b=10), legend=LEGEND_ABOVE,
                   xaxis=dict(automargin=True))


def esc(text) -> str:
    return html.escape(str(text), quote=False)


def system_colors(systems: list[str]) -> dict[str, str]:
    return {s: PALETTE[i % len(PALETTE)] for i, s in enumerate(systems)}


def result_label(path: Path, benchmarks: Path) -> str:
    """How a run reads in the picker: its folder under the workspace's benchmarks/ (or the path), then what
    ran: dataset · systems · protocol, from the file's head."""
    try:
        where = str(path.parent.relative_to(benchmarks))
    except ValueError:
        where = str(path)
    try:
        stat = path.stat()
    except OSError:
        return where
    return " · ".join(x for x in (where, _run_head(str(path), stat.st_mtime_ns, stat.st_size)) if x)


@functools.lru_cache(maxsize=256)
def _run_head(path: str, mtime_ns: int, size: int) -> str:
    """dataset · systems · protocol of a result file, read once per version of the file; "" if unreadable."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        systems = ", ".join(map(str, data.get("systems") or []))
        return " · ".join(str(x) for x in (data.get("dataset"), systems, data.get("protocol") and
                                           f"{data['protocol']} protocol") if x)
    except (OSError, ValueError, AttributeError, TypeError):
        return ""


def run_caption(result: BenchResult) -> str:
    """One line on what ran: dataset, protocol, rounds, conversations, embedder, schedule (plain text)."""
    d = result.data
    return (f"{d['dataset']} · {d['protocol']} protocol · {d['rounds']} round(s) · "
            f"{len(d.get('conversations') or [])} conversation(s) · {len(result.questions)} question records · "
            f"embedder {d.get('embedder', '?')} · schedule {d.get('schedule', '?')}"
            + (f" · scored against version {d['dataset_version']}" if d.get("dataset_version") else "")
            + (f" · gold overlay {d['gold_overlay']['version']}" if d.get("gold_overlay") else ""))


# -- the round-by-round figures ---------------------------------------------------------------------------
def _rounds(result: BenchResult, system: str) -> list[dict]:
    return sorted((r for r in result.rounds_detail if r["system"] == system), key=lambda r: r["round"])


SCOPES = {"overall": "Overall: every question visible at the round",
          "cohort": "Fixed cohort: the questions visible since round 1"}


def curves_figure(result: BenchResult, systems: list[str], scope: str = "overall") -> go.Figure:
    """One panel per metric; a line per system over the rounds. `scope` is "overall" or "cohort" (the
    questions visible since round 1)."""
    metrics = result.metrics
    colors = system_colors(result.systems)
    fig = make_subplots(rows=1, cols=max(1, len(metrics)), subplot_titles=[esc(m) for m in metrics],
                        shared_yaxes=True, horizontal_spacing=0.03)
    for s in systems:
        rows = _rounds(result, s)
        for i, m in enumerate(metrics, 1):
            fig.add_trace(go.Scatter(x=[r["round"] for r in rows], y=[(r.get(scope) or {}).get(m) for r in rows],
                                     mode="lines+markers", name=esc(s), legendgroup=s, showlegend=i == 1,
                                     line=dict(color=colors[s]),
                                     hovertemplate=f"{esc(s)} · {esc(m)}<br>round %{{x}}: %{{y:.3f}}<extra></extra>"),
                          row=1, col=i)
    fig.update_xaxes(dtick=1, title_text="round")
    fig.update_yaxes(range=[0, 1.02])
    fig.update_layout(height=350, **_LAYOUT)
    fig.update_layout(title=dict(text=SCOPES[scope], font=dict(size=14)), margin=dict(t=70, b=40),
                      legend=dict(orientation="h", y=-0.3))
    return fig


def category_figure(result: BenchResult, systems: list[str], metric: str) -> go.Figure:
    """`metric` per category at the last round: a group of bars per category, one bar per system."""
    colors = system_colors(result.systems)
    keys = sorted({k for s in systems for k in (result.summary.get(s, {}).get("by_category") or {})},
                  key=category_sort_key)
    labels = [esc(result.category_label(k)) for k in keys]
    fig = go.Figure()
    for s in systems:
        by_cat = result.summary.get(s, {}).get("by_category") or {}
        fig.add_trace(go.Bar(x=labels, y=[(by_cat.get(k) or {}).get(metric) for k in keys], name=esc(s),
                             marker_color=colors[s],
                             customdata=[(by_cat.get(k) or {}).get("n") for k in keys],
                             hovertemplate=f"{esc(s)} · %{{x}}<br>{esc(metric)} %{{y:.3f}} (n=%{{customdata}})"
                                           "<extra></extra>"))
    fig.update_layout(barmode="group", height=340, yaxis=dict(range=[0, 1.02], title=esc(metric)), **_LAYOUT)
    return fig


def category_sort_key(key: str):
    """Category keys in reading order: numbers numerically, then names."""
    return (0, int(key), "") if str(key).isdigit() else (1, 0, str(key))


def stage_p50(latency: dict, kind: str) -> dict[str, float]:
    """p50 milliseconds per stage of `kind` ("insert" or "query")."""
    return {stage: float(v["p50"]) for stage, v in ((latency or {}).get(kind) or {}).items()
            if isinstance(v, dict) and v.get("p50") is not None}


def query_p50(latency: dict) -> float | None:
    """A query's p50 latency: the "total" stage when the file records one, else the stages' p50s added up."""
    stages = stage_p50(latency, "query")
    if "total" in stages:
        return stages["total"]
    return sum(stages.values()) if stages else None


def latency_figure(result: BenchResult, systems: list[str], kind: str) -> go.Figure:
    """p50 milliseconds per stage at the last round, stacked, one bar per system."""
    stages: list[str] = []
    per_system = {s: stage_p50(result.summary.get(s, {}).get("latency_ms"), kind) for s in systems}
    for values in per_system.values():
        stages += [st for st in values if st not in stages and st != "total"]
    fig = go.Figure()
    for i, stage in enumerate(stages):
        fig.add_trace(go.Bar(x=[esc(s) for s in systems], y=[per_system[s].get(stage) for s in systems],
                             name=esc(stage), marker_color=STACK[i % len(STACK)],
                             hovertemplate=f"%{{x}} · {esc(stage)}: %{{y:.2f}} ms<extra></extra>"))
    fig.update_layout(barmode="stack", height=380, title=f"{kind} p50 by stage (ms)",
                      yaxis=dict(title="ms"), **SYSTEM_BARS)
    return fig


def tradeoff_figure(result: BenchResult, systems: list[str], metric: str) -> go.Figure:
    """`metric` at the last round against query latency p50: one point per system. Names that would print over
    each other (an engine's ablations share its latency and nearly its recall) are shared out by
    `point_labels`; each point's hover still names it."""
    colors = system_colors(result.systems)
    points = {s: (query_p50(result.summary.get(s, {}).get("latency_ms")),
                  (result.summary.get(s, {}).get("overall") or {}).get(metric)) for s in systems}
    labels = point_labels(points)
    fig = go.Figure()
    for s in systems:
        x, y = points[s]
        text, where = labels.get(s, ("", "top center"))
        fig.add_trace(go.Scatter(x=[x], y=[y], mode="markers+text", name=esc(s), text=[esc(text)],
                                 textposition=where, marker=dict(size=14, color=colors[s]),
                                 hovertemplate=f"{esc(s)}<br>query p50 %{{x:.2f}} ms<br>{esc(metric)} %{{y:.3f}}"
                                               "<extra></extra>"))
    right = max((x for x, y in points.values() if x is not None and y is not None), default=None)
    x_axis = dict(title="query latency p50 (ms)", rangemode="tozero")
    if right:
        x_axis["range"] = [0, right * 1.25]        # room for the rightmost name, centred on its point
    fig.update_layout(height=340, xaxis=x_axis, yaxis=dict(title=esc(metric), range=[0, 1.08]), showlegend=False,
                      **_LAYOUT)
    return fig


def point_labels(points: dict[str, tuple[float | None, float | None]], x_share: float = 0.25,
                 y_near: float = 0.06) -> dict[str, tuple[str, str]]:
    """(text, position) of each labelled point of the trade-off plot. A point joins the first group (in
    `points` order) whose first point is within `x_share` of the x axis (drawn from 0) and `y_near` on y: about
    a label's width and height. A lone point is named above it; a pair, one above and one below; a larger
    group once, above its first point, with how many more share the spot. Points without both coordinates get
    no label."""
    placed = {s: (x, y) for s, (x, y) in points.items() if x is not None and y is not None}
    span = max((x for x, _ in placed.values()), default=0.0) or 1.0
    groups: list[list[str]] = []
    for s, (x, y) in placed.items():
        for group in groups:
            gx, gy = placed[group[0]]
            if abs(x - gx) <= x_share * span and abs(y - gy) <= y_near:
                group.append(s)
                break
        else:
            groups.append([s])
    labels = {}
    for group in groups:
        if len(group) == 2:
            labels[group[0]], labels[group[1]] = (group[0], "top center"), (group[1], "bottom center")
        else:
            more = f" + {len(group) - 1} more" if len(group) > 2 else ""
            labels[group[0]] = (group[0] + more, "top center")
    return labels


def memory_figure(result: BenchResult, systems: list[str]) -> go.Figure:
    """Per system (a column each, wrapping after `MEMORY_COLUMNS`): nodes by kind and status, then edges by
    type, stacked per round. One colour per status or edge type across all systems. A system without a
    memory (the full-history ceiling) has no panel."""
    systems = [s for s in systems if result.keeps_memory(s)]
    cols = max(1, min(MEMORY_COLUMNS, len(systems)))
    blocks = max(1, math.ceil(len(systems) / cols))
    titles = []
    for b in range(blocks):
        chunk = systems[b * cols:(b + 1) * cols]
        titles += [f"{esc(s)} · nodes" for s in chunk] + [""] * (cols - len(chunk))
        titles += [f"{esc(s)} · edges" for s in chunk] + [""] * (cols - len(chunk))
    fig = make_subplots(rows=2 * blocks, cols=cols, subplot_titles=titles, vertical_spacing=0.2 / blocks,
                        horizontal_spacing=0.04)
    colors: dict[str, str] = {}

    def color(name: str) -> str:
        return colors.setdefault(name, STACK[len(colors) % len(STACK)])

    for i, s in enumerate(systems):
        row, col = 2 * (i // cols) + 1, i % cols + 1
        rows = _rounds(result, s)
        x = [r["round"] for r in rows]
        nodes = sorted({f"{kind} · {status}" for r in rows
                        for kind, statuses in ((r.get("memory") or {}).get("nodes") or {}).items() for status in statuses})
        for name in nodes:
            kind, status = name.split(" · ", 1)
            y = [(((r.get("memory") or {}).get("nodes") or {}).get(kind) or {}).get(status, 0) for r in rows]
            fig.add_trace(go.Bar(x=x, y=y, name=esc(name), legendgroup="n:" + name, marker_color=color("n:" + name),
                                 showlegend=_first(fig, "n:" + name),
                                 hovertemplate=f"{esc(s)} · {esc(name)}<br>round %{{x}}: %{{y}}<extra></extra>"),
                          row=row, col=col)
        edges = sorted({t for r in rows for t in ((r.get("memory") or {}).get("edges") or {})})
        if not edges:
            panel = fig.get_subplot(row + 1, col)            # placed on the page: the panel has no axis data
            fig.add_annotation(text="keeps no edges", showarrow=False, font=dict(color="gray"), xref="paper",
                               yref="paper", x=sum(panel.xaxis.domain) / 2, y=sum(panel.yaxis.domain) / 2)
        for t in edges:
            y = [((r.get("memory") or {}).get("edges") or {}).get(t, 0) for r in rows]
            fig.add_trace(go.Bar(x=x, y=y, name=esc(t), legendgroup="e:" + t, marker_color=color("e:" + t),
                                 showlegend=_first(fig, "e:" + t),
                                 hovertemplate=f"{esc(s)} · {esc(t)}<br>round %{{x}}: %{{y}}<extra></extra>"),
                          row=row + 1, col=col)
    fig.update_xaxes(dtick=1)
    fig.update_layout(barmode="stack", height=300 * blocks + 120, **_LAYOUT)
    fig.update_layout(legend=dict(orientation="h", y=-0.1 / blocks))
    return fig


COV_SHOWN = (1, 2, 4)             # the hop budgets whose Cov(H) the summary table shows


def answer_line(answer: dict) -> str:
    """What the answering model said, the keys it cited and the gold answer, as escaped markdown."""
    said = md_escape(answer.get("text") or "") or "*(no answer)*"
    if answer.get("error_code"):
        said += f" · failed: {md_code(answer['error_code'])}"
    cited = ", ".join(md_code(k) for k in answer.get("cited") or []) or "none"
    gold = md_escape(answer.get("gold") or "–")
    return f"**Answer** · {said}  \n**cites** {cited} · **gold answer** · {gold}"


def _first(fig: go.Figure, group: str) -> bool:
    """Whether no trace of `group` is in the figure yet: one legend entry per status or edge type."""
    return not any(t.legendgroup == group for t in fig.data)


# -- tables -----------------------------------------------------------------------------------------------
def summary_frame(result: BenchResult, systems: list[str]) -> pd.DataFrame:
    """Per system at the last round: every metric overall and on the cohort, latency p50s, the task time, and
    whose replay it was asked on (its own, or its host's for a retrieval-only ablation: then its seconds are
    its questions only)."""
    seconds: dict[str, float] = {}
    hosts: dict[str, str] = {}
    for t in result.tasks:
        seconds[t["system"]] = seconds.get(t["system"], 0.0) + float(t.get("seconds") or 0.0)
        if t.get("replayed_with"):
            hosts[t["system"]] = t["replayed_with"]
    rows = []
    for s in systems:
        summary = result.summary.get(s, {})
        row = {"system": s, "engine": result.data["systems"].get(s, {}).get("engine", s),
               "replay": f"{hosts[s]}'s" if s in hosts else "own"}     # a retrieval-only ablation rides its host's
        row |= {m: (summary.get("overall") or {}).get(m) for m in result.metrics}
        row |= {f"cohort {m}": (summary.get("cohort") or {}).get(m) for m in result.metrics[:2]}
        inserts = stage_p50(summary.get("latency_ms"), "insert")
        structure = summary.get("structure") or {}
        row["visible ratio"] = structure.get("visible_ratio")
        row |= {f"Cov({h})": (structure.get("cov") or {}).get(str(h)) for h in COV_SHOWN}
        row["insert p50 (ms)"] = inserts.get("total", sum(inserts.values())) if inserts else None
        row["query p50 (ms)"] = query_p50(summary.get("latency_ms"))
        cost = construction(result, s)
        row["build LLM calls / conv"] = cost["calls"] if cost else None
        row["build tokens / conv"] = cost["total"] if cost else None
        row["seconds"] = round(seconds.get(s, 0.0), 1)
        rows.append(row)
    return pd.DataFrame(rows)


def construction(result: BenchResult, system: str) -> dict | None:
    """A system's mean LLM calls and tokens per conversation of building memory; None when it builds none or
    the result predates the figure."""
    cost = result.summary.get(system, {}).get("construction")
    return cost.get("per_conversation") if isinstance(cost, dict) else None


def construction_frame(result: BenchResult, systems: list[str]) -> pd.DataFrame:
    """Per system: conversations, mean LLM calls, prompt, output and total tokens per conversation, calls per role."""
    rows = []
    for s in systems:
        cost = result.summary.get(s, {}).get("construction")
        if not isinstance(cost, dict):
            continue
        mean = cost["per_conversation"]
        rows.append({"system": s, "conversations": cost.get("conversations"), "LLM calls": mean.get("calls"),
                     "prompt tokens": mean.get("prompt"), "output tokens": mean.get("completion"),
                     "total tokens": mean.get("total"),
                     "calls per role": ", ".join(f"{role} {r.get('calls', 0):g}"
                                                 for role, r in (cost.get("by_role") or {}).items()) or "none"})
    return pd.DataFrame(rows, columns=["system", "conversations", "LLM calls", "prompt tokens", "output tokens",
                                       "total tokens", "calls per role"])


def construction_figure(result: BenchResult, systems: list[str]) -> go.Figure:
    """Prompt and output tokens of building one conversation's memory, per system and LLM role (stacked), with
    the calls in the hover."""
    fig = go.Figure()
    colors: dict[str, str] = {}
    for s in systems:
        cost = result.summary.get(s, {}).get("construction")
        if not isinstance(cost, dict):
            continue
        for role, r in (cost.get("by_role") or {}).items():
            color = colors.setdefault(role, STACK[len(colors) % len(STACK)])
            for part, opacity in (("prompt", 1.0), ("completion", 0.55)):
                group = f"{role} · {part}"
                fig.add_trace(go.Bar(x=[esc(s)], y=[r.get(part, 0)], name=esc(group), legendgroup=group,
                                     marker_color=color, opacity=opacity, showlegend=_first(fig, group),
                                     hovertemplate=f"{esc(s)} · {esc(role)}: %{{y:,.0f}} {part} tokens, "
                                                   f"{r.get('calls', 0):g} calls per conversation<extra></extra>"))
    # no title (the page's heading names the chart): the top margin holds the legend, a role's prompt and
    # completion an entry each, several rows of them
    fig.update_layout(barmode="stack", height=440, yaxis_title="tokens per conversation (by role)",
                      **{**SYSTEM_BARS, "margin": dict(l=10, r=10, t=140, b=10)})
    return fig


def boundaries_frame(result: BenchResult) -> pd.DataFrame:
    """QMSum: mean Pk, WindowDiff and ΔB per system over the meetings (fixed-50 too), lower is better."""
    frame = pd.DataFrame(result.boundaries)
    if frame.empty:
        return frame
    agg = frame.groupby("system", sort=False).agg(meetings=("meeting", "nunique"), pk=("pk", "mean"),
                                                  window_diff=("window_diff", "mean"), delta_b=("delta_b", "mean"))
    if "delta_b_rate" in frame:
        agg["delta_b_rate"] = frame.groupby("system", sort=False)["delta_b_rate"].mean()
    agg = agg.rename(columns={"pk": "Pk", "window_diff": "WindowDiff", "delta_b": "ΔB", "delta_b_rate": "ΔB rate"})
    return agg.reset_index().round(3)

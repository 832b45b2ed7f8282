"""A decision set's result drawn for the Benchmark page (engine.eval.decisions): per system the per-kind figures,
the confusion of labelled pairs against the decisions the engine made, and each missed or false decision with
what became of its pair and the scores that decided it. No Streamlit."""
from __future__ import annotations

from collections import Counter

import pandas as pd
import plotly.graph_objects as go

from engine.core.decision import DecisionKind
from engine.eval.decisions import DECIDED, FATES
from workbench.benchmark.result import BenchResult

NONE = "no decision"
FATE_HELP = {
    "applied": "a proposal of that kind covering the pair was applied and is in effect",
    "undone": "applied, then its run was undone",
    "gated": "proposed, and the gate held it back (confidence below θ)",
    "declined": "proposed, then dropped for another reason (duplicate, overlap, a person, a failed plan) or pending",
    "compared": "a deciding call had both turns before it and proposed nothing of that kind",
    "never compared": "no deciding call ever had both turns before it: not a candidate",
}
MISSED, FALSE, ALL = "missed", "false", "all"


def decision_systems(result: BenchResult) -> list[str]:
    return list(result.data.get("decisions") or {})


def kinds_frame(result: BenchResult, system: str) -> pd.DataFrame:
    """Each decision kind the system makes: gold pairs, correct and false decisions, precision, recall, F1 and
    the fates of the gold pairs."""
    table = result.data["decisions"][system]["table"]
    return pd.DataFrame([{"kind": kind, "gold": t["gold"], "correct": t["correct"], "false": t["false"],
                          "precision": t["precision"], "recall": t["recall"], "F1": t["f1"],
                          **{f: t["fates"].get(f, 0) for f in FATES}} for kind, t in table.items() if "f1" in t])


def negatives_frame(result: BenchResult, system: str) -> pd.DataFrame:
    """Each negative kind: its pairs, how many got a decision of any kind, and the share."""
    table = result.data["decisions"][system]["table"]
    return pd.DataFrame([{"negative kind": kind, "pairs": t["gold"], "given a decision": t["decided"],
                          "share": t["false_rate"]} for kind, t in table.items() if "false_rate" in t])


def reliability_figure(result: BenchResult, system: str) -> go.Figure:
    """Per decision kind: the share of the system's proposals that were right against their confidence, by
    confidence bin (the diagonal: confidences that read as probabilities)."""
    fig = go.Figure()
    fig.add_trace(go.Scatter(x=[0, 1], y=[0, 1], mode="lines", name="calibrated", line=dict(dash="dot",
                                                                                            color="#999999")))
    for kind, t in result.data["decisions"][system]["table"].items():
        bins = (t.get("reliability") or {}).get("bins") or []
        if bins:
            fig.add_trace(go.Scatter(x=[b["confidence"] for b in bins], y=[b["right"] for b in bins],
                                     mode="lines+markers", name=f"{kind} (ECE {t['reliability']['ece']:.2f})",
                                     customdata=[b["proposals"] for b in bins],
                                     hovertemplate="confidence %{x:.2f}<br>right %{y:.0%} of %{customdata} "
                                                   "proposals<extra></extra>"))
    fig.update_layout(height=340, margin=dict(l=40, r=10, t=30, b=40), xaxis=dict(range=[0, 1], title="confidence"),
                      yaxis=dict(range=[0, 1.02], title="share right", tickformat=".0%"),
                      legend=dict(orientation="h", y=1.12))
    return fig


def confusion_frame(result: BenchResult, system: str) -> pd.DataFrame:
    """Labelled pairs by their gold kind (rows) against the kinds of decision the system applied to them
    (columns; a pair with none counts under "no decision")."""
    verdicts = result.data["decisions"][system]["verdicts"]
    made = result.data["decisions"][system]["table"]
    kinds = [k for k in made if k in DecisionKind.POSITIVE]
    counts: dict[str, dict[str, int]] = {}
    for v in verdicts:
        applied = {e["kind"] for e in v["edits"] if e["outcome"] in DECIDED}
        row = counts.setdefault(v["kind"], {c: 0 for c in [*kinds, NONE]})
        for kind in applied or {NONE}:
            row[kind] = row.get(kind, 0) + 1
    order = [k for k in DecisionKind.ALL if k in counts]
    return pd.DataFrame([{"gold": k, **counts[k]} for k in order])


def wrong(v: dict, makes: set[str]) -> str:
    """"missed" (a positive of a kind the system makes, not decided), "false" (a decision the labels do not call
    for) or ""."""
    if v["kind"] in makes and not v["decided"]:
        return MISSED
    if any(e["outcome"] in DECIDED and e["kind"] != v["kind"] for e in v["edits"]):
        return FALSE
    return ""


def verdicts_frame(result: BenchResult, system: str, show: str = MISSED, kind: str = "") -> pd.DataFrame:
    """The labelled pairs to drill into: missed, false or all, of one gold kind or every kind."""
    rows = []
    makes = set(result.data["decisions"][system]["table"]) & set(DecisionKind.POSITIVE)
    for i, v in enumerate(result.data["decisions"][system]["verdicts"]):
        w = wrong(v, makes)
        if (show != ALL and w != show) or (kind and v["kind"] != kind):
            continue
        best = max((e for e in v["edits"]), key=lambda e: e["confidence"] or 0.0, default=None)
        rows.append({"#": i, "conversation": v["conversation"], "decision": v["id"], "gold": v["kind"],
                     "pair": " → ".join(dict.fromkeys([v.get("earlier") or v.get("turn"),
                                                       v.get("later") or v.get("turn")])),
                     "fate": v["fate"], "outcome": w or "right",
                     "best confidence": None if best is None else best["confidence"],
                     "θ": None if best is None else best["threshold"], "note": v.get("note", "")})
    return pd.DataFrame(rows)


def verdict(result: BenchResult, system: str, index: int) -> dict:
    return result.data["decisions"][system]["verdicts"][index]


def steps_frame(v: dict) -> pd.DataFrame:
    """What the system did with one labelled pair: every edit of any kind covering it (its outcome, confidence
    against θ, reason code and why), then the calls that compared the two turns without an edit."""
    rows = [{"step": f"{e['kind']} proposal" + (f" {e['proposal']}" if e.get("proposal") is not None else ""),
             "outcome": e["outcome"], "confidence": e["confidence"], "θ": e["threshold"],
             "reason code": e.get("reason_code") or "", "why": (e.get("note") or "") + (" · " if e.get("note") and
                                                                                       e.get("reason") else "")
             + (e.get("reason") or "")} for e in v["edits"]]
    calls = Counter((c["role"], c.get("backend") or "?", bool(c.get("ok"))) for c in v.get("compared_in", []))
    rows += [{"step": f"{role} call ({backend})" + (f" × {n}" if n > 1 else ""),
              "outcome": "compared" if ok else "call failed", "confidence": None, "θ": None, "reason code": "",
              "why": "both turns were in its input" + ("" if ok else "; the call failed")}
             for (role, backend, ok), n in calls.items()]
    return pd.DataFrame(rows)

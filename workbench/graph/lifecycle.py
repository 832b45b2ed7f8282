"""Lifecycle timelines and routing decisions, read from the op log (no Streamlit).

A node's lifecycle is the `node_created` record that gave it its first status,
then every `status_changed` record with its `cause` (MemLoom: `maturity` with
M, τ, n, H, V; `session_shift`; `task_completion`; `timeline_repair`; ...),
until the node is retracted. `lifecycle_lanes` folds those records into one
lane per node; `lifecycle_figure` draws the lanes as a plotly swimlane chart
(x = turn number, one row per node, segments coloured by status from the
schema's `StatusSpec.color`, a marker at each transition whose hover text is
the cause with its numbers).

Records of an online ingest carry the turn they ingested; records of an
offline run carry the turn it ran after, so run-made transitions are drawn
half a turn later (between that turn and the next).

The routing helpers read the `routing` payload an engine may put on its
`turn_ingested` record (MemLoom's HDRA: decision, τ_new, candidate events with
their scores, the chosen event). Nothing here names an engine: the statuses,
colours and labels come from the schema and the numbers from the log.
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from itertools import cycle

import pandas as pd
import plotly.graph_objects as go

from engine.core.oplog import OpKind, OpRecord
from engine.core.schema import EngineSchema
from engine.core.state import MemoryState
from workbench.chart_style import LEGEND_ABOVE
from workbench.text import MISSING

LIFECYCLE_KINDS = (OpKind.NODE_CREATED, OpKind.STATUS_CHANGED, OpKind.NODE_RETRACTED)
RUN_OFFSET = 0.5                     # an offline run happens after its turn's ingest, before the next turn
MAX_LANES = 40
LANE_PX = 20
FALLBACK_COLORS = ("#4e79a7", "#8c8c8c", "#f28e2b", "#59a14f", "#b07aa1", "#edc948", "#76b7b2", "#e15759")
CAUSE_LABELS = {"tau": "τ", "tau_new": "τ_new", "delta_days": "Δ days", "b_sw": "B_sw",
                "from_session": "from session", "to_session": "to session", "undo_of": "undo of"}
CANDIDATE_LABELS = {"event": "event", "cosine": "cosine", "delta_days": "Δ days", "b_sw": "B_sw",
                    "score": "score S_j"}
ATTR_LABELS = {"n": "n (evidence count)", "p": "p (participant distribution)", "V": "V (token mass)",
               "H": "H (participant entropy)", "M": "M (maturity)", "last_time": "last evidence time",
               "last_turn": "last evidence at turn", "published": "published by run"}


# -- causes ----------------------------------------------------------------------------------------
def _value(v) -> str:
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        v = 0.0 if v == 0 else v
        return f"{v:.3f}".rstrip("0").rstrip(".") if abs(v) < 1e6 else f"{v:.3g}"
    if isinstance(v, (list, tuple)):
        return ", ".join(f"u{x}" if isinstance(x, int) else _value(x) for x in v)
    if isinstance(v, dict):
        return ", ".join(f"{k} {_value(x)}" for k, x in v.items())
    return str(v)


def cause_text(cause: dict | None) -> str:
    """A transition's cause in one line: the rule, then its figures ("maturity · M 1.208 ≥ τ 1.2 · n 1 · …").

    A cause with both `M` and `tau` reads as the comparison that fired; every other field is `name value`.
    """
    cause = dict(cause or {})
    if not cause:
        return MISSING
    parts = []
    rule = cause.pop("rule", None)
    if rule:
        parts.append(str(rule).replace("_", " "))
    if "M" in cause and "tau" in cause:
        m, tau = cause.pop("M"), cause.pop("tau")
        parts.append(f"M {_value(m)} {'≥' if m >= tau else '<'} τ {_value(tau)}")
    parts += [f"{CAUSE_LABELS.get(k, k)} {_value(v)}" for k, v in cause.items()]
    return " · ".join(parts)


# -- lanes -------------------------------------------------------------------------------------------
@dataclass
class Transition:
    node: int
    x: float                     # turn number (online) or turn + RUN_OFFSET (a run after that turn)
    turn: int
    seq: int
    was: str
    status: str
    cause: dict
    actor: str
    run_id: str | None

    @property
    def who(self) -> str:
        if self.run_id:
            return f"{self.run_id} (after turn {self.turn})"
        return f"{self.actor} ingest of turn {self.turn}"


@dataclass
class Lane:
    """One node's statuses over turns: `segments` are (start x, end x, status), in order."""

    node: int
    kind: str
    created: float
    first_status: str
    transitions: list[Transition] = field(default_factory=list)
    ended: float | None = None              # retracted at this x (an undone run's node)

    def segments(self, now: float) -> list[tuple[float, float, str]]:
        out, start, status = [], self.created, self.first_status
        for t in self.transitions:
            out.append((start, t.x, status))
            start, status = t.x, t.status
        out.append((start, max(start, self.ended if self.ended is not None else now), status))
        return out

    def status_at(self, x: float) -> str:
        status = self.first_status
        for t in self.transitions:
            if t.x <= x:
                status = t.status
        return status


def _x(op: OpRecord) -> float:
    return op.turn + (RUN_OFFSET if op.run_id else 0.0)


def lifecycle_lanes(ops: Iterable[OpRecord], kinds: Iterable[str] | None = None) -> dict[int, Lane]:
    """One lane per node (of `kinds`, or every kind) from node_created / status_changed / node_retracted records,
    in log order. A node created again under a retracted id starts a new lane."""
    wanted = set(kinds) if kinds is not None else None
    lanes: dict[int, Lane] = {}
    for op in ops:
        p = op.payload
        if op.kind == OpKind.NODE_CREATED:
            node = p["node"]
            if wanted is None or node.get("kind") in wanted:
                lanes[node["id"]] = Lane(node["id"], node.get("kind", ""), _x(op), node.get("status", ""))
        elif op.kind == OpKind.STATUS_CHANGED and p.get("node") in lanes:
            lane = lanes[p["node"]]
            lane.transitions.append(Transition(p["node"], _x(op), op.turn, op.seq or 0, p.get("was", ""),
                                               p["status"], dict(p.get("cause") or {}), op.actor, op.run_id))
        elif op.kind == OpKind.NODE_RETRACTED and p.get("node") in lanes:
            lanes[p["node"]].ended = _x(op)
    return lanes


def kinds_with_transitions(lanes: dict[int, Lane]) -> list[str]:
    """Node kinds at least one of whose nodes changed status, most transitions per node first."""
    count: dict[str, list[int]] = {}
    for lane in lanes.values():
        c = count.setdefault(lane.kind, [0, 0])
        c[0] += len(lane.transitions)
        c[1] += 1
    return sorted((k for k, (n, _) in count.items() if n), key=lambda k: (-count[k][0] / count[k][1], k))


def default_kind(state: MemoryState, kinds: list[str]) -> str | None:
    """The kind a lifecycle timeline opens on: a group kind (nodes with members, e.g. events) if one changes
    status, else the kind with the most transitions per node."""
    grouped = {n.kind for n in state.nodes.values() if n.members}
    return next((k for k in kinds if k in grouped), kinds[0] if kinds else None)


@dataclass
class LaneSelection:
    lanes: list[Lane]
    matched: int

    @property
    def hidden(self) -> int:
        return self.matched - len(self.lanes)


def select_lanes(lanes: dict[int, Lane], ids: Iterable[int], max_lanes: int = MAX_LANES,
                 pinned: Iterable[int] = ()) -> LaneSelection:
    """The lanes of `ids` (the nodes the page's filters keep), oldest first; above `max_lanes` the most recently
    created are kept, plus any `pinned` node (the inspected one)."""
    chosen = [lanes[i] for i in dict.fromkeys(ids) if i in lanes]
    matched = len(chosen)
    if matched > max_lanes:
        must = {i for i in pinned if i in lanes and lanes[i] in chosen}
        rest = sorted((ln for ln in chosen if ln.node not in must), key=lambda ln: (ln.created, ln.node))
        keep = {ln.node for ln in rest[-max(0, max_lanes - len(must)):]} if max_lanes > len(must) else set()
        chosen = [ln for ln in chosen if ln.node in keep | must]
    return LaneSelection(sorted(chosen, key=lambda ln: (ln.created, ln.node)), matched)


def status_colors(schema: EngineSchema | None, statuses: Iterable[str]) -> dict[str, str]:
    """The schema's colour per status; statuses without one get a palette colour no declared status uses, so
    two statuses never share a colour (MemLoom's buffered records would otherwise be drawn as its closed events)."""
    declared = {s.name: s.color for s in schema.statuses if s.color} if schema is not None else {}
    spare = cycle([c for c in FALLBACK_COLORS if c not in declared.values()] or FALLBACK_COLORS)
    return {name: declared[name] if name in declared else next(spare) for name in statuses}


def _status_label(schema: EngineSchema | None, name: str) -> str:
    spec = schema.status(name) if schema is not None and name else None
    return spec.label if spec else (name or MISSING)


def lane_label(state: MemoryState, lane: Lane) -> str:
    node = state.nodes.get(lane.node)
    session = f" · s{node.session}" if node is not None and node.session else ""
    return f"u{lane.node}{session}"


def transitions_frame(lanes: Iterable[Lane], schema: EngineSchema | None = None) -> pd.DataFrame:
    """Every transition of the lanes as a table (turn order): node, from, to, when, by whom, cause."""
    rows = [{"node": f"u{t.node}", "turn": t.turn, "from": _status_label(schema, t.was),
             "to": _status_label(schema, t.status), "by": t.who, "rule": str(t.cause.get("rule", "")),
             "cause": cause_text(t.cause)}
            for lane in lanes for t in lane.transitions]
    frame = pd.DataFrame(rows, columns=["node", "turn", "from", "to", "by", "rule", "cause"])
    return frame.sort_values(["turn", "node"], kind="stable").reset_index(drop=True)


def lifecycle_figure(state: MemoryState, lanes: list[Lane], now: float, title: str = "") -> go.Figure:
    """A swimlane per lane: status segments over turns and a marker at every transition (hover: its cause)."""
    import html as _html

    schema = state.schema
    order = [s.name for s in schema.statuses] if schema is not None else []
    present = list(dict.fromkeys([*order, *(s for ln in lanes for _, _, s in ln.segments(now))]))
    colors = status_colors(schema, present)
    labels = [lane_label(state, ln) for ln in lanes]
    fig = go.Figure()
    for status in present:
        xs, bases, ys, hover = [], [], [], []
        for ln, label in zip(lanes, labels):
            node = state.nodes.get(ln.node)
            summary = _html.escape(node.summary[:90]) if node is not None else ""
            for start, end, s in ln.segments(now):
                if s != status:
                    continue
                xs.append(max(end - start, 0.0))
                bases.append(start)
                ys.append(label)
                hover.append(f"<b>u{ln.node}</b> {_html.escape(_status_label(schema, s))} from turn "
                             f"{start:g} to {end:g}<br>{summary}")
        if xs:
            fig.add_trace(go.Bar(x=xs, base=bases, y=ys, orientation="h", name=_status_label(schema, status),
                                 marker={"color": colors[status], "line": {"color": "#ffffff", "width": 0.5}},
                                 hovertext=hover, hoverinfo="text", legendgroup=status, width=0.7))
    mx, my, mcol, mhover = [], [], [], []
    for ln, label in zip(lanes, labels):
        for t in ln.transitions:
            mx.append(t.x)
            my.append(label)
            mcol.append(colors.get(t.status, "#333333"))
            mhover.append(f"<b>u{t.node}</b> {_html.escape(_status_label(schema, t.was))} → "
                          f"{_html.escape(_status_label(schema, t.status))}<br>{_html.escape(t.who)}<br>"
                          f"{_html.escape(cause_text(t.cause))}")
    if mx:
        fig.add_trace(go.Scatter(x=mx, y=my, mode="markers", name="transition (hover: cause)",
                                 marker={"symbol": "diamond", "size": 9, "color": mcol,
                                         "line": {"color": "#1a1a1a", "width": 1.2}},
                                 hovertext=mhover, hoverinfo="text"))
    fig.update_layout(
        barmode="overlay", title=title or None, height=110 + LANE_PX * max(1, len(lanes)),
        margin={"l": 10, "r": 10, "t": 40 if title else 10, "b": 40},
        legend={**LEGEND_ABOVE, "title": {"text": "status"}},
        xaxis={"title": {"text": "turn number"}, "rangemode": "tozero", "gridcolor": "#eeeeee"},
        yaxis={"title": None, "categoryorder": "array", "categoryarray": labels[::-1], "tickfont": {"size": 11}},
        plot_bgcolor="#ffffff")
    fig.add_vline(x=now, line={"color": "#999999", "dash": "dot", "width": 1})
    return fig


# -- routing -----------------------------------------------------------------------------------------
def routing_frame(routing: dict, state: MemoryState) -> pd.DataFrame:
    """The candidate events of one routing decision, best first: every figure the record holds, the score
    against τ_new and which one was chosen. Unknown candidate fields are shown under their own name."""
    tau = routing.get("tau_new")
    chosen = routing.get("chosen")
    rows = []
    for rank, c in enumerate(routing.get("candidates") or [], 1):
        eid = c.get("event")
        node = state.nodes.get(eid) if isinstance(eid, int) else None
        row = {"rank": rank, "event": f"u{eid}", "chosen": "◀ chosen" if eid == chosen else ""}
        score = c.get("score")
        if isinstance(score, (int, float)):
            row[CANDIDATE_LABELS["score"]] = score
            if isinstance(tau, (int, float)):
                row["vs τ_new"] = f"≥ {tau:g}" if score >= tau else f"< {tau:g}"
        for key, value in c.items():
            if key not in ("event", "score"):
                row[CANDIDATE_LABELS.get(key, key)] = value
        row["status now"] = "gone" if node is None else node.status
        row["summary"] = "" if node is None else node.summary
        rows.append(row)
    return pd.DataFrame(rows)


def routing_sentence(routing: dict) -> str:
    """The decision in words, from the figures rather than the decision's name: "CONTINUE: best score 0.424
    ≥ τ_new 0.30; the record joined u146 (score 0.424)" or "NEW_EVENT: …; a new event u12 was opened"."""
    decision = routing.get("decision", "?")
    tau = routing.get("tau_new")
    cands = routing.get("candidates") or []
    scores = [c.get("score") for c in cands if isinstance(c.get("score"), (int, float))]
    best = max(scores) if scores else None
    chosen = routing.get("chosen")
    tau_text = f"τ_new {tau:.2f}" if isinstance(tau, (int, float)) else "τ_new"
    if best is None:
        why = "no joinable candidate"
    elif isinstance(tau, (int, float)):
        why = f"best score {best:.3f} {'≥' if best >= tau else '<'} {tau_text}"
    else:
        why = f"best score {best:.3f}"
    joined = next((c for c in cands if c.get("event") == chosen), None)
    if chosen is None:
        what = "no event was chosen"
    elif joined is not None:
        score = joined.get("score")
        what = f"the record joined u{chosen}" + (f" (score {score:.3f})" if isinstance(score, (int, float)) else "")
    else:
        what = f"a new event u{chosen} was opened"
    return f"{decision}: {why}; {what}."


def joined_candidate(routing: dict) -> bool:
    """Did the record join one of the scored candidates (rather than open a new group)?"""
    return any(c.get("event") == routing.get("chosen") for c in routing.get("candidates") or [])


def routing_figure(routing: dict) -> go.Figure:
    """Candidate scores as horizontal bars with τ_new drawn as a vertical line; the chosen event highlighted."""
    cands = list(routing.get("candidates") or [])
    tau = routing.get("tau_new")
    chosen = routing.get("chosen")
    labels = [f"u{c.get('event')}" for c in cands]
    fig = go.Figure(go.Bar(
        x=[c.get("score", 0.0) for c in cands], y=labels, orientation="h",
        marker={"color": ["#e6a100" if c.get("event") == chosen else "#9db4d6" for c in cands]},
        text=[f"{c.get('score', 0.0):.3f}" for c in cands], textposition="outside",
        hovertext=[", ".join(f"{CANDIDATE_LABELS.get(k, k)} {_value(v)}" for k, v in c.items()) for c in cands],
        hoverinfo="text", name="score S_j"))
    if isinstance(tau, (int, float)):
        fig.add_vline(x=tau, line={"color": "#d62728", "dash": "dash", "width": 2},
                      annotation={"text": f"τ_new = {tau:g}", "font": {"color": "#d62728"}},
                      annotation_position="top")
    top = max([c.get("score", 0.0) for c in cands] + [tau if isinstance(tau, (int, float)) else 0.0, 0.1])
    title = ("routing score S_j (orange: the event the record joined)" if joined_candidate(routing)
             else f"routing score S_j (no candidate taken: the record opened u{chosen})")
    fig.update_layout(height=90 + 26 * max(1, len(cands)), margin={"l": 10, "r": 10, "t": 30, "b": 40},
                      xaxis={"title": {"text": title},
                             "range": [0, min(1.1, top * 1.35) if top <= 1 else top * 1.35]},
                      yaxis={"categoryorder": "array", "categoryarray": labels[::-1]}, showlegend=False,
                      plot_bgcolor="#ffffff")
    return fig


def attrs_frame(attrs: dict) -> pd.DataFrame:
    """A node's figures (MemLoom's event statistics) with labelled names; nested values in one line."""
    rows = [{"figure": ATTR_LABELS.get(k, k), "value": _value(v)} for k, v in attrs.items()]
    return pd.DataFrame(rows, columns=["figure", "value"])

"""Review-queue helpers for the Consolidation page.

In the spirit of a feedback review queue: one card per proposal with the
evidence a reviewer needs (targets and their text, confidence against the
gate threshold, reason, reason code) and an accept/reject choice that lives in
session state until the run is applied. Also the audit-log table and the
reason-code breakdown, which read the same proposals and op log.
"""
from __future__ import annotations

import html
from collections import Counter
from collections.abc import Iterable

import pandas as pd
import plotly.express as px
import streamlit as st

from engine.edge import EDGE_STYLE
from engine.oplog import OpKind, OpRecord
from engine.proposal import GateVerdict, Op, Proposal, ReasonCode, Status
from engine.state import MemoryState
from workbench.retrieval_view import ARCHIVED_MARK, VISIBLE_MARK, short

UNDECIDED, ACCEPT, REJECT = "Undecided", "Accept", "Reject"
CHOICES = (UNDECIDED, ACCEPT, REJECT)
NO_CODE = "(no code)"
OP_LABEL = {Op.SPLIT: "Split", Op.MERGE: "Merge", Op.UPDATE: "Update", "diagnosis": "Diagnosis"}
_DECISIONS_KEY = "review_decisions"


# -- decisions kept across reruns (pagination drops widget state, this dict survives) --------------
def decisions(run_key: str) -> dict[int, bool]:
    """The reviewer's accept (True) / reject (False) choices for one run; undecided ids are absent."""
    store = st.session_state.setdefault(_DECISIONS_KEY, {})
    return store.setdefault(run_key, {})


def run_key(db_name: str, run_id: str) -> str:
    """Decisions belong to one run of one database (a branch restarts run numbering from its fold)."""
    return f"{db_name}:{run_id}"


def widget_key(run_key: str, pid: int) -> str:
    return f"decide:{run_key}:{pid}"


def set_decisions(run_key: str, choices: dict[int, bool | None]) -> None:
    """Record choices (None = undecided) and drop the radios' own state so they redraw from the dict."""
    current = decisions(run_key)
    for pid, value in choices.items():
        if value is None:
            current.pop(pid, None)
        else:
            current[pid] = value
        st.session_state.pop(widget_key(run_key, pid), None)


def _radio_changed(run_key: str, pid: int) -> None:
    choice = st.session_state[widget_key(run_key, pid)]
    set_decisions(run_key, {pid: None if choice == UNDECIDED else choice == ACCEPT})


def choice_of(value: bool | None) -> str:
    return UNDECIDED if value is None else ACCEPT if value else REJECT


# -- the queue -----------------------------------------------------------------------------------
def sort_queue(proposals: Iterable[Proposal]) -> list[Proposal]:
    """Pending first, gate passes first, then most confident: the order a reviewer works in."""
    return sorted(proposals, key=lambda p: (p.status != Status.PENDING, p.gate != GateVerdict.PASS,
                                            -p.confidence, p.id))


def target_roles(p: Proposal) -> list[str]:
    if p.op == Op.UPDATE:
        return ["current (kept, descriptor refreshed)", "superseded (archived on apply)"][: len(p.targets)]
    if p.op == Op.MERGE:
        return ["source (archived behind the merged unit)"] * len(p.targets)
    if p.op == Op.SPLIT:
        return ["to split (archived behind its parts)"] * len(p.targets)
    return ["diagnosed target"] * len(p.targets)


def targets_label(p: Proposal) -> str:
    ids = [f"u{t}" for t in p.targets]
    return " → ".join(ids) if p.op == Op.UPDATE else ", ".join(ids)


def queue_frame(proposals: list[Proposal], chosen: dict[int, bool], gate_mode: bool) -> pd.DataFrame:
    """The compact overview table above the cards."""
    rows = []
    for p in proposals:
        if p.status != Status.PENDING:
            decision = "— (closed)"
        elif gate_mode:
            decision = f"gate: {ACCEPT if p.gate == GateVerdict.PASS else REJECT}"
        else:
            decision = choice_of(chosen.get(p.id))
        rows.append({"#": p.id, "operator": OP_LABEL.get(p.op, p.op), "targets": targets_label(p),
                     "confidence": round(p.confidence, 3), "gate": p.gate, "reason code": p.reason_code or "",
                     "status": p.status, "your decision": decision, "decided by": p.decided_by or ""})
    return pd.DataFrame(rows, columns=["#", "operator", "targets", "confidence", "gate", "reason code", "status",
                                       "your decision", "decided by"])


def unit_html(state: MemoryState, uid: int, role: str = "") -> str:
    """One target unit as an escaped HTML block; archived is marked by border style, icon and label."""
    unit = state.units.get(uid)
    if unit is None:
        return (f'<div style="border:1px dotted #999;border-radius:6px;padding:6px 10px;margin:4px 0">'
                f"<b>u{uid}</b> · {html.escape(role)} · <i>no longer in memory</i></div>")
    archived = not unit.visible
    border = "2px dashed #999" if archived else "2px solid #4c78a8"
    mark = ARCHIVED_MARK if archived else VISIBLE_MARK
    meta = " · ".join(x for x in (html.escape(role), mark, html.escape(unit.time), f"kind {html.escape(unit.kind)}",
                                  f"source {html.escape(', '.join(unit.source_ids)) or '—'}") if x)
    text = html.escape(unit.raw).replace("\n", "<br>")
    return (f'<div style="border:{border};border-radius:6px;padding:6px 10px;margin:4px 0;'
            f'{"opacity:.8;" if archived else ""}"><b>{unit.label}</b> '
            f'<span style="font-size:.85em;opacity:.75">{meta}</span><br>{text}</div>')


def text_html(label: str, text: str) -> str:
    """A labelled piece of model or conversation text, escaped."""
    body = html.escape(text).replace("\n", "<br>")
    return f'<div style="margin:2px 0"><span style="opacity:.7">{html.escape(label)}</span> {body}</div>'


def proposal_card(state: MemoryState, p: Proposal, run_key: str, theta: float | None, gate_mode: bool,
                  on_plan) -> None:
    """One review card: evidence on the left, the decision and plan button on the right."""
    chosen = decisions(run_key)
    with st.container(border=True):
        left, right = st.columns([4, 1])
        gate = "✓ pass" if p.gate == GateVerdict.PASS else "✗ fail"
        threshold = f" (gate θ {theta:.2f})" if theta is not None else ""
        left.markdown(f"**#{p.id} · {OP_LABEL.get(p.op, p.op)}** · confidence **{p.confidence:.2f}**{threshold}"
                      f" · gate **{gate}** · status `{p.status}`"
                      + (f" · decided by **{p.decided_by}**" if p.decided_by else ""))
        blocks = [unit_html(state, t, role) for t, role in zip(p.targets, target_roles(p))]
        blocks.append(text_html("Reason:", p.reason or "—"))
        if p.reason_code or p.note:
            blocks.append(text_html("Reason code:", f"{p.reason_code or '—'}" + (f" — {p.note}" if p.note else "")))
        if "coherence" in p.detail:
            blocks.append(text_html("Merge coherence (mean pairwise cosine):", f"{p.detail['coherence']:.3f}"))
        left.markdown("".join(blocks), unsafe_allow_html=True)
        with right:
            if p.status != Status.PENDING:
                st.caption(f"Closed: {p.status}")
            elif gate_mode:
                st.caption(f"The gate will **{'accept' if p.gate == GateVerdict.PASS else 'reject'}** this.")
            else:
                st.radio("Decision", CHOICES, index=CHOICES.index(choice_of(chosen.get(p.id))),
                         key=widget_key(run_key, p.id), on_change=_radio_changed, args=(run_key, p.id))
            if p.plan is None and p.status == Status.PENDING and p.op in Op.ORDER:
                st.button("Show plan", key=f"plan:{run_key}:{p.id}", on_click=on_plan, args=(p.id,),
                          help="Asks the LLM for the operator's plan now; apply executes exactly this plan.")
        if p.plan is not None:
            with st.expander(f"Plan for #{p.id}", expanded=p.status == Status.PENDING):
                plan_view(state, p)


def plan_view(state: MemoryState, p: Proposal) -> None:
    """What applying would write: split segments, merged descriptor, or refreshed descriptor + deprecations."""
    plan = p.plan or {}
    if p.op == Op.SPLIT:
        st.markdown(f"**Split?** {'yes' if plan.get('do_split') else 'no (plan declines)'}")
        if plan.get("split_rationale"):
            st.markdown(text_html("Rationale:", plan["split_rationale"]), unsafe_allow_html=True)
        st.dataframe(pd.DataFrame([{"segment": i + 1, "topic": s.get("topic_label", ""),
                                    "segment text (exact substring)": s["segment_text"],
                                    "summary": s["segment_summary"], "keywords": ", ".join(s["segment_keywords"])}
                                   for i, s in enumerate(plan.get("segments", []))]),
                     hide_index=True, width="stretch")
    elif p.op == Op.MERGE:
        st.markdown(text_html("Merged summary:", plan.get("summary", "")) +
                    text_html("Merged keywords:", ", ".join(plan.get("keywords", []))) +
                    "".join(text_html("Salient point:", s) for s in plan.get("salient_points", [])),
                    unsafe_allow_html=True)
    elif p.op == Op.UPDATE:
        current = state.units.get(p.targets[0])
        before, after = st.columns(2)
        if current is not None:
            before.markdown(text_html("Current summary:", current.summary) +
                            text_html("Current keywords:", ", ".join(current.keywords)), unsafe_allow_html=True)
        after.markdown(text_html("Refreshed summary:", plan.get("updated_summary", "")) +
                       text_html("Refreshed keywords:", ", ".join(plan.get("updated_keywords", []))),
                       unsafe_allow_html=True)
        deprecations = plan.get("deprecations") or ["none"]
        st.markdown("".join(text_html("Deprecates:", d) for d in deprecations) +
                    text_html("Alignment note:", plan.get("alignment_note", "")), unsafe_allow_html=True)


# -- run diff ------------------------------------------------------------------------------------
def units_frame(state: MemoryState, ids: Iterable[int]) -> pd.DataFrame:
    rows = [{"unit": f"u{u.id}", "state": VISIBLE_MARK if u.visible else ARCHIVED_MARK, "kind": u.kind,
             "time": u.time, "source ids": ", ".join(u.source_ids), "text": u.raw}
            for u in (state.units[i] for i in sorted(ids) if i in state.units)]
    return pd.DataFrame(rows, columns=["unit", "state", "kind", "time", "source ids", "text"])


def edges_frame(edges: Iterable) -> pd.DataFrame:
    """Edges given as Edge objects, dicts or (src, dst, type) keys."""
    rows = []
    for e in edges:
        src, dst, etype = edge_key(e)
        rows.append({"edge": f"u{src} —{etype}→ u{dst}", "type": EDGE_STYLE.get(etype, {}).get("label", etype)})
    return pd.DataFrame(rows, columns=["edge", "type"])


def edge_key(e) -> tuple[int, int, str]:
    if isinstance(e, dict):
        return e["src"], e["dst"], e["type"]
    if isinstance(e, (tuple, list)):
        return e[0], e[1], e[2]
    return e.src, e.dst, e.type


def rewired_frame(rewired: Iterable) -> pd.DataFrame:
    """Semantic edges moved off an archived unit: (src, old dst, new dst)."""
    rows = []
    for r in rewired:
        src, old, new = (r["src"], r["old_dst"], r["new_dst"]) if isinstance(r, dict) else r
        rows.append({"source": f"u{src}", "was → archived": f"u{old}", "now → representative": f"u{new}"})
    return pd.DataFrame(rows, columns=["source", "was → archived", "now → representative"])


def run_proposals_frame(state: MemoryState, run_id: str) -> pd.DataFrame:
    rows = [{"#": p.id, "operator": OP_LABEL.get(p.op, p.op), "targets": targets_label(p),
             "confidence": round(p.confidence, 3), "gate": p.gate, "status": p.status,
             "decided by": p.decided_by or "", "reason code": p.reason_code or "", "note": p.note}
            for p in sort_queue(p for p in state.proposals.values() if p.run_id == run_id)]
    return pd.DataFrame(rows, columns=["#", "operator", "targets", "confidence", "gate", "status", "decided by",
                                       "reason code", "note"])


# -- audit log -----------------------------------------------------------------------------------
def op_summary(op: OpRecord) -> str:
    """One line per record, enough to scan the log without opening the payload."""
    p = op.payload
    kind = op.kind
    if kind == OpKind.TURN_INGESTED:
        return f"turn {p['turn_id']} (session {p.get('session', '')})" + \
            ("" if p.get("descriptor_ok", True) else f" · descriptor failed: {p.get('descriptor_error')}")
    if kind == OpKind.UNIT_CREATED:
        u = p["unit"]
        return f"u{u['id']} {u['kind']} ← {', '.join(u['source_ids'])}: {short(u['raw'], 50)}"
    if kind == OpKind.UNIT_RETRACTED:
        return f"u{p['unit']} retracted"
    if kind == OpKind.DESCRIPTOR_CHANGED:
        return f"u{p['unit']} summary → {short(p['summary'], 50)}"
    if kind == OpKind.VISIBILITY_CHANGED:
        return f"u{p['unit']} {'archived → visible' if p['visible'] else 'visible → archived'}"
    if kind in (OpKind.EDGE_ADDED, OpKind.EDGE_REMOVED):
        e = p["edge"]
        return f"u{e['src']} —{e['type']}→ u{e['dst']}" + (f" (conf {e['confidence']:.2f})"
                                                          if e.get("confidence") is not None else "")
    if kind == OpKind.BUFFER_PUSHED:
        return f"u{p['unit']} buffered with {len(p['anchors'])} anchor(s)"
    if kind == OpKind.BUFFER_FLUSHED:
        return f"{len(p['units'])} buffered unit(s) flushed"
    if kind == OpKind.PROPOSAL_MADE:
        pr = p["proposal"]
        return (f"#{pr['id']} {pr['op']} [{', '.join(f'u{t}' for t in pr['targets'])}] conf {pr['confidence']:.2f}"
                f" · gate {pr['gate']}" + (f" · {pr['reason_code']}" if pr.get("reason_code") else ""))
    if kind == OpKind.PROPOSAL_UPDATED:
        changes = ", ".join(f"{k}={short(v, 30)}" if k != "plan" else "plan stored" for k, v in p["changes"].items())
        return f"#{p['id']}: {changes}"
    if kind == OpKind.RUN_STARTED:
        return f"{p.get('mode', '')} run over {len(p.get('buffer', []))} buffered unit(s)"
    if kind == OpKind.RUN_COMMITTED:
        s = p.get("summary", {})
        return (f"applied {s.get('applied', 0)}, rejected {s.get('rejected', 0)}, skipped {s.get('skipped', 0)}, "
                f"failed {s.get('failed', 0)} · decided by {p.get('decided_by', '')}")
    if kind == OpKind.RUN_UNDONE:
        return f"undid {p['undone_run']}"
    if kind == OpKind.LLM_CALL:
        return f"{p['role']} via {p['backend']}" + (f" · {p['error_code']}: {short(p.get('error') or '', 40)}"
                                                    if p.get("error_code") else "")
    return short(p)


def oplog_frame(ops: Iterable[OpRecord]) -> pd.DataFrame:
    """The op log as a table; LLM calls get their own columns (role, latency, tokens, error code)."""
    rows = []
    for op in ops:
        llm = op.payload if op.kind == OpKind.LLM_CALL else {}
        rows.append({"seq": op.seq, "kind": op.kind, "run": op.run_id or "", "actor": op.actor, "turn": op.turn,
                     "summary": op_summary(op), "LLM role": llm.get("role", ""),
                     "latency (ms)": round(llm["latency_ms"], 1) if llm else None,
                     "prompt tokens": llm.get("prompt_tokens"), "completion tokens": llm.get("completion_tokens"),
                     "error code": llm.get("error_code") or ""})
    return pd.DataFrame(rows, columns=["seq", "kind", "run", "actor", "turn", "summary", "LLM role", "latency (ms)",
                                       "prompt tokens", "completion tokens", "error code"])


def reason_breakdown(proposals: Iterable[Proposal]) -> pd.DataFrame:
    """Proposal counts per (reason code, operator); proposals without a code are counted as such."""
    counts = Counter((p.reason_code or NO_CODE, OP_LABEL.get(p.op, p.op)) for p in proposals)
    order = [*ReasonCode.ALL, NO_CODE]
    rows = [{"reason code": code, "operator": op, "proposals": n}
            for (code, op), n in sorted(counts.items(), key=lambda kv: (order.index(kv[0][0])
                                                                         if kv[0][0] in order else len(order), kv[0]))]
    return pd.DataFrame(rows, columns=["reason code", "operator", "proposals"])


def reason_chart(frame: pd.DataFrame):
    fig = px.bar(frame, x="reason code", y="proposals", color="operator", barmode="group", text="proposals",
                 labels={"proposals": "proposals (count)", "reason code": "reason code"},
                 title="Reason codes per operator, all proposals in the log")
    fig.update_layout(height=360, margin={"l": 10, "r": 10, "t": 50, "b": 10}, legend_title_text="operator")
    return fig

"""Review-queue helpers for the Consolidation page, for any engine's offline process.

In the spirit of a feedback review queue: one card per proposal with the
evidence a reviewer needs (targets and their text, confidence against the
gate threshold, reason, reason code) and an accept/reject choice that lives in
session state until the run is applied. Also the audit-log table and the
reason-code breakdown, which read the same proposals and op log.

Operator labels, target roles (and whether target order matters), the plan's
fields and how to show them, and the reason codes with their descriptions all
come from the engine's schema (`state.schema`); the gate θ a proposal was
judged against is in `proposal.detail["threshold"]`.
"""
from __future__ import annotations

import html
from collections import Counter
from collections.abc import Iterable

import pandas as pd
import plotly.express as px
import streamlit as st

from engine.core.oplog import OpKind, OpRecord
from engine.core.proposal import GateVerdict, Proposal, Status
from engine.core.schema import EngineSchema, OperatorSpec
from engine.core.state import MemoryState
from workbench.graph_view import edge_style, visibility_text
from workbench.retrieval_view import ARCHIVED_MARK, VISIBLE_MARK, short  # noqa: F401  (marks re-exported)
from workbench.text import MISSING, md_code, md_escape, missing

UNDECIDED, ACCEPT, REJECT = "Undecided", "Accept", "Reject"
CHOICES = (UNDECIDED, ACCEPT, REJECT)
NO_CODE = "(no code)"
_DECISIONS_KEY = "review_decisions"


# -- what the schema says about proposals ------------------------------------------------------
def operator(schema: EngineSchema | None, op: str) -> OperatorSpec | None:
    return schema.operator(op) if schema is not None else None


def op_label(schema: EngineSchema | None, op: str) -> str:
    """The operator's label ("Update"); a step that is not an operator (All-Mem's failed "diagnosis") capitalised."""
    spec = operator(schema, op)
    return spec.label if spec else op.replace("_", " ").capitalize()


def process_operators(schema: EngineSchema | None, process: str | None) -> list[OperatorSpec]:
    """The operators of one process, in the schema's order."""
    if schema is None:
        return []
    return [o for o in schema.operators if process is None or o.process == process]


def reason_description(schema: EngineSchema | None, code: str | None) -> str:
    spec = next((r for r in schema.reason_codes if r.code == code), None) if schema is not None and code else None
    return spec.description if spec else ""


def threshold(p: Proposal) -> float | None:
    """The gate θ this proposal was judged against, as the engine recorded it."""
    value = p.detail.get("threshold")
    return float(value) if isinstance(value, (int, float)) else None


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
    """Record choices (None = undecided): the bulk buttons and every card's radio write here, and the radios,
    the queue table and the Apply button all read from here (`decision_radio`)."""
    current = decisions(run_key)
    for pid, value in choices.items():
        if value is None:
            current.pop(pid, None)
        else:
            current[pid] = value


def _radio_changed(run_key: str, pid: int) -> None:
    choice = st.session_state[widget_key(run_key, pid)]
    set_decisions(run_key, {pid: None if choice == UNDECIDED else choice == ACCEPT})


def choice_of(value: bool | None) -> str:
    return UNDECIDED if value is None else ACCEPT if value else REJECT


def decision_radio(run_key: str, pid: int) -> None:
    """A card's Accept / Reject / Undecided radio, set from the stored decision on every run.

    The browser keeps a radio's own value across reruns, so a bulk button that only changed the stored
    decisions left the cards showing the old choice, and the next click sent that stale choice back. Writing
    the stored decision into the widget's state before drawing it makes the radio show what will be applied.
    """
    key = widget_key(run_key, pid)
    st.session_state[key] = choice_of(decisions(run_key).get(pid))
    st.radio("Decision", CHOICES, key=key, on_change=_radio_changed, args=(run_key, pid))


def tally(proposals: Iterable[Proposal], chosen: dict[int, bool]) -> tuple[int, int, int]:
    """(accepted, rejected, undecided) among the pending proposals: what Apply will do."""
    pending = [p for p in proposals if p.status == Status.PENDING]
    accepted = sum(chosen.get(p.id) is True for p in pending)
    rejected = sum(chosen.get(p.id) is False for p in pending)
    return accepted, rejected, len(pending) - accepted - rejected


def decided_counts(proposals: Iterable[Proposal]) -> dict[str, int]:
    """Proposals by status among those a decision reached (gate, reviewer or deferral), plus those still pending:
    the run summary of a run that is not committed yet."""
    proposals = list(proposals)
    counts = Counter(p.status for p in proposals if p.decided_by and p.status != Status.PENDING)
    return {**{s: counts.get(s, 0) for s in (Status.APPLIED, Status.REJECTED, Status.SKIPPED, Status.FAILED)},
            Status.PENDING: sum(p.status == Status.PENDING for p in proposals)}


# -- the queue -----------------------------------------------------------------------------------
def sort_queue(proposals: Iterable[Proposal]) -> list[Proposal]:
    """Pending first, gate passes first, then most confident: the order a reviewer works in."""
    return sorted(proposals, key=lambda p: (p.status != Status.PENDING, p.gate != GateVerdict.PASS,
                                            -p.confidence, p.id))


def target_roles(schema: EngineSchema | None, p: Proposal) -> list[str]:
    """What each target is to the operator ("current (kept, …)", "superseded (archived on apply)")."""
    spec = operator(schema, p.op)
    return [spec.role(i) if spec else "diagnosed target" for i in range(len(p.targets))]


def targets_label(schema: EngineSchema | None, p: Proposal) -> str:
    """`u7 → u3` when target order matters to the operator, `u3, u7` when it does not."""
    spec = operator(schema, p.op)
    ids = [f"u{t}" for t in p.targets]
    return " → ".join(ids) if spec is not None and spec.ordered_targets else ", ".join(ids)


def queue_frame(schema: EngineSchema | None, proposals: list[Proposal], chosen: dict[int, bool],
                gate_mode: bool) -> pd.DataFrame:
    """The compact overview table above the cards."""
    rows = []
    for p in proposals:
        if p.status != Status.PENDING:
            decision = f"{MISSING} (closed)"
        elif gate_mode:
            decision = f"gate: {ACCEPT if p.gate == GateVerdict.PASS else REJECT}"
        else:
            decision = choice_of(chosen.get(p.id))
        rows.append({"#": p.id, "operator": op_label(schema, p.op), "targets": targets_label(schema, p),
                     "detail": detail_text(p),
                     "confidence": round(p.confidence, 3), "gate θ": threshold(p), "gate": p.gate,
                     "reason code": p.reason_code or "",
                     "status": p.status, "your decision": decision, "decided by": p.decided_by or ""})
    return pd.DataFrame(rows, columns=["#", "operator", "targets", "detail", "confidence", "gate θ", "gate",
                                       "reason code", "status", "your decision", "decided by"])


MEMBERS_SHOWN = 4          # records of a group node shown on a card when the plan cites none of them


def _as_node_id(value) -> int | None:
    text = str(value).strip()
    text = text[1:] if text[:1] in ("u", "U") else text
    return int(text) if text.isdigit() else None


def cited_nodes(state: MemoryState, p: Proposal) -> list[int]:
    """Nodes a proposal's plan cites: the items of its list plan fields when every item names a node in memory
    (MemLoom's relation `evidence`: sentence ids as strings). Keywords and other words never qualify."""
    spec = operator(state.schema, p.op)
    plan = p.plan or {}
    out: list[int] = []
    for f in (spec.plan_fields if spec else ()):
        items = plan.get(f.name)
        if f.shape != "list" or not isinstance(items, (list, tuple)) or not items:
            continue
        ids = [_as_node_id(v) for v in items]
        if all(i is not None and i in state.units for i in ids):
            out += [i for i in ids if i not in out]
    return out


def _member_html(state: MemoryState, mid: int, cited: bool) -> str:
    e = html.escape
    m = state.units.get(mid)
    if m is None:
        return (f'<div style="margin:2px 0 2px 8px;padding-left:6px;border-left:3px solid #ccc">u{mid} · '
                f'<i>gone</i></div>')
    mark = " · <b>★ cited</b>" if cited else ""
    meta = " · ".join(x for x in (e(", ".join(m.source_ids)), e(visibility_text(m))) if x)
    return (f'<div style="margin:3px 0 3px 8px;padding-left:6px;border-left:3px solid '
            f'{"#e6a100" if cited else "#cccccc"}"><b>{e(m.label)}</b> <span style="font-size:.85em;opacity:.75">'
            f'{meta}</span>{mark}<br>{e(m.raw or m.summary).replace(chr(10), "<br>")}</div>')


def unit_html(state: MemoryState, uid: int, role: str = "", cited: Iterable[int] = ()) -> str:
    """One target node as an escaped HTML block; off the surface is marked by border style, icon and status.

    A group node (one with `members`, e.g. a MemLoom event) shows its summary and its records' raw text: the
    ones in `cited` (the plan's evidence) first and marked, else the first few.
    """
    unit = state.units.get(uid)
    if unit is None:
        return (f'<div style="border:1px dotted #999;border-radius:6px;padding:6px 10px;margin:4px 0">'
                f"<b>u{uid}</b> · {html.escape(role)} · <i>no longer in memory</i></div>")
    archived = not unit.visible
    border = "2px dashed #999" if archived else "2px solid #4c78a8"
    mark = html.escape(visibility_text(unit))
    kind = state.schema.kind(unit.kind) if state.schema is not None else None
    meta = " · ".join(x for x in (html.escape(role), mark, html.escape(unit.time),
                                  f"kind {html.escape(kind.label if kind else unit.kind)}",
                                  f"source {html.escape(missing(sources_text(unit.source_ids)))}") if x)
    text = html.escape(unit.raw or unit.summary).replace("\n", "<br>")
    members = ""
    if unit.members:
        cited_here = [m for m in unit.members if m in set(cited)]
        shown = cited_here or unit.members[:MEMBERS_SHOWN]
        more = len(unit.members) - len(shown)
        what = "cited" if cited_here else "first"
        members = (f'<div style="font-size:.85em;opacity:.75;margin-top:4px">{len(unit.members)} record(s); '
                   f'{len(shown)} {what} shown{f", {more} more" if more > 0 else ""}</div>'
                   + "".join(_member_html(state, m, m in cited_here) for m in shown))
    return (f'<div style="border:{border};border-radius:6px;padding:6px 10px;margin:4px 0;'
            f'{"opacity:.8;" if archived else ""}"><b>{unit.label}</b> '
            f'<span style="font-size:.85em;opacity:.75">{meta}</span><br>{text}{members}</div>')


def detail_labels(p: Proposal) -> list[str]:
    """The proposal's text details (a relation's type): what the queue can be filtered by."""
    return [v for k, v in p.detail.items() if k != "threshold" and isinstance(v, str) and v]


def sources_text(ids: list[str], limit: int = 6) -> str:
    """Source ids, shortened for a long group: "D1:1, D1:2, … D1:14 (14)"."""
    if len(ids) <= limit:
        return ", ".join(ids)
    return f"{', '.join(ids[:limit - 2])}, … {ids[-1]} ({len(ids)})"


def detail_text(p: Proposal) -> str:
    """The proposal's own details besides the gate θ, in one line ("CAUSAL_FOLLOW", "cosine 0.820")."""
    parts = []
    for key, value in p.detail.items():
        if key == "threshold" or isinstance(value, bool):
            continue
        if isinstance(value, str):
            parts.append(value)
        elif isinstance(value, (int, float)):
            parts.append(f"{key.replace('_', ' ')} {value:.3f}")
    return " · ".join(parts)


def text_html(label: str, text: str) -> str:
    """A labelled piece of model or conversation text, escaped."""
    body = html.escape(text).replace("\n", "<br>")
    return f'<div style="margin:2px 0"><span style="opacity:.7">{html.escape(label)}</span> {body}</div>'


def proposal_card(state: MemoryState, p: Proposal, run_key: str, gate_mode: bool, on_plan) -> None:
    """One review card: evidence on the left, the decision and plan button on the right."""
    schema = state.schema
    with st.container(border=True):
        left, right = st.columns([4, 1])
        gate = "✓ pass" if p.gate == GateVerdict.PASS else "✗ fail"
        theta = threshold(p)
        judged = f" (gate θ {theta:.2f})" if theta is not None else ""
        kinds = " ".join(md_code(v) for v in p.detail.values() if isinstance(v, str))
        left.markdown(f"**#{p.id} · {md_escape(op_label(schema, p.op))}**{f' {kinds}' if kinds else ''} · "
                      f"confidence **{p.confidence:.2f}**{judged} · gate **{gate}** · status {md_code(p.status)}"
                      + (f" · decided by **{md_escape(p.decided_by)}**" if p.decided_by else ""))
        spec = operator(schema, p.op)
        cited = cited_nodes(state, p)
        blocks = []
        if spec is not None and spec.ordered_targets and len(p.targets) > 1:
            blocks.append(text_html("Targets in order:", " → ".join(f"u{t} ({r})" for t, r in
                                                                    zip(p.targets, target_roles(schema, p)))))
        blocks += [unit_html(state, t, role, cited) for t, role in zip(p.targets, target_roles(schema, p))]
        inside = {m for t in p.targets if t in state.units for m in state.units[t].members}
        stray = [c for c in cited if c not in inside and c not in p.targets]
        if stray:
            blocks.append(text_html("Cited, in neither target:", "")
                          + "".join(_member_html(state, c, True) for c in stray))
        blocks.append(text_html("Reason:", missing(p.reason)))
        if p.reason_code:
            described = reason_description(schema, p.reason_code)
            blocks.append(text_html("Reason code:", p.reason_code + (f" ({described})" if described else "")))
        if p.note:
            blocks.append(text_html("Note:", p.note))
        for key, value in sorted(p.detail.items()):
            if key != "threshold" and isinstance(value, (int, float)) and not isinstance(value, bool):
                blocks.append(text_html(f"{key.replace('_', ' ').capitalize()}:", f"{value:.3f}"))
        left.markdown("".join(blocks), unsafe_allow_html=True)
        with right:
            if p.status != Status.PENDING:
                st.caption(f"Closed: {p.status}")
            elif gate_mode:
                st.caption(f"The gate will **{'accept' if p.gate == GateVerdict.PASS else 'reject'}** this.")
            else:
                decision_radio(run_key, p.id)
            if p.plan is None and p.status == Status.PENDING and spec is not None:
                st.button("Show plan", key=f"plan:{run_key}:{p.id}", on_click=on_plan, args=(p.id,),
                          help="Asks the LLM for the operator's plan now; apply executes exactly this plan.")
        if p.plan is not None:
            with st.expander(f"Plan for #{p.id}", expanded=p.status == Status.PENDING):
                plan_view(state, p)


def _plain(value) -> str:
    if value is None:
        return MISSING
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (list, tuple)):
        return ", ".join(_plain(v) for v in value)
    return str(value)


def plan_blocks(schema: EngineSchema | None, p: Proposal) -> tuple[str, list[tuple[str, pd.DataFrame]]]:
    """A plan as escaped HTML (text and list fields, then any field the schema does not declare) and tables
    (segments fields), in the order the operator's `plan_fields` declare them."""
    plan = p.plan or {}
    spec = operator(schema, p.op)
    fields = spec.plan_fields if spec else ()
    html_parts: list[str] = []
    tables: list[tuple[str, pd.DataFrame]] = []
    for f in fields:
        value = plan.get(f.name)
        if f.shape == "segments":
            items = value or []
            columns = [label for _, label in f.item_fields] or sorted({k for it in items for k in it})
            names = [name for name, _ in f.item_fields] or columns
            rows = [{"#": i + 1, **{label: _plain(item.get(name, "")) for name, label in zip(names, columns)}}
                    for i, item in enumerate(items) if isinstance(item, dict)]
            tables.append((f.label, pd.DataFrame(rows, columns=["#", *columns])))
        elif f.shape == "list":
            items = [str(v) for v in (value or [])]
            if not items:
                html_parts.append(text_html(f"{f.label}:", "none"))
            elif all(len(v) <= 40 for v in items):
                html_parts.append(text_html(f"{f.label}:", ", ".join(items)))
            else:
                html_parts += [text_html(f"{f.label}:", v) for v in items]
        else:
            html_parts.append(text_html(f"{f.label}:", _plain(value)))
    declared = {f.name for f in fields}
    for key, value in plan.items():
        if key not in declared:
            html_parts.append(text_html(f"{key.replace('_', ' ')}:", _plain(value)))
    return "".join(html_parts), tables


def plan_view(state: MemoryState, p: Proposal) -> None:
    """What applying would write, drawn from the operator's plan fields; the first target's current
    descriptor beside it when the plan rewrites one."""
    schema = state.schema
    body, tables = plan_blocks(schema, p)
    current = state.units.get(p.targets[0]) if p.targets else None
    spec = operator(schema, p.op)
    rewrites = (spec is not None and spec.ordered_targets and current is not None
                and any("summary" in f.name for f in spec.plan_fields))      # a relation rewrites no descriptor
    if rewrites:
        before, after = st.columns(2)
        before.markdown(text_html(f"Current summary of u{current.id}:", current.summary) +
                        text_html("Current keywords:", ", ".join(current.keywords)), unsafe_allow_html=True)
        after.markdown(body, unsafe_allow_html=True)
    elif body:
        st.markdown(body, unsafe_allow_html=True)
    for label, frame in tables:
        st.markdown(f"**{label}**")
        st.dataframe(frame, hide_index=True, width="stretch")


# -- run diff ------------------------------------------------------------------------------------
def units_frame(state: MemoryState, ids: Iterable[int]) -> pd.DataFrame:
    rows = [{"unit": f"u{u.id}", "state": visibility_text(u), "kind": u.kind,
             "time": u.time, "source ids": ", ".join(u.source_ids), "text": u.raw}
            for u in (state.units[i] for i in sorted(ids) if i in state.units)]
    return pd.DataFrame(rows, columns=["unit", "state", "kind", "time", "source ids", "text"])


def edges_frame(edges: Iterable, schema: EngineSchema | None = None, state: MemoryState | None = None
                ) -> pd.DataFrame:
    """Edges given as Edge objects, dicts or (src, dst, type) keys; with `state`, also each edge's confidence and
    the records it cites (a synthesised relation's evidence) as that state holds them."""
    rows = []
    for e in edges:
        src, dst, etype = edge_key(e)
        row = {"edge": f"u{src} —{etype}→ u{dst}", "type": edge_style(etype, schema)["label"]}
        if state is not None:
            stored = state.edges.get((src, dst, etype))
            row["confidence"] = None if stored is None or stored.confidence is None else round(stored.confidence, 3)
            row["cites"] = ", ".join(f"u{c}" for c in (getattr(stored, "evidence", None) or []))
        rows.append(row)
    return pd.DataFrame(rows, columns=["edge", "type", *(["confidence", "cites"] if state is not None else [])])


def edge_key(e) -> tuple[int, int, str]:
    if isinstance(e, dict):
        return e["src"], e["dst"], e["type"]
    if isinstance(e, (tuple, list)):
        return e[0], e[1], e[2]
    return e.src, e.dst, e.type


def rewired_frame(rewired: Iterable) -> pd.DataFrame:
    """Edges moved off a node that left the surface onto its representative: (src, old dst, new dst)."""
    rows = []
    for r in rewired:
        src, old, new = (r["src"], r["old_dst"], r["new_dst"]) if isinstance(r, dict) else r
        rows.append({"source": f"u{src}", "was → archived": f"u{old}", "now → representative": f"u{new}"})
    return pd.DataFrame(rows, columns=["source", "was → archived", "now → representative"])


def run_proposals_frame(state: MemoryState, run_id: str) -> pd.DataFrame:
    schema = state.schema
    rows = [{"#": p.id, "operator": op_label(schema, p.op), "targets": targets_label(schema, p),
             "confidence": round(p.confidence, 3), "gate": p.gate, "status": p.status,
             "decided by": p.decided_by or "", "reason code": p.reason_code or "", "note": p.note}
            for p in sort_queue(p for p in state.proposals.values() if p.run_id == run_id)]
    return pd.DataFrame(rows, columns=["#", "operator", "targets", "confidence", "gate", "status", "decided by",
                                       "reason code", "note"])


# -- audit log -----------------------------------------------------------------------------------
def _node_ref(p: dict) -> str:
    node = p.get("node")
    return f"u{node['id'] if isinstance(node, dict) else node}"


def _edge_text(e: dict) -> str:
    conf = e.get("confidence")
    return f"u{e['src']} —{e['type']}→ u{e['dst']}" + (f" (conf {conf:.2f})" if conf is not None else "")


def _entries(p: dict) -> str:
    ids = [f"u{u}" for u, _ in p.get("entries", [])]
    return ", ".join(ids[:6]) + (f" +{len(ids) - 6}" if len(ids) > 6 else "")


def _turn_ingested(p: dict) -> str:
    return f"turn {p['turn_id']} (session {p.get('session', '')})" + \
        ("" if p.get("descriptor_ok", True) else f" · descriptor failed: {p.get('descriptor_error')}")


def _node_created(p: dict) -> str:
    u = p["node"]
    status = f" [{u['status']}]" if u.get("status") else ""
    sources = ", ".join(u.get("source_ids", []))
    return f"u{u['id']} {u.get('kind', '')}{status} ← {sources}: {short(u.get('raw', ''), 50)}"


def _status_changed(p: dict) -> str:
    cause = p.get("cause") or {}
    why = f" (undo of #{cause['undo_of']})" if cause.get("undo_of") else \
        (f" ({', '.join(f'{k} {short(v, 20)}' for k, v in cause.items())})" if cause else "")
    return f"{_node_ref(p)} {p.get('was') or MISSING} → {p['status']}{why}"


def _proposal_made(p: dict) -> str:
    pr = p["proposal"]
    return (f"#{pr['id']} {pr['op']} [{', '.join(f'u{t}' for t in pr['targets'])}] conf {pr['confidence']:.2f}"
            f" · gate {pr['gate']}" + (f" · {pr['reason_code']}" if pr.get("reason_code") else ""))


def _proposal_updated(p: dict) -> str:
    changes = ", ".join(f"{k}={short(v, 30)}" if k != "plan" else "plan stored" for k, v in p["changes"].items())
    return f"#{p['id']}: {changes}"


def _run_started(p: dict) -> str:
    process = f"{p['process']} " if p.get("process") else ""
    return f"{p.get('mode', '')} {process}run over {len(p.get('buffer', []))} buffered node(s)"


def _run_committed(p: dict) -> str:
    s = p.get("summary", {})
    return (f"applied {s.get('applied', 0)}, rejected {s.get('rejected', 0)}, skipped {s.get('skipped', 0)}, "
            f"failed {s.get('failed', 0)} · decided by {p.get('decided_by', '')}")


def _llm_call(p: dict) -> str:
    return f"{p.get('role', '?')} via {p.get('backend', '?')}" + \
        (f" · {p['error_code']}: {short(p.get('error') or '', 40)}" if p.get("error_code") else "")


def _engine_state_set(p: dict) -> str:
    if "value" not in p:
        return f"{p['key']} removed"
    was = f" (was {short(p['prev'], 20)})" if "prev" in p else ""
    return f"{p['key']} = {short(p['value'], 40)}{was}"


OP_SUMMARIES = {
    OpKind.TURN_INGESTED: _turn_ingested,
    OpKind.NODE_CREATED: _node_created,
    OpKind.NODE_RETRACTED: lambda p: f"{_node_ref(p)} retracted",
    OpKind.NODE_UPDATED: lambda p: f"{_node_ref(p)} " + ", ".join(f"{k} → {short(v, 30)}"
                                                                  for k, v in p.get("changes", {}).items()),
    OpKind.DESCRIPTOR_CHANGED: lambda p: f"{_node_ref(p)} summary → {short(p['summary'], 50)}",
    OpKind.STATUS_CHANGED: _status_changed,
    OpKind.EDGE_ADDED: lambda p: _edge_text(p["edge"]),
    OpKind.EDGE_REMOVED: lambda p: _edge_text(p.get("edge") or p) + " removed",
    OpKind.BUFFER_PUSHED: lambda p: f"{p['buffer']} ← {_entries(p)}"
                                    + (f" with {len(p['entries'][0][1])} anchor(s)" if len(p["entries"]) == 1 else ""),
    OpKind.BUFFER_FLUSHED: lambda p: f"{len(p['entries'])} node(s) flushed from {p['buffer']}: {_entries(p)}",
    OpKind.ENGINE_STATE_SET: _engine_state_set,
    OpKind.PROPOSAL_MADE: _proposal_made,
    OpKind.PROPOSAL_UPDATED: _proposal_updated,
    OpKind.RUN_STARTED: _run_started,
    OpKind.RUN_COMMITTED: _run_committed,
    OpKind.RUN_UNDONE: lambda p: f"undid {p['undone_run']}",
    OpKind.RUN_DISCARDED: lambda p: "run discarded: nothing applied, its buffered work put back",
    OpKind.LLM_CALL: _llm_call,
    OpKind.NOTE: lambda p: short(p.get("text") or p.get("note") or p, 80),
}


def op_summary(op: OpRecord) -> str:
    """One line per record, enough to scan the log without opening the payload (every OpKind has one)."""
    describe = OP_SUMMARIES.get(op.kind)
    if describe is None:
        return short(op.payload)
    try:
        return describe(op.payload)
    except (KeyError, TypeError, IndexError, ValueError):      # an odd payload still gets a line
        return short(op.payload)


LLM_COLUMNS = ("LLM role", "latency (ms)", "prompt tokens", "completion tokens", "error code")


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


def reason_breakdown(proposals: Iterable[Proposal], schema: EngineSchema | None = None) -> pd.DataFrame:
    """Proposal counts per (reason code, operator), codes in the schema's order; no code is counted as such."""
    counts = Counter((p.reason_code or NO_CODE, op_label(schema, p.op)) for p in proposals)
    order = [*(r.code for r in (schema.reason_codes if schema is not None else ())), NO_CODE]
    rows = [{"reason code": code, "operator": op, "proposals": n,
             "meaning": reason_description(schema, code) or ("no drop or skip" if code == NO_CODE else "")}
            for (code, op), n in sorted(counts.items(), key=lambda kv: (order.index(kv[0][0])
                                                                         if kv[0][0] in order else len(order), kv[0]))]
    return pd.DataFrame(rows, columns=["reason code", "operator", "proposals", "meaning"])


def reason_codes_frame(schema: EngineSchema | None) -> pd.DataFrame:
    """The engine's reason codes and what each means."""
    rows = [{"reason code": r.code, "meaning": r.description} for r in (schema.reason_codes if schema else ())]
    return pd.DataFrame(rows, columns=["reason code", "meaning"])


def reason_chart(frame: pd.DataFrame):
    fig = px.bar(frame, x="reason code", y="proposals", color="operator", barmode="group", text="proposals",
                 hover_data=["meaning"] if "meaning" in frame.columns else None,
                 category_orders={"reason code": list(dict.fromkeys(frame["reason code"]))},
                 labels={"proposals": "proposals (count)", "reason code": "reason code"},
                 title="Reason codes per operator, all proposals in the log")
    fig.update_layout(height=360, margin={"l": 10, "r": 10, "t": 50, "b": 10}, legend_title_text="operator")
    return fig

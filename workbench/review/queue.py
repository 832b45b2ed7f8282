"""The review queue of the Consolidation page, for any engine's offline process.

In the spirit of a feedback review queue: one card per proposal with the evidence a reviewer needs (targets
and their text, the records a plan cites, confidence against the gate threshold, reason, reason code), an
accept/reject choice (`workbench.review.decisions`) and the plan that applying would execute. The plan's fields and how
to show them come from the operator's `plan_fields` in the engine's schema; how a proposal is named comes
from `workbench.review.proposal_text`.
"""
from __future__ import annotations

import html
from collections.abc import Iterable
from functools import partial

import pandas as pd
import streamlit as st

from engine.core.access import Action
from engine.core.node import node_label
from engine.core.proposal import GateVerdict, Proposal, ProposalCounts, Status
from engine.core.schema import EngineSchema
from engine.core.state import MemoryState
from workbench import access
from workbench.graph.style import kind_field, visibility_text
from workbench.model import Workbench
from workbench.review import actions
from workbench.review.decisions import (
    ACCEPT,
    REJECT,
    choice_of,
    decision_radio,
    decisions,
    set_decisions,
    tally,
)
from workbench.review.decisions import (
    run_key as decisions_key,
)
from workbench.review.proposal_text import (
    counts_text,
    detail_labels,
    detail_text,
    is_structural,
    op_label,
    operator,
    process_operators,
    reason_description,
    sources_text,
    target_roles,
    targets_label,
    threshold,
)
from workbench.text import MISSING, confidence_text, md_code, md_escape, missing, table, text_html

PAGE_SIZE = 10
GATE_MODE, MANUAL_MODE = "Let the gate decide", "I decide each proposal"


def sort_queue(proposals: Iterable[Proposal]) -> list[Proposal]:
    """Pending first, gate passes first, then most confident: the order a reviewer works in."""
    return sorted(proposals, key=lambda p: (p.status != Status.PENDING, p.gate != GateVerdict.PASS,
                                            -p.confidence, p.id))


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
                     "confidence": confidence_text(p.confidence), "gate θ": confidence_text(threshold(p)),
                     "gate": p.gate,
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
        if f.shape not in ("list", "ids") or not isinstance(items, (list, tuple)) or not items:
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
    meta = " · ".join(x for x in (html.escape(role), mark, html.escape(unit.time),
                                  f"kind {html.escape(kind_field(state.schema, unit.kind))}",
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


def detail_tables(p: Proposal) -> list[tuple[str, pd.DataFrame]]:
    """The proposal's tabular details (a list of records, e.g. RecMem's cluster with each unit's cosine), each as
    a table under its key."""
    out = []
    for key, value in p.detail.items():
        if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
            out.append((key, pd.DataFrame([{k: _plain(v) if isinstance(v, (list, tuple, bool)) or v is None else v
                                            for k, v in row.items()} for row in value])))
    return out


def proposal_card(state: MemoryState, p: Proposal, run_key: str, gate_mode: bool, on_plan) -> None:
    """One review card: evidence on the left, the decision and plan button on the right."""
    schema = state.schema
    with st.container(border=True):
        left, right = st.columns([4, 1])
        gate = "✓ pass" if p.gate == GateVerdict.PASS else "✗ fail"
        theta = threshold(p)
        judged = f" (gate θ {confidence_text(theta)})" if theta is not None else ""
        kinds = " ".join(md_code(v) for v in p.detail.values() if isinstance(v, str))
        left.markdown(f"**#{p.id} · {md_escape(op_label(schema, p.op))}**{f' {kinds}' if kinds else ''} · "
                      f"confidence **{confidence_text(p.confidence)}**{judged} · gate **{gate}** · status {md_code(p.status)}"
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
        for key, frame in detail_tables(p):
            left.markdown(f"**{md_escape(key.replace('_', ' ').capitalize())}** (the proposal's inputs)")
            left.dataframe(table(frame), hide_index=True, width="stretch")
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
        elif f.shape in ("list", "ids"):
            items = [str(v) for v in (value or [])]
            if f.shape == "ids":
                items = [node_label(i) if (i := _as_node_id(v)) is not None else v for v in items]
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


def structural_decision(schema: EngineSchema, structural: list[Proposal], run_key: str, chosen: dict[int, bool],
                        reviewer: bool, gate_mode: bool) -> bool:
    """The pending structural links (TEMPORAL_NEXT between consecutive events) as one decision, so the cards are
    the consequential proposals; returns whether the reviewer asked to see them one by one instead."""
    if not structural:
        return False
    types = sorted({p.detail.get("type") for p in structural})
    accepted = sum(chosen.get(p.id) is True for p in structural)
    rejected = sum(chosen.get(p.id) is False for p in structural)
    with st.container(border=True):
        st.markdown(f"**{len(structural)} structural link(s)** ({md_escape(', '.join(types))}): each follows from "
                    f"the timeline alone (\"{md_escape(structural[0].reason)}\"), so they are decided together. "
                    + (f"Chosen: {accepted} accept, {rejected} reject." if accepted + rejected else "Undecided."))
        if not gate_mode:
            c1, c2, c3 = st.columns([1, 1, 2])
            c1.button(f"Accept all {len(structural)}", key="structural_accept", on_click=set_decisions,
                      args=(run_key, {p.id: True for p in structural}), disabled=not reviewer)
            c2.button(f"Reject all {len(structural)}", key="structural_reject", on_click=set_decisions,
                      args=(run_key, {p.id: False for p in structural}), disabled=not reviewer)
            return c3.checkbox("Show them one by one", key="queue_structural")
    return False


def review_queue(wb: Workbench, state: MemoryState, open_run: str | None) -> None:
    """The open run's proposals: who decides, filters, bulk decisions, the queue table, a page of cards and the
    Apply button."""
    schema = state.schema
    if open_run is None:
        labels = " / ".join(p.label for p in schema.processes) if schema else ""
        st.info(f"No open run. Press **Run diagnosis · {md_escape(labels)}** to fill the review queue from the "
                "buffer" + ("; past runs are below, read-only." if state.runs else "."))
        return
    run_key = decisions_key(wb.db_path.name, open_run)
    proposals = [p for p in state.proposals.values() if p.run_id == open_run]
    pending = [p for p in proposals if p.status == Status.PENDING]
    counts = ProposalCounts.of(proposals)
    st.caption(f"**{open_run}**: {counts.total} proposals: {counts_text(counts)}"
               + ("; tick *Show closed proposals* to list the closed ones" if counts.total > counts.pending else "")
               + ".")
    reviewer = access.can(Action.REVIEW)
    gate_mode = st.radio("Who decides", [MANUAL_MODE, GATE_MODE], horizontal=True, key="decision_mode",
                         help="The gate accepts a proposal iff its confidence reaches the gate θ of its operator "
                              "(and any other check the engine makes, such as All-Mem's merge coherence)."
                         ) == GATE_MODE
    chosen = decisions(run_key)

    labels = sorted({v for p in proposals for v in detail_labels(p)})
    row = st.container(horizontal=True, vertical_alignment="bottom")     # filters that wrap when narrow
    cols = [row.container(width=220) for _ in range(3 if labels else 2)] + [row.container(width="content")]
    f1, f2, f3 = cols[0], cols[1], cols[-1]
    ops = f1.multiselect("Operator", sorted({op_label(schema, p.op) for p in proposals}), key="queue_ops",
                         placeholder="all operators")
    gates = f2.multiselect("Gate verdict", [GateVerdict.PASS, GateVerdict.FAIL], key="queue_gates",
                           placeholder="pass and fail")
    kinds = cols[2].multiselect("Type", labels, key="queue_types", placeholder="all types",
                           help="The proposal's own kind, e.g. a relation's type.") if labels else []
    show_closed = f3.checkbox("Show closed proposals", key="queue_closed",
                              help="Proposals routing already closed: duplicates, overlaps, filtered or disabled ones.")
    structural = [p for p in pending if is_structural(schema, p)]
    one_by_one = structural_decision(schema, structural, run_key, chosen, reviewer, gate_mode)
    shown = sort_queue(p for p in proposals
                          if (show_closed or p.status == Status.PENDING)
                          and (one_by_one or p not in structural)
                          and (not ops or op_label(schema, p.op) in ops) and (not gates or p.gate in gates)
                          and (not kinds or set(detail_labels(p)) & set(kinds)))
    shown_pending = [p for p in shown if p.status == Status.PENDING]
    if not gate_mode:
        bulk = st.container(horizontal=True)                  # each button as wide as its label
        b1, b2, b3 = bulk, bulk, bulk
        b1.button("Accept gate passes, reject the rest (shown)", on_click=set_decisions, disabled=not reviewer,
                  args=(run_key, {p.id: p.gate == GateVerdict.PASS for p in shown_pending}))
        b2.button("Reject all shown", on_click=set_decisions, args=(run_key, {p.id: False for p in shown_pending}),
                  disabled=not reviewer)
        b3.button("Clear all decisions", on_click=set_decisions, args=(run_key, {p.id: None for p in pending}),
                  disabled=not reviewer)
    st.dataframe(table(queue_frame(schema, shown, chosen, gate_mode)), hide_index=True, width="stretch",
                 height=min(35 * (len(shown) + 1) + 3, 300))

    pages = max(1, -(-len(shown) // PAGE_SIZE))
    page = st.selectbox(f"Cards page ({PAGE_SIZE} per page)", range(1, pages + 1), key="queue_page",
                        format_func=lambda n: f"{n} of {pages}") if pages > 1 else 1
    for p in shown[(page - 1) * PAGE_SIZE: page * PAGE_SIZE]:
        proposal_card(state, p, run_key, gate_mode, partial(actions.show_plan, wb))

    run = state.runs.get(open_run)
    order = " → ".join(o.label for o in process_operators(schema, run.process if run else None))
    in_order = f", operators in the order {order}" if order else ""
    if gate_mode:
        passes = sum(p.gate == GateVerdict.PASS for p in pending)
        st.button(f"Apply gate verdicts ({passes} accept, {len(pending) - passes} reject)", type="primary",
                  key="apply_run", on_click=actions.apply_decisions, args=(wb, run_key, True),
                  disabled=not reviewer)
        st.caption(f"Accepted proposals are executed in one transaction{in_order}; each decision is stored as "
                   f"made by the **gate**, and the run is committed as applied by **{md_escape(access.who())}**.")
        return
    accepted, rejected, undecided = tally(pending, chosen)
    hidden = sum(p.id in chosen for p in pending) - sum(p.id in chosen for p in shown_pending)
    with st.container(horizontal=True):
        st.button(f"Apply decisions ({accepted} accept, {rejected} reject"
                  + (f"; {undecided} undecided stay pending)" if undecided else ")"), type="primary",
                  key="apply_run", on_click=actions.apply_decisions, args=(wb, run_key, False),
                  disabled=not accepted + rejected or not reviewer)
        if undecided:
            st.button(f"{'Apply and defer' if accepted + rejected else 'Defer'} the {undecided} undecided",
                      key="apply_defer", on_click=actions.apply_decisions, args=(wb, run_key, False, True),
                      disabled=not reviewer, help="Closes the run: every undecided proposal is closed as skipped, never executed, with a "
                           "note saying who deferred it.")
    st.caption(f"Accepted proposals are executed in one transaction{in_order}; each decision is stored with who "
               f"made it (**{md_escape(access.who())}**, as signed in). Undecided proposals stay "
               "pending: the run stays open (the replay cannot ingest further) until each is decided, or deferred."
               + (f" The counts include {hidden} decision(s) on proposals the filters hide." if hidden else ""))

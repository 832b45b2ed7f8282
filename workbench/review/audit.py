"""The audit log and the reason-code breakdown: the op log and every proposal, read for a person.

One line per op record (`OP_SUMMARIES` has one describer per `OpKind`, and an odd payload still gets a
line), LLM calls with their role, latency, tokens and error code in columns of their own, and the reason
codes counted per operator in the schema's order.
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

import pandas as pd
import plotly.express as px
import streamlit as st

from engine.core.oplog import OpKind, OpRecord
from engine.core.proposal import Proposal
from engine.core.schema import EngineSchema
from workbench.retrieval_view import short
from workbench.review.proposal_text import op_label, reason_description
from workbench.text import MISSING, confidence_text, table

NO_CODE = "(no code)"


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
    return (f"#{pr['id']} {pr['op']} [{', '.join(f'u{t}' for t in pr['targets'])}] conf {confidence_text(pr['confidence'])}"
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


def audit_log(view, state) -> None:
    """The op log as a filterable table (a row's full payload on selection) and, for an engine with an offline
    process, the reason codes per operator."""
    frame = oplog_frame(view.store.ops(upto_seq=state.seq))
    if not (frame["kind"] == "llm_call").any():          # an engine without LLM calls: no LLM columns
        frame = frame.drop(columns=list(LLM_COLUMNS))
    a1, a2, a3, a4 = st.columns(4)
    kinds = a1.multiselect("Kind", sorted(frame["kind"].unique()), key="audit_kinds", placeholder="all kinds")
    runs = a2.multiselect("Run", sorted(r for r in frame["run"].unique() if r), key="audit_runs",
                          placeholder="all runs and online writes")
    actors = a3.multiselect("Actor", sorted(frame["actor"].unique()), key="audit_actors", placeholder="all actors")
    needle = a4.text_input("Summary contains", key="audit_search")
    rows = frame
    for column, picked in (("kind", kinds), ("run", runs), ("actor", actors)):
        if picked:
            rows = rows[rows[column].isin(picked)]
    if needle:
        rows = rows[rows["summary"].str.contains(needle, case=False, regex=False)]
    rows = rows.sort_values("seq", ascending=False)
    st.caption(f"{len(rows)} of {len(frame)} records, newest first. Select a row to see its full payload.")
    event = st.dataframe(table(rows), hide_index=True, width="stretch", height=360, on_select="rerun",
                         selection_mode="single-row", key="audit_table")
    if event and event.selection.rows:
        seq = int(rows.iloc[event.selection.rows[0]]["seq"])
        st.json(next(view.store.ops(seq=seq)).to_dict(), expanded=1)
    if not state.schema.processes:
        return
    if state.proposals:
        st.plotly_chart(reason_chart(reason_breakdown(state.proposals.values(), state.schema)),
                        width="stretch")
    else:
        st.caption("No proposals yet: the reason-code breakdown appears after the first diagnosis.")
    codes = reason_codes_frame(state.schema)
    if not codes.empty:
        with st.expander(f"The {state.schema.label} reason codes"):
            st.dataframe(table(codes), hide_index=True, width="stretch")

"""Consolidation page: a run's decisions beside another backend's on the very same inputs.

Side A is what the session recorded (the real model's replies, say); side B is asked again: the offline
rules, or another recording (a session database or JSONL of calls). Every decision either side made on an
input is one row, marked made by both, only A or only B, with the raw output of each side behind it
(`engine.llm.decisions`).
"""
from __future__ import annotations

import json

import pandas as pd
import streamlit as st

from engine.eval.llm_costs import OFFLINE, calls_by_run, reference_llm
from engine.llm.decisions import compare, decision_rows
from workbench.text import md_code, md_escape, table

_KEY = "consolidation_compare"


def _pretty(raw: str) -> str:
    try:
        return json.dumps(json.loads(raw), indent=1, ensure_ascii=False)
    except (TypeError, ValueError):
        return raw


def _run_label(state, run_id: str | None, count: int) -> str:
    if run_id is None:
        return f"ingest (online calls, {count})"
    run = state.runs.get(run_id)
    return f"{run_id} ({run.process or '-'}, turn {run.turn}, {count} calls)" if run else f"{run_id} ({count} calls)"


def compare_panel(wb) -> None:
    """Pick a run and a second backend; compare; show the decisions and the raw outputs."""
    state = wb.view.state
    by_run = calls_by_run(wb.engine.store)
    if not by_run:
        st.caption("This session has logged no LLM call yet.")
        return
    runs = list(by_run)
    if f"{_KEY}_run" not in st.session_state or st.session_state[f"{_KEY}_run"] not in runs:
        st.session_state[f"{_KEY}_run"] = runs[-1]             # the latest run: what was just diagnosed
    c1, c2 = st.columns([3, 3])
    run_id = c1.selectbox("Calls of", runs, key=f"{_KEY}_run",
                          format_func=lambda r: _run_label(state, r, len(by_run[r])))
    kind = c2.radio("Compare with", ["The offline rules", "Another recording"], horizontal=True, key=f"{_KEY}_kind")
    source = OFFLINE
    if kind == "Another recording":
        source = st.text_input("Session database or JSONL file of recorded calls", key=f"{_KEY}_source",
                               placeholder="/path/to/session.sqlite or calls.jsonl").strip()
    calls = by_run[run_id]
    models = sorted({str(c.get("model")) for c in calls})
    name_a = "A (this session)"
    name_b = "B (offline)" if source == OFFLINE else "B (recording)"
    st.caption(f"A: this session's replies ({md_escape(', '.join(models))}). B: the same inputs asked of "
               f"{'the offline rules' if source == OFFLINE else md_code(source or '…')}.")
    if not source:
        return
    token = (str(wb.db_path), run_id, source)
    if st.button("Compare", key=f"{_KEY}_go", icon=":material/compare_arrows:"):
        try:
            with st.spinner("Asking the second backend the same inputs…"):
                comparisons = compare(calls, reference_llm(source, wb.engine.embedder))
        except (OSError, ValueError) as exc:
            st.error(f"Could not compare with {md_code(source)}: {md_escape(exc)}", icon=":material/error:")
            return
        st.session_state[_KEY] = (token, comparisons)
    saved = st.session_state.get(_KEY)
    if not saved or saved[0] != token:
        return
    comparisons = saved[1]
    rows = decision_rows(comparisons, "A", "B")
    if not rows:
        st.caption("No deciding call in these calls (descriptors and plans only write text).")
        return
    frame = pd.DataFrame(rows)
    made = frame["made by"].value_counts()
    m = st.columns(4)
    m[0].metric("Inputs compared", len({r["input"] for r in rows}))
    m[1].metric("Decisions made by both", int(made.get("both", 0)))
    m[2].metric(f"Only {name_a}", int(made.get("only A", 0)))
    m[3].metric(f"Only {name_b}", int(made.get("only B", 0)))
    shown = st.multiselect("Show", ["both", "only A", "only B"], default=["only A", "only B"], key=f"{_KEY}_show")
    visible = frame[frame["made by"].isin(shown)]
    st.dataframe(table(visible[["input", "role", "on", "decision", "made by"]]), hide_index=True, width="stretch")
    inputs = sorted(set(visible["input"]))
    if not inputs:
        return
    pick = st.selectbox("Raw outputs of input", inputs, key=f"{_KEY}_input",
                        format_func=lambda i: f"#{i} · {comparisons[i].role} on {rows_on(rows, i)}")
    c = comparisons[pick]
    left, right = st.columns(2)
    for col, side, call in ((left, name_a, c.a), (right, name_b, c.b)):
        with col:
            st.markdown(f"**{md_escape(side)}** · {md_escape(call.backend)} {md_escape(call.model)}"
                        + (f" · {md_escape(call.error_code)}" if call.error_code else ""))
            st.code(_pretty(call.response) if call.response is not None else (call.error or ""), language="json")


def rows_on(rows: list[dict], n: int) -> str:
    return next((r["on"] for r in rows if r["input"] == n), "")

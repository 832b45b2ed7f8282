"""What a session's LLM calls cost, per role, and how often another backend decides otherwise.

The arithmetic lives in `engine.eval.metrics` (`llm_cost_tally`, `llm_cost_summary`); the comparison in
`engine.llm.decisions`. This module joins them for one session (`memwb llm costs`, the Replay page) and
writes the table `memwb llm costs` and `memwb bench` print.
"""
from __future__ import annotations

from typing import Any

from engine.eval.metrics import llm_calls, llm_cost_summary, llm_cost_tally
from engine.llm.base import LLM

OFFLINE = "offline"
MODEL_NOTE = ("a 135M model proves the path and the costs, not the papers' quality: its decisions are not a "
              "measure of what a capable model would decide")


def offline_llm(embedder: Any) -> LLM:
    """The deterministic offline backend, the reference every other backend's decisions are compared with."""
    from engine.llm import make_backend

    return LLM(make_backend("offline", embedder=embedder))


def costs_of_calls(calls: list, compare_with: LLM | None = None) -> dict[str, dict]:
    """Per-role summary of `calls`; with `compare_with`, each deciding call is asked again of that backend."""
    return costs_and_decisions(calls, compare_with)[0]


def costs_and_decisions(calls: list, compare_with: LLM | None = None) -> tuple[dict[str, dict], dict[str, int]]:
    """Per-role summary of `calls`, and with `compare_with` how the decisions on the same inputs split:
    {"inputs", "both", "only_this", "only_other", "failed_this", "failed_other", "other_where_this_failed"}."""
    if compare_with is None:
        return llm_cost_summary(llm_cost_tally(calls)), {}
    from engine.llm.decisions import compare, differ_by_key

    comparisons = compare(calls, compare_with)
    return llm_cost_summary(llm_cost_tally(calls, differ_by_key(comparisons))), decision_counts(comparisons)


def decision_counts(comparisons: list) -> dict[str, int]:
    """Decisions on the same inputs: made by both backends, only by this one, only by the other; the inputs on
    which either call failed (those count no difference), and what the other decided where this one failed."""
    out = {"inputs": len(comparisons), "both": 0, "only_this": 0, "only_other": 0, "failed_this": 0,
           "failed_other": 0, "other_where_this_failed": 0}
    for c in comparisons:
        out["failed_this"] += not c.a.ok
        out["failed_other"] += not c.b.ok
        if not c.a.ok and c.b.ok:
            out["other_where_this_failed"] += len(c.decisions_b)
        if not (c.a.ok and c.b.ok):
            continue
        a, b = c.decisions_a, c.decisions_b
        out["both"] += len(a & b)
        out["only_this"] += len(a - b)
        out["only_other"] += len(b - a)
    return out


def session_costs(engine: Any, compare: str | None = None) -> dict[str, dict]:
    """Per-role costs of every call a session logged; `compare="offline"` adds the differs-from-offline rate."""
    return session_costs_and_decisions(engine, compare)[0]


def session_costs_and_decisions(engine: Any, compare: str | None = None) -> tuple[dict[str, dict], dict[str, int]]:
    if compare not in (None, OFFLINE):
        raise ValueError(f"can compare with the offline backend only, not {compare!r}")
    other = offline_llm(engine.embedder) if compare == OFFLINE else None
    return costs_and_decisions(llm_calls(engine.store), other)


def decisions_line(counts: dict[str, int], this: str = "this session", other: str = "the offline rules") -> str:
    """The split of decisions as one sentence (`memwb llm costs --compare`)."""
    if not counts:
        return ""
    return (f"decisions on the same {counts['inputs']} inputs: {counts['both']} made by both, {counts['only_this']} "
            f"only by {this}, {counts['only_other']} only by {other}; calls failed: {counts['failed_this']} of "
            f"{this}, {counts['failed_other']} of {other}; where {this} failed, {other} made "
            f"{counts['other_where_this_failed']} decisions")


def _ms(value: float | None) -> str:
    return "–" if value is None else f"{value:,.0f}"


def _rate(value: float | None) -> str:
    return "–" if value is None else f"{value:.0%}"


def models_text(models: dict[str, int] | None) -> str:
    """The models that answered a role's calls: one name, or each with its count; "–" for costs summarised
    before models were counted."""
    if not models:
        return "–"
    return next(iter(models)) if len(models) == 1 else ", ".join(f"{k}={v}" for k, v in models.items())


def cost_rows(costs: dict[str, dict]) -> list[dict]:
    """One flat row per role (and a total), the columns every view of the costs shows."""
    rows = []
    for role, c in costs.items():
        rows.append({"role": role, "calls": c["calls"], "prompt tokens": c["prompt"],
                     "completion tokens": c["completion"], "p50 ms": c["latency_ms"]["p50"],
                     "p95 ms": c["latency_ms"]["p95"], "schema-valid": c["valid_rate"],
                     "differs from offline": c["differ_rate"], "compared": c["compared"],
                     "errors": ", ".join(f"{k}={v}" for k, v in c["errors"].items()),
                     "structured": ", ".join(f"{k}={v}" for k, v in c["structured"].items()),
                     "model": models_text(c.get("models"))})
    return rows


def cost_table(costs: dict[str, dict], title: str = "") -> str:
    """A Markdown table of `costs` (per role)."""
    if not costs:
        return f"{title}no LLM calls".strip()
    head = ("| role | calls | prompt tok | completion tok | p50 ms | p95 ms | schema-valid | differs from offline "
            "| errors | structured | model |")
    lines = [title] if title else []
    lines += [head, "|" + "---|" * 11]
    for r in cost_rows(costs):
        differ = "–" if r["differs from offline"] is None else \
            f"{_rate(r['differs from offline'])} of {r['compared']}"
        lines.append(f"| {r['role']} | {r['calls']} | {r['prompt tokens']:,} | {r['completion tokens']:,} | "
                     f"{_ms(r['p50 ms'])} | {_ms(r['p95 ms'])} | {_rate(r['schema-valid'])} | {differ} | "
                     f"{r['errors'] or '–'} | {r['structured']} | {r['model']} |")
    return "\n".join(lines)


def reference_llm(source: str, embedder: Any) -> LLM:
    """The backend a session's calls are compared with: the offline rules (`"offline"`), or the replies of
    another recording (a session database or a JSONL file of calls), which answers only the prompts it
    holds (a missing one is a NOT_RECORDED call, shown as such)."""
    if source == OFFLINE:
        return offline_llm(embedder)
    from engine.llm.recorded import RecordedBackend, load_calls_jsonl

    if str(source).endswith(".jsonl"):
        calls = load_calls_jsonl(source)
    else:
        from engine.store.log_store import Store

        calls = llm_calls(Store(source))
    return LLM(RecordedBackend(calls, strict=False))


def calls_by_run(store: Any) -> dict[str | None, list[dict]]:
    """A session's logged calls grouped by the run they were made in, in log order; the key None holds those
    made while ingesting (in no run)."""
    from engine.core.oplog import OpKind

    out: dict[str | None, list[dict]] = {}
    for op in store.ops(kinds=[OpKind.LLM_CALL]):
        out.setdefault(op.run_id, []).append(op.payload)
    return out

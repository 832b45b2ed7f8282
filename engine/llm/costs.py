"""What a session's LLM calls cost, per role, and how often another backend decides otherwise.

The arithmetic lives in `engine.metrics` (`llm_cost_tally`, `llm_cost_summary`); the comparison in
`engine.llm.decisions`. This module joins them for one session (`memwb llm costs`, the Replay page) and
writes the table `memwb llm costs` and `memwb bench` print.
"""
from __future__ import annotations

from typing import Any

from engine.llm.base import LLM
from engine.metrics import llm_calls, llm_cost_summary, llm_cost_tally

MODEL_NOTE = ("a 135M model proves the path and the costs, not the papers' quality: its decisions are not a "
              "measure of what a capable model would decide")


def offline_llm(embedder: Any) -> LLM:
    """The deterministic offline backend, the reference every other backend's decisions are compared with."""
    from engine.llm import make_backend

    return LLM(make_backend("offline", embedder=embedder))


def costs_of_calls(calls: list, compare_with: LLM | None = None) -> dict[str, dict]:
    """Per-role summary of `calls`; with `compare_with`, each deciding call is asked again of that backend."""
    differ = None
    if compare_with is not None:
        from engine.llm.decisions import compare, differ_by_key

        differ = differ_by_key(compare(calls, compare_with))
    return llm_cost_summary(llm_cost_tally(calls, differ))


def session_costs(engine: Any, compare: str | None = None) -> dict[str, dict]:
    """Per-role costs of every call a session logged; `compare="offline"` adds the differs-from-offline rate."""
    calls = llm_calls(engine.store)
    other = offline_llm(engine.embedder) if compare == "offline" else None
    if compare not in (None, "offline"):
        raise ValueError(f"can compare with the offline backend only, not {compare!r}")
    return costs_of_calls(calls, other)


def _ms(value: float | None) -> str:
    return "–" if value is None else f"{value:,.0f}"


def _rate(value: float | None) -> str:
    return "–" if value is None else f"{value:.0%}"


def cost_rows(costs: dict[str, dict]) -> list[dict]:
    """One flat row per role (and a total), the columns every view of the costs shows."""
    rows = []
    for role, c in costs.items():
        rows.append({"role": role, "calls": c["calls"], "prompt tokens": c["prompt"],
                     "completion tokens": c["completion"], "p50 ms": c["latency_ms"]["p50"],
                     "p95 ms": c["latency_ms"]["p95"], "schema-valid": c["valid_rate"],
                     "differs from offline": c["differ_rate"], "compared": c["compared"],
                     "errors": ", ".join(f"{k}={v}" for k, v in c["errors"].items()),
                     "structured": ", ".join(f"{k}={v}" for k, v in c["structured"].items())})
    return rows


def cost_table(costs: dict[str, dict], title: str = "") -> str:
    """A Markdown table of `costs` (per role)."""
    if not costs:
        return f"{title}no LLM calls".strip()
    head = ("| role | calls | prompt tok | completion tok | p50 ms | p95 ms | schema-valid | differs from offline "
            "| errors | structured |")
    lines = [title] if title else []
    lines += [head, "|" + "---|" * 10]
    for r in cost_rows(costs):
        differ = "–" if r["differs from offline"] is None else \
            f"{_rate(r['differs from offline'])} of {r['compared']}"
        lines.append(f"| {r['role']} | {r['calls']} | {r['prompt tokens']:,} | {r['completion tokens']:,} | "
                     f"{_ms(r['p50 ms'])} | {_ms(r['p95 ms'])} | {_rate(r['schema-valid'])} | {differ} | "
                     f"{r['errors'] or '–'} | {r['structured']} |")
    return "\n".join(lines)


OFFLINE = "offline"


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
        from engine.store import Store

        calls = llm_calls(Store(source))
    return LLM(RecordedBackend(calls, strict=False))


def calls_by_run(store: Any) -> dict[str | None, list[dict]]:
    """A session's logged calls grouped by the run they were made in, in log order; the key None holds those
    made while ingesting (in no run)."""
    from engine.oplog import OpKind

    out: dict[str | None, list[dict]] = {}
    for op in store.ops(kinds=[OpKind.LLM_CALL]):
        out.setdefault(op.run_id, []).append(op.payload)
    return out

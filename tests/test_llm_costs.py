"""What each role costs (engine.metrics) and what each reply decides (engine.llm.decisions), by hand."""
from __future__ import annotations

import json

import pytest

from engine.llm import LLM, RecordedBackend
from engine.llm.base import LLMCall
from engine.llm.decisions import compare, decision_rows, decisions, differ_by_key, label
from engine.llm.prompts import payload_of, render
from engine.eval.metrics import llm_cost_summary, llm_cost_tally, llm_tokens_by_role, pool_llm_costs


def call(role: str, latency: float, error: str | None = None, prompt: int = 10, completion: int = 5,
         mode: str = "json_object", key: str = "", data: dict | None = None) -> dict:
    return LLMCall(role=role, backend="openai", model="m", key=key or f"{role}-{latency}", prompt=[],
                   response=None if error == "NETWORK" else "{}", data=data, error_code=error,
                   prompt_tokens=0 if error == "NETWORK" else prompt,
                   completion_tokens=0 if error == "NETWORK" else completion, latency_ms=latency,
                   params={"structured": mode, "usage": error != "NETWORK"}).to_dict()


CALLS = [call("router", 100), call("router", 200, "JSON_PARSE_FAIL"), call("router", 300), call("router", 400),
         call("router", 500, "NETWORK"), call("event_merge", 1000, key="em"), call("event_merge", 3000, key="em")]


def test_the_tally_counts_tokens_latency_validity_errors_and_modes() -> None:
    costs = llm_cost_summary(llm_cost_tally(CALLS))
    router = costs["router"]
    assert (router["calls"], router["prompt"], router["completion"]) == (5, 40, 20)
    assert router["latency_ms"] == {"p50": 300.0, "p95": 480.0, "mean": 300.0, "n": 5}
    assert router["valid_rate"] == 0.6 and router["errors"] == {"JSON_PARSE_FAIL": 1, "NETWORK": 1}
    assert router["structured"] == {"json_object": 5} and router["usage_reported"] == 4
    assert router["compared"] == 0 and router["differ_rate"] is None
    assert list(costs) == ["event_merge", "router"]
    assert llm_tokens_by_role(CALLS) == {"event_merge": {"calls": 2, "prompt": 20, "completion": 10},
                                         "router": {"calls": 5, "prompt": 40, "completion": 20}}


def test_differences_are_matched_to_repeated_prompts_in_order_and_pooling_adds_up() -> None:
    tally = llm_cost_tally(CALLS, differ={"em": [True, False], "router-100": [True]})
    costs = llm_cost_summary(tally)
    assert (costs["event_merge"]["compared"], costs["event_merge"]["differ"]) == (2, 1)
    assert costs["event_merge"]["differ_rate"] == 0.5
    assert (costs["router"]["compared"], costs["router"]["differ"]) == (1, 1)
    halves = pool_llm_costs([llm_cost_tally(CALLS[:3]), llm_cost_tally(CALLS[3:])])
    assert llm_cost_summary(halves) == llm_cost_summary(llm_cost_tally(CALLS))


def test_a_prompt_gives_back_its_payload() -> None:
    payload = {"utterance": "I ran 4 half-marathons", "speaker": "Jon", "window": [{"id": "1", "text": "ü"}]}
    assert payload_of(render("router", payload)) == payload
    with pytest.raises(ValueError, match="no INPUT section"):
        payload_of([{"role": "user", "content": "hello"}])


@pytest.mark.parametrize(("role", "data", "expected"), [
    ("diagnosis", {"split_tasks": [{"node_id": "3", "reason": "", "confidence": 0.9}],
                   "merge_tasks": [{"node_ids": ["7", "2"], "reason": "", "confidence": 0.5}],
                   "update_tasks": [{"old_node_id": "1", "new_node_id": "4", "reason": "", "confidence": 1}]},
     {("split", "3"), ("merge", "2", "7"), ("update", "4", "1")}),
    ("event_merge", {"merge": True, "confidence": 0.2, "summary": "", "keywords": [], "rationale": ""},
     {("merge", True)}),
    ("relation_synthesis", {"relations": [
        {"type": "CAUSAL_FOLLOW", "source_id": "2", "target_id": "5", "confidence": 1, "evidence": [],
         "rationale": ""},
        {"type": "NONE", "source_id": "3", "target_id": "5", "confidence": 1, "evidence": [], "rationale": ""}]},
     {("CAUSAL_FOLLOW", "2", "5")}),
    ("episode_extraction", {"episodes": [{"text": "cake", "units": ["u3", "u1"]}, {"text": "x", "units": ["u2"]}]},
     {("episode", "u1", "u3"), ("episode", "u2")}),
    ("episode_merge", {"should_merge": "no", "merged_memory": "", "confidence": 0.4}, {("merge", False)}),
    ("split_plan", {"do_split": False, "segments": [{}], "split_rationale": ""}, {("split", False, 1)}),
    ("answer", {"answer": " ", "evidence_keys": ["D1:2"]}, {("answers", False), ("cites", "D1:2")}),
    ("descriptor", {"summary": "s", "keywords": []}, None),
])
def test_what_a_reply_decides(role: str, data: dict, expected) -> None:
    assert decisions(role, data) == (None if expected is None else frozenset(expected))


def test_recmem_decisions_read_as_a_reviewer_says_them() -> None:
    assert label("episode_merge", ("merge", True)) == "merge into the episode"
    assert label("episode_merge", ("merge", False)) == "keep apart from the episode"
    assert label("episode_extraction", ("episode", "u1", "u3")) == "episode of u1 + u3"


def test_two_recordings_compared_on_the_same_inputs() -> None:
    """The same event-merge input answered merge by one recording and apart by the other: one row each side;
    a failed call is shown but not counted as a difference."""
    payload = {"earlier": {"id": "11"}, "later": {"id": "14"}}
    messages = render("event_merge", payload)

    def reply(merge: bool | None) -> LLMCall:
        text = None if merge is None else json.dumps({"merge": merge, "confidence": 0.5, "summary": "",
                                                       "keywords": [], "rationale": ""})
        probe = LLM(RecordedBackend([], strict=False)).call("event_merge", payload)
        return LLMCall(role="event_merge", backend="openai", model="m", key=probe.key, prompt=messages,
                       response=text, data=json.loads(text) if text else None,
                       error_code=None if text else "TIMEOUT")

    a, b = [reply(True)], [reply(False)]
    comparisons = compare(a, LLM(RecordedBackend(b)))
    assert [c.differs for c in comparisons] == [True]
    rows = decision_rows(comparisons, "A", "B")
    assert [(r["on"], r["decision"], r["made by"]) for r in rows] == [
        ("11 | 14", "keep the events apart", "only B"), ("11 | 14", "merge the two events", "only A")]
    assert differ_by_key(comparisons) == {comparisons[0].key: [True]}
    failed = compare([reply(None)], LLM(RecordedBackend(b)))
    assert failed[0].differs is None and decision_rows(failed)[0]["A raw"].startswith("[TIMEOUT]")


def test_the_cost_table_names_the_model_that_answered() -> None:
    """The model column shows what each role's calls were answered by (one name, or each with its count); a
    summary written before models were counted still renders."""
    from engine.eval.llm_costs import cost_rows, cost_table

    calls = [*CALLS, {**call("router", 600), "model": "SmolLM2-135M-Instruct-Q4_1"}]
    costs = llm_cost_summary(llm_cost_tally(calls))
    assert costs["event_merge"]["models"] == {"m": 2}
    assert costs["router"]["models"] == {"SmolLM2-135M-Instruct-Q4_1": 1, "m": 5}
    rows = {r["role"]: r["model"] for r in cost_rows(costs)}
    assert rows == {"event_merge": "m", "router": "SmolLM2-135M-Instruct-Q4_1=1, m=5"}
    table = cost_table(costs)
    assert table.splitlines()[0].endswith("| structured | model |")
    assert table.splitlines()[2].endswith("| json_object=2 | m |")
    pooled = llm_cost_summary(pool_llm_costs([llm_cost_tally(calls[:4]), llm_cost_tally(calls[4:])]))
    assert pooled["router"]["models"] == costs["router"]["models"]
    older = {role: {k: v for k, v in c.items() if k != "models"} for role, c in costs.items()}
    assert cost_table(older).splitlines()[2].endswith("| json_object=2 | – |")

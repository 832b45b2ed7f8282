"""The Benchmark page's LLM costs, from a result whose All-Mem roles a real model answered: the hand-made result
file of test_page_benchmark with the costs of the committed SmolLM2 recording (tests/fixtures/llm/) as its
All-Mem system's `llm_costs`, computed by the engine library."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from apptest import start_app
from engine.llm.recorded import load_calls_jsonl
from engine.eval.metrics import llm_cost_summary, llm_cost_tally
from engine.store.workspace import ENV
from workbench.driver import bench_fixture_workspace

ROOT = Path(__file__).resolve().parents[1]
PAGE = "../pages/6_benchmark.py"

pytestmark = pytest.mark.slow


@pytest.fixture
def workspace(tmp_path: Path):
    path = bench_fixture_workspace(tmp_path)
    data = json.loads(path.read_text(encoding="utf-8"))
    calls = load_calls_jsonl(ROOT / "tests" / "fixtures" / "llm" / "allmem_demo12.jsonl")
    data["llm"] = "openai"
    data["summary"]["allmem"]["llm_costs"] = llm_cost_summary(llm_cost_tally(calls))
    path.write_text(json.dumps(data), encoding="utf-8")
    before = os.environ.get(ENV)
    os.environ[ENV] = str(tmp_path)
    yield data
    if before is None:
        del os.environ[ENV]
    else:
        os.environ[ENV] = before


def test_the_costs_of_the_roles_a_model_answered_are_shown_per_system(workspace) -> None:
    at, _ = start_app()
    at.switch_page(PAGE).run()
    assert not at.exception, at.exception
    assert any(m.value == "#### LLM costs per role" for m in at.markdown)
    assert any("SmolLM2" in c.value for c in at.caption)
    costs = next(d.value for d in at.dataframe if "role" in d.value.columns and "schema-valid" in d.value.columns)
    expected = workspace["summary"]["allmem"]["llm_costs"]
    assert list(costs["role"]) == list(expected)
    assert list(costs["calls"]) == [c["calls"] for c in expected.values()]
    assert list(costs["prompt tokens"]) == [c["prompt"] for c in expected.values()]
    figures = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    panels = next(f for f in figures if f["layout"].get("title", {}).get("text") == "allmem")
    assert [t["name"] for t in panels["data"]] == ["prompt tokens", "completion tokens", "p50", "p95",
                                                   "schema-valid", "differs from offline"]
    tables = [d for d in at.dataframe if "schema-valid" in d.value.columns]
    assert len(tables) == 1                     # naive's roles were the offline rules': no costs table for it

"""The Retrieval page through Streamlit's AppTest, on the bundled demo with the real embedder."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from engine.allmem.retrieval import Hop, RetrievedUnit
from engine.edge import EdgeType
from engine.proposal import Op
from engine.state import MemoryState
from engine.unit import Unit
from workbench import retrieval_view as rv
from tests.apptest import open_app_page
from workbench.model import Workbench

ROOT = Path(__file__).resolve().parents[1]
PAGE = "../pages/4_retrieval.py"          # relative to the main script, which lives in workbench/

pytestmark = pytest.mark.slow


def open_page(turn: int = 0) -> tuple[AppTest, Workbench]:
    return open_app_page(PAGE, turn)


def code_text(at: AppTest) -> str:
    return "\n".join(c.value for c in at.code)


def metric(at: AppTest, label: str) -> str:
    return next(m.value for m in at.metric if m.label == label)


def test_page_runs_on_an_empty_memory():
    at, _ = open_page()
    assert any("Memory is empty" in i.value for i in at.info)


def test_free_query_shows_stages_paths_and_naive_rag():
    at, wb = open_page(turn=20)
    at.radio(key="retrieval_source").set_value("Free query").run()
    at.text_input(key="retrieval_query").input("What breed is Pepper?").run()
    assert not at.exception
    assert "anchor u" in code_text(at)
    for label in ("Stage 1 anchors (ms)", "Stage 2 expansion (ms)", "Stage 3 ranking (ms)", "Total (ms)"):
        float(metric(at, label))
    naive = next(d.value for d in at.dataframe if "turn id" in d.value.columns)
    seen = {t.id for t in wb.conversation.turns[:20]}
    assert len(naive) == 5 and set(naive["turn id"]) <= seen     # naive RAG only sees turns up to the cursor
    for tab in ("Stage 1 · anchors", "Stage 2 · expansion", "Stage 3 · ranking", "Materialized context"):
        at.session_state["retrieval_tab"] = tab
        at.run()
        assert not at.exception


def test_path_reaches_the_archived_unit_after_the_update():
    at, wb = open_page()
    wb.jump(next(i for i, t in enumerate(wb.conversation.turns) if t.id == "D5:4") + 1)
    state = wb.engine.state
    current, superseded = state.turn_units["D5:4"], state.turn_units["D1:4"]
    wb.engine.propose(manual=True)
    update = next(p for p in wb.engine.state.proposals.values()
                  if p.op == Op.UPDATE and p.targets == [current, superseded] and p.status == "pending")
    wb.engine.apply({update.id: True}, decided_by="human")
    wb.reload()
    assert (current, superseded, EdgeType.VERSION) in wb.engine.state.edges

    at.run()                                  # q1: how many half marathons has Jon run? (gold D5:4)
    assert not at.exception
    assert f"—version→ u{superseded} [archived]" in code_text(at)
    assert metric(at, "All-Mem R@5") == "1.00"
    gold = next(d.value for d in at.dataframe if "gold id" in d.value.columns)
    assert list(gold["gold id"]) == ["D5:4"] and gold["in top 5"].iloc[0] == rv.HIT


HOSTILE = '<img src=x onerror="alert(1)"> & <b>bold</b>'


def test_gold_answer_is_escaped(tmp_path):
    lines = [{"id": "t1", "speaker": "Ana", "text": "My cat is called Miso.", "time": "2024-01-01T10:00:00",
              "session": "1"},
             {"type": "question", "id": "q1", "question": "What is the cat called?", "answer": f"Miso {HOSTILE}",
              "evidence": ["t1"], "category": 4}]
    path = tmp_path / "hostile.jsonl"
    path.write_text("\n".join(json.dumps(x) for x in lines), encoding="utf-8")
    at, wb = open_page()
    hostile = Workbench.open(path, embedder=wb.engine.embedder, workdir=tmp_path)
    hostile.jump(1)
    at.session_state["workbench"] = hostile
    at.run()
    assert not at.exception
    text = "\n".join(m.value for m in at.markdown)
    assert "&lt;img src=x onerror=&quot;alert(1)&quot;&gt;" in text and "<img" not in text


def _unit(uid: int, visible: bool = True) -> Unit:
    return Unit(id=uid, raw=f"raw {uid}", summary="", keywords=[], time="t", kind="turn", source_ids=[f"D1:{uid}"],
                visible=visible)


def test_path_rendering_names_archived_units():
    state = MemoryState()
    state.units = {3: _unit(3), 7: _unit(7, visible=False), 9: _unit(9)}
    r = RetrievedUnit(id=9, visible=True, score=1.0, dense=0.5, lexical=0.0, anchor=3, hop=2,
                      path=[Hop(3, 7, "version"), Hop(7, 9, "sibling")], source_ids=["D1:9"], time="t", raw="raw 9",
                      kind="turn")
    assert rv.path_text(state, r) == "anchor u3 —version→ u7 [archived] —sibling→ u9"
    assert rv.path_edges([r]) == [(3, 7, "version"), (7, 9, "sibling")]
    assert rv.path_units([r]) == [3, 7, 9]
    block = rv.paths_block(state, [r], gold=["D1:9"])
    assert "[D1:9*]" in block and "* = gold evidence" in block
    marks = rv.gold_frame(["D1:9", "D1:2"], ["D1:2", "D1:5"], k=1, seen={"D1:2"})
    assert list(marks["in top 1"]) == [rv.MISS, rv.MISS] and list(marks["rank"].fillna(0)) == [2, 0]
    assert list(marks["note"]) == ["", "not ingested yet"]

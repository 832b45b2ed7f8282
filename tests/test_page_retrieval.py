"""The Retrieval page through Streamlit's AppTest, on the bundled demo with the real embedder."""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from apptest import ENGINES, open_app_page, shown_text
from streamlit.testing.v1 import AppTest

from engine.core.node import Node as Unit
from engine.core.state import MemoryState
from engine.engines import engine_schema
from engine.retrieval.explain import explain_sources
from engine.retrieval.result import Hop, RetrievedUnit
from tests.test_retrieval import small_bank
from workbench import retrieval_view as rv
from workbench.model import Workbench

UPDATE, VERSION = "update", "version"      # All-Mem's operator and edge type, as its schema names them

ROOT = Path(__file__).resolve().parents[1]
PAGE = "../pages/4_retrieval.py"          # relative to the main script, which lives in workbench/

pytestmark = pytest.mark.slow


def open_page(turn: int = 0, engine: str = "allmem") -> tuple[AppTest, Workbench]:
    return open_app_page(PAGE, turn, engine)


def code_text(at: AppTest) -> str:
    return "\n".join(c.value for c in at.code)


def metric(at: AppTest, label: str) -> str:
    return next(m.value for m in at.metric if m.label == label)


def test_page_runs_on_an_empty_memory():
    at, _ = open_page()
    assert any("Memory is empty" in i.value for i in at.info)


def valid_path(state: MemoryState, r) -> bool:
    """A result's path starts at its seed, walks edges the state holds (either way round), ends at the result."""
    node = r.anchor
    for h in r.path:
        if h.src != node or ((h.src, h.dst, h.type) not in state.edges and (h.dst, h.src, h.type) not in state.edges):
            return False
        node = h.dst
    return node == r.id


@pytest.mark.parametrize("engine", ENGINES)
def test_free_query_shows_stages_paths_and_a_peer_engine(engine):
    schema = engine_schema(engine)
    at, wb = open_page(turn=20, engine=engine)
    at.radio(key="retrieval_source").set_value("Free query").run()
    at.text_input(key="retrieval_query").input("What breed is Pepper?").run()
    assert not at.exception
    word = rv.seed_word(schema)                  # "anchor" (All-Mem, RAG), "seed" (MemLoom)
    assert f"{word} u" in code_text(at) or "direct u" in code_text(at)
    for stage in schema.stages:
        float(metric(at, f"{stage.label} (ms)"))
    float(metric(at, "Total (ms)"))
    res = wb.view.retrieve("What breed is Pepper?", 5)
    assert res.units and all(valid_path(wb.view.state, r) for r in res.units)
    seeds = [a for a, _ in res.anchors]
    assert all(rv.path_text(wb.view.state, r, word, seeds) in code_text(at) for r in res.units)
    assert all(f"u{r.id}" in code_text(at) for r in res.units)
    tables = [d.value for d in at.dataframe if "source id" in d.value.columns]
    assert len(tables) == 2, "the engine and its peer, as the same kind of table"
    ours, peer = tables
    assert list(ours["source id"]) == res.source_ids[:5]
    peer_name = at.selectbox(key="retrieval_peer").value
    assert peer_name == wb.default_peer() and peer_name != engine
    seen = {t.id for t in wb.conversation.turns[:20]}
    assert len(peer) == 5 and set(peer["source id"]) <= seen    # the peer only holds turns up to the cursor
    assert (peer["text"].str.len() > 0).all()                   # text, not just ids
    assert wb.peer(peer_name).state.turn == 20
    sections = [s.label for s in schema.stages] + ([] if any(s.shows == "context" for s in schema.stages)
                                                   else ["Materialized context"])
    captions_before = len(at.caption)
    for tab in sections:
        at.session_state["retrieval_tab"] = tab
        at.run()
        assert not at.exception
    assert captions_before
    at.session_state["retrieval_tab"] = schema.stages[0].label
    at.run()
    expected = rv.stage_caption(schema.stages[0].help, wb.view.settings)
    assert "{" not in expected and any(expected in c.value for c in at.caption)


def test_the_peer_engine_can_be_changed():
    at, wb = open_page(turn=12)
    at.radio(key="retrieval_source").set_value("Free query").run()
    at.text_input(key="retrieval_query").input("Where does Maya work?").run()
    at.selectbox(key="retrieval_peer").set_value("hybrid").run()
    assert not at.exception
    assert wb.peer("hybrid").name == "hybrid" and wb.peer("hybrid").state.turn == 12
    assert any("Hybrid RAG" in m.value for m in at.markdown)


def test_path_reaches_the_archived_unit_after_the_update():
    at, wb = open_page()
    wb.jump(next(i for i, t in enumerate(wb.conversation.turns) if t.id == "D5:4") + 1)
    state = wb.engine.state
    current, superseded = state.turn_units["D5:4"], state.turn_units["D1:4"]
    wb.engine.propose(manual=True)
    update = next(p for p in wb.engine.state.proposals.values()
                  if p.op == UPDATE and p.targets == [current, superseded] and p.status == "pending")
    wb.engine.apply({update.id: True}, decided_by="human")
    wb.reload()
    assert (current, superseded, VERSION) in wb.engine.state.edges

    at.run()                                  # q1: how many half marathons has Jon run? (gold D5:4)
    assert not at.exception
    assert f"—version→ u{superseded} [archived]" in code_text(at)
    assert metric(at, "All-Mem R@5") == "1.00"
    gold = next(d.value for d in at.dataframe if "gold id" in d.value.columns)
    assert list(gold["gold id"]) == ["D5:4"] and gold["in top 5"].iloc[0] == rv.HIT
    # the why-this-rank caption states what All-Mem's z-values are taken over: every unit, the archived one too
    captions = "\n".join(c.value for c in at.caption)
    assert f"z is taken over this query's scores of {len(wb.engine.state.nodes)} nodes, 1 of them off the surface" \
        in captions


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
                status="visible" if visible else "archived", visible=visible)


def test_path_rendering_names_off_surface_nodes_by_status():
    state = MemoryState(schema=engine_schema("allmem"))
    state.units.update({3: _unit(3), 7: _unit(7, visible=False), 9: _unit(9)})
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
    state.units[7].status = "superseded"                 # another engine's off-surface status, named as such
    assert rv.path_text(state, r) == "anchor u3 —version→ u7 [superseded] —sibling→ u9"
    assert rv.stage_caption("top-{k}, {missing}", state) == "top-{k}, {missing}"     # unformattable: as written


def test_why_this_rank_and_a_missed_gold_turn():
    """At the end of the demo with k = 1, a question whose gold turn ranks second: the page lists that turn as
    missed with its best unit's candidate rank and scores, and each result's signals under 'Why this rank'."""
    at, wb = open_page()
    wb.jump(len(wb.conversation.turns))
    view = wb.view
    question, found = None, []
    for q in wb.conversation.questions:
        res = view.retrieve(q.question, 1)
        found = [sp for sp in explain_sources(view, res, q.evidence) if sp.source_rank and sp.source_rank > 1]
        if found:
            question = q
            break
    assert question is not None, "some demo question's gold turn ranks below the first source id"
    at.number_input(key="retrieval_k").set_value(1).run()
    at.selectbox(key="retrieval_question").set_value(question).run()
    assert not at.exception
    text = "\n".join(m.value for m in at.markdown)
    assert "Missed gold evidence" in text
    for sp in found:
        best = min(i for i, r in enumerate(res.candidates, 1) if sp.source_id in r.source_ids)
        assert sp.best.rank == best
        line = rv.missed_gold_lines([sp], 1, wb.schema)[0]
        assert line in text
        shown, _ = shown_text(line)
        assert f"{sp.source_id} source rank {sp.source_rank} > k 1" in shown
        assert f"best unit u{sp.best.uid} at candidate rank {best}" in shown and f"score {sp.best.signals.score:.3f}" \
            in shown
    assert any(e.label.startswith("Why this rank") for e in at.expander)
    ref = view.explain(res, [res.units[0].id])[res.units[0].id].signals.reference
    assert ref.nodes == len(view.state.nodes) and not ref.off_surface        # replayed by hand: nothing archived
    captions = "\n".join(c.value for c in at.caption)
    assert (f"z is taken over this query's scores of {ref.nodes} nodes: cosine mean {ref.dense_mean:.3f}, "
            f"sd {ref.dense_sd:.3f}; BM25 mean {ref.lexical_mean:.2f}, sd {ref.lexical_sd:.2f}.") in captions
    why = [d.value for d in at.dataframe if "fused" in d.value.columns]
    assert len(why) == 2, "the engine's results and its peer's"
    ours = why[0]
    assert list(ours["unit"]) == [f"u{r.id}" for r in res.units]
    assert list(ours["score"]) == [round(r.score, 3) for r in res.units]
    assert list(ours["dense cosine"]) == [round(r.dense, 3) for r in res.units]
    assert list(ours["hop"]) == [r.hop for r in res.units]
    labels = {s.label for s in wb.schema.stages}
    assert set(ours["admitted by"]) <= labels


def test_a_never_candidate_gold_line_names_the_stage_and_escapes_the_id(make_engine):
    """A gold turn that no stage admitted reads "never a candidate — dropped at <stage>: <reason>"; a source id
    carrying markdown stays literal text."""
    eng = small_bank(make_engine)
    res = eng.retrieve("lighthouse tower painted red")
    sid = eng.state.nodes[4].source_ids[0]
    sp = explain_sources(eng, res, [sid])[0]
    assert sp.best.uid == 4 and not sp.best.candidate
    hostile = dataclasses.replace(sp, source_id="t`1 **b** [open](https://e.test)")
    line = rv.missed_gold_lines([hostile], 5, eng.schema)[0]
    shown, kinds = shown_text(line)
    assert shown.startswith("t`1 **b** [open](https://e.test) never a candidate — dropped at Stage 1 · anchors: "
                            "ranked below the seed cut and no path reached it: anchor rank ")
    assert kinds <= {"text", "code_inline", "softbreak"}
    gone = dataclasses.replace(sp, best=None, units=0)
    assert shown_text(rv.missed_gold_lines([gone], 5, eng.schema, seen=set())[0])[0] == \
        f"{sid} not ingested yet at this turn"


def test_a_causal_chain_question_tables_its_links_as_the_memory_holds_them(tmp_path):
    """A causal suite scenario in MemLoom, its steward run every three sessions: picking a chain question tables
    each link of its gold chain as the engine's state holds it at the cursor. Right after the effect is said, its
    link is pending (the turn waits in the real-time buffer); at the end the steward has made links relations.
    The naive peer, which has no causal relation, tables none, and neither does All-Mem on the demo."""
    from engine.bench.datasets import chain_question
    from engine.eval.chain_links import LINK_FATE_LABELS, LinkFate, follow_links

    source = ROOT / "datasets" / "causal" / "validation.jsonl"
    at, wb = open_page()
    causal = Workbench.open(source, "lab-freezer", engine="memloom", schedule="every-3-sessions",
                            embedder=wb.engine.embedder, workdir=tmp_path)
    turns = [t.id for t in causal.conversation.turns]
    end = len(turns)

    def fate(cursor: int, cause: str, effect: str) -> LinkFate:
        causal.jump(cursor)
        return follow_links(causal.view.state, causal.schema, [cause, effect])[0].fate
    # a link whose effect waits in the buffer right after it is said, and which the steward has made a relation
    # citing both turns by the end
    question, link = next((q, i) for q in causal.conversation.questions if q.category == 1
                          for i, (a, b) in enumerate(zip(q.evidence, q.evidence[1:]))
                          if fate(turns.index(b) + 1, a, b) == LinkFate.PENDING and fate(end, a, b) == LinkFate.CITED)
    effect = turns.index(question.evidence[link + 1])

    def links_tables(cursor: int):
        causal.jump(cursor)
        at.session_state["workbench"] = causal
        at.run()
        at.selectbox(key="retrieval_question").set_value(question).run()
        assert not at.exception
        return [d.value for d in at.dataframe if list(d.value.columns) == ["cause", "effect", "link", "relation"]]

    (ours,) = links_tables(effect + 1)
    expected = follow_links(causal.view.state, causal.schema, question.evidence)
    assert list(ours["link"]) == [LINK_FATE_LABELS[x.fate] for x in expected]
    assert ours["link"][link] == LINK_FATE_LABELS[LinkFate.PENDING] and ours["relation"][link] == "–"

    (ours,) = links_tables(end)
    expected = follow_links(causal.view.state, causal.schema, question.evidence)
    assert list(zip(ours["cause"], ours["effect"])) == list(zip(question.evidence, question.evidence[1:]))
    assert list(ours["link"]) == [LINK_FATE_LABELS[x.fate] for x in expected]
    assert ours["link"][link] == LINK_FATE_LABELS[LinkFate.CITED]
    edge = causal.view.state.edges[tuple(expected[link].edge)]
    assert edge.type == "CAUSAL_FOLLOW" and ours["relation"][link] == f"CAUSAL_FOLLOW {edge.confidence:.2f}"

    at, wb = open_page()
    wb.jump(len(wb.conversation.turns))
    multi_hop = next(q for q in wb.conversation.questions if chain_question(wb.conversation, q))
    at.session_state["workbench"] = wb
    at.run()
    at.selectbox(key="retrieval_question").set_value(multi_hop).run()
    assert not at.exception
    assert not [d for d in at.dataframe if list(d.value.columns) == ["cause", "effect", "link", "relation"]]
    assert any("gold id" in d.value.columns for d in at.dataframe)

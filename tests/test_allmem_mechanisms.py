"""All-Mem's consolidation matters to retrieval: a real replay of LoCoMo conv-26's first four sessions with the
real embedder and the offline diagnosis. An Update that archives a superseded plan changes the top 5 for its
question; a Merge leaves one visible representative whose version links Stage 2 walks; each retrieval
ablation switch changes what Stage 2 walks."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from engine.core.conversation import Conversation
from engine.core.text import strip_speaker
from engine.engines.allmem.retrieval import held_parts, relevance, superseded
from engine.engines.allmem.schema import EdgeType, Op
from engine.llm.offline_diagnosis import MERGE_FLOOR
from engine.loaders import load_conversations
from engine.retrieval.relevance import Relevance
from engine.runtime.replay import Schedule, replay
from engine.session import open_session
from tests.conftest import LOCOMO, needs_data
from workbench.retrieval_view import fused_text, source_text

pytestmark = pytest.mark.slow
CAMPING = "When did Melanie go camping in June?"


@pytest.fixture(scope="module")
def memory(tmp_path_factory):
    """conv-26 sessions 1-4 replayed without consolidation, then one diagnosis run left open."""
    conv = next(c for c in load_conversations(needs_data(LOCOMO)) if c.id == "conv-26")
    turns = [t for t in conv.turns if t.session in {"1", "2", "3", "4"}]
    sub = Conversation(conv.id, [dataclasses.replace(t, index=i) for i, t in enumerate(turns)], [])
    engine = open_session(tmp_path_factory.mktemp("mech") / "m.sqlite", engine="allmem")
    replay(engine, sub, Schedule.parse("manual"))
    unit = {u.source_ids[0]: u.id for u in engine.state.units.values()}
    asked = [CAMPING] + [q.question for q in conv.questions
                         if q.evidence and all(e.split(":")[0] in {"D1", "D2", "D3", "D4"} for e in q.evidence)]
    before = {q: engine.retrieve(q, k=5).source_ids[:5] for q in asked}
    proposals = engine.propose(manual=True)
    return engine, unit, before, proposals


def _proposal(proposals, op, targets):
    found = [p for p in proposals if p.op == op and p.targets == targets]
    assert found, f"no {op} of {targets} among {[(p.op, p.targets, round(p.confidence, 2)) for p in proposals]}"
    return found[0]


def test_an_update_that_archives_a_superseded_plan_changes_the_top_5(memory):
    engine, unit, before, proposals = memory
    plan, outcome = unit["D2:7"], unit["D4:6"]          # "thinking about going camping next month" -> "just took"
    upd = _proposal(proposals, Op.UPDATE, [outcome, plan])
    assert upd.confidence >= 0.9 and "a plan, then its outcome" in upd.reason
    merge = _proposal(proposals, Op.MERGE, sorted([unit["D2:8"], unit["D2:10"]]))
    assert MERGE_FLOOR <= merge.confidence < 0.9      # the merge model's; below θ a reviewer decides (at the end)
    engine.apply({upd.id: True}, decided_by="test")                   # the rest of the run stays pending
    state = engine.state
    assert not state.units[plan].visible and (outcome, plan, EdgeType.VERSION) in state.edges
    assert superseded(state, plan)
    for q in before:            # the z-statistics are the whole memory's, the archived plan's signals included
        rel = relevance(engine, q)
        dense = np.array([rel.dense(u) for u in state.units])
        lexical = np.array([rel.lexical.get(u, 0.0) for u in state.units])
        assert len(rel.ids) == len(state.units) - 1
        assert (rel.dense_mu, rel.dense_sd) == pytest.approx((dense.mean(), dense.std()), abs=1e-7)
        assert (rel.lex_mu, rel.lex_sd) == pytest.approx((lexical.mean(), lexical.std() or 1.0), abs=1e-9)

    after = {q: engine.retrieve(q, k=5).source_ids[:5] for q in before}
    changed = [q for q in before if after[q] != before[q]]
    assert changed, "archiving the superseded plan changed no question's top 5"
    # the plan's or its outcome's place changed for a question (the outcome's new keywords move BM25's lengths)
    assert any([s for s in before[q] if s in ("D2:7", "D4:6")] != [s for s in after[q] if s in ("D2:7", "D4:6")]
               for q in changed)
    res = engine.retrieve(CAMPING, k=5)
    old = next(c for c in res.candidates if c.id == plan)              # still recovered, over its version link
    assert not old.visible and old.path[-1].type == EdgeType.VERSION and old.path[-1].src == outcome
    assert engine.explain(res, [plan])[plan].signals.penalty == engine.settings.archived_penalty
    engine.apply({merge.id: True}, decided_by="test", defer_rest=True)
    assert engine.open_run() is None


def test_a_merge_leaves_one_representative_whose_version_links_stage_2_walks(memory):
    engine, unit, _, _ = memory
    state = engine.state
    a, b = unit["D2:8"], unit["D2:10"]
    reps = [u for u in state.units.values() if u.kind == "merged" and {"D2:8", "D2:10"} <= set(u.source_ids)]
    assert len(reps) == 1 and reps[0].visible and not state.units[a].visible and not state.units[b].visible
    rep = reps[0].id
    assert {(rep, a, EdgeType.VERSION), (rep, b, EdgeType.VERSION)} <= set(state.edges)
    assert not superseded(state, a) and not superseded(state, b)       # regrouped, not stale: no penalty
    res = engine.retrieve("What did Caroline research?", k=5)
    assert rep in {x for x, _ in res.anchors}
    walked = {(e["parent"], e["id"], e["type"]) for e in res.expansion}
    assert (rep, a, EdgeType.VERSION) in walked and (rep, b, EdgeType.VERSION) in walked
    source = next(c for c in res.candidates if c.id == a)
    assert engine.explain(res, [a])[a].signals.penalty == 0.0 and source.hop == 1


def test_each_retrieval_ablation_changes_what_stage_2_walks(memory):
    engine, unit, _, _ = memory
    full_settings = engine.settings
    query = "What did Caroline research?"
    full = engine.retrieve(query, k=5)
    walked = {}
    try:
        for ablation in ("anchors-only", "no-recovery-links", "no-type-priority"):
            engine.settings = dataclasses.replace(full_settings, ablations=[ablation])
            walked[ablation] = engine.retrieve(query, k=5).expansion
    finally:
        engine.settings = full_settings
    types = [e["type"] for e in full.expansion]
    assert walked["anchors-only"] == [] and full.expansion
    assert EdgeType.VERSION in types and not {e["type"] for e in walked["no-recovery-links"]} & {
        EdgeType.VERSION, EdgeType.SIBLING}
    # with priority, every version link of the first hop comes before any temporal or semantic one
    hop1 = [t for e, t in zip(full.expansion, types) if e["hop"] == 1]
    assert hop1 == sorted(hop1, key=lambda t: [EdgeType.SIBLING, EdgeType.VERSION, EdgeType.TEMPORAL,
                                               EdgeType.SEMANTIC].index(t))
    assert [e["type"] for e in walked["no-type-priority"]] != types


def test_a_representative_gives_each_merged_turn_only_its_own_evidence(memory):
    """A Merge's representative is retrieved for what its turns say together; each turn it carries takes a source
    slot at no more than the score of the archived version holding that turn, so a turn whose own words miss
    the question is not ranked among the sources at the representative's score."""
    engine, unit, _, _ = memory
    state = engine.state
    rep = next(u.id for u in state.units.values() if u.kind == "merged" and {"D2:8", "D2:10"} <= set(u.source_ids))
    res = engine.retrieve("What did Caroline research?", k=None)
    found = {c.id: c for c in res.candidates}
    worth = found[rep].source_worth
    assert set(worth) == {"D2:8", "D2:10"}
    for sid in worth:                  # each turn's worth is its own archived unit's score, reached over a version link
        assert worth[sid] == found[unit[sid]].score and found[unit[sid]].path[-1].type == EdgeType.VERSION
    weaker = min(worth, key=worth.get)
    assert worth[weaker] < found[rep].score
    between = [c for c in res.candidates if worth[weaker] < c.score < found[rep].score and weaker not in c.source_ids]
    assert between, "no candidate scores between the weaker turn's own evidence and the representative"
    ranked = res.source_ids
    assert all(ranked.index(s) < ranked.index(weaker) for c in between for s in c.source_ids)
    assert f"{weaker} (≤ {worth[weaker]:.3f})" in source_text(found[rep])        # what the Retrieval page shows


def test_a_representative_scores_lexically_as_the_best_of_the_parts_it_holds(memory):
    """BM25 divides by length, so a Merge's representative (its parts' texts joined) would score below each part
    on the words that part alone says; it holds each part's whole text, so it scores at least as that part."""
    engine, unit, _, _ = memory
    state = engine.state
    rep = next(u.id for u in state.units.values() if u.kind == "merged" and {"D2:8", "D2:10"} <= set(u.source_ids))
    parts = [unit["D2:8"], unit["D2:10"]]
    holders, held = held_parts(state)
    assert sorted(held[holders == rep].tolist()) == sorted(parts)
    assert not set(holders.tolist()) - {u.id for u in state.units.values() if u.kind == "merged"}
    for part in parts:
        query = strip_speaker(state.units[part].raw)[1]
        rel = relevance(engine, query)
        joined = Relevance(engine, query, rel.weight, engine.settings.archived_penalty,     # BM25 of the joined text
                           archived=np.asarray(state.archived_ids, dtype=np.int64))
        assert rel.lexical[rep] == max(rel.lexical.get(p, 0.0) for p in parts) >= rel.lexical[part]
        assert joined.lexical[rep] < rel.lexical[part]
        assert rel.score(rep) > joined.score(rep)
        res = engine.retrieve(query, k=None)
        sig = engine.explain(res, [rep])[rep].signals
        best = max(parts, key=lambda p: (rel.lexical.get(p, 0.0), -p))
        assert sig.lexical_of == best and f"BM25 of held u{best}" in fused_text(sig)     # what the page shows

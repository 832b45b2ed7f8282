"""Why this rank: every engine's explanation against its real retrieval on the replayed demo and built cases."""
from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import pytest

from engine.core.schema import settings_fields
from engine.engines import settings_class
from engine.engines.allmem.schema import EdgeType
from engine.loaders import load_conversation
from engine.retrieval.explain import Drop, explain_sources
from engine.retrieval.relevance import Relevance
from engine.session import open_session, scratch_engine
from tests.conftest import engines_under_test, turn
from tests.test_retrieval import add_edges, small_bank

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "datasets" / "demo" / "demo.jsonl"
ENGINES = tuple(engines_under_test())


@pytest.fixture(scope="module")
def conv():
    return load_conversation(DEMO)


@pytest.fixture(scope="module")
def replayed(conv, tmp_path_factory):
    """The demo replayed to the end in every engine (All-Mem and MemLoom with their offline runs)."""
    embedder = open_session(tmp_path_factory.mktemp("explain") / "embedder.sqlite").embedder
    return {name: scratch_engine(name, conv, embedder) for name in ENGINES}


def with_settings(engine, **changes):
    engine.settings = dataclasses.replace(engine.settings, **changes)
    return engine


def carriers(engine, sid: str) -> set[int]:
    return {u.id for u in engine.state.nodes.values() if sid in u.source_ids}


@pytest.mark.parametrize("name", ENGINES)
def test_breakdown_adds_up_to_the_score_of_every_candidate(replayed, conv, name):
    eng = replayed[name]
    for q in conv.questions:
        res = eng.retrieve(q.question, 5)
        placed = eng.explain(res, [r.id for r in res.candidates])
        for rank, r in enumerate(res.candidates, 1):
            p = placed[r.id]
            assert p.rank == rank and p.returned == (rank <= len(res.units))
            sig = p.signals
            assert sig.score == r.score and sig.dense == pytest.approx(r.dense, abs=1e-6)
            assert sig.lexical == pytest.approx(r.lexical, abs=1e-6)
            ref = sig.reference            # what the z-values are relative to, as the page states it
            assert ref is not None and ref.nodes >= len(res.units) and 0 <= ref.off_surface < ref.nodes
            assert sig.z_dense == pytest.approx((sig.dense - ref.dense_mean) / ref.dense_sd, abs=1e-6)
            if sig.weight:
                assert sig.z_lexical == pytest.approx((sig.lexical - ref.lexical_mean) / ref.lexical_sd, abs=1e-6)
            if name == "allmem":           # every unit, visible or archived
                assert (ref.nodes, ref.off_surface) == (len(eng.state.nodes), len(eng.state.archived_ids))
            fused = (sig.z_dense + sig.weight * sig.z_lexical - sig.penalty if sig.weight
                     else sig.dense - sig.penalty)
            assert fused == pytest.approx(sig.relevance, abs=1e-6)      # float32 cosines summed in float64
            relations = [h for h in r.path if h.type != "evidence"]
            # the fused value is what ranked it, unless a relation chain passed it more (MemLoom only) or a
            # multiplicative re-rank's parts make the score (GAM: P_sem of the relevance times each β; the hop that
            # reached an event is its topic edge, else the anchor's cross edge)
            if sig.factors:
                product = math.prod(v for _, v in sig.factors)
                assert name == "gam" and product == pytest.approx(r.score, rel=1e-4, abs=1e-6)
                relations = [h for h in relations if h.type != "cross"] or relations
            elif sig.inherited is None:
                assert round(sig.relevance, 6) == pytest.approx(r.score, abs=1e-6)
            else:
                assert name == "memloom" and sig.inherited == r.score > sig.relevance
            assert sig.hop == r.hop and sig.admitted in {s.key for s in eng.schema.stages}
            assert sig.edge == (relations[-1].type if relations else "")
            if not p.returned:
                assert p.drop == Drop.BELOW_K and p.detail == f"rank {rank} > the {len(res.units)} returned"


# Engines that return their top `final_k` of one ranking; RecMem returns per-layer budgets instead (k_sub, k_epi,
# k_sem), and why-this-rank names the layer budget that left a node out (tests/test_recmem.py).
TOP_K_ENGINES = tuple(e for e in ENGINES if any(s["name"] == "final_k" for s in settings_fields(settings_class(e))))


@pytest.mark.parametrize("name", TOP_K_ENGINES)
def test_a_missed_gold_turn_is_reported_at_its_true_rank(replayed, conv, name):
    """With one result returned, every gold turn not at the top is missed; its best unit's reported rank is where
    it sits in the full candidate ranking of an unchanged retrieval."""
    eng = replayed[name]
    final_k = eng.settings.final_k
    missed = 0
    try:
        for q in conv.questions:
            full = with_settings(eng, final_k=final_k).retrieve(q.question)
            ranks = {r.id: i for i, r in enumerate(full.candidates, 1)}
            res = with_settings(eng, final_k=1).retrieve(q.question, 1)
            assert [r.id for r in res.candidates] == [r.id for r in full.candidates]     # the same ranking
            for sp in explain_sources(eng, res, q.evidence):
                ours = carriers(eng, sp.source_id)
                assert sp.units == len(ours)
                true = min((ranks[u] for u in ours if u in ranks), default=None)
                assert sp.source_rank == (full.source_ids.index(sp.source_id) + 1
                                          if sp.source_id in full.source_ids else None)
                assert sp.best.rank == true
                if true is not None and true > 1:
                    missed += 1
                    assert not sp.best.returned and sp.best.drop == Drop.BELOW_K
                    assert sp.best.reason.endswith(f"rank {true} > the 1 returned")
                    assert sp.best.signals.score == full.candidates[true - 1].score
    finally:
        with_settings(eng, final_k=final_k)
    assert missed, "some gold turn of the demo ranks below the top one"


@pytest.mark.parametrize("name", ["naive", "hybrid"])
def test_a_turn_below_the_candidate_cap_gets_its_rank_in_the_full_ranking(replayed, conv, name):
    eng = replayed[name]
    kept = eng.settings.candidates
    q = conv.questions[0].question
    try:
        full = with_settings(eng, candidates=1000).retrieve(q)
        res = with_settings(eng, candidates=5).retrieve(q)
        assert len(full.candidates) == len(eng.state.nodes) and len(res.candidates) == 5
        for rank in (6, 9, len(full.candidates)):
            uid = full.candidates[rank - 1].id
            p = eng.explain(res, [uid])[uid]        # under the settings the result was retrieved with
            assert p.rank is None and p.drop == Drop.CANDIDATE_CAP and p.stage == "rank"
            assert p.detail == f"rank {rank} > the 5 candidates kept"
            assert p.signals.score == pytest.approx(full.candidates[rank - 1].score, abs=1e-6)
    finally:
        with_settings(eng, candidates=kept)


def test_allmem_names_the_stage_that_dropped_a_unit(make_engine):
    """Anchor u1 (k = 1), budget 3: u2 and u5 are admitted, u3 is two hops away but the budget is spent, u4 is
    three hops away (hop limit 2), u6 has no link at all."""
    eng = small_bank(make_engine, budget=3)
    add_edges(eng, (1, 2, EdgeType.VERSION), (2, 3, EdgeType.TEMPORAL), (3, 4, EdgeType.SEMANTIC),
              (1, 5, EdgeType.SEMANTIC))
    res = eng.retrieve("lighthouse tower painted red")
    assert [r.id for r in res.candidates][:1] == [1] and {r.id for r in res.candidates} == {1, 2, 5}
    placed = eng.explain(res, [3, 4, 6, 99])
    surface = [u for u, _ in Relevance(eng, res.query, eng.settings.lexical_weight,
                                       eng.settings.archived_penalty).ranked_surface()]
    assert placed[3].drop == Drop.BUDGET and placed[3].stage == "stage2"
    assert placed[3].detail == (f"anchor rank {surface.index(3) + 1} > top-k 1; a link reaches it at hop 2, but the "
                                f"budget of 3 candidates was spent first")
    for uid in (4, 6):
        assert placed[uid].drop == Drop.BELOW_SEED_CUT and placed[uid].stage == "stage1"
        assert placed[uid].detail == (f"anchor rank {surface.index(uid) + 1} > top-k 1, and no allowed link within "
                                      f"2 hops of an anchor reaches it")
    assert placed[99].drop == Drop.GONE and placed[99].signals is None
    assert all(p.rank is None and not p.returned for p in placed.values())


def test_allmem_anchors_only_names_the_ablation(make_engine):
    eng = small_bank(make_engine, ablations=["anchors-only"])
    add_edges(eng, (1, 2, EdgeType.VERSION))
    res = eng.retrieve("lighthouse tower painted red")
    assert [r.id for r in res.candidates] == [1]
    p = eng.explain(res, [2])[2]
    assert p.drop == Drop.EXPANSION_OFF and p.stage == "stage2" and "anchors-only" in p.detail


def test_memloom_buffered_record_below_the_realtime_cut(tmp_path, conv):
    """Before any steward run every record is buffered and stream two is all there is: a record below the
    buffer's cut is dropped there, at the rank a retrieval with a wider cut gives it."""
    eng = open_session(tmp_path / "m.sqlite", engine="memloom", settings={"realtime_k": 3})
    turns = conv.turns[:12]
    eng.prefetch(turns)
    for t in turns:
        eng.ingest(t)
    query = "What breed is Pepper?"
    res = eng.retrieve(query)
    assert len(res.candidates) == 3 and eng.published_view() is None
    wide = with_settings(eng, realtime_k=100).retrieve(query)
    with_settings(eng, realtime_k=3)
    assert [r.id for r in wide.candidates[:3]] == [r.id for r in res.candidates]
    fifth = wide.candidates[4].id
    p = eng.explain(res, [fifth])[fifth]
    assert p.drop == Drop.BUFFER_CUT and p.stage == "seed" and p.detail == "buffer rank 5 > realtime_k 3"
    event = next(u.id for u in eng.state.nodes.values() if u.kind == "event")
    assert eng.explain(res, [event])[event].drop == Drop.FILTERED


def test_memloom_curated_records_are_placed_by_a_real_stage(replayed, conv):
    """On the replayed demo every curated record outside the candidates is dropped at a stage MemLoom runs."""
    eng = replayed["memloom"]
    res = eng.retrieve(conv.questions[0].question)
    ids = {r.id for r in res.candidates}
    records = [u.id for u in eng.state.nodes.values() if u.kind == "turn" and u.id not in ids]
    assert records
    for p in eng.explain(res, records).values():
        assert p.rank is None and p.drop in set(Drop) - {Drop.BELOW_K, Drop.GONE, Drop.FILTERED}
        assert p.stage in {s.key for s in eng.schema.stages} and p.detail and p.signals is not None


def test_explain_keeps_turn_text_out_of_its_reasons(make_engine):
    """Reasons are built from ids, ranks and settings: a turn's text never reaches them."""
    eng = make_engine(settings={"online_semantic_links": 0, "k": 1})
    eng.ingest(turn(1, "Ann", "The lighthouse keeper repainted the tower red."))
    eng.ingest(turn(2, "Ann", "[open](https://x.test) **bold** `tick`", session="2", day=2))
    res = eng.retrieve("lighthouse")
    p = eng.explain(res, [2])[2]
    assert p.drop == Drop.BELOW_SEED_CUT and "open" not in p.reason and "*" not in p.reason


def _buffered(tmp_path, conv, **settings):
    """MemLoom with the demo's first 12 turns ingested and no steward run: every record is buffered."""
    eng = open_session(tmp_path / "m.sqlite", engine="memloom", settings=settings)
    eng.prefetch(conv.turns[:12])
    for t in conv.turns[:12]:
        eng.ingest(t)
    assert eng.published_view() is None
    return eng


def test_memloom_no_realtime_names_the_ablation_for_a_buffered_record(tmp_path, conv):
    """Without a published snapshot and with the real-time stream ablated, nothing is a candidate: each
    buffered record is dropped at the seed stage by the ablation, not by a cut."""
    eng = _buffered(tmp_path, conv, ablations=["no-realtime"])
    res = eng.retrieve("What breed is Pepper?")
    records = [u.id for u in eng.state.nodes.values() if u.kind == "turn"]
    assert res.candidates == [] and records
    for p in eng.explain(res, records).values():
        assert p.drop == Drop.EXPANSION_OFF and p.stage == "seed" and "no-realtime" in p.detail


def test_memloom_record_offered_from_the_buffer_but_over_max_evidence(tmp_path, conv):
    """The buffer offers realtime_k records and max_evidence keeps fewer: the ones cut were offered (their
    buffer rank is within realtime_k) and are dropped at grounding by the cap."""
    eng = _buffered(tmp_path, conv, realtime_k=5, max_evidence=2)
    query = "What breed is Pepper?"
    res = eng.retrieve(query)
    wide = with_settings(eng, realtime_k=5, max_evidence=100).retrieve(query)
    with_settings(eng, realtime_k=5, max_evidence=2)
    kept = {r.id for r in res.candidates}
    offered = [r.id for r in wide.candidates]
    assert len(kept) == 2 and len(offered) == 5 and kept < set(offered)
    cut = [u for u in offered if u not in kept]
    for uid, p in eng.explain(res, cut).items():
        assert p.drop == Drop.CANDIDATE_CAP and p.stage == "ground", (uid, p)
        assert "offered from the buffer at rank" in p.detail and "below the 2 records kept" in p.detail


def test_memloom_no_traversal_names_the_ablation_for_an_unreached_curated_record(replayed, conv):
    """On the replayed demo with the relation closure ablated, a curated record whose events no seed reached
    is dropped at the traversal stage by the ablation; with the closure on, the same record gets a real cut."""
    eng = replayed["memloom"]
    base = eng.settings
    try:
        with_settings(eng, ablations=["no-traversal"])
        res = eng.retrieve(conv.questions[0].question)
        ids = {r.id for r in res.candidates}
        placed = eng.explain(res, [u.id for u in eng.state.nodes.values() if u.kind == "turn" and u.id not in ids])
        ablated = [uid for uid, p in placed.items() if p.drop == Drop.EXPANSION_OFF]
        assert ablated and all(placed[u].stage == "traverse" and "no-traversal" in placed[u].detail for u in ablated)
        eng.settings = base
        res = eng.retrieve(conv.questions[0].question)
        again = eng.explain(res, ablated)
        assert all(p.drop != Drop.EXPANSION_OFF for p in again.values())
    finally:
        eng.settings = base

"""Three-stage retrieval: expansion order, budgets, paths, ablations, provenance."""
from __future__ import annotations

from engine.core.edge import Edge
from engine.core.payloads import EdgeAdded
from engine.core.tx import Tx
from engine.engines.allmem.schema import EdgeType
from tests.conftest import turn
from tests.test_operators import RIVER, UPDATE_NEW, UPDATE_OLD, ingest


def add_edges(eng, *edges):
    tx = Tx(eng.state, turn=eng.state.turn, actor="test", isolated=False)
    for src, dst, t in edges:
        tx.emit(EdgeAdded(edge=Edge(src, dst, t, "test").to_dict()))
    eng.store.commit(tx.ops, eng.state)


def small_bank(make_engine, **settings):
    eng = make_engine(settings={"online_semantic_links": 0, "k": 1, **settings})
    texts = ["The lighthouse keeper repainted the tower red.", "Alpha note about gardening tomatoes.",
             "Bravo note about baking sourdough.", "Charlie note about chess openings.",
             "Delta note about kayaking rivers.", "Echo note about violin practice."]
    for i, text in enumerate(texts):
        eng.ingest(turn(i + 1, "Ann", text, session=str(i + 1), day=i + 1))   # one per session: no temporal links
    return eng


def test_expansion_follows_type_priority_then_id(make_engine):
    eng = small_bank(make_engine)
    add_edges(eng, (1, 6, EdgeType.SEMANTIC), (1, 5, EdgeType.TEMPORAL), (1, 4, EdgeType.VERSION),
              (1, 3, EdgeType.SIBLING), (1, 2, EdgeType.SEMANTIC))
    res = eng.retrieve("lighthouse tower painted red")
    assert [a for a, _ in res.anchors] == [1]
    assert [(e["id"], e["type"]) for e in res.expansion] == [
        (3, EdgeType.SIBLING), (4, EdgeType.VERSION), (5, EdgeType.TEMPORAL), (2, EdgeType.SEMANTIC),
        (6, EdgeType.SEMANTIC)]


def test_no_type_priority_uses_id_order(make_engine):
    eng = small_bank(make_engine, ablations=["no-type-priority"])
    add_edges(eng, (1, 6, EdgeType.SIBLING), (1, 2, EdgeType.SEMANTIC), (1, 4, EdgeType.VERSION))
    assert [e["id"] for e in eng.retrieve("lighthouse tower painted red").expansion] == [2, 4, 6]


def test_hop_limit_budget_and_paths(make_engine):
    eng = small_bank(make_engine, budget=3)
    add_edges(eng, (1, 2, EdgeType.VERSION), (2, 3, EdgeType.TEMPORAL), (3, 4, EdgeType.SEMANTIC),
              (1, 5, EdgeType.SEMANTIC))
    res = eng.retrieve("lighthouse tower painted red")
    assert [e["id"] for e in res.expansion] == [2, 5]            # budget L=3 counts the anchor
    eng2 = small_bank(make_engine)
    add_edges(eng2, (1, 2, EdgeType.VERSION), (2, 3, EdgeType.TEMPORAL), (3, 4, EdgeType.SEMANTIC))
    res = eng2.retrieve("lighthouse tower painted red")
    assert [(e["id"], e["hop"]) for e in res.expansion] == [(2, 1), (3, 2)]   # H_q = 2 stops before u4
    by_id = {u.id: u for u in res.candidates}
    assert [h.to_dict() for h in by_id[3].path] == [{"from": 1, "to": 2, "type": EdgeType.VERSION},
                                                    {"from": 2, "to": 3, "type": EdgeType.TEMPORAL}]
    assert by_id[1].path == [] and by_id[3].anchor == 1


def test_a_version_chain_is_recovered_before_associations_take_the_budget(make_engine):
    """A unit regrouped and then superseded sits two version links behind the surface: with type priority Stage 2
    walks the recovery links alone to the hop limit before any temporal or semantic link spends the budget;
    without it, the frontier's links go by id and the association takes the last place."""
    links = ((1, 2, EdgeType.VERSION), (2, 3, EdgeType.VERSION), (1, 4, EdgeType.TEMPORAL), (1, 5, EdgeType.SEMANTIC))
    eng = small_bank(make_engine, budget=3)
    add_edges(eng, *links)
    assert [(e["id"], e["hop"], e["type"]) for e in eng.retrieve("lighthouse tower painted red").expansion] == [
        (2, 1, EdgeType.VERSION), (3, 2, EdgeType.VERSION)]
    eng2 = small_bank(make_engine, budget=3, ablations=["no-type-priority"])
    add_edges(eng2, *links)
    assert [e["id"] for e in eng2.retrieve("lighthouse tower painted red").expansion] == [2, 4]


def test_anchors_only_and_no_recovery_links(make_engine):
    eng = small_bank(make_engine, ablations=["anchors-only"])
    add_edges(eng, (1, 2, EdgeType.VERSION))
    assert eng.retrieve("lighthouse").expansion == []
    eng2 = small_bank(make_engine, ablations=["no-recovery-links"])
    add_edges(eng2, (1, 2, EdgeType.VERSION), (1, 3, EdgeType.SIBLING), (1, 4, EdgeType.SEMANTIC))
    assert [e["id"] for e in eng2.retrieve("lighthouse").expansion] == [4]


def test_recovery_reaches_archived_unit_with_path_and_provenance(make_engine):
    eng = make_engine()
    ids = ingest(eng, UPDATE_OLD, RIVER, UPDATE_NEW)
    eng.consolidate()
    res = eng.retrieve("How many half marathons has Maya run?", k=5)
    assert not eng.state.units[ids["D1:1"]].visible
    assert res.anchors and all(eng.state.units[a].visible for a, _ in res.anchors)   # anchors: visible only
    old = next(u for u in res.candidates if u.id == ids["D1:1"])
    assert not old.visible and old.path and old.path[-1].dst == ids["D1:1"]
    assert old.path[-1].type == EdgeType.VERSION
    assert set(res.source_ids) <= {"D1:1", "D1:2", "D2:1"} and res.source_ids[0] == "D2:1"
    assert res.context.index("[2024-01-01") < res.context.index("[2024-01-20")     # materialized by time
    assert set(res.stages) == {"stage1_ms", "stage2_ms", "stage3_ms", "total_ms"}


def test_no_lexical_is_pure_cosine(make_engine):
    eng = make_engine(settings={"ablations": ["no-lexical"]})
    ingest(eng, UPDATE_OLD, RIVER)
    res = eng.retrieve("half marathons")
    assert res.candidates and all(u.visible for u in res.candidates)
    for u in res.candidates:
        assert abs(u.score - u.dense) < 1e-6


def test_temporal_links_chain_turns_that_share_a_session_time(make_engine):
    """LoCoMo stamps every turn of a session with one time: tau must still link each turn to the one before."""
    from engine.core.conversation import Turn

    eng = make_engine()
    for i in range(1, 5):
        eng.ingest(Turn(id=f"D1:{i}", speaker="A", text=f"Remark number {i} about the garden.",
                        time="2023-05-08T13:56:00", session="1", index=i))
    tau = sorted((s, d) for (s, d, t) in eng.state.edges if t == EdgeType.TEMPORAL)
    assert tau == [(2, 1), (3, 2), (4, 3)]

"""Golden tests for Split, Merge and Update: edges, visibility, rewiring, reason codes."""
from __future__ import annotations

import pytest

from engine.core.proposal import GateVerdict, Status
from engine.engines.allmem.schema import EdgeType, Op, ReasonCode
from engine.eval.diagnostics import version_orphans
from engine.llm.base import BackendReply, LLMBackend
from engine.runtime.errors import RunError
from tests.conftest import turn

UPDATE_OLD = turn(1, "Maya", "I've run 3 half marathons so far, all of them along the river course.", "1", 1)
RIVER = turn(2, "Maya", "The river course for the half marathons is flat and lovely in spring.", "1", 1)
UPDATE_NEW = turn(1, "Maya", "I've run 4 half marathons so far now, all of them along the river course.", "2", 20)
SISTER_A = turn(3, "Jon", "My sister Lena lives in Porto and works as a nurse.", "1", 1)
SISTER_B = turn(2, "Jon", "My sister Lena lives in Porto, she works as a nurse there.", "2", 20)
MIXED = turn(4, "Maya", "The plumber finally fixed our leaking kitchen sink today. Also, I started learning the "
                        "cello with a teacher named Mr. Okafor.", "1", 1)


def ingest(engine, *turns):
    return {t.id: engine.ingest(t).unit_id for t in turns}


def only(proposals, op, status=None):
    found = [p for p in proposals if p.op == op and (status is None or p.status == status)]
    assert found, f"no {op} proposal among {[(p.op, p.targets, p.status) for p in proposals]}"
    return found[0]


def test_update_archives_superseded_and_redirects_semantic_links(make_engine):
    eng = make_engine()
    ids = ingest(eng, UPDATE_OLD, RIVER, UPDATE_NEW)
    old, river, new = ids["D1:1"], ids["D1:2"], ids["D2:1"]
    assert (river, old, EdgeType.SEMANTIC) in eng.state.edges      # online sigma link to the old statement
    report = eng.consolidate()
    upd = only(report.proposals, Op.UPDATE, Status.APPLIED)
    assert upd.targets == [new, old] and upd.confidence >= 0.9 and upd.decided_by == "gate"
    st = eng.state
    assert not st.units[old].visible and st.units[new].visible
    assert (new, old, EdgeType.VERSION) in st.edges
    assert (river, old, EdgeType.SEMANTIC) not in st.edges           # redirect-to-representative
    assert (river, new, EdgeType.SEMANTIC) in st.edges
    assert st.units[old].raw == UPDATE_OLD.raw
    assert old not in eng.index.ids and new in eng.index.ids
    assert version_orphans(st) == []


def test_merge_creates_representative_and_archives_sources(make_engine):
    eng = make_engine()
    ids = ingest(eng, SISTER_A, SISTER_B)
    a, b = ids["D1:3"], ids["D2:2"]
    report = eng.consolidate()
    merge = only(report.proposals, Op.MERGE, Status.APPLIED)
    assert merge.targets == [a, b] and merge.detail["coherence"] >= 0.7
    rep = report.created[0]
    st = eng.state
    u = st.units[rep]
    assert u.kind == "merged" and u.visible and u.source_ids == ["D1:3", "D2:2"]
    assert u.raw == f"{SISTER_A.raw}\n{SISTER_B.raw}"
    assert {(rep, a, EdgeType.VERSION), (rep, b, EdgeType.VERSION)} <= set(st.edges)
    assert not st.units[a].visible and not st.units[b].visible
    assert eng.index.ids == {rep}


def test_split_makes_exact_substring_siblings(make_engine):
    eng = make_engine()
    uid = ingest(eng, MIXED)["D1:4"]
    report = eng.consolidate()
    split = only(report.proposals, Op.SPLIT, Status.APPLIED)
    assert split.targets == [uid]
    parts = report.created
    st = eng.state
    assert len(parts) == 2 and not st.units[uid].visible
    for p in parts:
        assert st.units[p].raw in MIXED.raw and st.units[p].kind == "split-part"
        assert st.units[p].source_ids == ["D1:4"]
        assert (p, uid, EdgeType.VERSION) in st.edges
    assert (parts[0], parts[1], EdgeType.SIBLING) in st.edges and (parts[1], parts[0], EdgeType.SIBLING) in st.edges
    assert "plumber" in st.units[parts[0]].raw and "cello" in st.units[parts[1]].raw


def test_low_confidence_is_gated_and_recorded(make_engine):
    """A plan and an outcome that may be another job (the living room, then the bedroom) is an Update the
    diagnosis is unsure of: proposed below the 0.9 gate, recorded as gated out, not applied."""
    eng = make_engine()
    ingest(eng, turn(1, "Maya", "I'm planning to paint the living room blue this summer.", "1", 1),
           turn(1, "Maya", "I finally painted the bedroom green, took all weekend.", "2", 20))
    props = eng.propose(manual=False)
    low = [p for p in props if p.reason_code == ReasonCode.LOW_CONF]
    assert low and all(p.gate == GateVerdict.FAIL and p.status == Status.SKIPPED for p in low)
    assert all(0 < p.confidence < 0.9 for p in low)


def test_merge_coherence_gate(make_engine):
    eng = make_engine(settings={"gamma_merge": 0.999})
    ingest(eng, SISTER_A, SISTER_B)
    props = eng.propose(manual=False)
    merge = only(props, Op.MERGE)
    assert merge.reason_code == ReasonCode.COH_FAIL and merge.status == Status.SKIPPED


class ScriptedBackend(LLMBackend):
    """Answers each role with fixed text: lets a test feed the engine garbage or bad plans."""

    name = "scripted"

    def __init__(self, inner, replies: dict[str, str]):
        self.inner, self.replies = inner, replies

    def generate(self, request):
        if request.role in self.replies:
            return BackendReply(text=self.replies[request.role])
        return self.inner.generate(request)


def test_garbage_diagnosis_fails_closed(make_engine):
    eng = make_engine()
    ingest(eng, SISTER_A, SISTER_B)
    before = eng.snapshot()
    eng.llm.backend = ScriptedBackend(eng.llm.backend, {"diagnosis": "sure! here are the merges: {"})
    report = eng.consolidate()
    assert {p.reason_code for p in report.proposals} == {ReasonCode.JSON_PARSE_FAIL}
    assert eng.snapshot() == before


def test_schema_failure_and_norm_filter(make_engine):
    eng = make_engine()
    ingest(eng, SISTER_A, SISTER_B)
    eng.llm.backend = ScriptedBackend(eng.llm.backend, {"diagnosis": '{"split_tasks": []}'})
    assert {p.reason_code for p in eng.consolidate().proposals} == {ReasonCode.SCHEMA_FAIL}
    eng.ingest(turn(9, "Jon", "Lena says hi from Porto.", "2", 21))
    bogus = '{"split_tasks": [], "update_tasks": [], "merge_tasks": [{"node_ids": ["1", "999"], "reason": "x", "confidence": 0.99}]}'
    eng.llm.backend = ScriptedBackend(eng.llm.backend.inner, {"diagnosis": bogus})
    props = eng.consolidate().proposals
    assert {p.reason_code for p in props} == {ReasonCode.NORM_FILTER}
    assert "999" in props[0].note


def test_invalid_split_plan_fails_closed(make_engine):
    eng = make_engine()
    ingest(eng, MIXED)
    before = eng.snapshot()
    plan = ('{"do_split": true, "split_rationale": "x", "segments": ['
            '{"segment_text": "The plumber fixed the sink.", "segment_summary": "s", "segment_keywords": ["k"], "topic_label": "a"},'
            '{"segment_text": "I started the cello.", "segment_summary": "s", "segment_keywords": ["k"], "topic_label": "b"}]}')
    eng.llm.backend = ScriptedBackend(eng.llm.backend, {"split_plan": plan})
    split = only(eng.consolidate().proposals, Op.SPLIT)
    assert split.status == Status.FAILED and split.reason_code == ReasonCode.PLAN_VALIDATION_FAIL
    assert "substring" in split.note
    assert eng.snapshot() == before


def test_touched_set_skips_stale_targets(make_engine):
    """A unit merged away earlier in the run cannot then be updated: APPLICABLE_FAIL."""
    eng = make_engine()
    ingest(eng, SISTER_A, SISTER_B)
    a, b = 1, 2
    tasks = ('{"split_tasks": [], "merge_tasks": [{"node_ids": ["1", "2"], "reason": "dup", "confidence": 0.95}],'
             '"update_tasks": [{"old_node_id": "1", "new_node_id": "2", "reason": "newer", "confidence": 0.95}]}')
    eng.llm.backend = ScriptedBackend(eng.llm.backend, {"diagnosis": tasks})
    props = eng.consolidate().proposals
    merges = [p for p in props if p.op == Op.MERGE and p.status == Status.APPLIED]
    updates = [p for p in props if p.op == Op.UPDATE and p.targets == [b, a]]
    assert merges and updates
    assert all(u.status == Status.SKIPPED for u in updates)
    # both buffered targets diagnosed the same pair: one copy loses de-duplication, the other is stale
    assert sorted(u.reason_code for u in updates) == [ReasonCode.APPLICABLE_FAIL, ReasonCode.DUPLICATE]


def test_manual_review_accept_and_reject(make_engine):
    eng = make_engine()
    ids = ingest(eng, UPDATE_OLD, UPDATE_NEW, SISTER_A, SISTER_B)
    props = eng.propose(manual=True)
    upd = only(props, Op.UPDATE, Status.PENDING)
    merge = only(props, Op.MERGE, Status.PENDING)
    before = eng.snapshot()
    plan = eng.preview_plan(upd.id)
    assert plan["updated_summary"] and eng.state.proposals[upd.id].plan == plan
    assert eng.snapshot() == before                                     # previewing changes nothing
    report = eng.apply({upd.id: True, merge.id: False}, decided_by="alice")
    st = eng.state
    assert st.proposals[upd.id].status == Status.APPLIED and st.proposals[upd.id].decided_by == "alice"
    assert st.proposals[merge.id].status == Status.REJECTED and st.proposals[merge.id].decided_by == "alice"
    assert st.units[ids["D1:3"]].visible and st.units[ids["D2:2"]].visible   # rejected merge changed nothing
    assert not st.units[ids["D1:1"]].visible
    assert report.run_id == upd.run_id and eng.open_run() is None


def test_undecided_proposals_stay_pending_for_a_later_apply_of_the_run(make_engine):
    """A manual apply decides only what it is given: the rest stays pending, the run stays open, and a later
    apply of the same run decides it; the committed summary and undo cover every part."""
    eng = make_engine()
    ids = ingest(eng, UPDATE_OLD, UPDATE_NEW, SISTER_A, SISTER_B)
    before = eng.snapshot()
    props = eng.propose(manual=True)
    upd, merge = only(props, Op.UPDATE, Status.PENDING), only(props, Op.MERGE, Status.PENDING)
    pending = [p.id for p in props if p.status == Status.PENDING]
    run_id = upd.run_id
    eng.apply({upd.id: True}, decided_by="alice")
    stored = eng.store.load_state()                          # the database, folded afresh
    assert stored.proposals[upd.id].status == Status.APPLIED
    assert all(stored.proposals[i].status == Status.PENDING and stored.proposals[i].decided_by is None
               for i in pending if i != upd.id)
    assert stored.runs[run_id].status == "open" and eng.open_run() == run_id
    assert not stored.units[ids["D1:1"]].visible             # the applied part is in effect already
    with pytest.raises(RunError, match="still has undecided"):
        eng.propose(manual=True)

    eng.apply({i: i == merge.id for i in pending if i != upd.id}, decided_by="bob")
    stored = eng.store.load_state()
    run = stored.runs[run_id]
    assert run.status == "committed" and eng.open_run() is None
    assert (stored.proposals[merge.id].status, stored.proposals[merge.id].decided_by) == (Status.APPLIED, "bob")
    assert run.summary["applied"] == sum(stored.proposals[i].status == Status.APPLIED for i in pending) == 2
    assert run.summary["rejected"] == sum(stored.proposals[i].status == Status.REJECTED for i in pending)
    assert set(run.summary["archived"]) == set(stored.archived_ids) >= {ids["D1:1"], ids["D1:3"], ids["D2:2"]}
    eng.undo_last_run()                                      # both parts are one run: undo reverts both
    assert eng.snapshot() == before


def test_deferring_the_rest_closes_the_run_with_a_note_on_each(make_engine):
    eng = make_engine()
    ingest(eng, UPDATE_OLD, UPDATE_NEW, SISTER_A, SISTER_B)
    props = eng.propose(manual=True)
    upd = only(props, Op.UPDATE, Status.PENDING)
    rest = [p.id for p in props if p.status == Status.PENDING and p.id != upd.id]
    assert rest
    with pytest.raises(RunError, match="nothing to apply"):
        eng.apply({}, decided_by="alice")                    # nothing is ever closed silently
    eng.apply({upd.id: True}, decided_by="alice", defer_rest=True)
    stored = eng.store.load_state()
    assert stored.runs[upd.run_id].status == "committed" and eng.open_run() is None
    assert stored.proposals[upd.id].status == Status.APPLIED
    for i in rest:
        p = stored.proposals[i]
        assert (p.status, p.decided_by) == (Status.SKIPPED, "alice") and p.note.startswith("deferred by alice")
    routed = [p.id for p in props if p.status == Status.SKIPPED]        # closed at diagnosis, before the review
    assert stored.runs[upd.run_id].summary["skipped"] == len(rest) + len(routed)
    assert stored.runs[upd.run_id].summary["skipped_at_diagnosis"] == len(routed)


def test_undo_last_run_restores_the_bank(make_engine):
    eng = make_engine()
    ingest(eng, UPDATE_OLD, RIVER, UPDATE_NEW, SISTER_A, SISTER_B, MIXED)
    before = eng.snapshot()
    report = eng.consolidate()
    assert report.created and eng.snapshot() != before
    eng.undo_last_run()
    assert eng.snapshot() == before
    assert sorted(eng.index.ids) == eng.state.visible_ids
    # the undo is itself in the log: a fresh fold agrees
    assert eng.store.load_state().units.keys() == eng.state.units.keys()


def test_no_visibility_ablation_never_archives(make_engine):
    eng = make_engine(settings={"ablations": ["no-visibility"]})
    ingest(eng, UPDATE_OLD, UPDATE_NEW, SISTER_A, SISTER_B)
    report = eng.consolidate()
    assert report.created and not eng.state.archived_ids


def test_operator_ablation_drops_proposals(make_engine):
    eng = make_engine(settings={"ablations": ["no-merge"]})
    ingest(eng, SISTER_A, SISTER_B)
    report = eng.consolidate()
    assert all(p.status == Status.SKIPPED for p in report.proposals if p.op == Op.MERGE)
    assert not report.created


def test_undo_puts_diagnosed_units_back_in_the_buffer(make_engine):
    eng = make_engine()
    ids = ingest(eng, UPDATE_OLD, UPDATE_NEW)
    eng.consolidate()
    assert not eng.state.buffer("atc")
    eng.undo_last_run()
    assert set(eng.state.buffer("atc")) == set(ids.values())
    assert any(p.op == Op.UPDATE and p.status == Status.APPLIED for p in eng.consolidate().proposals)

"""Property-based tests of the DESIGN §2 invariants over random ingest/consolidate/decide sequences."""
from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.core.proposal import Status
from engine.engines.allmem.executor import Executor
from engine.engines.allmem.schema import EdgeType
from engine.eval.diagnostics import version_orphans
from engine.session import open_session
from engine.store.tables import rows_of
from tests.conftest import turn

POOL = [
    ("Maya", "I've run 3 half marathons so far, all of them along the river course."),
    ("Maya", "I've run 4 half marathons so far now, all of them along the river course."),
    ("Jon", "My sister Lena lives in Porto and works as a nurse."),
    ("Jon", "My sister Lena lives in Porto, she works as a nurse there."),
    ("Maya", "The plumber finally fixed our leaking kitchen sink today. Also, I started learning the cello "
             "with a teacher named Mr. Okafor."),
    ("Jon", "Pepper the beagle chewed through another garden hose this morning."),
    ("Maya", "I still eat meat, mostly chicken at weekends."),
    ("Maya", "I don't eat meat anymore, not even chicken at weekends."),
    ("Jon", "We adopted a grey kitten called Miso from the shelter. Work has been busy with the new audit."),
    ("Maya", "My coral reef research got a second year of funding from the ocean trust."),
    ("Jon", "Pepper the beagle chewed through another garden hose this week."),
    ("Maya", "The river course is flat, which is why I love it for half marathons."),
]

action = st.one_of(
    st.tuples(st.just("ingest"), st.integers(0, len(POOL) - 1)),
    st.tuples(st.just("auto"), st.just(0)),
    st.tuples(st.just("manual"), st.integers(0, 2 ** 16)),
    st.tuples(st.just("undo"), st.just(0)),
)


def check_invariants(eng, raws: dict[int, str]) -> None:
    st_ = eng.state
    for uid, raw in raws.items():                  # raw evidence byte-identical forever
        if uid in st_.units:
            assert st_.units[uid].raw.encode() == raw.encode()
    assert version_orphans(st_) == []              # every archived unit reachable along version edges
    s = eng.settings
    for uid in st_.units:                           # per-type out-degree caps
        assert len(st_.out(uid, EdgeType.TEMPORAL)) <= s.cap_temporal
        assert len(st_.out(uid, EdgeType.SEMANTIC)) <= s.cap_semantic
        assert len(st_.out(uid, EdgeType.SIBLING)) <= s.cap_sibling
    assert sorted(eng.index.ids) == st_.visible_ids  # FAISS holds exactly the visible surface
    folded = eng.store.load_state()                 # the log is the truth (folded from a checkpoint)
    assert {u: (x.visible, x.summary) for u, x in folded.units.items()} == \
           {u: (x.visible, x.summary) for u, x in st_.units.items()}
    assert set(folded.edges) == set(st_.edges)
    assert rows_of(eng.store.load_state(checkpoints=False)) == rows_of(folded) == eng.store.table_rows()


@pytest.mark.slow
@settings(max_examples=40, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                HealthCheck.too_slow])
@given(actions=st.lists(action, min_size=3, max_size=14))
def test_invariants_hold_over_random_sequences(tmp_path_factory, actions):
    eng = open_session(tmp_path_factory.mktemp("prop") / "m.sqlite")
    eng.store.checkpoint_every = 7                  # checkpoints land all over the sequence
    raws: dict[int, str] = {}
    day = 1
    for kind, arg in actions:
        if kind == "ingest":
            day += 1
            speaker, text = POOL[arg]
            t = turn(day % 60, speaker, text, session=str(day // 4 + 1), day=min(day, 28))
            t = t.__class__(**{**t.__dict__, "id": f"T{day}"})
            raws[eng.ingest(t).unit_id] = t.raw
        elif kind == "auto" and eng.state.buffer("atc"):
            eng.consolidate()
        elif kind == "manual" and eng.state.buffer("atc"):
            props = [p for p in eng.propose(manual=True) if p.status == Status.PENDING]
            if not props:                            # nothing to decide: the diagnosis committed its own run
                assert eng.open_run() is None
            else:
                before = eng.snapshot()
                decisions = {p.id: bool((arg >> i) & 1) for i, p in enumerate(props)}
                report = eng.apply(decisions, decided_by="prop-test")
                if not any(decisions.values()):     # a rejected proposal changes nothing
                    assert eng.snapshot() == before
                for p in report.proposals:
                    if p.status == Status.REJECTED:
                        assert p.decided_by == "prop-test"
        elif kind == "undo" and eng.state.last_committed_run() is not None:
            try:
                eng.undo_last_run()
            except Exception as exc:                 # only "not the latest run" may refuse
                assert "not the latest" in str(exc)
        check_invariants(eng, raws)


def test_consolidation_run_is_atomic(make_engine, monkeypatch):
    """A failure halfway through a run leaves the store and state exactly as before."""
    eng = make_engine()
    for i, (speaker, text) in enumerate(POOL[:6]):
        eng.ingest(turn(i + 1, speaker, text, session=str(i // 2 + 1), day=i + 1))
    eng.propose(manual=False)
    before, ops_before = eng.snapshot(), eng.store.last_seq()
    calls = {"n": 0}
    original = Executor._merge

    def exploding_merge(self, p, plan):
        calls["n"] += 1
        original(self, p, plan)          # some edits are made in the transaction...
        raise RuntimeError("disk on fire")  # ...then the run dies

    monkeypatch.setattr(Executor, "_merge", exploding_merge)
    with pytest.raises(RuntimeError):
        eng.apply(None)
    assert calls["n"] == 1
    assert eng.snapshot() == before and eng.store.last_seq() == ops_before
    assert eng.store.load_state().units.keys() == eng.state.units.keys()
    monkeypatch.setattr(Executor, "_merge", original)
    report = eng.apply(None)             # the open run can still be applied afterwards
    assert any(p.status == Status.APPLIED for p in report.proposals)

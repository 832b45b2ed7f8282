"""The operation log is the truth: folds, time travel, branching, persistence; on SQLite and PostgreSQL."""
from __future__ import annotations

import pytest

from engine.core.oplog import OpKind
from engine.core.ops import fold
from engine.session import open_session
from tests.conftest import BACKENDS
from tests.test_operators import SISTER_A, SISTER_B, UPDATE_NEW, UPDATE_OLD, ingest


@pytest.fixture(scope="module", params=BACKENDS)
def backend(request):
    """Every test here that uses a database runs on SQLite and on PostgreSQL (tests/conftest.py)."""
    return request.param


def test_state_is_a_fold_of_the_log_and_survives_reopen(db_url):
    db = db_url
    eng = open_session(db)
    ingest(eng, UPDATE_OLD, SISTER_A, UPDATE_NEW, SISTER_B)
    eng.consolidate()
    again = open_session(db, create=False)
    assert again.snapshot() == eng.snapshot()
    assert again.state.proposals.keys() == eng.state.proposals.keys()
    assert sorted(again.index.ids) == again.state.visible_ids


def test_time_travel_to_any_turn(make_engine):
    eng = make_engine()
    ingest(eng, UPDATE_OLD, SISTER_A)
    at2 = eng.snapshot()
    ingest(eng, UPDATE_NEW)
    eng.consolidate()
    view = eng.at(upto_turn=2)
    assert view.snapshot() == at2
    assert len(view.state.units) == 2 and view.state.turn == 2
    assert [u.id for u in view.retrieve("half marathons", k=3).units][:1] == [1]


def test_every_change_is_logged_with_llm_calls(make_engine):
    eng = make_engine()
    ingest(eng, UPDATE_OLD, UPDATE_NEW)
    eng.consolidate()
    kinds = [op.kind for op in eng.store.ops()]
    for kind in (OpKind.TURN_INGESTED, OpKind.NODE_CREATED, OpKind.EDGE_ADDED, OpKind.BUFFER_PUSHED,
                 OpKind.RUN_STARTED, OpKind.PROPOSAL_MADE, OpKind.PROPOSAL_UPDATED, OpKind.STATUS_CHANGED,
                 OpKind.RUN_COMMITTED, OpKind.LLM_CALL):
        assert kind in kinds, kind
    calls = [op.payload for op in eng.store.ops(kinds=[OpKind.LLM_CALL])]
    assert {c["role"] for c in calls} >= {"descriptor", "diagnosis", "update_plan"}
    assert all(c["response"] and c["latency_ms"] >= 0 and c["prompt_tokens"] > 0 for c in calls)
    seqs = [op.seq for op in eng.store.ops()]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)


@pytest.mark.parametrize("target", BACKENDS, ids=[f"into-{b}" for b in BACKENDS])
def test_branch_keeps_history_up_to_a_point(make_engine, make_db, target):
    eng = make_engine()
    ingest(eng, UPDATE_OLD, UPDATE_NEW)
    seq = eng.store.last_seq()
    eng.consolidate()
    other = eng.store.branch(make_db(target), seq)
    state = other.load_state()
    assert not state.runs and all(u.visible for u in state.units.values())
    assert other.get_meta("branched_from")["seq"] == seq
    assert fold(eng.store.ops(), upto_seq=seq).units.keys() == state.units.keys()


def test_recorded_backend_replays_a_session_without_a_model(make_engine, make_db):
    eng = make_engine()
    ingest(eng, UPDATE_OLD, UPDATE_NEW)
    eng.consolidate()
    replayed = open_session(make_db(), llm="recorded", records=str(eng.store.url))
    assert replayed.llm.backend.name == "recorded"
    ingest(replayed, UPDATE_OLD, UPDATE_NEW)
    replayed.consolidate()
    assert replayed.snapshot() == eng.snapshot()


@pytest.mark.parametrize("target", BACKENDS, ids=[f"into-{b}" for b in BACKENDS])
def test_branch_carries_annotation_cases(make_engine, make_db, target):
    from engine.loaders import load_conversation
    from engine.store.annotations import AnnotationStore
    from tests.conftest import ROOT

    demo = load_conversation(ROOT / "datasets" / "demo" / "demo.jsonl")
    eng = make_engine()
    ingest(eng, UPDATE_OLD)
    store = AnnotationStore(eng.store.engine, author="test")
    report = store.import_json((ROOT / "datasets" / "demo" / "cases.json").read_text(), "cases.json", demo)
    assert store.cases("demo"), report.line()
    other = eng.store.branch(make_db(target), eng.store.last_seq())
    assert [c.scenario_id for c in AnnotationStore(other.engine).cases("demo")] == \
        [c.scenario_id for c in store.cases("demo")]


def test_reopening_with_the_same_partial_settings_resumes(db_url):
    db = db_url
    open_session(db, settings={"ablations": ["no-lexical"]})
    again = open_session(db, settings={"ablations": ["no-lexical"]})
    assert again.settings.ablations == ["no-lexical"]


def test_every_op_kind_is_declared_once_and_unknown_kinds_stop_the_fold(make_engine):
    from engine.core import ops
    from engine.core.oplog import OpRecord

    assert set(OpKind) == set(ops.SPECS)
    with pytest.raises(ops.UnknownOpKind, match="op kind 'unit_teleported'"):
        fold([OpRecord(kind="unit_teleported", payload={}, turn=1, seq=1)])
    eng = make_engine()
    ingest(eng, UPDATE_OLD)
    assert {op.v for op in eng.store.ops()} == {1}           # every stored record names its payload version


def test_older_payload_versions_are_upcast_on_read(monkeypatch):
    """A kind whose payload changed shape reads old records through its upcast chain."""
    from dataclasses import replace

    from engine.core import ops
    from engine.core.oplog import OpRecord

    old = ops.SPECS[OpKind.NOTE]
    seen = []
    monkeypatch.setitem(ops.SPECS, OpKind.NOTE, replace(
        old, version=3, apply=lambda s, p, op: seen.append(p.to_dict()),
        upcast={1: lambda p: {"text": p["msg"]}, 2: lambda p: {**p, "lang": "en"}}))
    fold([OpRecord(kind=OpKind.NOTE, payload={"msg": "hi"}, seq=1, v=1),
                      OpRecord(kind=OpKind.NOTE, payload={"text": "yo", "lang": "fr"}, seq=2, v=3)])
    assert seen == [{"text": "hi", "lang": "en"}, {"text": "yo", "lang": "fr"}]


def test_illegal_lifecycle_transition_is_refused(make_engine):
    from engine.core.ops import IllegalTransition
    from engine.core.tx import Tx

    eng = make_engine()
    uid = ingest(eng, UPDATE_OLD)["D1:1"]
    tx = Tx(eng.state, turn=1)
    tx.set_status(uid, "archived")
    with pytest.raises(IllegalTransition, match="archived -> visible is not a legal transition"):
        tx.set_status(uid, "visible")
    assert eng.state.units[uid].status == "visible"           # the live state never saw the isolated edit


def test_a_clone_shares_until_it_changes_and_never_changes_what_it_came_from(make_engine):
    """Tx works on a copy-on-write clone: every declared kind of record applied to it (nodes, edges, proposals,
    runs, buffers, engine variables, turns, notes) leaves the live state as it was, and the clone ends where
    applying the same records to a full copy ends. A kind declared later fails this test until it is applied
    here too."""
    from engine.core import ops
    from engine.core.edge import Edge
    from engine.core.node import Node
    from engine.core.ops import apply
    from engine.core.payloads import (LLMCallMade, Note, RunCommitted, RunDiscarded, RunStarted, RunUndone,
                                      TurnIngested)
    from engine.core.proposal import Proposal
    from engine.core.state import MemoryState
    from engine.core.tx import Tx

    eng = make_engine()
    ids = ingest(eng, UPDATE_OLD, SISTER_A, UPDATE_NEW, SISTER_B)
    eng.consolidate()
    before = eng.state.to_dict()

    def adjacency(state):
        return {u: (sorted(e.key for e in state.out_edges(u)), sorted(e.key for e in state.in_edges(u)))
                for u in state.nodes}

    links = adjacency(eng.state)
    old, sister, new, other = (ids[t.id] for t in (UPDATE_OLD, SISTER_A, UPDATE_NEW, SISTER_B))
    run = next(iter(eng.state.runs))
    tx = Tx(eng.state, turn=eng.state.turn, run_id="r-clone")
    tx.emit(RunStarted(mode="manual"))
    tx.set_status(new, "archived")
    tx.set_descriptor(sister, "a changed summary", ["changed"])
    tx.update_node(old, attrs={"note": "changed"}, source_ids=["D1:1", "D9:9"])
    tx.create_node(Node(id=tx.state.next_node_id, raw="a node of the run", summary="", keywords=[], time="",
                        kind="unit", source_ids=["D9:9"]))
    made = tx.state.next_node_id - 1
    tx.add_edge(Edge(src=old, dst=made, type="semantic", confidence=0.5))
    tx.add_edge(Edge(src=sister, dst=old, type="semantic", confidence=0.4))
    for e in list(tx.state.out_edges(old))[:1]:
        tx.remove_edge(*e.key)
    tx.retract_node(made)
    tx.push_buffer("clone-test", [(old, [sister])])
    tx.set_var("phase", {"phase": "changed"})
    pid = tx.state.next_proposal_id
    tx.make_proposal(Proposal(id=pid, run_id="r-clone", op="merge", targets=[old, sister], confidence=0.5,
                               reason="a test"))
    for p in list(eng.state.proposals)[:2]:
        tx.update_proposal(p, note="changed")
    tx.flush_buffer("clone-test")
    tx.emit(TurnIngested(turn_id="D9:9"))
    tx.emit(Note(text="a note"))
    tx.emit(LLMCallMade(call={"role": "test"}))
    tx.emit(RunUndone(undone_run=run))
    tx.emit(RunCommitted(summary={"n": 1}))
    tx.emit(RunDiscarded())
    assert {op.kind for op in tx.ops} == set(ops.SPECS)     # a new kind of record must be added here
    assert eng.state.to_dict() == before and adjacency(eng.state) == links
    full = MemoryState.from_dict(before, eng.state.schema)
    for op in tx.ops:
        apply(full, op)
    assert tx.state.to_dict() == full.to_dict()
    assert adjacency(tx.state) == adjacency(full)
    assert tx.state.nodes[old] is not eng.state.nodes[old]        # a changed node is the clone's own
    assert tx.state.nodes[other] is eng.state.nodes[other]        # the others are still shared


def test_nodes_and_proposals_write_every_field_as_asdict_does():
    """Node.to_dict and Proposal.to_dict are written out for speed; a field added to either, or a nested value
    shared with the object, would make a checkpoint or a log record differ from the object."""
    from dataclasses import asdict

    from engine.core.node import Node
    from engine.core.proposal import Proposal

    node = Node(id=3, raw="r", summary="s", keywords=["k"], time="t", kind="unit", source_ids=["D1:1"],
                speakers=["A"], members=[1, 2], attrs={"a": {"b": [1]}})
    prop = Proposal(id=5, run_id="r1", op="merge", targets=[1, 2], confidence=0.5, reason="why",
                    plan={"keep": [1]}, detail={"evidence": [{"turn": "D1:1"}]})
    for item in (node, prop):
        data = item.to_dict()
        assert data == asdict(item) and list(data) == list(asdict(item))
        data[next(k for k in data if isinstance(data[k], list))].append("changed")
        assert item.to_dict() == asdict(item) and data != asdict(item)


def test_old_databases_are_refused_with_a_clear_message(db_url):
    from sqlalchemy import create_engine

    from engine.store.database import database_url
    from engine.store.log_store import Store, StoreError

    old = create_engine(database_url(db_url))
    with old.begin() as con:
        con.exec_driver_sql("CREATE TABLE op_log (seq INTEGER PRIMARY KEY, turn INT, run_id TEXT, kind TEXT, "
                            "actor TEXT, payload TEXT)")
    old.dispose()
    with pytest.raises(StoreError, match="older Memory Workbench"):
        Store(db_url)


def test_any_text_round_trips_through_the_store_and_vectors_bit_for_bit(db_url):
    """NUL (PostgreSQL text cannot hold it: engine/store/postgres.py escapes it), the escape character itself,
    control characters, RTL and emoji come back identical from the log, the materialized tables and the
    annotation tables; cached vectors come back bit for bit."""
    import numpy as np

    from engine.core.cases import Case
    from engine.store.annotations import AnnotationStore
    from engine.store.tables import rows_of
    from tests.conftest import turn

    odd = "nul\x00 here, \u2400 and \u24000 and \\0, \x01\x1f\x7f, \u202eRTL\u202c, \U0001f469\u200d\U0001f467"
    eng = open_session(db_url)
    uid = eng.ingest(turn(1, "Ann", odd)).unit_id
    case = Case("odd", "conv\x00", title=odd)
    case.add_question(query_text=odd, gold_answer=odd)
    AnnotationStore(eng.store.engine, author="test").save(case)

    again = open_session(db_url, create=False)
    assert odd in again.state.nodes[uid].raw and again.snapshot() == eng.snapshot()
    assert again.store.table_rows() == rows_of(again.state) == rows_of(eng.state)
    assert odd in again.store.table_rows()["node"][0]["raw"]
    assert [op.payload for op in again.store.ops()] == [op.payload for op in eng.store.ops()]
    assert AnnotationStore(again.store.engine).cases("conv\x00") == [case]
    vectors = dict(eng.embedder.memory)
    stored = again.store.get_embeddings(list(vectors))
    assert vectors and stored.keys() == vectors.keys()
    assert all(np.array_equal(stored[k], vectors[k].astype(np.float32)) for k in vectors)


def test_messages_name_the_database_without_its_password(db_url, make_db, backend):
    """Errors and the branch record name a server's URL with its credentials removed."""
    from sqlalchemy.engine import make_url

    from engine.session import SessionError

    url = db_url
    if backend == "postgresql":              # the test server trusts loopback, so a password is ignored
        url = make_url(db_url).set(password="s3cret-pw").render_as_string(hide_password=False)
    with pytest.raises(SessionError, match="no memory in") as err:
        open_session(url, create=False)
    eng = open_session(url)
    ingest(eng, UPDATE_OLD)
    with pytest.raises(SessionError, match="holds a 'allmem' memory, not 'naive'") as other:
        open_session(url, engine="naive")
    branch = eng.store.branch(make_db(), eng.store.last_seq())
    for text in (str(err.value), str(other.value), eng.store.location, str(branch.get_meta("branched_from"))):
        assert "s3cret" not in text, text


def test_a_server_that_refuses_is_named_without_its_password():
    from engine.store.log_store import Store, StoreError

    for url in ("postgresql://team:s3cret-pw@127.0.0.1:1/memory",
                "postgres://127.0.0.1:1/memory?user=team&password=s3cret-pw"):
        with pytest.raises(StoreError) as err:
            Store(url)
        message = str(err.value)
        assert message.startswith("cannot open postgresql+psycopg://") and "127.0.0.1:1/memory: " in message
        assert "s3cret" not in message and "\n" not in message


def test_checkpoints_space_out_as_the_memory_grows(db_url):
    """A checkpoint writes the whole fold, so its spacing grows with the memory (a quarter of its nodes, in
    records, once that passes `checkpoint_every`): a growing memory pays for its checkpoints linearly, and
    every point of its history still folds from the nearest one to the log's own fold."""
    import json
    import zlib

    from sqlalchemy import text as sql

    from engine.store.log_store import CHECKPOINT_SHARE
    from tests.conftest import turn

    eng = open_session(db_url, engine="naive")
    eng.store.checkpoint_every = 10
    places = ["river", "harbour", "market", "station", "library", "orchard", "bakery", "stadium"]
    for i in range(1, 241):
        eng.ingest(turn(i, "Maya" if i % 2 else "Leo", f"Day {i}: we walked past the {places[i % 8]} and "
                                                        f"counted {i * 7} birds on the way.", str(1 + i // 40), i))
    with eng.store.engine.connect() as conn:
        rows = conn.execute(sql("SELECT seq, body FROM checkpoint ORDER BY seq")).all()
    seqs = [seq for seq, _ in rows]
    nodes = [len(json.loads(zlib.decompress(body))["nodes"]) for _, body in rows]
    gaps = [b - a for a, b in zip([0, *seqs], seqs)]
    assert all(gap >= max(10, n // CHECKPOINT_SHARE) for gap, n in zip(gaps, nodes)), list(zip(gaps, nodes))
    assert max(gaps) > 10 * 4 and len(seqs) < eng.state.seq // 10 / 2      # fixed spacing would write seq/10
    for target in (seqs[-1], seqs[-1] - 1, seqs[len(seqs) // 2] + 3, eng.state.seq):
        assert eng.store.load_state(upto_seq=target).to_dict() == \
            eng.store.load_state(upto_seq=target, checkpoints=False).to_dict()

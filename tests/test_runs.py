"""Open runs and the single writer: `memwb runs`, discard, refusal of stale views and of an id handed out twice."""
from __future__ import annotations

import pytest
from sqlalchemy import text
from sqlalchemy.exc import IntegrityError

from engine.core.oplog import OpKind, OpRecord
from engine.runtime.errors import RunError
from engine.session import open_session
from engine.store.log_store import StaleView, Store, StoreError
from tests.conftest import BACKENDS, turn
from tests.writers import finish, memwb, replay_args

TURNS = [
    turn(1, "Maya", "I've run 3 half marathons so far, all of them along the river course."),
    turn(2, "Jon", "My sister Lena lives in Porto and works as a nurse."),
    turn(3, "Maya", "I've run 4 half marathons so far now, all of them along the river course."),
    turn(4, "Jon", "My sister Lena lives in Porto, she works as a nurse there."),
    turn(5, "Maya", "The plumber finally fixed our leaking kitchen sink today. Also, I started learning the cello "
                    "with a teacher named Mr. Okafor."),
]


@pytest.fixture(scope="module", params=BACKENDS)
def backend(request):
    return request.param


@pytest.fixture
def open_run_db(db_url):
    """A memory whose manual consolidation run was proposed and never decided (a review left open)."""
    db = db_url
    eng = open_session(db)
    for t in TURNS:
        eng.ingest(t)
    buffered = dict(eng.state.buffer("atc"))
    props = eng.propose(manual=True)
    assert eng.open_run() == "run-0001" and props
    return db, buffered


def test_runs_lists_an_open_run_and_other_commands_say_so(open_run_db):
    db, _ = open_run_db
    code, out, err = finish(memwb("runs", "--db", db))
    assert code == 0 and "run-0001" in out and " open " in out and "pending=" in out, (out, err)
    code, out, err = finish(memwb("export", "--db", db, "--json"))
    assert code == 0 and "run-0001 is open" in err and f"memwb runs apply run-0001 --db {db}" in err


def test_a_replay_with_a_schedule_refuses_while_a_run_is_open(open_run_db, tmp_path):
    db, _ = open_run_db
    conv = tmp_path / "turns.jsonl"
    conv.write_text("".join(
        '{"id": "%s", "speaker": "%s", "text": "%s", "time": "%s", "session": "1"}\n'
        % (t.id, t.speaker, t.text, t.time) for t in TURNS + [turn(6, "Jon", "Pepper chewed a hose.")]))
    before = Store(db).last_seq()
    code, out, err = finish(memwb(*replay_args(conv, db, "every-1-turns")))
    assert code == 2 and "run-0001 is open" in err and "memwb runs discard run-0001" in err, err
    assert Store(db).last_seq() == before           # nothing written


def test_discard_closes_the_run_and_puts_its_work_back(open_run_db):
    db, buffered = open_run_db
    code, out, err = finish(memwb("runs", "discard", "run-0001", "--db", db))
    assert code == 0, err
    eng = open_session(db, create=False)
    assert eng.state.runs["run-0001"].status == "discarded" and eng.open_run() is None
    assert {p.status for p in eng.state.proposals.values()} == {"skipped"}
    assert dict(eng.state.buffer("atc")) == buffered        # the next run diagnoses the same turns again
    code, out, err = finish(memwb("consolidate", "--db", db))
    assert code == 0 and out.startswith("run-0002:"), (out, err)
    assert open_session(db, create=False).state.runs["run-0002"].status == "committed"


def test_runs_apply_lets_the_gate_decide_an_open_run(open_run_db):
    db, _ = open_run_db
    code, out, err = finish(memwb("runs", "apply", "run-0001", "--db", db))
    assert code == 0 and out.startswith("run-0001:"), (out, err)
    eng = open_session(db, create=False)
    assert eng.state.runs["run-0001"].status == "committed"
    assert not [p for p in eng.state.proposals.values() if p.status == "pending"]
    code, out, err = finish(memwb("runs", "discard", "run-0001", "--db", db))
    assert code == 2 and "run-0001 is not an open run" in err


def test_a_stale_view_writes_nothing(db_url):
    db = db_url
    first, second = open_session(db), open_session(db)
    first.ingest(TURNS[0])
    stale = second.state.seq
    with pytest.raises(StaleView, match="another process wrote"):
        second.store.commit([OpRecord(kind=OpKind.NOTE, payload={"text": "late"})], second.state)
    assert second.store.last_seq() == first.state.seq and second.state.seq == stale
    report = second.ingest(TURNS[1])                 # an engine write catches up first, then writes
    assert report.unit_id == first.state.next_node_id and second.others_records > 0
    assert second.state.turn_ids == ["D1:1", "D1:2"]


def test_the_database_refuses_an_id_handed_out_twice(db_url):
    db = db_url
    eng = open_session(db)
    eng.ingest(TURNS[0])
    node = eng.state.nodes[1].payload()
    seq = eng.state.seq
    with pytest.raises(StoreError, match="node id '1' a second time"):
        eng.store.commit([OpRecord(kind=OpKind.NODE_CREATED, payload={"node": node})], eng.state)
    again = OpRecord(kind=OpKind.TURN_INGESTED, payload={"turn_id": "D1:1", "index": 1, "session": "1"}, turn=2)
    with pytest.raises(StoreError, match="turn id 'D1:1' a second time"):
        eng.store.commit([again], eng.state)
    assert eng.store.last_seq() == seq
    with pytest.raises(IntegrityError), eng.store.engine.begin() as c:     # the key, not only the code
        c.execute(text("insert into claim (kind, key, seq) values ('run', 'x', 1), ('run', 'x', 2)"))


def test_a_failing_step_of_an_automatic_run_leaves_no_open_run(db_url, monkeypatch):
    """A backend raising during apply: the whole run rolls back (no proposals left undecided)."""
    db = db_url
    eng = open_session(db)
    for t in TURNS:
        eng.ingest(t)
    seq = eng.state.seq
    process = eng.process()

    def boom(*_a, **_k):
        raise RuntimeError("backend exploded")

    monkeypatch.setattr(type(process), "execute", boom)
    with pytest.raises(RuntimeError, match="exploded"):
        eng.consolidate()
    assert eng.store.last_seq() == seq and eng.open_run() is None and eng.state.seq == seq
    reopened = open_session(db, create=False)
    assert reopened.open_run() is None and reopened.pending() == eng.pending() > 0


def test_run_scheduled_never_skips_silently(open_run_db):
    db, _ = open_run_db
    eng = open_session(db, create=False)
    with pytest.raises(RunError, match="run-0001 is open"):
        eng.run_scheduled()


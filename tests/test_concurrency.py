"""Several real processes writing one database: no duplicate id, no lost turn, each says what it did.

Each test starts `memwb` processes (and, for the UI case, steps the workbench model in this process) on the
same SQLite file and checks the stored log afterwards: ids handed out once, every turn ingested once with
its text in its unit, tables equal to the fold, no run left open, and the same memory a single writer makes.
"""
from __future__ import annotations

import re
import threading
import time

import pytest

from engine.loaders import load_conversation
from engine.runtime.replay import Schedule
from engine.session import open_session
from tests.conftest import BACKENDS
from tests.writers import SCHEDULE, assert_whole, demo_prefix, export, finish, memwb, replay_args, turns_in

pytestmark = pytest.mark.slow
TURNS = 40


@pytest.fixture(scope="module", params=BACKENDS)
def backend(request):
    return request.param


@pytest.fixture(scope="module")
def conversation(tmp_path_factory):
    return demo_prefix(tmp_path_factory.mktemp("conv"), TURNS)


@pytest.fixture(scope="module")
def reference(conversation, tmp_path_factory):
    """The memory one replay alone makes (every 10 turns a run, the gate deciding), on SQLite."""
    db = tmp_path_factory.mktemp("ref") / "ref.sqlite"
    code, out, err = finish(memwb(*replay_args(conversation, db)))
    assert code == 0, err
    return export(db)


def wait_for_turns(db, n: int, proc, timeout: float = 300) -> None:
    """Until the log holds `n` turns (so a second writer starts while the first is mid-replay)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end and proc.poll() is None:
        if turns_in(db) >= n:
            return
        time.sleep(0.2)
    raise AssertionError(f"{db} never reached {n} turns while the first writer ran")


def ingested_by(out: str) -> int:
    """Turns a `memwb replay` says it ingested: all of `turns=` unless its line says fewer."""
    m = re.search(r"this replay ingested (\d+) turns", out)
    return int(m.group(1)) if m else int(re.search(r"turns=(\d+)", out).group(1))


def test_two_replays_of_one_file_share_the_turns(conversation, reference, db_url):
    db = db_url
    first = memwb(*replay_args(conversation, db), paced=0.2)
    wait_for_turns(db, 3, first)
    second = memwb(*replay_args(conversation, db))
    (c1, o1, e1), (c2, o2, e2) = finish(first), finish(second)
    assert (c1, c2) == (0, 0), (e1, e2)
    assert ingested_by(o1) + ingested_by(o2) == TURNS, (o1, o2)
    assert "other writers added" in o1 + o2                 # the one that was overtaken says so
    assert_whole(db, conversation, TURNS)
    assert export(db) == reference                          # the same memory as one writer alone


def test_replay_and_consolidations_at_once(conversation, db_url):
    db = db_url
    replay = memwb(*replay_args(conversation, db, "manual"), paced=0.2)     # still replaying when the loop starts
    wait_for_turns(db, 5, replay)
    reports = []
    while replay.poll() is None:
        code, out, err = finish(memwb("consolidate", "--db", db))
        assert code == 0, err
        reports.append(out.strip())
    code, out, err = finish(replay)
    assert code == 0, err
    runs = [r.split(":")[0] for r in reports if r.startswith("run-")]
    assert runs and len(set(runs)) == len(runs), reports     # each consolidation reported its own run
    assert_whole(db, conversation, TURNS)
    state = open_session(db, create=False).state
    assert sorted(state.runs) == sorted(runs)


def test_two_consolidations_at_once(conversation, db_url):
    db = db_url
    engine = open_session(db)                      # the whole conversation, nothing consolidated yet
    for t in load_conversation(conversation).turns:
        engine.ingest(t)
    a, b = memwb("consolidate", "--db", db), memwb("consolidate", "--db", db)
    (ca, oa, ea), (cb, ob, eb) = finish(a), finish(b)
    assert (ca, cb) == (0, 0), (ea, eb)
    outs = sorted([oa.strip(), ob.strip()])
    assert outs[0] == "buffer is empty: nothing to consolidate", outs   # the second saw the first's run
    assert outs[1].startswith("run-0001:"), outs
    assert_whole(db, conversation, TURNS)
    state = open_session(db, create=False).state
    assert list(state.runs) == ["run-0001"] and state.runs["run-0001"].status == "committed"


def test_workbench_session_and_cli_replay_on_one_database(conversation, reference, db_url, tmp_path):
    """The workbench steps turns (as its Replay page does) while `memwb replay` writes the same file."""
    from workbench.model import Workbench

    db = db_url
    cli = memwb(*replay_args(conversation, db), paced=0.2)
    wait_for_turns(db, 2, cli)
    conv = load_conversation(conversation)
    engine = open_session(db, create=False)
    wb = Workbench(source_label="demo", source_path=conversation, conversation=conv, engine=engine,
                   schedule=Schedule.parse(SCHEDULE), db_path=tmp_path / "ui.sqlite")
    stepped = []

    def step_until_done():
        while wb.cursor < TURNS:
            wb.next()
            if wb.last_ingest is not None:
                stepped.append(wb.last_ingest.turn_id)

    ui = threading.Thread(target=step_until_done)
    ui.start()
    code, out, err = finish(cli)
    ui.join(timeout=600)
    assert code == 0, err
    assert not ui.is_alive()
    assert ingested_by(out) + len(stepped) == TURNS, (out, stepped)
    assert wb.engine.others_records > 0                    # the workbench caught up with the CLI's records
    assert_whole(db, conversation, TURNS)
    assert export(db) == reference

"""`memwb check`: a clean session passes; each corruption of a real database is found and named."""
from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.test_operators import RIVER, SISTER_A, SISTER_B, UPDATE_NEW, UPDATE_OLD, ingest

DEMO = ROOT / "datasets" / "demo" / "demo.jsonl"


def memwb(*args):
    return subprocess.run([sys.executable, "-m", "engine.cli", *map(str, args)], cwd=ROOT, capture_output=True,
                          text=True, timeout=600)


@pytest.fixture(scope="module", params=["allmem", "memloom"])
def clean_db(request, tmp_path_factory) -> Path:
    """The demo conversation replayed with its scheduled consolidation runs."""
    db = tmp_path_factory.mktemp("check") / f"{request.param}.sqlite"
    proc = memwb("replay", DEMO, "--db", db, "--engine", request.param, "--quiet")
    assert proc.returncode == 0, proc.stderr
    return db


@pytest.fixture
def copy(clean_db, tmp_path) -> Path:
    target = tmp_path / "corrupt.sqlite"
    shutil.copy(clean_db, target)
    return target


def findings(db) -> tuple[int, list[str], str]:
    proc = memwb("check", "--db", db)
    return proc.returncode, proc.stdout.splitlines(), proc.stderr


def codes(lines: list[str]) -> set[str]:
    return {line.split(" ", 1)[0] for line in lines}


def sql(db, *statements, params=()):
    with sqlite3.connect(db) as con:
        out = None
        for statement in statements:
            out = con.execute(statement, params).fetchall()
    return out


def append_record(db, kind: str, payload: dict) -> None:
    """A log record appended by plain SQL, as a second writer or a bug would leave it."""
    sql(db, "INSERT INTO op_log (turn, run_id, kind, v, actor, payload) "
            "VALUES ((SELECT MAX(turn) FROM op_log), NULL, ?, 1, 'engine', ?)", params=(kind, json.dumps(payload)))


def duplicate_last(db, kind: str) -> None:
    sql(db, "INSERT INTO op_log (turn, run_id, kind, v, actor, payload) SELECT turn, run_id, kind, v, actor, "
            "payload FROM op_log WHERE kind = ? ORDER BY seq DESC LIMIT 1", params=(kind,))


def after_last_checkpoint(db, kind: str) -> dict:
    """The payload of the newest `kind` record, with the fold checkpoints taken at or after it dropped (they are a
    cache), so a corruption of it or after it sits after every checkpoint left. A replay that ends with a run
    checkpoints after its last record."""
    seq, payload = sql(db, "SELECT seq, payload FROM op_log WHERE kind = ? ORDER BY seq DESC LIMIT 1",
                       params=(kind,))[0]
    sql(db, "DELETE FROM checkpoint WHERE seq >= ?", params=(seq,))
    return json.loads(payload)


def test_a_clean_session_passes(clean_db):
    rc, lines, err = findings(clean_db)
    assert rc == 0 and len(lines) == 1 and lines[0].startswith(f"ok: {clean_db}: "), (lines, err)
    assert "records fold to the tables and" in lines[0] and "102 turns" in lines[0] and "3 runs" in lines[0]


def test_a_missing_or_foreign_database_is_an_error_and_nothing_is_created(tmp_path):
    missing = tmp_path / "nowhere.sqlite"
    proc = memwb("check", "--db", missing)
    assert proc.returncode == 2 and f"no memory database at {missing}" in proc.stderr
    assert not missing.exists()
    other = tmp_path / "other.sqlite"
    sql(other, "CREATE TABLE notes (x TEXT)")
    proc = memwb("check", "--db", other)
    assert proc.returncode == 2 and "holds no memory (it has no op_log table)" in proc.stderr
    assert sql(other, "SELECT name FROM sqlite_master") == [("notes",)]


def test_a_deleted_node_row_is_a_fold_mismatch(copy):
    uid = sql(copy, "SELECT MIN(id) FROM node")[0][0]
    sql(copy, "DELETE FROM node WHERE id = ?", params=(uid,))
    rc, lines, _ = findings(copy)
    assert rc == 1 and codes(lines) == {"FOLD_MISMATCH"}
    assert f"FOLD_MISMATCH node u{uid} is in the log's fold but not in the node table" in lines


def test_a_node_created_twice_is_a_duplicate_node_id(copy):
    payload = after_last_checkpoint(copy, "node_created")
    uid = payload["node"]["id"]
    sql(copy, "INSERT INTO op_log (turn, run_id, kind, v, actor, payload) SELECT turn, run_id, kind, v, actor, "
              "payload FROM op_log WHERE kind = 'node_created' AND json_extract(payload, '$.node.id') = ?",
        params=(uid,))
    rc, lines, _ = findings(copy)
    assert rc == 1 and "DUPLICATE_NODE_ID" in codes(lines)
    assert any(line.startswith(f"DUPLICATE_NODE_ID node u{uid} is created 2 times in the log (seq ")
               for line in lines), lines


def test_a_turn_ingested_twice_is_named(copy):
    turn_id = after_last_checkpoint(copy, "turn_ingested")["turn_id"]
    duplicate_last(copy, "turn_ingested")
    rc, lines, _ = findings(copy)
    assert rc == 1 and codes(lines) == {"TURN_INGESTED_TWICE"}
    assert lines[0].startswith(f"TURN_INGESTED_TWICE turn {turn_id} is ingested 2 times in the log (seq ")


def test_a_run_started_twice_is_a_duplicate_run_id(copy):
    run = sql(copy, "SELECT run_id FROM op_log WHERE kind = 'run_started' ORDER BY seq DESC LIMIT 1")[0][0]
    duplicate_last(copy, "run_started")
    rc, lines, _ = findings(copy)
    assert rc == 1 and "DUPLICATE_RUN_ID" in codes(lines)      # the second start also reopens it: OPEN_RUN
    assert any(line.startswith(f"DUPLICATE_RUN_ID run {run} is started 2 times") for line in lines), lines


def test_a_proposal_made_twice_is_a_duplicate_proposal_id(copy):
    pid = json.loads(sql(copy, "SELECT payload FROM op_log WHERE kind = 'proposal_made' ORDER BY seq DESC "
                               "LIMIT 1")[0][0])["proposal"]["id"]
    duplicate_last(copy, "proposal_made")
    rc, lines, _ = findings(copy)
    assert rc == 1 and any(line.startswith(f"DUPLICATE_PROPOSAL_ID proposal {pid} is made 2 times")
                           for line in lines), lines


def test_changed_raw_text_in_table_and_log_is_named(copy):
    """Table and log edited alike: the fold still equals the tables, only the stored content hash tells."""
    payload = after_last_checkpoint(copy, "turn_ingested")
    uid = sql(copy, "SELECT json_extract(payload, '$.node.id') FROM op_log WHERE kind = 'node_created' AND "
                    "json_extract(payload, '$.node.kind') = 'turn' AND json_extract(payload, '$.node.source_ids[0]') "
                    "= ?", params=(payload["turn_id"],))[0][0]
    sql(copy, "UPDATE node SET raw = raw || ' (edited)' WHERE id = ?", params=(uid,))
    sql(copy, "UPDATE op_log SET payload = json_set(payload, '$.node.raw', json_extract(payload, '$.node.raw') || "
              "' (edited)') WHERE kind = 'node_created' AND json_extract(payload, '$.node.id') = ?", params=(uid,))
    rc, lines, _ = findings(copy)
    assert rc == 1 and codes(lines) == {"RAW_TEXT_CHANGED"}, lines
    assert lines[0].startswith(f"RAW_TEXT_CHANGED turn {payload['turn_id']} (node u{uid}): its raw text")
    assert "(edited)" in lines[0]


def test_an_archived_node_without_its_recovery_link_is_unreachable(copy):
    """A link into an archived node removed as a buggy run would (log and table alike)."""
    rows = sql(copy, "SELECT e.src, e.dst, e.type, e.made_by, e.confidence, e.created_turn, e.evidence FROM edge e "
                     "JOIN node n ON n.id = e.dst WHERE n.visible = 0 AND e.type IN ('version', 'sibling', "
                     "'evidence', 'lineage') AND e.dst IN (SELECT dst FROM edge WHERE type IN ('version', "
                     "'sibling', 'evidence', 'lineage') GROUP BY dst HAVING COUNT(*) = 1) ORDER BY e.dst LIMIT 1")
    src, dst, etype, made_by, confidence, created_turn, evidence = rows[0]
    edge = {"src": src, "dst": dst, "type": etype, "made_by": made_by, "confidence": confidence,
            "created_turn": created_turn, "evidence": json.loads(evidence)}
    append_record(copy, "edge_removed", {"src": src, "dst": dst, "type": etype, "edge": edge})
    sql(copy, "DELETE FROM edge WHERE src = ? AND dst = ? AND type = ?", params=(src, dst, etype))
    rc, lines, _ = findings(copy)
    assert rc == 1 and codes(lines) == {"ARCHIVED_UNREACHABLE"}, lines
    assert lines[0].startswith(f"ARCHIVED_UNREACHABLE node u{dst} (")
    assert "is off the surface and no recovery link" in lines[0]


def test_a_corrupt_index_is_named_by_sqlite_integrity(copy):
    sql(copy, "PRAGMA writable_schema = ON",
        "UPDATE sqlite_master SET sql = 'CREATE INDEX ix_node_kind ON node (status)' WHERE name = 'ix_node_kind'")
    rc, lines, _ = findings(copy)
    assert rc == 1 and "SQLITE_INTEGRITY" in codes(lines)
    assert any("ix_node_kind" in line for line in lines if line.startswith("SQLITE_INTEGRITY "))


def test_an_open_run_names_its_undecided_proposals_and_the_way_out(make_engine):
    eng = make_engine()
    ingest(eng, UPDATE_OLD, RIVER, SISTER_A, UPDATE_NEW, SISTER_B)
    pending = [p for p in eng.propose(manual=True) if p.status == "pending"]
    assert pending
    run = eng.open_run()
    db = eng.store.location
    rc, lines, _ = findings(db)
    assert rc == 1 and codes(lines) == {"OPEN_RUN"}
    assert lines == [f"OPEN_RUN run {run} (atc, manual) is open with {len(pending)} undecided proposal(s) and "
                     f"blocks every later run; resolve it with `memwb runs apply {run} --db {db}` or "
                     f"`memwb runs discard {run} --db {db}`"]
    eng.apply({p.id: True for p in pending}, decided_by="test")
    assert findings(db)[0] == 0


def test_a_checkpoint_that_differs_from_the_log_or_cannot_be_read_is_named(copy):
    import zlib

    seqs = [r[0] for r in sql(copy, "SELECT seq FROM checkpoint ORDER BY seq")]
    assert len(seqs) >= 2
    body = json.loads(zlib.decompress(sql(copy, "SELECT body FROM checkpoint WHERE seq = ?", params=(seqs[0],))[0][0]))
    body["nodes"][0]["summary"] += " (edited)"
    sql(copy, "UPDATE checkpoint SET body = ? WHERE seq = ?",
        params=(zlib.compress(json.dumps(body).encode()), seqs[0]))
    sql(copy, "UPDATE checkpoint SET body = X'00' WHERE seq = ?", params=(seqs[1],))
    rc, lines, _ = findings(copy)
    assert rc == 1 and codes(lines) == {"FOLD_MISMATCH", "CHECKPOINT_UNREADABLE"}, lines
    assert f"FOLD_MISMATCH checkpoint at seq {seqs[0]} differs from the fold of the log up to seq {seqs[0]} (nodes)" \
        in lines
    assert any(line.startswith(f"CHECKPOINT_UNREADABLE checkpoint at seq {seqs[1]}: error: ") for line in lines), lines


def test_a_record_that_does_not_apply_is_fold_failed(copy):
    seq = sql(copy, "SELECT MAX(seq) FROM op_log WHERE kind = 'edge_added'")[0][0]
    sql(copy, "UPDATE op_log SET payload = '{}' WHERE seq = ?", params=(seq,))
    rc, lines, _ = findings(copy)
    assert rc == 1 and lines == [f"FOLD_FAILED the log does not fold at seq {seq} (edge_added): MalformedPayload: "
                                 "edge_added payload lacks 'edge'"]

"""`memwb dump` / `memwb load`: a real session survives the round trip row for row, fold for fold."""
from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from engine.core.cases import Case, CaseQuestion, CaseTurn
from engine.core.node import node_label
from engine.core.oplog import OpKind, OpRecord
from engine.engines import engine_schema
from engine.loaders import LoaderError, load_conversation
from engine.session import open_session
from engine.store.annotations import AnnotationStore
from engine.store.dump import DumpError, dump, load
from engine.store.log_store import Store
from engine.store.tables import rows_of
from tests.conftest import LOCOMO, ROOT, needs_data

DEMO = ROOT / "datasets" / "demo" / "demo.jsonl"
CASES = ROOT / "datasets" / "demo" / "cases.json"
CACHE = "embedding_cache"


def memwb(*args, stdout=None, check=True):
    proc = subprocess.run([sys.executable, "-m", "engine.cli", *map(str, args)], cwd=ROOT, text=True, timeout=1200,
                          stdout=stdout or subprocess.PIPE, stderr=subprocess.PIPE)
    if check and proc.returncode != 0:
        raise AssertionError(f"memwb {args} failed ({proc.returncode}):\n{proc.stderr}")
    return proc


def contents(db: Path) -> dict[str, list[tuple]]:
    """Every table of a SQLite file and its rows (order-free), read with plain sqlite3."""
    with sqlite3.connect(db) as con:
        names = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table' "
                                           "AND name NOT LIKE 'sqlite_%'")]
        return {n: sorted(con.execute(f'SELECT * FROM "{n}"').fetchall(), key=repr) for n in names}


def folds(db) -> dict:
    """The fold from checkpoints, its rows, the fold from scratch and the materialized tables."""
    store = Store(db, create=False)
    store.schema = engine_schema(store.get_meta("engine"))
    state = store.load_state()
    return {"state": state.to_dict(), "rows": rows_of(state),
            "scratch": rows_of(store.load_state(checkpoints=False)), "tables": store.table_rows()}


def dump_to(db, path: Path, *flags) -> subprocess.CompletedProcess:
    with open(path, "w") as out:
        return memwb("dump", "--db", db, *flags, stdout=out)


@pytest.fixture(scope="module")
def session_db(tmp_path_factory) -> Path:
    """The demo conversation replayed with its scheduled consolidation runs, plus annotation cases."""
    db = tmp_path_factory.mktemp("dump") / "demo.sqlite"
    memwb("replay", DEMO, "--db", db, "--quiet")
    AnnotationStore.at(db, author="test").import_json(CASES.read_text(), CASES, load_conversation(DEMO))
    return db


@pytest.fixture(scope="module")
def dumped(session_db, tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("dumpfile") / "demo.jsonl"
    proc = dump_to(session_db, path)
    assert "embedding_cache left out; --embeddings includes it" in proc.stderr
    return path


def test_cli_round_trip_gives_the_same_fold_and_tables(session_db, dumped, tmp_path):
    source = contents(session_db)
    assert source["annotation_case"] and source["annotation_question"] and source[CACHE] and source["checkpoint"]
    kinds = {r[3] for r in source["op_log"]}
    assert {OpKind.RUN_COMMITTED, OpKind.STATUS_CHANGED, OpKind.LLM_CALL} <= kinds     # consolidation ran

    target = tmp_path / "loaded.sqlite"
    out = memwb("load", dumped, "--db", target).stdout
    assert out.startswith(f"loaded {sum(len(v) for k, v in source.items() if k != CACHE)} rows of ")
    loaded = contents(target)
    assert loaded.pop(CACHE) == [] and set(loaded) == set(source) - {CACHE}
    assert loaded == {k: v for k, v in source.items() if k != CACHE}          # every table, row for row
    before, after = folds(session_db), folds(target)
    assert after == before
    assert after["rows"] == after["scratch"] == after["tables"]

    again = tmp_path / "again.jsonl"
    dump_to(target, again)
    first, second = dumped.read_text().splitlines(), again.read_text().splitlines()
    assert second[1:] == first[1:]                                             # a dump of the load is the dump
    head1, head2 = json.loads(first[0]), json.loads(second[0])
    assert head1.pop("created_from") != head2.pop("created_from") and head1 == head2
    assert memwb("check", "--db", target).stdout.startswith("ok: ")


def test_embeddings_flag_carries_the_cache_and_retrieval_matches(session_db, tmp_path):
    path = tmp_path / "with-cache.jsonl"
    with open(path, "wb") as out:
        report = dump(session_db, out, embeddings=True)
    assert report.rows[CACHE] > 0 and not report.left_out
    target = tmp_path / "loaded.sqlite"
    load(path, target)
    assert contents(target) == contents(session_db)
    query = "How many half marathons has Maya run?"
    want = open_session(session_db, create=False).retrieve(query, k=5).to_dict(k=5)
    got = open_session(target, create=False).retrieve(query, k=5).to_dict(k=5)
    assert got["source_ids"] == want["source_ids"] and got["context"] == want["context"]


def test_load_refuses_a_non_empty_database_and_leaves_it_unchanged(session_db, dumped, tmp_path):
    full = tmp_path / "full.sqlite"
    shutil.copy(session_db, full)
    before = contents(full)
    proc = memwb("load", dumped, "--db", full, check=False)
    with sqlite3.connect(full) as db:
        records = db.execute("select count(*) from op_log").fetchone()[0]
    assert proc.returncode == 2 and "is not empty (" in proc.stderr and f"op_log {records} rows" in proc.stderr, \
        proc.stderr
    assert contents(full) == before

    only_cases = tmp_path / "cases-only.sqlite"           # rows in a side table alone make a database non-empty
    AnnotationStore.at(only_cases, author="test").import_json(CASES.read_text(), CASES, load_conversation(DEMO))
    before = contents(only_cases)
    with pytest.raises(DumpError, match=r"is not empty \(annotation_case \d+ rows"):
        load(dumped, only_cases)
    assert contents(only_cases) == before


def _edit_line(n: int, change):
    def edit(lines: list[str]) -> list[str]:
        obj = json.loads(lines[n - 1])
        change(obj)
        return lines[:n - 1] + [json.dumps(obj)] + lines[n:]
    return edit


def _row_line(lines: list[str], table: str) -> int:
    return next(i for i, line in enumerate(lines, start=1) if line.startswith(f'{{"table":"{table}"'))


MALFORMED = {
    # name: (edit of the dump's lines, or of its bytes; the expected record and message)
    "empty file": (lambda lines: [], None, "empty file: no header line"),
    "bad JSON": (lambda lines: lines[:6] + [lines[6][:-4]] + lines[7:], "line 7", "not valid JSON"),
    "wrong format": (_edit_line(1, lambda h: h.update(format="memwb-scds-cases")), "line 1 (header)",
                     "field 'format': expected 'memwb-dump'"),
    "newer version": (_edit_line(1, lambda h: h.update(version=2)), "line 1 (header)",
                      "unsupported version 2; this build reads version 1"),
    "unknown table in header": (_edit_line(1, lambda h: h["tables"][0].update(name="nodes")),
                                "line 1 (header) / tables[0]", "unknown table 'nodes'"),
    "unknown column in header": (_edit_line(1, lambda h: h["tables"][0]["columns"][0].update(name="colour")),
                                 "line 1 (header) / tables[0] / columns[0]", "unknown column 'colour'"),
    "unknown table": (lambda lines: _edit_line(9, lambda r: r.update(table="nodes"))(lines), "line 9",
                      "unknown table 'nodes'"),
    "unknown column": (lambda lines: _edit_line(9, lambda r: r["row"].update(colour="red"))(lines), "line 9",
                       "field 'row.colour': unknown column"),
    "wrong type": (lambda lines: _edit_line(_row_line(lines, "op_log"),
                                            lambda r: r["row"].update(seq="seven"))(lines),
                   "line {op_log}", "field 'row.seq': expected int, got str"),
    "null where a value is required": (lambda lines: _edit_line(_row_line(lines, "node"),
                                                                lambda r: r["row"].update(raw=None))(lines),
                                       "line {node}", "field 'row.raw': null in a column"),
    "bytes not base64": (lambda lines: _edit_line(_row_line(lines, "checkpoint"),
                                                  lambda r: r["row"].update(body="%%not base64%%"))(lines),
                         "line {checkpoint}", "field 'row.body': not base64 text"),
    "row repeated": (lambda lines: lines[:_row_line(lines, "node")] + lines[_row_line(lines, "node") - 1:],
                     "lines {node}-", "could not be written: UNIQUE constraint failed: node.id"),
    "truncated at a line end": (lambda lines: lines[:-40], None,
                                "other row counts than its header declares (a truncated or edited dump): op_log"),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_a_malformed_dump_is_refused_naming_the_line_and_leaves_the_target_empty(dumped, tmp_path, case):
    edit, record, message = MALFORMED[case]
    lines = dumped.read_text(encoding="utf-8").splitlines()
    at = {t: _row_line(lines, t) for t in ("op_log", "node", "checkpoint")}
    bad = tmp_path / "bad.jsonl"
    bad.write_text("".join(line + "\n" for line in edit(lines)), encoding="utf-8")
    target = tmp_path / "target.sqlite"
    with pytest.raises(LoaderError) as err:
        load(bad, target)
    text = str(err.value)
    assert text.startswith("bad.jsonl: ") and message in text, text
    if record:
        assert f"record {record.format(**at)}" in text, text
    assert not target.exists() or all(rows == [] for rows in contents(target).values())


def test_a_truncated_dump_is_refused_by_the_cli_and_the_target_stays_empty(dumped, tmp_path):
    data = dumped.read_bytes()
    cut = tmp_path / "cut.jsonl"
    cut.write_bytes(data[: len(data) * 2 // 3])           # cut in the middle of a line, as a full disk leaves it
    target = tmp_path / "target.sqlite"
    proc = memwb("load", cut, "--db", target, check=False)
    assert proc.returncode == 2
    assert proc.stderr.startswith("memwb load: error: cut.jsonl: record line ") and "cut off" in proc.stderr
    assert all(rows == [] for rows in contents(target).values())


def test_load_into_postgresql_keeps_seq_and_advances_the_sequence(dumped, tmp_path, make_db):
    """On PostgreSQL the explicit seq values must not leave op_log's sequence behind: the next append
    after a load gets the next seq instead of colliding with seq 1."""
    url = make_db("postgresql")
    report = load(dumped, url)
    store = Store(url)
    state = store.load_state()
    assert store.last_seq() == report.last_seq == state.seq
    store.commit([OpRecord(kind=OpKind.NOTE, payload={"text": "after the load"}, turn=state.turn)], state)
    assert store.last_seq() == report.last_seq + 1
    again = tmp_path / "again.jsonl"
    with open(again, "wb") as out:
        dump(url, out)
    first = dumped.read_text().splitlines()
    second = again.read_text().splitlines()
    extra = [line for line in second[1:] if line not in set(first)]
    assert len(second) == len(first) + 1 and len(extra) == 1 and "after the load" in extra[0]
    store.engine.dispose()


@pytest.mark.slow
def test_conv26_round_trip(tmp_path):
    """LoCoMo conv-26 replayed with consolidation, annotated, dumped and loaded through the CLI; prints the
    figures the issue's closing note quotes (run with -s to see them)."""
    data = needs_data(LOCOMO)
    db = tmp_path / "c26.sqlite"
    memwb("replay", data, "--conversation", "conv-26", "--db", db, "--quiet")
    conv = load_conversation(data, "conv-26")
    t = conv.turns
    case = Case("c26-support", conv.id, "Caroline's support group",
                [CaseTurn("c26-support:t01", t[0].id), CaseTurn("c26-support:t02", t[1].id)],
                [CaseQuestion("c26-support-q1", viewer_id=t[1].speaker, query_text="What did Caroline attend?",
                              gold_evidence_keys=["c26-support:t01"])])
    AnnotationStore.at(db, author="test").add_all([case])
    path = tmp_path / "c26.jsonl"
    start = time.perf_counter()
    dump_to(db, path, "--embeddings")
    dumped_s = time.perf_counter() - start
    target = tmp_path / "c26-loaded.sqlite"
    start = time.perf_counter()
    memwb("load", path, "--db", target)
    loaded_s = time.perf_counter() - start
    source = contents(db)
    assert contents(target) == source
    before, after = folds(db), folds(target)
    assert after == before and after["rows"] == after["scratch"] == after["tables"]
    assert memwb("check", "--db", target).stdout.startswith("ok: ")
    rows = {name: len(v) for name, v in sorted(source.items())}
    print(f"\nconv-26 dump/load round trip: {rows['op_log']} log records, {len(rows)} tables, "
          f"{sum(rows.values())} rows ({', '.join(f'{k} {v}' for k, v in rows.items())}); dump "
          f"{path.stat().st_size / 1e6:.1f} MB (with the embedding cache) in {dumped_s:.1f} s, load {loaded_s:.1f} s; "
          "fold and every table identical")


def test_dump_refuses_what_it_cannot_carry_and_creates_nothing(session_db, tmp_path):
    missing = tmp_path / "nowhere.sqlite"
    proc = memwb("dump", "--db", missing, check=False)
    assert proc.returncode == 2 and f"no memory database at {missing}" in proc.stderr and proc.stdout == ""
    assert not missing.exists()
    newer = tmp_path / "newer.sqlite"
    shutil.copy(session_db, newer)
    with sqlite3.connect(newer) as con:             # as a later version of the workbench might leave it
        con.execute("CREATE TABLE from_a_later_version (id TEXT PRIMARY KEY)")
        con.execute("ALTER TABLE node ADD COLUMN colour TEXT")
    with pytest.raises(DumpError, match="holds table from_a_later_version, column node.colour, which this version"):
        with open(tmp_path / "x.jsonl", "wb") as out:
            dump(newer, out)


DUMPS = ROOT / "tests" / "fixtures" / "dumps"


def labelled(export: dict) -> dict:
    """An export 434c343 wrote, with its unit ids as `export --json` writes them since (u4, as the pages do)."""
    return {"units": [{**u, "id": node_label(u["id"]), "members": [node_label(m) for m in u["members"]]}
                      for u in export["units"]],
            "edges": [{**e, "src": node_label(e["src"]), "dst": node_label(e["dst"])} for e in export["edges"]]}


def as_exported_then(export: dict, then: dict) -> dict:
    """Today's export narrowed to the fields an older one wrote: each edge then had src, dst and type alone (it
    has since gained who made it, its confidence, the records it cites and its proposal: issue 53.6)."""
    keys = set(then["edges"][0]) if then["edges"] else {"src", "dst", "type"}
    return {**export, "edges": [{k: v for k, v in e.items() if k in keys} for e in export["edges"]]}


@pytest.mark.parametrize("engine", ["allmem", "memloom"])
def test_a_dump_written_before_the_package_layout_loads_unchanged(engine, tmp_path):
    """The database format outlives code moves: a dump `memwb dump` wrote at 434c343 (the flat `engine/`, a
    replay of datasets/fixtures/tiny.jsonl with a consolidation every session) loads, passes `memwb check`,
    exports exactly what that code exported (its ids written u4 as the pages write them), and dumps back row for row."""
    source = DUMPS / f"434c343-tiny-{engine}.jsonl"
    db = tmp_path / "loaded.sqlite"
    memwb("load", source, "--db", db)
    assert memwb("check", "--db", db).stdout.startswith("ok: ")
    exported = memwb("export", "--db", db, "--json").stdout
    then = labelled(json.loads((DUMPS / f"434c343-tiny-{engine}.export.json").read_text()))
    assert as_exported_then(json.loads(exported), then) == then
    again = tmp_path / "again.jsonl"
    dump_to(db, again)
    rows = lambda path: sorted(line for line in path.read_text().splitlines()[1:])     # noqa: E731
    assert rows(again) == rows(source)


TYPED_KIT_BASE = {"review-allmem": "allmem", "tiny-memloom": "memloom"}      # dumps written at c4e02da


def load_typed_kit_base(name: str, tmp_path: Path) -> Path:
    db = tmp_path / "loaded.sqlite"
    memwb("load", DUMPS / f"c4e02da-{name}.jsonl", "--db", db)
    return db


@pytest.mark.parametrize("name", sorted(TYPED_KIT_BASE))
def test_a_dump_written_before_the_typed_payloads_loads_unchanged(name, tmp_path):
    """Every record is read through its kind's payload class since c4e02da, the commit before them: a dump that
    commit's `memwb dump` wrote loads, passes `memwb check`, exports exactly what that code exported, dumps back
    row for row and folds from scratch to its tables. `review-allmem`: demo turns D1:4, D1:11, D5:4, D5:9
    replayed by All-Mem with a manual schedule, a run applied in two parts (a note) and undone, a run discarded,
    a run applied. `tiny-memloom`: datasets/fixtures/tiny.jsonl in MemLoom with a run every session, the last
    undone, a run applied in part and discarded."""
    source = DUMPS / f"c4e02da-{name}.jsonl"
    db = load_typed_kit_base(name, tmp_path)
    assert memwb("check", "--db", db).stdout.startswith("ok: ")
    exported = memwb("export", "--db", db, "--json").stdout
    then = json.loads((DUMPS / f"c4e02da-{name}.export.json").read_text())
    assert as_exported_then(json.loads(exported), then) == then
    again = tmp_path / "again.jsonl"
    dump_to(db, again)
    rows = lambda path: sorted(line for line in path.read_text().splitlines()[1:])     # noqa: E731
    assert rows(again) == rows(source)
    loaded = folds(db)
    assert loaded["rows"] == loaded["scratch"] == loaded["tables"]
    assert open_session(db, create=False).name == TYPED_KIT_BASE[name]


def test_the_dumps_written_before_the_typed_payloads_hold_every_op_kind():
    """What the test above proves reaches every payload class."""
    kinds = {json.loads(line)["row"]["kind"] for name in TYPED_KIT_BASE
             for line in (DUMPS / f"c4e02da-{name}.jsonl").read_text().splitlines()[1:]
             if json.loads(line)["table"] == "op_log"}
    assert kinds == set(OpKind)


def test_a_run_written_before_the_typed_payloads_undoes_to_the_state_before_it(tmp_path):
    """Today's inverses read the records c4e02da wrote: undoing the run that ends `review-allmem` (an Update
    and a merge applied: descriptors changed, nodes archived and created, edges rewired) leaves the nodes, edges
    and buffers as they were before it, and the tables equal the fold."""
    eng = open_session(load_typed_kit_base("review-allmem", tmp_path), create=False)
    run = eng.state.last_committed_run()
    assert {op.kind for op in eng.store.ops(after_seq=run.last_seq)} == {OpKind.LLM_CALL}     # the log's last change
    before = eng.store.load_state(upto_seq=run.first_seq - 1, checkpoints=False)
    eng.undo_last_run()
    after, prior = rows_of(eng.state), rows_of(before)
    assert (after["node"], after["edge"], eng.state.buffers) == (prior["node"], prior["edge"], before.buffers)
    assert eng.store.table_rows() == after

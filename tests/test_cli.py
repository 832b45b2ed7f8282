"""The `memwb` command-line contract, run as a user would (subprocess)."""
from __future__ import annotations

import argparse
import json
import os
import re
import sqlite3
import subprocess
import sys

import pytest

from engine.cli.parser import build_parser
from engine.loaders import load_conversation
from engine.session import open_session
from tests.conftest import LOCOMO, ROOT, needs_data

DEMO = ROOT / "datasets" / "demo" / "demo.jsonl"


def memwb(*args, check=True, env=None):
    proc = subprocess.run([sys.executable, "-m", "engine.cli", *map(str, args)], cwd=ROOT, capture_output=True,
                          text=True, timeout=1200, env=env)
    if check and proc.returncode != 0:
        raise AssertionError(f"memwb {args} failed ({proc.returncode}):\n{proc.stderr}")
    return proc


@pytest.fixture(scope="module")
def demo_db(tmp_path_factory):
    db = tmp_path_factory.mktemp("cli") / "demo.sqlite"
    out = memwb("replay", DEMO, "--db", db, "--quiet").stdout.strip()
    assert out.startswith("turns=102 ") and "off_surface=" in out and "proposals applied=" in out
    figures = dict(re.findall(r"\b(units|visible|off_surface)=(\d+)", out))
    assert int(figures["units"]) == int(figures["visible"]) + int(figures["off_surface"])
    return db


def test_replay_progress_into_a_pipe_prints_lines_and_nothing_when_quiet(tmp_path):
    """Without a terminal the progress is one line per 50 turns (no carriage returns run together); --quiet
    prints none."""
    proc = memwb("replay", DEMO, "--db", tmp_path / "p.sqlite", "--engine", "naive")
    assert "\r" not in proc.stderr
    lines = [line for line in proc.stderr.splitlines() if "turns" in line]
    assert lines == ["replay: 50/102 turns", "replay: 100/102 turns", "replay: 102/102 turns"]
    assert proc.stderr.startswith("replay: encoder: all-MiniLM-L6-v2 under ONNX Runtime")    # which encoder embeds
    quiet = memwb("replay", DEMO, "--db", tmp_path / "q.sqlite", "--engine", "naive", "--quiet")
    assert "/102 turns" not in quiet.stderr and quiet.stdout.startswith("turns=102 ")
    assert "encoder" not in quiet.stderr


def test_diagnostics_count_nodes_off_the_surface_apart_from_the_archived_status(demo_db):
    data = json.loads(memwb("diagnostics", "--db", demo_db).stdout)
    assert "archived" not in data and data["visible"] + data["off_surface"] == data["units"]
    assert data["statuses"].get("archived", 0) <= data["off_surface"]


def test_retrieve_json_contract(demo_db):
    res = json.loads(memwb("retrieve", "--db", demo_db, "--query", "How many half marathons has Maya run?",
                           "--json").stdout)
    assert set(res) >= {"source_ids", "units", "context", "stages"}
    assert len(res["source_ids"]) == 5 and res["source_ids"][0] == "D5:4"
    for u in res["units"]:
        assert set(u) >= {"id", "visible", "score", "source_ids", "path"}
        assert re.fullmatch(r"u\d+", u["id"]) and re.fullmatch(r"u\d+", u["anchor"])   # ids as the pages write them
        for hop in u["path"]:
            assert set(hop) == {"from", "to", "type"}
            assert re.fullmatch(r"u\d+", hop["from"]) and re.fullmatch(r"u\d+", hop["to"])
    assert all(re.fullmatch(r"u\d+", a["id"]) for a in res["anchors"])
    assert all(re.fullmatch(r"u\d+", e["id"]) and re.fullmatch(r"u\d+", e["parent"]) for e in res["expansion"])
    archived = [u for u in res["units"] if not u["visible"]]
    assert any(u["source_ids"] == ["D1:4"] and u["path"][-1]["type"] == "version" for u in archived)
    assert set(res["stages"]) >= {"stage1_ms", "stage2_ms", "stage3_ms"}
    assert "reading" not in res                       # All-Mem does not route by the query


def test_retrieve_says_how_memloom_read_the_query(tmp_path):
    """A why-question worded without "why" is read as one, the output says so and names the words, and the walk
    back along CAUSAL_FOLLOW brings the demo's whole causal chain (q7's evidence) to the top."""
    db = tmp_path / "memloom.sqlite"
    memwb("replay", DEMO, "--db", db, "--engine", "memloom", "--quiet")
    query = "What set off Maya missing her deadlines?"
    res = json.loads(memwb("retrieve", "--db", db, "--query", query, "--json").stdout)
    assert res["reading"].startswith("a why-question (“what set off”): walks CAUSAL_FOLLOW back to causes")
    assert set(res["source_ids"][:4]) == {"D2:6", "D3:9", "D4:2", "D6:6"}
    text = memwb("retrieve", "--db", db, "--query", "Which breed is Jon's dog?").stdout
    assert "\nread as: a lookup (no cue of a cause or of a history)" in text


def test_retrieve_queries_file_keeps_ids(demo_db, tmp_path):
    qfile = tmp_path / "q.jsonl"
    qfile.write_text('{"id": "a", "query": "Where does Lena live?"}\n\n{"id": 7, "query": "kitten"}\n')
    lines = memwb("retrieve", "--db", demo_db, "--queries", qfile, "--k", "3", "--json").stdout.splitlines()
    rows = [json.loads(line) for line in lines]
    assert [r["id"] for r in rows] == ["a", 7] and all(len(r["source_ids"]) == 3 for r in rows)


@pytest.fixture(scope="module")
def naive_db(tmp_path_factory):
    """The demo in naive RAG: retrieval without any offline process, quick to make."""
    db = tmp_path_factory.mktemp("cli-naive") / "naive.sqlite"
    memwb("replay", DEMO, "--db", db, "--engine", "naive", "--quiet")
    return db


def test_retrieve_text_shows_the_k_sources_asked_for(naive_db):
    """`--k 3` in text mode lists three source turns, ranked as --json ranks them, each with the node carrying it
    and that node's dated text, and nothing more (it printed 3 ids, then the text of all 16 results: issue 53.8)."""
    query = "How many half marathons has Maya run?"
    text = memwb("retrieve", "--db", naive_db, "--query", query, "--k", "3").stdout
    ranked = re.findall(r"^ +(\d+)\. (D\d+:\d+)  u\d+  score \d+\.\d{3}  ", text, re.M)
    res = json.loads(memwb("retrieve", "--db", naive_db, "--query", query, "--k", "3", "--json").stdout)
    assert ranked == [(str(i), sid) for i, sid in enumerate(res["source_ids"], 1)] and len(ranked) == 3, text
    assert len(re.findall(r"^ {5}\[\d{4}-\d\d-\d\dT", text, re.M)) == 3, text     # one dated text per source
    assert all(len(line) <= 100 for line in text.splitlines() if line.startswith(" " * 5)), text   # wrapped


@pytest.mark.parametrize("command", [("schema", "--engine", "allmem"),
                                     ("retrieve", "--query", "half marathons", "--k", "3"),
                                     ("export", "--json")])
def test_a_reader_that_stops_early_ends_the_command_quietly(naive_db, command):
    """`memwb … | head`: once the reader has closed the pipe the command stops without a word on stderr (it said
    "error: [Errno 32] Broken pipe"), exiting 1 as Python does on a closed pipe."""
    db = () if command[0] == "schema" else ("--db", naive_db)
    proc = subprocess.Popen([sys.executable, "-m", "engine.cli", *command, *map(str, db)], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    proc.stdout.close()                   # the reader is gone before the first line is written
    err = proc.stderr.read()
    assert proc.wait(timeout=600) == 1 and err == "", err


def test_every_flag_and_argument_says_what_it_is_for():
    """`memwb X --help` explains every flag and argument (`--port`, `--llm` and `--quiet` had none: issue 53.3)."""
    def unexplained(parser, name):
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for sub, subparser in action.choices.items():
                    yield from unexplained(subparser, f"{name} {sub}")
            elif not isinstance(action, argparse._HelpAction) and not action.help:
                yield f"{name} {'/'.join(action.option_strings) or action.dest}"

    assert list(unexplained(build_parser(), "memwb")) == []
    ui = memwb("ui", "--help").stdout
    assert "--port PORT" in ui and "default 8501" in ui


def test_diagnostics_say_what_each_figure_means(naive_db):
    """`notes` explains the figures a reader cannot judge alone, with which way is good (issue 53.3)."""
    data = json.loads(memwb("diagnostics", "--db", naive_db).stdout)
    notes = data.pop("notes")
    assert {"visible_ratio", "coverage", "h95", "unreachable_fraction", "version_orphans"} <= set(notes) <= set(data)
    assert "0 is best" in notes["unreachable_fraction"] and "must be 0" in notes["version_orphans"]


def readme_jsonl_section() -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    return text[text.index("Inputs: "):text.index("A malformed file gets an error")]


def test_the_readme_documents_the_jsonl_format_a_newcomer_writes(tmp_path):
    """The README's JSONL format: its example loads, the time forms it names load and the one it refuses is refused
    naming the field, and it gives the question category codes (only datasets/demo/README.md had them); it says
    how to pick the port and spells out SCDS where it first appears (issue 53.3)."""
    from engine.loaders import LoaderError

    section = readme_jsonl_section()
    example = re.search(r"```json\n(.*?)```", section, re.S).group(1)
    (tmp_path / "mine.jsonl").write_text(example, encoding="utf-8")
    conv = load_conversation(tmp_path / "mine.jsonl")
    assert [t.id for t in conv.turns] == ["D1:4", "D5:4"] and conv.questions[0].category == 4
    assert "ISO 8601" in section
    turn_line = json.loads(example.splitlines()[0])
    for written in re.findall(r"`(\d{4}-\d\d-\d\d[^`]*)`", section):
        (tmp_path / "t.jsonl").write_text(json.dumps({**turn_line, "time": written}) + "\n", encoding="utf-8")
        assert load_conversation(tmp_path / "t.jsonl").turns[0].time.startswith(written[:10]), written
    (tmp_path / "bad.jsonl").write_text(json.dumps({**turn_line, "time": "3 Feb 2024"}) + "\n", encoding="utf-8")
    with pytest.raises(LoaderError, match="'time'.*ISO 8601"):
        load_conversation(tmp_path / "bad.jsonl")
    words = " ".join(section.split())
    assert all(code in words for code in ("**1** multi-hop", "**2** temporal", "**3** open-domain",
                                          "**4** single-hop"))
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "bash scripts/start.sh --port 8502" in readme
    assert readme.index("SCDS") == readme.index("SCDS (MemLoom's Synthetic Causal Diagnostic Suite)")


def test_export_json(demo_db):
    data = json.loads(memwb("export", "--db", demo_db, "--json").stdout)
    conv = load_conversation(DEMO)
    raws = {t.raw for t in conv.turns}
    turn_units = [u for u in data["units"] if u["kind"] == "turn"]
    assert len(turn_units) == 102 and {u["raw"] for u in turn_units} == raws   # evidence verbatim
    assert all(set(u) == {"id", "visible", "status", "kind", "raw", "summary", "keywords", "time", "source_ids",
                          "members"}
               for u in data["units"])
    assert {e["type"] for e in data["edges"]} >= {"temporal", "semantic", "version"}
    ids = {u["id"] for u in data["units"]}
    assert all(re.fullmatch(r"u\d+", i) for i in ids)                      # ids as the pages write them
    assert all(e["src"] in ids and e["dst"] in ids for e in data["edges"])
    assert all(set(u["members"]) <= ids for u in data["units"])


def test_export_keeps_what_the_review_showed(tmp_path):
    """`memwb export --json` on a MemLoom replay of the demo: every relation the steward wrote carries the proposal
    behind it (id, confidence, gate, reason code and reason, who decided) and the records it cites, as the database
    stores them; an edge made online carries no proposal. Without --json: a readable summary naming the same
    relations (it was the same JSON, and the help called JSON "the only format": issue 53.6)."""
    db = tmp_path / "memloom.sqlite"
    memwb("replay", DEMO, "--db", db, "--engine", "memloom", "--quiet")
    data = json.loads(memwb("export", "--db", db, "--json").stdout)
    state = open_session(db, create=False).state
    relations = [e for e in data["edges"] if e["proposal"] is not None]
    assert relations and {e["type"] for e in relations} >= {"CAUSAL_FOLLOW", "TEMPORAL_NEXT"}
    for e in relations:
        p = state.proposals[e["proposal"]["id"]]
        stored = state.edges[(int(e["src"][1:]), int(e["dst"][1:]), e["type"])]
        assert p.status == "applied" and p.run_id == e["made_by"] == e["proposal"]["run"]
        assert p.targets == [int(e["src"][1:]), int(e["dst"][1:])] and p.detail["type"] == e["type"]
        assert e["proposal"]["confidence"] == p.confidence == e["confidence"] == stored.confidence
        assert (e["proposal"]["reason"], e["proposal"]["reason_code"], e["proposal"]["decided_by"]) == \
            (p.reason, p.reason_code, p.decided_by)
        assert [c["id"] for c in e["evidence"]] == [f"u{c}" for c in stored.evidence] and stored.evidence
        assert all(c["source_ids"] == state.nodes[int(c["id"][1:])].source_ids for c in e["evidence"])
    online = [e for e in data["edges"] if e["made_by"] == "online"]
    assert online and all(e["proposal"] is None for e in online)
    text = memwb("export", "--db", db).stdout
    assert not text.lstrip().startswith("{") and f"relations offline runs wrote through a proposal: {len(relations)}" in text
    first = relations[0]
    assert (f"{first['src']} —{first['type']}→ {first['dst']}  {first['made_by']} proposal #{first['proposal']['id']} "
            f"relation, confidence {first['proposal']['confidence']:.2f}") in text
    assert f"cites {first['evidence'][0]['id']} ({', '.join(first['evidence'][0]['source_ids'])}): " in text
    assert "the only format" not in memwb("export", "--help").stdout


def test_clear_errors(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "x1", "speaker": "A", "time": "2024-01-01", "session": "1"}\n')
    proc = memwb("replay", bad, "--db", tmp_path / "x.sqlite", check=False)
    assert proc.returncode == 2 and "bad.jsonl" in proc.stderr and "text" in proc.stderr
    proc = memwb("retrieve", "--db", tmp_path / "missing.sqlite", "--query", "x", check=False)
    assert proc.returncode == 2 and "no memory database" in proc.stderr
    proc = memwb("replay", DEMO, "--db", tmp_path / "y.sqlite", "--consolidate", "sometimes", check=False)
    assert proc.returncode == 2 and "every-3-sessions" in proc.stderr


@pytest.mark.slow
def test_locomo_end_to_end(tmp_path):
    """Replay a LoCoMo dev conversation offline; answers carry the conversation's dia_ids."""
    data = needs_data(LOCOMO)
    db = tmp_path / "c26.sqlite"
    out = memwb("replay", data, "--conversation", "conv-26", "--db", db, "--quiet").stdout
    conv = load_conversation(data, "conv-26")
    assert out.startswith(f"turns={len(conv.turns)} ")
    questions = [q for q in conv.questions if q.category in (1, 2, 3, 4)][:20]
    qfile = tmp_path / "q.jsonl"
    qfile.write_text("\n".join(json.dumps({"id": q.id, "query": q.question}) for q in questions))
    rows = [json.loads(x) for x in memwb("retrieve", "--db", db, "--queries", qfile, "--json").stdout.splitlines()]
    dia_ids = conv.turn_ids()
    assert len(rows) == 20
    for row, q in zip(rows, questions):
        assert row["id"] == q.id and row["source_ids"] and set(row["source_ids"]) <= dia_ids
    hits = sum(bool(set(r["source_ids"]) & set(q.evidence)) for r, q in zip(rows, questions))
    assert hits >= 8, f"only {hits}/20 questions have gold evidence in the top 5"


@pytest.mark.parametrize("engine", ["naive", "hybrid"])
def test_baseline_engines_replay_retrieve_export(engine, tmp_path):
    """The baselines are engines like any other: same commands, same JSON shapes, no consolidation."""
    db = tmp_path / f"{engine}.sqlite"
    out = memwb("replay", DEMO, "--db", db, "--engine", engine, "--quiet").stdout
    assert out.startswith("turns=102 units=102 visible=102 off_surface=0 status[stored=102]") and "runs=0" in out
    res = json.loads(memwb("retrieve", "--db", db, "--query", "How many half marathons has Maya run?",
                           "--json").stdout)
    assert len(res["source_ids"]) == 5 and "D5:4" in res["source_ids"][:2]
    assert set(res["stages"]) == {"rank_ms", "total_ms"}
    assert all(u["path"] == [] and u["status"] == "stored" and u["visible"] for u in res["units"])
    data = json.loads(memwb("export", "--db", db, "--json").stdout)
    assert len(data["units"]) == 102 and data["edges"] == [] and {u["status"] for u in data["units"]} == {"stored"}
    assert "nothing to consolidate" in memwb("consolidate", "--db", db).stdout
    again = memwb("replay", DEMO, "--db", db, "--engine", "allmem", check=False)
    assert again.returncode == 2 and f"holds a '{engine}' memory" in again.stderr


def test_unknown_engine_lists_the_known_ones(tmp_path):
    proc = memwb("replay", DEMO, "--db", tmp_path / "z.sqlite", "--engine", "memloomz", check=False)
    assert proc.returncode == 2 and "allmem" in proc.stderr and "naive" in proc.stderr and "hybrid" in proc.stderr
    schema = json.loads(memwb("schema", "--engine", "allmem").stdout)
    assert [s["name"] for s in schema["statuses"]] == ["visible", "archived"]
    assert {e["name"] for e in schema["edge_types"]} == {"temporal", "semantic", "version", "sibling"}


def _write_turns(path, rows):
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def _log_size(db) -> int:
    with sqlite3.connect(db) as con:
        return con.execute("SELECT COUNT(*) FROM op_log").fetchone()[0]


def test_replay_into_an_existing_memory_refuses_a_changed_file(tmp_path):
    """Resuming a memory from a file whose already-ingested turns differ exits 2 naming the first differing
    turn, and ingests nothing; a file that only grew resumes; an old database (no hashes) is compared on
    turn order only."""
    rows = [json.loads(line) for line in DEMO.read_text(encoding="utf-8").splitlines()][:12]
    assert all("type" not in row for row in rows)
    db = tmp_path / "m.sqlite"
    out = memwb("replay", _write_turns(tmp_path / "conv.jsonl", rows[:10]), "--db", db, "--engine", "naive",
                "--quiet").stdout
    assert out.startswith("turns=10 ")
    size = _log_size(db)

    edited = [dict(row) for row in rows]
    edited[6]["text"] += " (edited)"
    renamed = [{**row, "conversation": "other"} for row in rows]
    reordered = [dict(row) for row in rows[:10]]             # JSONL turns are put in time order
    reordered[2]["time"], reordered[3]["time"] = rows[3]["time"], rows[2]["time"]
    cases = {
        "edited.jsonl": (edited[:10], f"turn {rows[6]['id']} (turn 7) content differs from the stored turn"),
        "reordered.jsonl": (reordered,
                            f"turn order differs at turn 3: the memory has {rows[2]['id']} there, the file "
                            f"{rows[3]['id']}"),
        "removed.jsonl": (rows[:4] + rows[5:11], f"stored turn {rows[4]['id']} (turn 5) is no longer in the file"),
        "renamed.jsonl": (renamed[:10], "holds conversation 'demo', not 'other'"),
    }
    for name, (variant, problem) in cases.items():
        proc = memwb("replay", _write_turns(tmp_path / name, variant), "--db", db, "--engine", "naive", check=False)
        assert proc.returncode == 2 and problem in proc.stderr, (name, proc.stderr)
        assert str(db) in proc.stderr
        assert _log_size(db) == size, f"{name}: something was ingested"

    grown = memwb("replay", _write_turns(tmp_path / "grown.jsonl", rows), "--db", db, "--engine", "naive",
                  "--quiet").stdout
    assert grown.startswith("turns=12 ")

    with sqlite3.connect(db) as con:         # a database written before content hashes were stored
        con.execute("UPDATE op_log SET payload = json_remove(payload, '$.sha256') WHERE kind = 'turn_ingested'")
    assert memwb("replay", _write_turns(tmp_path / "old.jsonl", edited), "--db", db, "--engine", "naive",
                 "--quiet").stdout.startswith("turns=12 ")
    proc = memwb("replay", tmp_path / "reordered.jsonl", "--db", db, "--engine", "naive", check=False)
    assert proc.returncode == 2 and "turn order differs at turn 3" in proc.stderr


def test_ui_refuses_a_db_that_is_no_session(tmp_path):
    """`memwb ui --db` names what is wrong before any server starts, and leaves the file as it was."""
    junk = tmp_path / "junk.sqlite"
    junk.write_bytes(b"not a database" * 20)
    proc = memwb("ui", "--headless", "--db", junk, check=False)
    assert proc.returncode == 2 and "not a readable session database" in proc.stderr and str(junk) in proc.stderr
    assert junk.read_bytes() == b"not a database" * 20
    proc = memwb("ui", "--headless", "--db", tmp_path / "missing.sqlite", check=False)
    assert proc.returncode == 2 and "no such file" in proc.stderr


def test_a_command_naming_a_built_in_engine_imports_no_plugin_and_spacy_no_torch(tmp_path):
    """A replay into All-Mem, which parses statements to diagnose, in a fresh process: no plugin is imported
    (the installed mem0 adapter imports mem0) and spaCy is loaded without torch; torch still imports afterwards."""
    conversation = tmp_path / "demo12.jsonl"
    conversation.write_text("\n".join(DEMO.read_text(encoding="utf-8").splitlines()[:12]) + "\n", encoding="utf-8")
    script = ("import sys\nfrom engine.cli import main\n"
              f"code = main(['replay', {str(conversation)!r}, '--db', {str(tmp_path / 'a.sqlite')!r}, '--quiet'])\n"
              "print('LOADED', sorted(m for m in ('spacy', 'torch', 'mem0', 'memwb_mem0') if m in sys.modules))\n"
              "import torch\nprint('TORCH', torch.__version__, code)\n")
    proc = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "MEMWB_WORKSPACE": str(tmp_path / "ws")})
    assert proc.returncode == 0, proc.stderr
    assert "turns=12" in proc.stdout and "runs=1" in proc.stdout
    assert "LOADED ['spacy']" in proc.stdout and re.search(r"TORCH \S+ 0", proc.stdout), proc.stdout

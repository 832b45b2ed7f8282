"""`memwb replay --set NAME=VALUE` for every engine, `memwb schema` listing the settings, and RecMem's command-line
contract (replay, export, retrieve --json, check), run as a user would (subprocess, real SQLite files)."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from engine.engines import settings_class
from engine.core.schema import settings_fields
from engine.store.log_store import Store
from tests.conftest import engines_under_test
from tests.test_cli import DEMO, ROOT, memwb

TINY = DEMO.parent.parent / "fixtures" / "tiny.jsonl"


def first_number(engine: str) -> dict:
    """The engine's first numeric setting that has bounds."""
    return next(s for s in settings_fields(settings_class(engine))
                if s["type"] in ("int", "float") and s["max"] is not None)


@pytest.mark.parametrize("engine", engines_under_test())
def test_set_is_stored_shown_and_checked(engine, tmp_path):
    spec = first_number(engine)
    value = spec["max"] if spec["default"] != spec["max"] else spec["min"]
    db = tmp_path / "s.sqlite"
    proc = memwb("replay", TINY, "--db", db, "--engine", engine, "--set", f"{spec['name']}={value}", "--quiet")
    assert f"settings: {spec['name']}={value}" in proc.stdout
    stored = Store(db).meta()["settings"]
    assert stored[spec["name"]] == value and settings_class(engine).from_dict(stored).to_dict() == stored

    bad = memwb("replay", TINY, "--db", tmp_path / "u.sqlite", "--engine", engine, "--set", "no_such=1",
                check=False)
    assert bad.returncode == 2 and "unknown setting 'no_such'" in bad.stderr
    assert all(s["name"] in bad.stderr for s in settings_fields(settings_class(engine)))
    high = memwb("replay", TINY, "--db", tmp_path / "h.sqlite", "--engine", engine, "--set",
                 f"{spec['name']}={spec['max'] + 1}", check=False)
    assert high.returncode == 2 and f"{spec['name']}={spec['max'] + 1} is out of range" in high.stderr
    typed = memwb("replay", TINY, "--db", tmp_path / "t.sqlite", "--engine", engine, "--set",
                  f"{spec['name']}=lots", check=False)
    assert typed.returncode == 2 and f"setting {spec['name']} takes a {spec['type']} value, not 'lots'" in typed.stderr
    assert not any((tmp_path / n).exists() for n in ("u.sqlite", "h.sqlite", "t.sqlite"))   # refused before a file


def test_schema_lists_settings_with_bounds():
    described = json.loads(memwb("schema", "--engine", "recmem").stdout)
    settings = {s["name"]: s for s in described["settings"]}
    assert settings["theta_sim"] == {"name": "theta_sim", "type": "float", "default": 0.7, "min": 0.0, "max": 1.0,
                                     "group": "recurrence gate", "choices": None,
                                     "help": settings["theta_sim"]["help"]}
    assert settings["preset"]["choices"] == ["locomo", "longmemeval", "custom"]
    assert described["schedule"] == "every-1-turns"
    assert {k["name"] for k in described["node_kinds"]} == {"turn", "unit", "episode", "fact"}


def test_dict_and_list_settings(tmp_path):
    db = tmp_path / "a.sqlite"
    out = memwb("replay", TINY, "--db", db, "--set", "theta=merge:0.8", "--set", "ablations=no-split,no-merge",
                "--quiet").stdout
    stored = Store(db).meta()["settings"]
    assert stored["theta"] == {"split": 0.9, "merge": 0.8, "update": 0.9}
    assert stored["ablations"] == ["no-merge", "no-split"] and "ablations=" in out
    bad = memwb("replay", TINY, "--db", tmp_path / "b.sqlite", "--set", "theta=splat:0.8", check=False)
    assert bad.returncode == 2 and "keys split, merge, update" in bad.stderr
    bad = memwb("replay", TINY, "--db", tmp_path / "c.sqlite", "--set", "ablations=no-such", check=False)
    assert bad.returncode == 2 and "not no-such" in bad.stderr


def test_recmem_command_line_contract(tmp_path):
    db = tmp_path / "r.sqlite"
    out = memwb("replay", DEMO, "--db", db, "--engine", "recmem", "--set", "preset=longmemeval", "--quiet").stdout
    assert out.startswith("turns=102 ") and "episodic=" in out and "semantic=" in out
    assert "settings: preset=longmemeval theta_sim=0.6 theta_count=4 theta_merge=0.6" in out
    assert Store(db).meta()["schedule"] == "every-1-turns"
    assert memwb("check", "--db", db).stdout.startswith("ok: ")
    data = json.loads(memwb("export", "--db", db, "--json").stdout)
    kinds = {u["kind"] for u in data["units"]}
    assert kinds == {"turn", "unit", "episode", "fact"}
    edges = {(e["src"], e["dst"], e["type"]) for e in data["edges"]}
    units = {u["id"]: u for u in data["units"]}
    for u in data["units"]:
        if u["kind"] in ("unit", "episode"):
            assert {(u["id"], m, "derived_from") for m in u["members"]} <= edges
        if u["kind"] == "fact":
            assert any(src == u["id"] and units[dst]["kind"] == "episode" for src, dst, t in edges
                       if t == "derived_from")
    res = json.loads(memwb("retrieve", "--db", db, "--query", "How many half marathons has Jon run?", "--json",
                           "--k", "5").stdout)
    assert len(res["source_ids"]) == 5 and set(res["stages"]) == {"layers_ms", "provenance_ms", "rank_ms", "total_ms"}
    layers = {u["layer"] for u in res["units"]}
    assert layers <= {"subconscious", "episodic", "semantic"} and len(layers) >= 2
    for u in res["units"]:
        assert u["path"] == [] and units[u["id"]]["visible"]
        for hop in u.get("provenance", []):
            assert (hop["from"], hop["to"], hop["type"]) in edges
        if u["kind"] in ("fact", "episode"):
            assert u["provenance"] and {units[h["to"]]["kind"] for h in u["provenance"]} >= {"unit", "turn"}


def test_eval_recall_reads_set_as_replay_does(tmp_path):
    """`scripts/eval_recall.py --set` takes what `memwb replay --set` takes and refuses what it refuses, before
    anything is replayed (it once parsed values as JSON and took a setting no engine has without a word)."""
    def script(*args):
        return subprocess.run([sys.executable, "scripts/eval_recall.py", "--data", TINY, *map(str, args)], cwd=ROOT,
                              capture_output=True, text=True, timeout=600)

    unknown = script("--set", "expansion_bonus=0.3", "--out", tmp_path / "u.json")
    assert unknown.returncode == 1 and "unknown setting 'expansion_bonus' for engine allmem" in unknown.stderr
    high = script("--set", "lexical_weight=9", "--out", tmp_path / "h.json")
    assert high.returncode == 1 and "lexical_weight=9.0 is out of range" in high.stderr
    assert not (tmp_path / "u.json").exists() and not (tmp_path / "h.json").exists()
    ran = script("--engines", "allmem,naive", "--set", "lexical_weight=0.7", "--set", "theta=merge:0.8",
                 "--out", tmp_path / "r.json")
    assert ran.returncode == 0, ran.stderr
    result = json.loads((tmp_path / "r.json").read_text())
    assert result["settings"] == {"lexical_weight": 0.7, "theta": {**settings_class("allmem")().theta, "merge": 0.8}}
    assert result["engines"] == ["allmem", "naive"] and result["questions"] > 0

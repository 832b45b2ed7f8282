"""Engines from other packages: the tutorial's example (examples/memwb-notes-engine) and a package of deliberately
broken plugins (tests/fixtures/plugins/memwb-broken-engines) are pip-installed into a folder of this test session
(`pip install --target`, so the shared environment is left as it was) and put on the path of real `memwb`
processes; discovery finds them, `memwb engine check` passes the example and names the rule a broken one breaks,
and every other engine keeps working beside the broken ones."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from engine.eval.contract import DOC, RULES
from engine.engines import BrokenEngine, broken_engines, engine_class, known_engines, rediscover
from engine.store.log_store import Store
from tests.conftest import ROOT
from workbench.session_link import NEW_PARAM

EXAMPLE = ROOT / "examples" / "memwb-notes-engine"
ADAPTER = ROOT / "examples" / "memwb-mem0"          # mem0ai itself comes from the environment (--no-deps)
BROKEN = ROOT / "tests" / "fixtures" / "plugins" / "memwb-broken-engines"
TINY = ROOT / "datasets" / "fixtures" / "tiny.jsonl"
BROKEN_NAMES = {"badimport": "cannot import memwb_broken.missing:Engine: ModuleNotFoundError",
                "noattr": "module 'memwb_broken' has no attribute 'NoSuchEngine'",
                "badschema": "initial_status 'fresh' is not a declared status",
                "naive": "the name 'naive' is taken by a built-in engine"}


def pip_install(package: Path, site: Path, scratch: Path) -> None:
    """A real install of `package` into `site`, built from a copy (the build leaves nothing in the repository)."""
    source = scratch / package.name
    shutil.copytree(package, source, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
                    "--disable-pip-version-check", "--target", str(site), str(source)], check=True,
                   capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    site, scratch = tmp_path_factory.mktemp("site"), tmp_path_factory.mktemp("build")
    for package in (EXAMPLE, ADAPTER, BROKEN):
        pip_install(package, site, scratch)
    return site


def memwb(site: Path, *args, check: bool = True) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(site)]), "HF_HUB_OFFLINE": "1"}
    proc = subprocess.run([sys.executable, "-m", "engine.cli", *map(str, args)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=1200)
    if check and proc.returncode != 0:
        raise AssertionError(f"memwb {args} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return proc


@pytest.fixture
def on_path(site):
    """The installed plugins visible to this process too (for the pages under AppTest), then gone again."""
    sys.path.insert(0, str(site))
    rediscover()
    yield site
    sys.path.remove(str(site))
    rediscover()


def test_memwb_engines_lists_where_each_engine_came_from_and_why_a_plugin_is_broken(site):
    listed = json.loads(memwb(site, "engines", "--json").stdout)
    usable = {e["name"]: e for e in listed if e["usable"]}
    # other plugins the environment holds may show too: only what this session installed is asserted
    assert {"allmem", "naive", "hybrid", "memloom", "recmem", "gam", "notes", "lazy"} <= set(usable)
    assert usable["allmem"]["package"] == "memory-workbench"
    assert (usable["notes"]["package"], usable["notes"]["version"], usable["notes"]["target"]) == \
        ("memwb-notes-engine", "0.1.0", "memwb_notes.engine:NotesEngine")
    broken = {e["name"]: e["error"] for e in listed if not e["usable"]}
    assert set(BROKEN_NAMES) <= set(broken)
    for name, reason in BROKEN_NAMES.items():
        assert reason in broken[name]
    text = memwb(site, "engines")
    assert re.search(r"^notes +Notes +plugin from memwb-notes-engine 0\.1\.0", text.stdout, re.M)
    assert re.search(r"^badimport +BROKEN +plugin from memwb-broken-engines 0\.0\.1", text.stdout, re.M)
    assert re.search(r"\d+ installed plugin\(s\) cannot be used; every other engine works", text.stderr)


def test_every_other_engine_works_beside_broken_plugins(site, tmp_path):
    for engine in ("notes", "hybrid"):
        db = tmp_path / f"{engine}.sqlite"
        out = memwb(site, "replay", TINY, "--db", db, "--engine", engine, "--quiet").stdout
        assert out.startswith("turns=8 ") and Store(db).meta()["engine"] == engine
    notes = Store(tmp_path / "notes.sqlite")
    assert {op.payload["node"]["kind"] for op in notes.ops(kinds=["node_created"])} == {"note"}
    demo = tmp_path / "demo.sqlite"
    memwb(site, "replay", ROOT / "datasets" / "demo" / "demo.jsonl", "--db", demo, "--engine", "notes",
          "--consolidate", "manual", "--quiet")
    ran = memwb(site, "consolidate", "--db", demo).stdout        # named as the engine names leaving the surface
    off = sorted(op.payload["node"] for op in Store(demo).ops(kinds=["status_changed"]))
    assert off and re.fullmatch(r"run-0001: \{.*\} created=\[\] superseded=\[[\d, ]+\]\n", ran)
    assert sorted(json.loads(ran.split("superseded=")[1])) == off
    assert json.loads(memwb(site, "schema", "--engine", "notes").stdout)["label"] == "Notes"
    refused = memwb(site, "replay", TINY, "--db", tmp_path / "x.sqlite", "--engine", "badimport", check=False)
    assert refused.returncode == 2 and "engine 'badimport' from memwb-broken-engines 0.0.1 cannot be used: cannot " \
        "import memwb_broken.missing:Engine" in refused.stderr
    assert not (tmp_path / "x.sqlite").exists()
    refused = memwb(site, "bench", "--dataset", "locomo", TINY, "--engines", "notes,noattr", "--out",
                    tmp_path / "refused", check=False)
    assert refused.returncode == 2 and "engine 'noattr' from memwb-broken-engines 0.0.1 cannot be used" in refused.stderr
    out = tmp_path / "bench"
    memwb(site, "bench", "--dataset", "locomo", TINY, "--engines", "notes,naive", "--protocol", "static",
          "--out", out)
    result = json.loads((out / "result.json").read_text())
    assert {"notes", "naive"} <= {s["name"] if isinstance(s, dict) else s for s in result["systems"]}
    assert all(t["error"] is None for t in result["tasks"])


def test_the_registry_keeps_a_broken_plugin_aside_in_process(on_path):
    usable = set(known_engines())
    assert {"notes", "lazy"} <= usable and not (set(BROKEN_NAMES) - {"naive"}) & usable
    assert set(BROKEN_NAMES) <= {o.name for o in broken_engines()}
    with pytest.raises(BrokenEngine, match="engine 'badschema' from memwb-broken-engines 0.0.1 cannot be used: "
                                           "initial_status 'fresh'"):
        engine_class("badschema")
    assert engine_class("naive").__module__ == "engine.engines.rag.engine"      # the built-in keeps its name


def test_the_replay_page_names_a_broken_plugin_and_loads_a_discovered_engine(on_path):
    at = AppTest.from_file(str(ROOT / "workbench" / "app.py"), default_timeout=180)
    at.query_params[NEW_PARAM] = "demo"
    at.run()                                         # the app opens on the Replay page
    assert not at.exception
    warnings = " ".join(w.value for w in at.warning)
    for name in BROKEN_NAMES:
        assert f"Engine plugin `{name}` from memwb\\-broken\\-engines 0\\.0\\.1 cannot be used" in warnings
    picker = at.selectbox(key="replay_engine")
    assert {"Notes", "Lazy notes"} <= set(picker.options)
    picker.set_value("notes").run()
    at.button(key="replay_load").click().run()
    assert not at.exception
    wb = at.session_state["workbench"]
    assert wb.engine_name == "notes" and wb.engine.store.meta()["engine"] == "notes"


@pytest.mark.slow
@pytest.mark.parametrize("name", ["notes", "mem0"], ids=["tutorial", "adapter"])    # ids: not a per-engine case
def test_engine_check_passes_on_the_example_and_the_adapter(site, name):
    proc = memwb(site, "engine", "check", name)
    assert re.search(rf"memwb engine check {name}: \d+ passed, 0 failed", proc.stdout), proc.stdout[-2000:]
    assert "FAIL" not in proc.stdout


def test_engine_check_names_the_rule_a_plugin_breaks_and_where_it_is_documented(site):
    proc = memwb(site, "engine", "check", "lazy", "-k", "execute_closes", check=False)
    assert proc.returncode == 1
    assert "FAIL tests/test_engine_contract.py::test_execute_closes_every_accepted_proposal[lazy-sqlite]" in proc.stdout
    assert "rule: execute sets each accepted proposal applied" in proc.stdout
    assert f"documented: {DOC}#rule-execute-closes" in proc.stdout
    broken = memwb(site, "engine", "check", "noattr", check=False)
    assert broken.returncode == 2 and "has no attribute 'NoSuchEngine'" in broken.stderr


def test_engine_new_writes_the_example_package_and_a_new_one_that_installs_and_replays(site, tmp_path):
    memwb(site, "engine", "new", "notes", "--dir", tmp_path)
    written = {p.relative_to(tmp_path / "memwb-notes-engine"): p.read_text()
               for p in (tmp_path / "memwb-notes-engine").rglob("*") if p.is_file()}
    example = {p.relative_to(EXAMPLE): p.read_text() for p in EXAMPLE.rglob("*")     # what git holds of it, not what
               if p.is_file() and not any(part == "__pycache__" or part.endswith(".egg-info")   # an install left
                                          for part in p.parts)}
    assert written == example, "examples/memwb-notes-engine is `memwb engine new notes`"

    memwb(site, "engine", "new", "my_mem", "--dir", tmp_path)
    again = memwb(site, "engine", "new", "my_mem", "--dir", tmp_path, check=False)
    assert again.returncode == 2 and "already exists; nothing was written" in again.stderr
    bad = memwb(site, "engine", "new", "My-Mem", "--dir", tmp_path, check=False)
    assert bad.returncode == 2 and "use lower-case letters" in bad.stderr
    own = tmp_path / "own-site"
    pip_install(tmp_path / "memwb-my-mem-engine", own, tmp_path / "scratch")
    listed = {e["name"]: e for e in json.loads(memwb(own, "engines", "--json").stdout)}
    assert listed["my_mem"]["usable"] and listed["my_mem"]["package"] == "memwb-my-mem-engine"
    out = memwb(own, "replay", TINY, "--db", tmp_path / "m.sqlite", "--engine", "my_mem", "--quiet").stdout
    assert out.startswith("turns=8 ")
    check = memwb(own, "engine", "check", "my_mem", "-k", "loads_the_engine or replay_fills or execute_closes",
                  check=False)
    assert check.returncode == 0 and re.search(r"memwb engine check my_mem: [1-9]\d* passed, 0 failed", check.stdout)


@pytest.mark.slow
def test_the_contract_names_every_per_engine_test_and_the_guide_states_every_rule(site):
    """Collected with the example installed, every test that runs once per engine (a `notes` parameter) belongs
    to a rule, every rule's test exists, and the guide states each rule under its anchor with its tests."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(site)]), "HF_HUB_OFFLINE": "1"}
    collected = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--collect-only",
                                "tests"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600).stdout
    per_engine = {line.split("[", 1)[0] for line in collected.splitlines()
                  if re.search(r"\[([^]]*-)?notes(-[^]]*)?\]$", line)}
    in_rules = {t for r in RULES for t in r.tests}
    assert per_engine and per_engine <= in_rules, per_engine - in_rules
    for test in in_rules:
        path, name = test.split("::")
        assert f"def {name}(" in (ROOT / path).read_text(), test
    guide = (ROOT / DOC).read_text()
    for rule in RULES:
        assert f'<a id="rule-{rule.key}"></a>' in guide, rule.key
        section = guide.split(f'<a id="rule-{rule.key}"></a>', 1)[1].split('<a id="rule-', 1)[0]
        for test in rule.tests:
            assert test.split("::")[1] in section, (rule.key, test)


def test_the_run_diff_words_a_discovered_engine_s_edits_from_its_schema(on_path):
    """The Consolidation page's run diff names what a run moved by the engine's own lineage type and off-surface
    status, never All-Mem's words for them."""
    from apptest import open_app_page

    at, wb = open_app_page("../pages/3_consolidation.py", turn=90, engine="notes")
    at.button(key="run_diagnosis").click().run()
    at.radio(key="decision_mode").set_value("Let the gate decide").run()
    at.button(key="apply_run").click().run()
    assert not at.exception
    run = wb.engine.state.last_committed_run()
    assert run.summary["applied"] > 0 and len(run.summary["archived"]) == run.summary["applied"]
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Edges moved along supersedes"] == "0"
    assert metrics["Nodes created / superseded"] == f"0 / {run.summary['applied']}"
    shown = " ".join(m.value for m in at.markdown)
    assert "**Edges moved along supersedes**: from a node now superseded" in shown
    assert "representative" not in shown and "rewired" not in shown.lower() and "degree cap" not in shown

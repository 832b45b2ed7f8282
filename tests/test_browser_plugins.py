"""The two engines installed from outside the repository (the tutorial's `notes` engine and the mem0 adapter,
each its own package found through the `memory_workbench.engines` entry points) on all six pages, in a real
headless Chromium, driven as a person does: the Replay page on the demo, the graph, one proposal accepted by
hand on Consolidation and read back from the session database, a question on Retrieval, the bundled cases on
Annotate, and a `memwb bench` run of the engine on the Benchmark page (issue 56)."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys

import pytest
from conftest import ROOT

from engine.core.access import local_identity
from engine.core.proposal import Status
from engine.engines import engine_schema, known_engines
from engine.store.catalog import list_sessions
from engine.store.log_store import Store
from engine.store.workspace import ENV
from workbench.driver import CHROMIUM, browser_page, click, open_page, running_app, wait_idle
from workbench.driver.browser import open_at_demo_turn
from workbench.driver.demo import UPDATE_QUERY
from workbench.driver.tours import ask_free_query
from workbench.model import DEMO_PATH
from workbench.review.queue import sort_queue

pytestmark = [pytest.mark.slow, pytest.mark.browser]
if not shutil.which(CHROMIUM) and not (ROOT / CHROMIUM).exists():
    pytestmark.append(pytest.mark.skip(reason=f"{CHROMIUM} missing: scripts/test.sh installs Debian chromium"))

PLUGINS = ("notes", "mem0")          # examples/memwb-notes-engine and examples/memwb-mem0, installed by the test command


@pytest.mark.parametrize("name", PLUGINS, ids=["tutorial", "adapter"])    # ids: not per-engine contract cases
def test_an_installed_engine_on_all_six_pages(tmp_path, name):
    assert name in known_engines(), f"{name} is not installed: scripts/install.sh installs examples/"
    schema = engine_schema(name)
    workspace = tmp_path / "workspace"
    bench = subprocess.run([sys.executable, "-m", "engine.cli", "bench", "--dataset", "locomo", str(DEMO_PATH),
                            "--engines", name, "--rounds", "1"], cwd=ROOT, capture_output=True, text=True,
                           timeout=600, env={**os.environ, ENV: str(workspace)})
    assert bench.returncode == 0, bench.stderr
    local = local_identity().name
    with running_app(env={ENV: str(workspace), "MEMWB_ENGINE": name}) as url, browser_page(1280, 900) as page:
        texts = {}
        open_at_demo_turn(page, url, "D5:9")
        texts["replay"] = page.inner_text("body")

        open_page(page, "Memory graph")
        page.wait_for_timeout(1000)
        texts["graph"] = page.inner_text("body")

        open_page(page, "Consolidation")
        click(page, "Run diagnosis")
        db = next(s.path for s in list_sessions(workspace / "sessions") if s.engine == name)
        state = Store(db).load_state()
        run_id = next(r.run_id for r in state.open_runs())
        queue = sort_queue([p for p in state.proposals.values() if p.run_id == run_id and p.status == Status.PENDING])
        assert queue, f"{name}: no proposal to review at D5:9"
        page.get_by_text("Accept", exact=True).first.click()        # the first card
        wait_idle(page)
        page.get_by_role("button", name=re.compile(r"^Apply decisions \(1 accept")).click()
        page.get_by_text(re.compile(rf"{run_id}: 1 applied|{run_id} committed: 1 applied")).first.wait_for()
        texts["consolidation"] = page.inner_text("body")
        accepted = Store(db).load_state().proposals[queue[0].id]
        assert accepted.status not in (Status.PENDING, Status.REJECTED) and accepted.decided_by == local, accepted

        ask_free_query(page, texts, lambda name: None, UPDATE_QUERY)

        open_page(page, "Annotate")
        page.get_by_role("button", name="Import").first.click()
        page.get_by_role("button", name="Load the bundled demo cases").click()
        wait_idle(page, 1500)
        page.keyboard.press("Escape")
        texts["annotate"] = page.inner_text("body")

        open_page(page, "Benchmark")
        page.get_by_text("Per-round curves").wait_for()
        texts["benchmark"] = page.inner_text("body")
        assert page.get_by_test_id("stException").count() == 0

    assert f"Engine · {schema.label}" in texts["replay"] and "What turn D5:9 caused" in texts["replay"]
    assert "Memory graph" in texts["graph"] and "Traceback" not in texts["graph"]
    assert queue[0].op in texts["consolidation"].lower() or schema.label in texts["consolidation"]
    assert re.search(r"#1 +u\d+ +\[D\d+:\d+", texts["retrieval"]), texts["retrieval"][-1500:]   # ranked, with its turn
    assert "commute" in texts["annotate"]                   # a bundled case's question
    assert name in texts["benchmark"]
    assert all("Traceback" not in t for t in texts.values())

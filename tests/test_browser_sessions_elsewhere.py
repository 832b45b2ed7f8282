"""Sessions made with the CLI, opened from the UI of a running workbench (issue 53.4): no second server."""
from __future__ import annotations

import re
import shutil
import subprocess
import sys

import pytest
from conftest import ROOT

from engine.session import open_session
from engine.store.catalog import read_session
from engine.store.data_paths import DATA_DIRS_ENV
from engine.store.workspace import ENV
from workbench.driver import CHROMIUM, browser_page, click, running_app, wait_idle, wait_loaded
from workbench.model import DEMO_PATH

pytestmark = [pytest.mark.slow, pytest.mark.browser]
if not shutil.which(CHROMIUM) and not (ROOT / CHROMIUM).exists():
    pytestmark.append(pytest.mark.skip(reason=f"{CHROMIUM} missing: scripts/test.sh installs Debian chromium"))


def _cli_replay(db, *args: str) -> str:
    """`memwb replay` as a user types it; its summary line."""
    done = subprocess.run([sys.executable, "-m", "engine.cli", "replay", str(DEMO_PATH), "--db", str(db), "--quiet",
                           *args], capture_output=True, text=True, check=True, cwd=ROOT)
    return done.stdout


def _stored(db) -> tuple[int, int]:
    """(turns ingested, nodes held) as the database stores them."""
    return read_session(db).turn, len(open_session(db, create=False).state.nodes)


def test_a_cli_made_session_in_a_data_folder_opens_from_the_session_picker(tmp_path):
    """`memwb replay --db` into a folder the workbench reads (MEMWB_DATA_DIRS): the Replay page's picker lists it
    beside the workspace's sessions, Open shows its turns and nodes as stored; a path outside the data folders
    typed into "Open a database" is refused, one inside opens."""
    data = tmp_path / "mine"
    (data / "runs").mkdir(parents=True)
    listed, typed = data / "runs" / "cli-memloom.sqlite", data / "typed.sqlite"
    _cli_replay(listed, "--engine", "memloom")
    _cli_replay(typed, "--engine", "naive")
    outside = tmp_path / "outside.sqlite"
    shutil.copy(typed, outside)
    turns, nodes = _stored(listed)
    env = {ENV: str(tmp_path / "workspace"), DATA_DIRS_ENV: str(data)}
    with running_app(env=env) as url, browser_page() as page:
        page.goto(url)
        page.get_by_role("button", name="Next ▶").wait_for(timeout=180_000)
        wait_loaded(page)
        page.get_by_text("Sessions in the workspace").click()
        wait_idle(page)
        body = page.inner_text("body")
        assert "Session databases in the data folders" in body and str(data) in body
        combo = page.get_by_role("combobox", name="Session", exact=True)
        combo.click()
        page.get_by_role("option").filter(has_text=str(listed)).click()
        wait_idle(page)
        click(page, "Open session", exact=True)
        page.get_by_text(f"Opened {listed.name} at turn {turns} of").wait_for()
        text = page.inner_text("body")
        assert f"Database · {listed.name}" in text and "Engine · MemLoom" in text
        assert re.search(rf"Turn · {turns} / {turns}\b", text)
        assert re.search(rf"Nodes · {nodes} \(", text), text[:1500]
        assert nodes and _stored(listed) == (turns, nodes)          # opening ingested nothing

        box = page.get_by_role("textbox", name="Open a database")
        if not box.is_visible():                       # the listing stays open after Open, unless a rerun closed it
            page.get_by_text("Sessions in the workspace").click()
            wait_idle(page)
        box.fill(str(outside))
        box.press("Enter")
        wait_idle(page)
        click(page, "Open database", exact=True)
        assert "is outside the folders the workbench reads from" in page.inner_text("body")
        assert f"Database · {listed.name}" in page.inner_text("body")          # still the session opened before
        box = page.get_by_role("textbox", name="Open a database")
        box.fill(str(typed))
        box.press("Enter")
        wait_idle(page)
        click(page, "Open database", exact=True)
        page.get_by_text(f"Opened {typed.name} at turn").wait_for()
        assert "Engine · Naive RAG" in page.inner_text("body")

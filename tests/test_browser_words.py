"""Words and counts that agree on one screen, in a real browser (issue 53.7): `/replay` as a URL, a router summary
that names its subject once ("Maya spends most of their week"), MemLoom's queued
count in the header and under the turn, its process named from the schema on the button and the run, the Play
button naming its session, and the run's proposals read without a scroll box of their own."""
from __future__ import annotations

import re
import shutil

import pytest
from conftest import ROOT

from engine.session import open_session
from engine.store.catalog import list_sessions
from engine.store.workspace import ENV
from workbench.driver import (CHROMIUM, browser_page, click, jump_to_turn, open_page, open_tab, running_app,
                              wait_loaded)
from workbench.driver.tours import apply_gate_verdicts
from workbench.model import DEMO_PATH
from engine.loaders import load_conversation
from workbench.text import full_height

pytestmark = [pytest.mark.slow, pytest.mark.browser]
if not shutil.which(CHROMIUM) and not (ROOT / CHROMIUM).exists():
    pytestmark.append(pytest.mark.skip(reason=f"{CHROMIUM} missing: scripts/test.sh installs Debian chromium"))

TURN = 30


def test_memloom_at_turn_30_says_one_thing_once(tmp_path):
    workspace = tmp_path / "workspace"
    with running_app(env={ENV: str(workspace), "MEMWB_ENGINE": "memloom"}) as url, browser_page(1280, 900) as page:
        page.goto(f"{url}/replay")
        page.get_by_role("button", name="Next ▶").wait_for(timeout=180_000)
        wait_loaded(page)
        assert "Page not found" not in page.inner_text("body")
        jump_to_turn(page, 7)                    # "... so I spend most of my week staring at tanks"
        page.get_by_text("Turn · 7 /").wait_for()
        page.get_by_text("What turn D1:7 caused").wait_for()
        card = page.inner_text("body")
        assert "so Maya spends most of their week staring at tanks" in card and "Maya's week" not in card
        jump_to_turn(page, TURN)
        page.get_by_text(f"Turn · {TURN} /").wait_for()
        db = next(s.path for s in list_sessions(workspace / "sessions") if s.engine == "memloom")
        queued = len(open_session(db, create=False).state.buffer("steward"))
        text = page.inner_text("body")
        assert f"Queued for Off-peak steward · {queued}" in text                  # the header
        assert f"Queued for Off-peak steward\n\n{queued}" in text                 # the metric under the turn
        assert "Queued after ingest" not in text
        upcoming = load_conversation(DEMO_PATH).turns[TURN].session
        play = page.get_by_role("button", name=re.compile("Play to end of session"))
        assert play.inner_text().strip() == f"▶▶ Play to end of session {upcoming}"

        open_page(page, "Consolidation")
        click(page, "Run diagnosis · Off-peak steward", exact=True)
        apply_gate_verdicts(page)
        open_tab(page, "Run diff & undo")
        chosen = page.get_by_role("combobox", name="Run", exact=True)
        assert chosen.input_value() == f"run-0001 · Off-peak steward, manual run at turn {TURN} · committed"
        state = open_session(db, create=False).state
        n = sum(p.run_id == "run-0001" for p in state.proposals.values())
        table = page.get_by_test_id("stDataFrame").last                    # the run's proposals, last on the tab
        table.scroll_into_view_if_needed()
        box = table.bounding_box()
        assert abs(box["height"] - full_height(n, cap=200)) <= 2, (box, n)
        inner = table.evaluate("e => { const s = e.querySelector('.dvn-scroller'); "
                               "return s ? [s.scrollHeight, s.clientHeight] : null; }")
        assert inner is None or inner[0] <= inner[1] + 1, inner              # no scroll box of its own

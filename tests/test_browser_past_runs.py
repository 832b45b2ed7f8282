"""A committed run reviewed read-only in a real browser (issue 53.5): with no open run the review queue offers the
past runs, each proposal with its decision, who decided, confidence, reason code and reason, evidence and why it
was skipped, as the database stores them."""
from __future__ import annotations

import shutil
import subprocess
import sys

import pytest
from conftest import ROOT

from engine.session import open_session
from engine.store.catalog import DB_ENV
from engine.store.workspace import ENV
from workbench.driver import CHROMIUM, browser_page, choose_option, open_page, running_app, wait_loaded
from workbench.model import DEMO_PATH
from workbench.review.queue import PAGE_SIZE

pytestmark = [pytest.mark.slow, pytest.mark.browser]
if not shutil.which(CHROMIUM) and not (ROOT / CHROMIUM).exists():
    pytestmark.append(pytest.mark.skip(reason=f"{CHROMIUM} missing: scripts/test.sh installs Debian chromium"))


def test_a_committed_runs_proposals_are_readable_with_no_open_run(tmp_path):
    db = tmp_path / "demo.sqlite"
    subprocess.run([sys.executable, "-m", "engine.cli", "replay", str(DEMO_PATH), "--db", str(db), "--quiet"],
                   check=True, capture_output=True, cwd=ROOT)
    engine = open_session(db, create=False)
    state = engine.state
    records = len(list(engine.store.ops()))
    assert not state.open_runs()
    by_run = {r: [p for p in state.proposals.values() if p.run_id == r] for r in state.runs}
    busiest = max(by_run, key=lambda r: (len(by_run[r]), r))
    skipped = [p for p in by_run[busiest] if p.status == "skipped"]
    applied = [p for p in by_run[busiest] if p.status == "applied"]
    assert skipped and applied
    with running_app(env={ENV: str(tmp_path / "workspace"), DB_ENV: str(db)}) as url, browser_page() as page:
        page.goto(url)
        page.get_by_text(f"Database · {db.name}").wait_for(timeout=180_000)
        wait_loaded(page)
        open_page(page, "Consolidation")
        page.get_by_text("Past runs (read-only)").wait_for()
        text = _every_card_page(page, len(by_run[busiest]))
        assert "No open run" in text and "past runs are below, read-only" in text
        chosen = page.get_by_role("combobox", name="Past run", exact=True)
        assert chosen.input_value() == (f"{busiest} · Consolidation (ATC), scheduled run at turn "
                                        f"{state.runs[busiest].turn} · committed")
        for p in by_run[busiest]:                        # every card, as stored
            assert f"#{p.id} · {engine.schema.operator(p.op).label}" in text
            assert f"confidence {p.confidence:.2f} (gate θ {p.detail['threshold']:.2f})" in text
        for p in skipped:
            assert f"Note: {p.note}" in text and p.reason_code and f"Reason code: {p.reason_code}" in text
        for p in applied:
            assert f"#{p.id}" in text and "decided by gate" in text and f"Reason: {p.reason}" in text
        first = min(by_run)
        choose_option(page, "Past run", f"{first} · Consolidation (ATC), scheduled run at turn "
                                        f"{state.runs[first].turn} · committed")
        text = page.inner_text("body").replace("\u2060", "")
        for p in by_run[first]:
            assert f"confidence {p.confidence:.2f}" in text and f"status {p.status}" in text
        assert all(f"#{p.id} · " not in text for p in by_run[busiest] if p.id not in {q.id for q in by_run[first]})
    assert len(list(open_session(db, create=False).store.ops())) == records           # reading wrote no record


def _every_card_page(page, cards: int) -> str:
    """The page's text with each page of a past run's cards shown in turn (`PAGE_SIZE` a page), ending back on
    the first."""
    text = page.inner_text("body").replace("\u2060", "")
    pages = -(-cards // PAGE_SIZE)
    for k in [*range(2, pages + 1), 1] if pages > 1 else []:
        choose_option(page, f"Cards page ({PAGE_SIZE} per page)", f"{k} of {pages}")
        text += page.inner_text("body").replace("\u2060", "")
    return text

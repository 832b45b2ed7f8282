"""The workbench in a real headless Chromium, driven the way a person uses it."""
from __future__ import annotations

import shutil

import pytest

from tests.conftest import ROOT
from workbench.driver import (CHROMIUM, browser_page, click, jump_to_turn, open_page, running_app, wait_idle,
                              walkthrough)

pytestmark = [pytest.mark.slow, pytest.mark.browser]
if not shutil.which(CHROMIUM) and not (ROOT / CHROMIUM).exists():
    pytestmark.append(pytest.mark.skip(reason=f"{CHROMIUM} missing: scripts/test.sh installs Debian chromium"))


def test_demo_walkthrough(tmp_path):
    """Step past the superseded fact, consolidate, accept the Update, and recover the archived unit."""
    with running_app() as url, browser_page() as page:
        texts = walkthrough(page, url, shots=tmp_path)
    assert "What turn D5:9 caused" in texts["replay"]
    assert "1 applied" in texts["consolidation"] and "decided by human" in texts["consolidation"]
    assert "Units created / archived\n\n0 / 1" in texts["consolidation"]       # the superseded unit archived
    assert "version (ν) · 1" in texts["graph"]
    assert "—version→" in texts["retrieval"] and "[archived]" in texts["retrieval"]
    assert "D1:4" in texts["retrieval"] and "D5:4" in texts["retrieval"]
    assert "commute" in texts["annotate"]
    assert len(list(tmp_path.glob("*.png"))) == 5


def test_conversation_html_is_escaped_on_every_page():
    """Turns carrying <script> and onerror payloads: shown as text, never executed, on any page."""
    fixture = ROOT / "tests" / "fixtures" / "xss.jsonl"
    dialogs: list[str] = []
    with running_app(env={"MEMWB_DEMO": str(fixture)}) as url, browser_page() as page:
        page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
        page.goto(url)
        page.get_by_role("button", name="Next ▶").wait_for()
        wait_idle(page)
        jump_to_turn(page, 6)
        replay = page.inner_text("body")
        assert "<script>alert('xss-turn')</script>" in replay          # rendered as literal text
        assert "<b>bold</b>" in replay
        open_page(page, "Consolidation")
        click(page, "Run diagnosis")
        page.get_by_text("Let the gate decide", exact=True).click()
        wait_idle(page)
        page.get_by_role("button", name="Apply gate verdicts").first.click()
        wait_idle(page, 1500)
        for title in ("Memory graph", "Retrieval", "Annotate", "Consolidation", "Replay"):
            open_page(page, title)
            page.wait_for_timeout(2000)
            for frame in page.frames:                               # the pyvis graph lives in an iframe
                injected = frame.evaluate("""() => ({
                    onerror: document.querySelectorAll('[onerror]').length,
                    bold: Array.from(document.querySelectorAll('b')).filter(b => b.textContent === 'bold').length,
                    scripts: Array.from(document.scripts).filter(s => s.text.trim().startsWith('alert(')).length,
                })""")
                assert injected == {"onerror": 0, "bold": 0, "scripts": 0}, f"{title}: {injected}"
    assert dialogs == [], f"conversation text executed as script: {dialogs}"

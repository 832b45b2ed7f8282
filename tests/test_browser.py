"""The workbench in a real headless Chromium, driven the way a person uses it."""
from __future__ import annotations

import re

import shutil

import pytest

from conftest import ROOT
from workbench.driver import (CHROMIUM, baseline_walkthrough, browser_page, click, jump_to_turn,
                              memloom_walkthrough, open_page, running_app, wait_idle, walkthrough)

pytestmark = [pytest.mark.slow, pytest.mark.browser]
if not shutil.which(CHROMIUM) and not (ROOT / CHROMIUM).exists():
    pytestmark.append(pytest.mark.skip(reason=f"{CHROMIUM} missing: scripts/test.sh installs Debian chromium"))


def test_demo_walkthrough(tmp_path):
    """Step past the superseded fact, consolidate, accept the Update, and recover the archived unit."""
    with running_app() as url, browser_page() as page:
        texts = walkthrough(page, url, shots=tmp_path)
    assert "What turn D5:9 caused" in texts["replay"]
    assert "1 applied" in texts["consolidation"] and "decided by human" in texts["consolidation"]
    assert "Nodes created / archived\n\n0 / 1" in texts["consolidation"]       # the superseded unit archived
    assert "version (ν) · 1" in texts["graph"]
    assert "—version→" in texts["retrieval"] and "[archived]" in texts["retrieval"]
    assert "D1:4" in texts["retrieval"] and "D5:4" in texts["retrieval"]
    assert "commute" in texts["annotate"]
    assert len(list(tmp_path.glob("*.png"))) == 5


def test_naive_rag_session_walkthrough(tmp_path):
    """A session opened in naive RAG: no edges, nothing to consolidate, retrieval beside All-Mem."""
    with running_app(env={"MEMWB_ENGINE": "naive"}) as url, browser_page() as page:
        texts = baseline_walkthrough(page, url, shots=tmp_path)
    assert "Engine · Naive RAG" in texts["replay"] and "What turn D5:9 caused" in texts["replay"]
    assert "keeps no edges" in texts["graph"]
    assert "The Naive RAG engine has no offline process: nothing to consolidate" in texts["consolidation"]
    assert "Ranking (ms)" in texts["retrieval"] and "All-Mem" in texts["retrieval"]
    assert "D5:4" in texts["retrieval"]
    assert len(list(tmp_path.glob("*.png"))) == 4


def test_memloom_session_walkthrough(tmp_path):
    """A session opened in MemLoom: a turn's routing decision, steward relations with cited evidence applied by
    the gate, event FSM shapes and the lifecycle timeline, the causal question's path from its seed event."""
    with running_app(env={"MEMWB_ENGINE": "memloom"}) as url, browser_page() as page:
        texts = memloom_walkthrough(page, url, shots=tmp_path)
    assert "Engine · MemLoom" in texts["replay"] and "What turn D" in texts["replay"]
    assert "Routing decision" in texts["replay"] and "score S_j" in texts["replay"]
    assert "★ cited" in texts["consolidation"] and "Relation" in texts["consolidation"]
    assert "applied" in texts["applied"]
    assert "Lifecycle timeline" in texts["graph"] and "events that pass the filters" in texts["graph"]
    assert "Lanes for" in texts["graph"]            # (the graph legend lives in its iframe)
    assert "Gold evidence: D2:6, D3:9, D4:2, D6:6" in texts["retrieval"] and "seed u" in texts["retrieval"]
    assert "—evidence→" in texts["retrieval"] and "stored edge" in texts["retrieval"]
    # the root cause is a result, reached from D6:6's event through CAUSAL_FOLLOW relations only, and highlighted
    assert re.search(r"u\d+ +\[D2:6\*\][^\n]* seed u\d+( —CAUSAL_FOLLOW \(reverse\)→ u\d+){2,} —evidence→ u\d+",
                     texts["retrieval"]), texts["retrieval"][-2500:]
    assert "(D2:6)" in texts["highlight"] and "CAUSAL_FOLLOW" in texts["highlight"], texts["highlight"]
    assert sorted(p.name for p in tmp_path.glob("*.png")) == ["6_memloom_graph.png", "7_memloom_retrieval.png",
                                                              "8_memloom_replay.png", "9_memloom_consolidation.png"]


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

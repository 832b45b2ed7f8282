"""The RecMem tour in a real browser, as a person takes it: open the demo in RecMem with thresholds set in the
settings form, read the recurrence gate's trace and the threshold sweep on Replay, review a consolidation run
(reject one cluster, accept another), look at the layers on the graph and a result's provenance on Retrieval,
then undo the run. Used by tests/test_browser.py (which reads the session database after each step) and
scripts/screenshots.py (19_recmem_replay … 22_recmem_retrieval).
"""
from __future__ import annotations

import re
from pathlib import Path

from engine.core.oplog import OpKind
from engine.core.proposal import Status
from engine.store.catalog import list_sessions
from engine.store.log_store import Store
from workbench.driver.browser import (choose_radio, click, jump_to_turn, open_expander, open_page, open_tab,
                                      tall_screenshot, wait_idle, wait_loaded)
from workbench.driver.demo import UPDATE_QUERY
from workbench.driver.tours import ask_free_query
from workbench.review.queue import sort_queue

SETTINGS = {"theta sim": "0.60", "theta count": "3", "theta merge": "0.60"}     # the demo is short: see docs
REVIEW_TURN = 48


def session_db(workspace: Path) -> Path:
    """The RecMem session the tour opened (the newest in the workspace)."""
    found = [s for s in list_sessions(workspace / "sessions") if s.engine == "recmem"]
    return max(found, key=lambda s: s.path.stat().st_mtime).path


def trigger_turn(db: Path) -> int:
    """The first turn whose gate fired a recurrence trigger, from the stored turn records."""
    for op in Store(db).ops(kinds=[OpKind.TURN_INGESTED]):
        if any(g["fired"] == "consolidate" for g in op.payload.get("gate") or []):
            return op.turn
    raise AssertionError("no recurrence trigger in the replayed turns")


def _jump(page, turn: int) -> None:
    """Jump the Replay cursor to `turn` and wait until the header says so (once more if a rerun swallowed the
    first request)."""
    from playwright.sync_api import expect

    for attempt in range(2):
        jump_to_turn(page, turn)
        try:
            expect(page.get_by_text(f"Turn · {turn} /")).to_be_visible(timeout=300_000 if attempt else 30_000)
            return
        except AssertionError:
            if attempt:
                raise


def _decide(page, queue: list, pid: int, choice: str) -> None:
    card = page.get_by_test_id("stRadio").filter(has_text="Decision").nth([p.id for p in queue].index(pid))
    card.get_by_text(choice, exact=True).click()
    wait_idle(page)


def recmem_walkthrough(page, url: str, workspace: Path, shots: Path | None = None) -> dict:
    """Returns each page's visible text and what the tour decided: {"texts", "db", "rejected", "accepted",
    "run"}."""
    from playwright.sync_api import expect

    def shot(name: str, max_height: int = 4200) -> None:
        if shots is not None:
            tall_screenshot(page, shots / f"{name}.png", max_height)

    texts: dict[str, str] = {}
    page.goto(url)
    expect(page.get_by_role("button", name="Next ▶")).to_be_visible(timeout=180_000)
    wait_loaded(page)
    open_expander(page, "Source, conversation, engine and settings")
    engine = page.get_by_test_id("stSelectbox").filter(has_text="Engine")
    if "RecMem" not in engine.inner_text():
        engine.click()
        page.get_by_role("option", name="RecMem").click()
        wait_idle(page)
    for label, value in SETTINGS.items():
        box = page.get_by_label(label, exact=True)
        box.fill(value)
        box.press("Enter")
        wait_idle(page)
    page.get_by_test_id("stSelectbox").filter(has_text="Schedule of").click()
    page.get_by_role("option", name="Manual (Consolidation page)").click()
    wait_idle(page)
    click(page, "Load")
    expect(page.get_by_text(re.compile(r"Loaded demo .* into RecMem"))).to_be_visible(timeout=60_000)
    wait_idle(page, 1500)
    db = session_db(workspace)

    _jump(page, REVIEW_TURN)
    turn = trigger_turn(db)
    _jump(page, turn)
    expect(page.get_by_text("|R| vs θ_count").first).to_be_visible()
    open_expander(page, re.compile("^Threshold sweep"), 2500)
    texts["replay"] = page.inner_text("body")
    shot("19_recmem_replay")

    _jump(page, REVIEW_TURN)
    open_page(page, "Consolidation")
    click(page, "Run diagnosis")
    state = Store(db).load_state()
    run = next(r.run_id for r in state.open_runs())
    pending = [p for p in state.proposals.values() if p.run_id == run and p.status == Status.PENDING]
    clusters = sorted((p for p in pending if p.op == "consolidate"), key=lambda p: p.id)
    follows = {p.detail["after"][0]: p for p in pending if p.op == "refine"}
    rejected = [clusters[0], follows[clusters[0].id]]
    accepted = [p for p in pending if p not in rejected]
    queue = sort_queue(pending)
    choose_radio(page, "I decide each proposal")
    wait_idle(page)
    for p in rejected:
        _decide(page, queue, p.id, "Reject")
    for p in accepted:
        _decide(page, queue, p.id, "Accept")
    expect(page.get_by_text("Cluster (the proposal's inputs)").first).to_be_visible()
    texts["consolidation"] = page.inner_text("body")
    shot("20_recmem_consolidation", 3200)
    click(page, f"Apply decisions ({len(accepted)} accept, {len(rejected)} reject)")
    expect(page.get_by_text(re.compile(rf"{run} committed: "))).to_be_visible()
    texts["applied"] = page.inner_text("body")

    open_page(page, "Memory graph")
    open_tab(page, "Layers", 2500)
    texts["graph"] = page.inner_text("body")
    shot("21_recmem_graph")

    ask_free_query(page, texts, shot, UPDATE_QUERY, "22_recmem_retrieval")

    open_page(page, "Consolidation")
    open_tab(page, "Run diff & undo")
    click(page, f"Undo last run ({run})…")
    click(page, "Yes, undo")
    expect(page.get_by_text(f"{run} undone")).to_be_visible()
    texts["undone"] = page.inner_text("body")
    return {"texts": texts, "db": db, "rejected": [p.id for p in rejected], "accepted": [p.id for p in accepted],
            "run": run, "clusters": [p.id for p in clusters]}


def locomo_layers_walkthrough(page, url: str, shots: Path | None = None) -> str:
    """The Layers tab of a RecMem session holding a whole LoCoMo conversation (start the app with `memwb ui --db`
    on it): facts, episodes and units of conv-26 along their derived_from links. Screenshot 23_recmem_layers."""
    page.goto(url)
    page.get_by_role("button", name="Next ▶").wait_for(timeout=300_000)
    wait_idle(page, 2000)
    open_page(page, "Memory graph")
    open_tab(page, "Layers", 4000)
    if shots is not None:
        tall_screenshot(page, shots / "23_recmem_layers.png")
    return page.inner_text("body")

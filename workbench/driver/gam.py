"""The GAM tour in a real browser, as a person takes it: the session-end trigger on Replay, a topic edge reviewed
and accepted on Consolidation, the topic network on the graph, a question's provenance on Retrieval, then the run
undone and the edge rejected. Used by tests/test_browser.py and scripts/screenshots.py (15_gam_replay …
18_gam_retrieval).
"""
from __future__ import annotations

import re
from pathlib import Path

from workbench.driver.browser import (
    click,
    jump_to_turn,
    open_page,
    open_tab,
    tall_screenshot,
    wait_idle,
)
from workbench.driver.demo import (
    GAM_QUERY,
    GAM_SHOWCASE_TURN,
    demo_turn_after,
)
from workbench.driver.tours import ask_free_query


def gam_walkthrough(page, url: str, db: Path, shots: Path | None = None) -> dict:
    """The GAM tour on a `gam_session` database opened with `memwb ui --db`: the session-end trigger with the
    detector's boundaries and the buffer gauge (15_gam_replay); a topic edge reviewed with its segment and
    accepted (16_gam_consolidation); the topic network with that edge and a topic expanded into its archived
    events (17_gam_graph); a question's provenance from anchor topic through the cross edge, with each factor
    of the re-rank (18_gam_retrieval); then the accepting run undone and the same edge rejected on a second
    diagnosis. Returns the pages' texts and what the database held after each decision."""
    from playwright.sync_api import expect

    from engine.core.proposal import GateVerdict, Status
    from engine.store.log_store import Store
    from workbench.review.queue import sort_queue

    def shot(name: str, max_height: int = 4200) -> None:
        if shots is not None:
            tall_screenshot(page, shots / f"{name}.png", max_height)

    def open_run():
        state = Store(db).load_state()
        run_id = next(r.run_id for r in state.open_runs())
        return run_id, sort_queue(p for p in state.proposals.values() if p.run_id == run_id
                                  and p.status == Status.PENDING)

    def decide(pid: int, queue: list, choice: str) -> None:
        radio = page.get_by_test_id("stRadio").filter(has_text="Decision").nth([p.id for p in queue].index(pid))
        radio.get_by_text(choice, exact=True).click()
        wait_idle(page)
        defer = page.get_by_role("button", name=re.compile(r"^Apply and defer the \d+ undecided"))
        (defer if defer.count() else page.get_by_role("button", name=re.compile(r"^Apply decisions \("))).first.click()
        wait_idle(page, 1500)

    texts: dict = {}
    page.goto(url)
    page.get_by_text(f"Database · {db.name}").wait_for(timeout=180_000)
    wait_idle(page)
    jump_to_turn(page, demo_turn_after("D2:1"))                  # behind the head: the log tells what happened
    expect(page.get_by_text("Detector boundaries", exact=False).first).to_be_visible()
    page.wait_for_timeout(1500)
    texts["replay"] = page.inner_text("body")
    shot("15_gam_replay")
    jump_to_turn(page, GAM_SHOWCASE_TURN)                        # back to the head before editing

    def linking() -> None:
        """The Consolidation page's process picker on the Topic linking process."""
        open_page(page, "Consolidation")
        page.get_by_test_id("stSelectbox").filter(has_text="Offline process").click()
        page.get_by_role("option", name=re.compile(r"^Topic linking")).click()
        wait_idle(page)

    linking()
    click(page, "Run diagnosis")
    run_id, queue = open_run()
    chosen = next(p for p in queue if p.gate == GateVerdict.PASS)
    edge = (chosen.targets[0], chosen.targets[1], chosen.plan["relation"])
    texts.update(run=run_id, chosen=chosen.id, edge=edge, queue=page.inner_text("body"))
    shot("16_gam_consolidation", 3000)
    decide(chosen.id, queue, "Accept")
    expect(page.get_by_text(re.compile(rf"{run_id} committed: 1 applied")).first).to_be_visible()
    texts["accepted"] = Store(db).load_state()

    open_page(page, "Memory graph")                               # the accepted edge on the topic network
    open_tab(page, "Topic network")
    page.get_by_test_id("stMultiSelect").filter(has_text="Expanded (drawn with their members)").click()
    page.get_by_role("option").first.click()
    page.keyboard.press("Escape")
    wait_idle(page, 2500)
    texts["graph"] = page.inner_text("body")
    shot("17_gam_graph", 2600)
    ask_free_query(page, texts, shot, GAM_QUERY, "18_gam_retrieval")       # the provenance paths tab
    open_tab(page, "Multi-factor re-rank", 1000, reruns=True)
    texts["ranking"] = page.inner_text("body")

    linking()                                                     # undo the accepted edge, then reject it
    open_tab(page, "Run diff & undo")
    click(page, f"Undo last run ({run_id})…")
    click(page, "Yes, undo")
    expect(page.get_by_text(f"{run_id} undone").first).to_be_visible()
    texts["undone"] = Store(db).load_state()
    open_tab(page, "Review queue")
    click(page, "Run diagnosis")
    again, queue = open_run()
    same = next(p for p in queue if p.targets == chosen.targets)
    decide(same.id, queue, "Reject")
    expect(page.get_by_text(re.compile(rf"{again} committed: 0 applied, 1 rejected")).first).to_be_visible()
    texts.update(again=again, rejected_id=same.id, rejected=Store(db).load_state())
    return texts

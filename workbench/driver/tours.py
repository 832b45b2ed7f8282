"""The tours: each page of the workbench walked as a new user does, returning what each page showed (and,
given a folder, the screenshots of `scripts/screenshots.py`). Each raises if an expected control or result is
missing, so a tour is also a real-browser test of the story it tells.
"""
from __future__ import annotations

import re
from pathlib import Path

from workbench.driver.browser import (
    choose_option,
    click,
    jump_to_turn,
    look,
    open_at_demo_turn,
    open_at_turn,
    open_page,
    open_tab,
    pick_in_multiselect,
    read_page,
    shooter,
    start_long_jump,
    switch_engine,
    tall_screenshot,
    wait_idle,
    wait_loaded,
)
from workbench.driver.demo import (
    CAUSAL_QUESTION,
    UPDATE_QUERY,
    causal_root,
    demo_turn_after,
    routing_showcase_turn,
)
from workbench.driver.graph import (
    click_graph_node,
    folded_groups,
    graph_frame,
    graph_label_boxes,
    graph_nodes,
    overlapping_labels,
    redrawn_frame,
)
from workbench.text import ROW_PX


def progress_walkthrough(page, url: str, shots: Path | None = None, shown_turn: int = 30) -> dict[str, str]:
    """A long jump on a LoCoMo conversation (the app opened on it): the progress bar mid-jump, then Cancel.

    Returns the bar's text and the page after the cancel; the shot is `11_replay_progress`."""
    page.goto(url)
    page.get_by_role("button", name="Next ▶").wait_for(timeout=180_000)
    wait_loaded(page)
    total = int(re.search(r"Turn · \d+ / (\d+)", page.inner_text("body")).group(1))
    texts = {"bar": start_long_jump(page, total, shown_turn)}
    shooter(page, shots)("11_replay_progress")
    page.get_by_role("button", name="Cancel").click()
    page.get_by_text(re.compile("cancelled at turn")).wait_for()
    wait_idle(page, 1500)
    texts["cancelled"] = page.inner_text("body")
    return texts


def ask_free_query(page, texts: dict, shot, query: str, shot_name: str = "4_retrieval") -> None:
    """Retrieval page: ask `query` as a free query; keep the page's text under "retrieval" and take `shot_name`."""
    open_page(page, "Retrieval")
    page.get_by_text("Free query", exact=True).click()
    wait_idle(page)
    box = page.get_by_role("textbox", name="Query", exact=True)
    box.fill(query)
    box.press("Enter")
    wait_idle(page, 2500)
    read_page(page, texts, "retrieval")
    shot(shot_name)


def walkthrough(page, url: str, shots: Path | None = None) -> dict[str, str]:
    """The two-minute demo, as a new user does it; returns each page's visible text.

    Step past the superseded fact (D5:4) and the duplicate (D5:9), run
    diagnosis, accept the Update, apply it, defer the other proposals (which
    closes the run), look at the graph, ask a question
    whose answer path reaches the archived unit, open the annotation cases.
    Raises if an expected control or result is missing.
    """
    from playwright.sync_api import expect

    shot, texts = shooter(page, shots), {}
    open_at_demo_turn(page, url, "D5:9", steps=2)
    look(page, texts, shot, "replay", "1_replay")

    open_page(page, "Consolidation")
    click(page, "Run diagnosis")
    pick_in_multiselect(page, "Operator", "Update")
    expect(page.get_by_text("· Update").first).to_be_visible()
    page.get_by_text("Accept", exact=True).first.click()      # the first card: the most confident Update
    wait_idle(page)
    apply = page.get_by_role("button", name=re.compile(r"^Apply decisions \(1 accept"))
    expect(apply).to_be_visible()                             # the decision reached the server
    apply.click()
    wait_idle(page, 1000)
    expect(page.get_by_text(re.compile(r"run-\d+: 1 applied, 0 rejected\. \d+ proposal\(s\) still pending"))
           ).to_be_visible()                                  # the others wait for a decision in the open run
    page.get_by_role("button", name=re.compile(r"^Defer the \d+ undecided")).click()
    wait_idle(page, 1000)
    expect(page.get_by_text(re.compile(r"run-\d+ committed: .*deferred with a note"))).to_be_visible()
    look(page, texts, shot, "consolidation", "3_consolidation")
    open_page(page, "Memory graph")
    graph_frame(page)                                         # drawn, however long the rerun took
    look(page, texts, shot, "graph", "2_memory_graph", wait_ms=1000)
    ask_free_query(page, texts, shot, UPDATE_QUERY)

    open_page(page, "Annotate")
    page.get_by_role("button", name="Import").first.click()
    page.get_by_role("button", name="Load the bundled demo cases").click()
    wait_idle(page, 1500)
    page.keyboard.press("Escape")                             # the Import popover closes, as a person closes it
    wait_idle(page)
    look(page, texts, shot, "annotate", "5_annotate")
    return texts


def baseline_walkthrough(page, url: str, shots: Path | None = None) -> dict[str, str]:
    """The same tour on an engine without an offline process (start the app with MEMWB_ENGINE=naive):
    step to D5:9, see the graph, the Consolidation page saying there is nothing to consolidate, and a
    question whose comparison column is All-Mem. Returns each page's visible text."""
    shot, texts = shooter(page, shots), {}
    open_at_demo_turn(page, url, "D5:9")
    look(page, texts, shot, "replay", "1_replay")
    open_page(page, "Memory graph")
    graph_frame(page)                                         # drawn, however long the rerun took
    look(page, texts, shot, "graph", "2_memory_graph", wait_ms=1000)
    look(page, texts, shot, "consolidation", "3_consolidation", "Consolidation")
    ask_free_query(page, texts, shot, UPDATE_QUERY)
    return texts


def apply_gate_verdicts(page) -> None:
    """Consolidation page, a run open: let the gate decide, apply, and see the run committed."""
    from playwright.sync_api import expect

    page.get_by_text("Let the gate decide", exact=True).click()
    wait_idle(page)
    page.get_by_role("button", name=re.compile(r"^Apply gate verdicts")).first.click()
    wait_idle(page, 1500)
    expect(page.get_by_text(re.compile(r"run-\d+ committed: \d+ applied"))).to_be_visible()


def memloom_walkthrough(page, url: str, shots: Path | None = None, switch: bool = False) -> dict[str, str]:
    """The MemLoom tour (start the app with MEMWB_ENGINE=memloom, or with `switch` load MemLoom from the Replay
    page's form, as a person switching engines does): the routing decision of a turn (with an FSM
    transition and several candidate events), a steward run reviewed in the queue (relations with their cited
    evidence) and applied by the gate, the event FSM on the graph with its largest event opened by a click and
    the lifecycle timeline, and the causal question q7 with its path. Returns each page's visible text (and the
    graph labels that overlap, on the graph and on Retrieval); screenshots 6_memloom_graph, 7_memloom_retrieval,
    8_memloom_replay and 9_memloom_consolidation."""
    from playwright.sync_api import expect

    def shot(name: str, max_height: int = 4200) -> None:
        if shots is not None:
            tall_screenshot(page, shots / f"{name}.png", max_height)

    texts: dict[str, str] = {}
    if switch:
        switch_engine(page, url, "MemLoom")
        jump_to_turn(page, routing_showcase_turn())
    else:
        open_at_turn(page, url, routing_showcase_turn())
    expect(page.get_by_text("Routing decision", exact=False).first).to_be_visible()
    page.wait_for_timeout(1500)
    read_page(page, texts, "replay")
    shot("8_memloom_replay")

    jump_to_turn(page, demo_turn_after("D6:6"))
    expect(page.get_by_text(f"Turn · {demo_turn_after('D6:6')} /")).to_be_visible()
    open_page(page, "Consolidation")
    click(page, "Run diagnosis")
    pick_in_multiselect(page, "Gate verdict", "pass")
    if page.get_by_test_id("stMultiSelect").filter(has_text="Type").count():   # the relation type of the cards
        pick_in_multiselect(page, "Type", "CAUSAL_FOLLOW", required=False)
    expect(page.get_by_text("★ cited").first).to_be_visible()
    read_page(page, texts, "consolidation")
    shot("9_memloom_consolidation", 2600)
    apply_gate_verdicts(page)
    read_page(page, texts, "applied")

    open_page(page, "Memory graph")
    open_largest_event(page)
    texts["graph_overlaps"] = _overlaps_text(graph_frame(page))
    open_tab(page, "Lifecycle timeline", 2500)
    read_page(page, texts, "graph")
    shot("6_memloom_graph")

    open_page(page, "Retrieval")
    page.get_by_test_id("stSelectbox").filter(has_text="Question").click()
    page.get_by_role("option", name=re.compile(rf"^{CAUSAL_QUESTION} · ")).click()
    wait_idle(page, 1500)
    highlight = page.get_by_test_id("stSelectbox").filter(has_text="Highlight on the graph")
    combo = highlight.get_by_role("combobox")
    combo.click()
    page.keyboard.type(f"({causal_root()})")                 # the list is virtualised: search for the root cause
    options = page.get_by_role("option")
    page.wait_for_timeout(500)
    if not options.count():                                  # the root is not among the results: browse them all
        combo.fill("")
        page.keyboard.press("ArrowDown")
        options.nth(1).wait_for()
    for pattern in (r"CAUSAL_FOLLOW \(reverse\)", r"CAUSAL_FOLLOW.*CAUSAL_FOLLOW", r"\(reverse\)", r"CAUSAL_FOLLOW",
                    r"—evidence→"):
        found = options.filter(has_text=re.compile(pattern))
        if found.count():
            found.first.click()
            wait_idle(page, 2500)
            expect(page.get_by_text("stored edge").first).to_be_visible()      # the hop-by-hop table
            break
    else:
        page.keyboard.press("Escape")
        wait_idle(page, 2500)
    read_page(page, texts, "retrieval")
    texts["highlight"] = highlight.inner_text() + " " + (combo.input_value() or "")
    texts["retrieval_overlaps"] = _overlaps_text(graph_frame(page))
    shot("7_memloom_retrieval")
    return texts


def _overlaps_text(frame) -> str:
    """The drawn labels that overlap another, "u45 [grounded] / u47 [grounded]; …" ("" when none do)."""
    return "; ".join(f"{a['label']} / {b['label']}" for a, b in overlapping_labels(graph_label_boxes(frame)))


def open_largest_event(page) -> tuple[int, list, list]:
    """On the Memory graph page: click the folded group node holding the most members (an event "u88 ▸ 7")
    and wait for the graph to draw it open. Returns its id and the drawn node ids before and after."""
    frame = graph_frame(page)
    before = graph_nodes(frame)
    folded = folded_groups(frame)
    event = max(folded, key=lambda i: (folded[i], -i))
    click_graph_node(page, frame, event)
    return event, before, graph_nodes(redrawn_frame(page, before))


def memloom_graph_walkthrough(page, url: str) -> dict:
    """The MemLoom graph at the demo's turn 80 (after D6:6) once a steward run is applied by the gate, as the
    MemLoom tour leaves it (start the app with MEMWB_ENGINE=memloom): the label boxes of the graph with its
    events folded, then a click on the folded event holding the most records (the drawn node ids before and
    after, the labels of the drawing and the page's Open events picker), then every event drawn open (Fold
    events: never) and its labels."""
    turn = demo_turn_after("D6:6")
    open_at_turn(page, url, turn)
    open_page(page, "Consolidation")
    click(page, "Run diagnosis")
    apply_gate_verdicts(page)
    open_page(page, "Memory graph")
    frame = graph_frame(page)
    out = {"turn": turn, "folded_labels": graph_label_boxes(frame), "folded": folded_groups(frame)}
    event, before, after = open_largest_event(page)
    frame = graph_frame(page)
    out |= {"clicked": event, "before": before, "after": after, "opened_labels": graph_label_boxes(frame),
            "open_picker": page.get_by_test_id("stMultiSelect").filter(has_text="Open events").inner_text(),
            "inspector": page.get_by_role("heading", level=4).first.inner_text()}
    choose_option(page, "Fold events", "never")
    frame = redrawn_frame(page, after)
    out |= {"unfolded": graph_nodes(frame), "unfolded_labels": graph_label_boxes(frame)}
    return out


def play_to_end(page, url: str) -> int:
    """Open the app and jump to the last turn of its conversation; returns the turn count."""
    from playwright.sync_api import expect

    page.goto(url)
    expect(page.get_by_role("button", name="Next ▶")).to_be_visible(timeout=180_000)
    wait_loaded(page)
    total = int(re.search(r"Turn · \d+ / (\d+)", page.inner_text("body")).group(1))
    jump_to_turn(page, total)
    expect(page.get_by_text(f"Turn · {total} /")).to_be_visible(timeout=900_000)
    return total


def locomo_graph_walkthrough(page, url: str, shots: Path | None = None) -> dict:
    """The memory graph at LoCoMo scale (start the app with MEMWB_DEMO = `locomo_conversation_file()`): play the
    conversation to its end, open the graph (sessions grouped), click a unit to inspect it and a session to expand
    it. Returns the page text and the drawn node ids at each step; screenshot 10_locomo_graph."""
    total = play_to_end(page, url)
    open_page(page, "Memory graph")
    frame = graph_frame(page)
    out = {"turns": total, "grouped": graph_nodes(frame)}
    if shots is not None:
        tall_screenshot(page, shots / "10_locomo_graph.png", 1500)
    inspected = page.get_by_role("heading", level=4).first.inner_text()
    unit = next(n for n in out["grouped"] if isinstance(n, int) and not inspected.startswith(f"u{n} "))
    click_graph_node(page, frame, unit)
    out |= {"clicked": unit, "inspector": page.get_by_role("heading", level=4).first.inner_text()}
    frame = graph_frame(page)
    group = next(n for n in graph_nodes(frame) if isinstance(n, str) and n.startswith("group:"))
    click_graph_node(page, frame, group)
    out |= {"expanded_group": group, "after_expanding": graph_nodes(graph_frame(page)), "text": page.inner_text("body")}
    return out


def locomo_events_walkthrough(page, url: str, shots: Path | None = None) -> dict:
    """A whole LoCoMo conversation in MemLoom (start the app with MEMWB_ENGINE=memloom and MEMWB_DEMO =
    `locomo_conversation_file()`): play it to its end, let the steward's gate apply its relations, and draw
    every session at once (Group sessions: never) with the events folded over their records. Returns the
    turn count, the folded events and the label boxes; screenshot 13_locomo_memloom_graph."""
    total = play_to_end(page, url)
    open_page(page, "Consolidation")
    click(page, "Run diagnosis")
    apply_gate_verdicts(page)
    open_page(page, "Memory graph")
    before = graph_nodes(graph_frame(page))
    choose_option(page, "Group sessions", "never")
    frame = redrawn_frame(page, before)
    out = {"turns": total, "folded": folded_groups(frame), "labels": graph_label_boxes(frame)}
    if shots is not None:
        tall_screenshot(page, shots / "13_locomo_memloom_graph.png", 1700)
    return out


def benchmark_walkthrough(page, url: str, result: Path, shots: Path | None = None, miss: str = "demo:q7",
                          system: str = "naive") -> dict[str, str]:
    """The Benchmark page on `result`, the workspace's newest run (start the app with MEMWB_WORKSPACE =
    `bench_fixture_workspace()`'s folder): the charts, then `system`'s miss on question `miss` selected in the
    question table (misses only) and read beside the other system (screenshot 12_benchmark), then opened on the
    Retrieval page. Returns the Benchmark page's text and the Retrieval page's."""
    from playwright.sync_api import expect

    from workbench.benchmark.questions import QuestionFilter, filtered_questions
    from workbench.benchmark.result import load_result

    loaded = load_result(result)
    misses = filtered_questions(loaded, QuestionFilter(tuple(loaded.systems), (), True, loaded.metrics[0]))
    row = next(i for i, q in enumerate(misses) if q["system"] == system and q["question_id"] == miss)
    page.goto(url)
    expect(page.get_by_role("button", name="Next ▶")).to_be_visible(timeout=180_000)
    wait_loaded(page)
    open_page(page, "Benchmark")
    expect(page.get_by_text("Per-round curves")).to_be_visible()
    page.get_by_text("Misses only", exact=True).click()
    wait_idle(page)
    grid = page.get_by_test_id("stDataFrame").filter(has_text="question").last
    grid.scroll_into_view_if_needed()
    grid.click(position={"x": 15, "y": ROW_PX * (row + 1) + ROW_PX // 2})     # the row's select box
    wait_idle(page, 2500)                                     # plots draw after the rerun
    combo = page.get_by_test_id("stSelectbox").filter(has_text="Question").get_by_role("combobox")
    expect(combo).to_have_value(re.compile(rf"^{re.escape(system)} · .* · {re.escape(miss)} · .* · miss$"))
    texts = {"benchmark": page.inner_text("body"), "picked": combo.input_value()}
    if shots is not None:
        tall_screenshot(page, shots / "12_benchmark.png", 4600)
    page.get_by_role("button", name=re.compile(r"^Open on the Retrieval page at turn \d+")).first.click()
    page.wait_for_function("() => location.pathname.endsWith('/retrieval')")
    expect(page.get_by_text("Missed gold evidence").first).to_be_visible(timeout=180_000)
    wait_idle(page, 1500)
    read_page(page, texts, "retrieval")
    return texts


def decisions_walkthrough(page, url: str, shots: Path | None = None, system: str = "memloom") -> dict[str, str]:
    """The Benchmark page on a decision-set run, the workspace's newest: `system`'s per-kind table, confusion and
    reliability, then the first missed pair picked to show what became of it (screenshot 24_decisions)."""
    from playwright.sync_api import expect

    page.goto(url)
    expect(page.get_by_role("button", name="Next ▶")).to_be_visible(timeout=180_000)
    wait_loaded(page)
    open_page(page, "Benchmark")
    expect(page.get_by_text("Decisions per kind")).to_be_visible(timeout=60_000)
    choose_option(page, "System", system)
    wait_idle(page, 1500)
    grid = page.get_by_test_id("stDataFrame").filter(has_text="fate").last
    grid.scroll_into_view_if_needed()
    grid.click(position={"x": 15, "y": ROW_PX + ROW_PX // 2})       # the first missed pair's select box
    wait_idle(page, 2500)
    texts = {"decisions": page.inner_text("body")}
    if shots is not None:
        tall_screenshot(page, shots / "24_decisions.png", 4200)
    return texts

"""Start the workbench and drive it in headless Debian Chromium (Playwright).

Shared by `scripts/screenshots.py` and the real-browser tests, so both walk
the app exactly as a person would: through the sidebar, buttons and inputs.
"""
from __future__ import annotations

import contextlib
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Iterator

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = os.environ.get("MEMWB_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--no-first-run"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def running_app(env: dict[str, str] | None = None, timeout: float = 120, cwd: Path | None = None,
                via_cli: bool = False, cli_args: list[str] | None = None) -> Iterator[str]:
    """A streamlit server on a free loopback port; yields its base URL and stops it afterwards.

    `via_cli` starts it the way a user does, with `memwb ui` (from `cwd`, the repository by default) and
    `cli_args` after it (say, `["--db", FILE]`)."""
    port = free_port()
    cli = [sys.executable, "-m", "engine.cli", "ui", "--headless", "--port", str(port), *(cli_args or [])]
    cmd = cli if via_cli else \
        [sys.executable, "-m", "streamlit", "run", str(ROOT / "workbench" / "app.py"), "--server.headless", "true",
         "--server.port", str(port), "--server.address", "127.0.0.1", "--browser.gatherUsageStats", "false"]
    log = open(Path(os.environ.get("TMPDIR", "/tmp")) / f"memwb-app-{port}.log", "w")
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    proc = subprocess.Popen(cmd, cwd=cwd or ROOT, env={**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": path,
                                                       **(env or {})},
                            stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + timeout
        while True:
            try:
                with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                if proc.poll() is not None or time.time() > deadline:
                    raise RuntimeError(f"the workbench did not start; see {log.name}") from None
                time.sleep(0.5)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


@contextlib.contextmanager
def browser_page(width: int = 1500, height: int = 1100):
    """A Playwright page in Debian's chromium (Playwright must not download its own browser)."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": width, "height": height})
        page.set_default_timeout(120_000)
        try:
            yield page
        finally:
            browser.close()


def wait_idle(page, settle_ms: int = 600) -> None:
    """Wait for the rerun an action triggered to start (if it does) and then to finish."""
    running = '[data-testid="stStatusWidgetRunningIcon"], [data-testid="stSpinner"]'
    with contextlib.suppress(Exception):
        page.wait_for_selector(running, state="attached", timeout=3000)
    page.wait_for_function(f"() => !document.querySelector('{running}')", timeout=300_000)
    page.wait_for_timeout(settle_ms)


def open_page(page, title: str) -> None:
    """Navigate with the sidebar (a URL change would start a new session and lose state)."""
    page.get_by_test_id("stSidebarNav").get_by_text(title, exact=True).click()
    wait_idle(page)


def click(page, name: str, exact: bool = False) -> None:
    page.get_by_role("button", name=name, exact=exact).first.click()
    wait_idle(page)


def jump_to_turn(page, turn: int) -> None:
    """Replay page: type a turn number into the jump box and press its Go button."""
    box = page.get_by_role("spinbutton", name="Jump to turn")
    box.fill(str(turn))
    box.press("Enter")
    wait_idle(page)
    page.get_by_role("button", name="Go").first.click()
    wait_idle(page, 1500)


def start_long_jump(page, turn: int, shown_turn: int = 1) -> str:
    """Replay page: start a jump to `turn` and return the progress bar's text once it shows the cursor at
    `shown_turn` or later (the jump is still running: this does not wait for it)."""
    box = page.get_by_role("spinbutton", name="Jump to turn")
    box.fill(str(turn))
    box.press("Enter")
    wait_idle(page)
    page.get_by_role("button", name="Go").first.click()
    bar = page.get_by_test_id("stProgress")
    page.wait_for_function(
        "n => { const m = (document.querySelector('[data-testid=stProgress]') || {}).innerText?.match(/Turn (\\d+) \\//);"
        " return m && +m[1] >= n; }", arg=shown_turn, timeout=600_000)
    return bar.inner_text()


def progress_walkthrough(page, url: str, shots: Path | None = None, shown_turn: int = 30) -> dict[str, str]:
    """A long jump on a LoCoMo conversation (the app opened on it): the progress bar mid-jump, then Cancel.

    Returns the bar's text and the page after the cancel; the shot is `11_replay_progress`."""
    page.goto(url)
    page.get_by_role("button", name="Next ▶").wait_for(timeout=180_000)
    wait_idle(page)
    total = int(re.search(r"Turn · \d+ / (\d+)", page.inner_text("body")).group(1))
    texts = {"bar": start_long_jump(page, total, shown_turn)}
    _shooter(page, shots)("11_replay_progress")
    page.get_by_role("button", name="Cancel").click()
    page.get_by_text(re.compile("cancelled at turn")).wait_for()
    wait_idle(page, 1500)
    texts["cancelled"] = page.inner_text("body")
    return texts


def choose_radio(scope, label: str) -> None:
    scope.get_by_text(label, exact=True).first.click()


UPDATE_QUERY = "How many half marathons has Jon run?"


def _demo():
    """The bundled demo conversation, which the tours step through and ask about."""
    from engine.loaders import load_conversation
    from workbench.model import DEMO_PATH

    return load_conversation(DEMO_PATH)


def demo_turn_after(turn_id: str) -> int:
    """Cursor position that has just ingested `turn_id` of the bundled demo."""
    return next(i for i, t in enumerate(_demo().turns) if t.id == turn_id) + 1


def _shooter(page, shots: Path | None):
    def shot(name: str) -> None:
        if shots is not None:
            shots.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(shots / f"{name}.png"), full_page=True)
    return shot


def _open_at_turn(page, url: str, turn: int, steps: int = 0) -> None:
    """Open the app, press Next `steps` times, then jump to cursor position `turn`."""
    from playwright.sync_api import expect

    page.goto(url)
    expect(page.get_by_role("button", name="Next ▶")).to_be_visible(timeout=180_000)
    wait_idle(page)
    for _ in range(steps):
        click(page, "Next ▶")
    jump_to_turn(page, turn)
    expect(page.get_by_text(f"Turn · {turn} /")).to_be_visible()


def _open_at_demo_turn(page, url: str, turn_id: str, steps: int = 0) -> None:
    """Open the app and stand just after the demo's turn `turn_id`."""
    _open_at_turn(page, url, demo_turn_after(turn_id), steps)


def _look(page, texts: dict, shot, key: str, shot_name: str, page_title: str | None = None,
          wait_ms: int = 0) -> None:
    """Open a page (unless already there), keep its visible text under `key`, take its screenshot."""
    if page_title:
        open_page(page, page_title)
    if wait_ms:
        page.wait_for_timeout(wait_ms)
    texts[key] = page.inner_text("body")
    shot(shot_name)


def _ask_free_query(page, texts: dict, shot, query: str, shot_name: str = "4_retrieval") -> None:
    """Retrieval page: type a free query, keep the page's text under "retrieval" and take its screenshot."""
    open_page(page, "Retrieval")
    page.get_by_text("Free query", exact=True).click()
    wait_idle(page)
    box = page.get_by_role("textbox", name="Query", exact=True)
    box.fill(query)
    box.press("Enter")
    wait_idle(page, 2500)
    texts["retrieval"] = page.inner_text("body")
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

    shot, texts = _shooter(page, shots), {}
    _open_at_demo_turn(page, url, "D5:9", steps=2)
    _look(page, texts, shot, "replay", "1_replay")

    open_page(page, "Consolidation")
    click(page, "Run diagnosis")
    page.get_by_test_id("stMultiSelect").filter(has_text="Operator").click()
    page.get_by_role("option", name="Update").click()
    page.keyboard.press("Escape")
    wait_idle(page)
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
    _look(page, texts, shot, "consolidation", "3_consolidation")
    _look(page, texts, shot, "graph", "2_memory_graph", "Memory graph", 2500)
    _ask_free_query(page, texts, shot, UPDATE_QUERY)

    open_page(page, "Annotate")
    page.get_by_role("button", name="Import").first.click()
    page.get_by_role("button", name="Load the bundled demo cases").click()
    wait_idle(page, 1500)
    _look(page, texts, shot, "annotate", "5_annotate")
    return texts


def baseline_walkthrough(page, url: str, shots: Path | None = None) -> dict[str, str]:
    """The same tour on an engine without an offline process (start the app with MEMWB_ENGINE=naive):
    step to D5:9, see the graph, the Consolidation page saying there is nothing to consolidate, and a
    question whose comparison column is All-Mem. Returns each page's visible text."""
    shot, texts = _shooter(page, shots), {}
    _open_at_demo_turn(page, url, "D5:9")
    _look(page, texts, shot, "replay", "1_replay")
    _look(page, texts, shot, "graph", "2_memory_graph", "Memory graph", 2500)
    _look(page, texts, shot, "consolidation", "3_consolidation", "Consolidation")
    _ask_free_query(page, texts, shot, UPDATE_QUERY)
    return texts


def tall_screenshot(page, path: Path, max_height: int = 4200) -> None:
    """The whole page, not only the viewport: Streamlit scrolls inside its main container, so the viewport is
    grown to the content's height (at most `max_height`) for the shot and put back afterwards."""
    path.parent.mkdir(parents=True, exist_ok=True)
    size = page.viewport_size or {"width": 1500, "height": 1100}
    height = page.evaluate("""() => Math.max(document.documentElement.scrollHeight, ...Array.from(
        document.querySelectorAll('[data-testid="stMain"], [data-testid="stAppViewContainer"], section'))
        .map(e => e.scrollHeight))""")
    page.set_viewport_size({"width": size["width"], "height": max(size["height"], min(int(height) + 20, max_height))})
    page.wait_for_timeout(1500)                               # plots and the graph iframe redraw at the new size
    page.screenshot(path=str(path), full_page=True)
    page.set_viewport_size(size)
    page.wait_for_timeout(300)


CAUSAL_QUESTION = "q7"              # "Why has Maya been missing deadlines?" (the demo's causal chain)


def causal_root() -> str:
    """The root cause of the demo's causal question: the first turn of its gold chain (D2:6 for q7)."""
    return next(q.evidence[0] for q in _demo().questions if q.id.endswith(f":{CAUSAL_QUESTION}"))


def routing_showcase_turn(engine: str = "memloom", upto: str = "D6:6") -> int:
    """The demo turn (up to `upto`) whose routing decision shows the most: an FSM transition, then the most
    candidates (up to 6), then the latest. Read from the log of a scratch replay, so the tour follows the engine."""
    from engine.core.oplog import OpKind
    from workbench.model import DEMO_PATH, Workbench

    wb = Workbench.open(DEMO_PATH, None, engine=engine, workdir=Path(tempfile.mkdtemp(prefix="memwb-showcase-")))
    wb.jump(demo_turn_after(upto))
    shown = {op.turn: len((op.payload.get("routing") or {}).get("candidates") or [])
             for op in wb.engine.store.ops(kinds=[OpKind.TURN_INGESTED])}
    moved = {op.turn for op in wb.engine.store.ops(kinds=[OpKind.STATUS_CHANGED]) if not op.run_id}
    return max(shown, key=lambda t: (t in moved, min(shown[t], 6), t))


def memloom_walkthrough(page, url: str, shots: Path | None = None) -> dict[str, str]:
    """The MemLoom tour (start the app with MEMWB_ENGINE=memloom): the routing decision of a turn (with an FSM
    transition and several candidate events), a steward run reviewed in the queue (relations with their cited evidence) and applied by the
    gate, the event FSM on the graph with the lifecycle timeline, and the causal question q7 with its path.
    Returns each page's visible text; screenshots 6_memloom_graph, 7_memloom_retrieval, 8_memloom_replay and
    9_memloom_consolidation."""
    from playwright.sync_api import expect

    def shot(name: str, max_height: int = 4200) -> None:
        if shots is not None:
            tall_screenshot(page, shots / f"{name}.png", max_height)

    texts: dict[str, str] = {}
    _open_at_turn(page, url, routing_showcase_turn())
    expect(page.get_by_text("Routing decision", exact=False).first).to_be_visible()
    page.wait_for_timeout(1500)
    texts["replay"] = page.inner_text("body")
    shot("8_memloom_replay")

    jump_to_turn(page, demo_turn_after("D6:6"))
    expect(page.get_by_text(f"Turn · {demo_turn_after('D6:6')} /")).to_be_visible()
    open_page(page, "Consolidation")
    click(page, "Run diagnosis")
    page.get_by_test_id("stMultiSelect").filter(has_text="Gate verdict").click()
    page.get_by_role("option", name="pass").click()
    page.keyboard.press("Escape")
    wait_idle(page)
    types = page.get_by_test_id("stMultiSelect").filter(has_text="Type")
    if types.count():                                       # the relation type of the queue's cards
        types.click()
        causal = page.get_by_role("option", name="CAUSAL_FOLLOW")
        if causal.count():
            causal.click()
        page.keyboard.press("Escape")
        wait_idle(page)
    expect(page.get_by_text("★ cited").first).to_be_visible()
    texts["consolidation"] = page.inner_text("body")
    shot("9_memloom_consolidation", 2600)
    page.get_by_text("Let the gate decide", exact=True).click()
    wait_idle(page)
    page.get_by_role("button", name=re.compile(r"^Apply gate verdicts")).first.click()
    wait_idle(page, 1500)
    expect(page.get_by_text(re.compile(r"run-\d+ committed: \d+ applied"))).to_be_visible()
    texts["applied"] = page.inner_text("body")

    open_page(page, "Memory graph")
    page.get_by_role("tab", name="Lifecycle timeline").click()
    wait_idle(page, 2500)
    texts["graph"] = page.inner_text("body")
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
    texts["retrieval"] = page.inner_text("body")
    texts["highlight"] = highlight.inner_text() + " " + (combo.input_value() or "")
    shot("7_memloom_retrieval")
    return texts


LOCOMO = ROOT.parent / "shared" / "data" / "locomo" / "locomo-dev8.json"
LOCOMO_GRAPH_CONVERSATION = "conv-26"


def locomo_conversation_file(folder: Path, conversation: str = LOCOMO_GRAPH_CONVERSATION) -> Path:
    """One LoCoMo conversation in a file of its own, for MEMWB_DEMO (the app opens a one-conversation file)."""
    import json

    items = [c for c in json.loads(LOCOMO.read_text(encoding="utf-8")) if c.get("sample_id") == conversation]
    if not items:
        raise RuntimeError(f"{conversation} not found in {LOCOMO}")
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{conversation}.json"
    path.write_text(json.dumps(items), encoding="utf-8")
    return path


def graph_frame(page, timeout_ms: int = 120_000):
    """The frame of the drawn memory graph (its body is marked once vis-network has drawn)."""
    deadline = time.time() + timeout_ms / 1000
    while time.time() < deadline:
        for frame in page.frames:
            try:
                if frame.evaluate("() => !!document.body && document.body.hasAttribute('data-drawn-ms') "
                                  "&& typeof network !== 'undefined'"):
                    return frame
            except Exception:                               # a frame replaced by a rerun while we looked
                continue
        page.wait_for_timeout(250)
    raise RuntimeError("no drawn memory graph on the page")


def graph_nodes(frame) -> list:
    """The ids of the nodes the graph draws (units are numbers, groups and titles "group:…" / "session:…")."""
    return frame.evaluate("() => nodeData.map(n => n.id)")


def click_graph_node(page, frame, node) -> None:
    """Click node `node` on the vis-network canvas, where it is drawn now, and wait for the rerun."""
    at = frame.evaluate("(id) => network.canvasToDOM(network.getPositions([id])[id])", node)
    frame.locator("#graph canvas").click(position={"x": at["x"], "y": at["y"]})
    wait_idle(page, 1500)


def locomo_graph_walkthrough(page, url: str, shots: Path | None = None) -> dict:
    """The memory graph at LoCoMo scale (start the app with MEMWB_DEMO = `locomo_conversation_file()`): play the
    conversation to its end, open the graph (sessions grouped), click a unit to inspect it and a session to expand
    it. Returns the page text and the drawn node ids at each step; screenshot 10_locomo_graph."""
    from playwright.sync_api import expect

    page.goto(url)
    expect(page.get_by_role("button", name="Next ▶")).to_be_visible(timeout=180_000)
    wait_idle(page)
    total = int(re.search(r"Turn · \d+ / (\d+)", page.inner_text("body")).group(1))
    jump_to_turn(page, total)
    expect(page.get_by_text(f"Turn · {total} /")).to_be_visible(timeout=600_000)
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


BENCH_FIXTURE = ROOT / "tests" / "fixtures" / "bench_result_small.json"
BENCH_RUN = "small"                  # the fixture's run folder under the workspace's benchmarks/
GRID_ROW_PX = 35                     # a Streamlit dataframe's header and row height


def bench_fixture_workspace(workspace: Path, embedder=None) -> Path:
    """A workspace holding the hand-made benchmark result (tests/fixtures/bench_result_small.json) as run
    `benchmarks/small`, with the session databases its tasks name: the bundled demo replayed in each system's
    engine. Returns the result file."""
    import json

    from engine.loaders import load_conversation
    from engine.runtime.replay import Schedule, replay
    from engine.session import open_session
    from workbench.model import DEMO_PATH

    run = workspace / "benchmarks" / BENCH_RUN
    run.mkdir(parents=True, exist_ok=True)
    data = json.loads(BENCH_FIXTURE.read_text(encoding="utf-8"))
    data["source"] = str(DEMO_PATH)
    conversation = load_conversation(DEMO_PATH)
    for task in data["tasks"]:
        db = run / task["db"]
        if db.exists():
            continue
        db.parent.mkdir(parents=True, exist_ok=True)
        engine = data["systems"][task["system"]]["engine"]
        session = open_session(db, engine=engine, conversation=conversation.id, source=str(DEMO_PATH),
                               schedule=data["schedule"], label="bundled demo", embedder=embedder)
        replay(session, conversation, Schedule.parse(data["schedule"]))
    result = run / "result.json"
    result.write_text(json.dumps(data, indent=1), encoding="utf-8")
    return result


def bench_demo_workspace(workspace: Path, engines: tuple[str, ...] = ("allmem", "naive"),
                         answer: str | None = None) -> Path:
    """A workspace holding a real `memwb bench` run (streaming, 5 rounds) of `engines` on the bundled demo as
    run `benchmarks/demo`; returns its result file."""
    from engine.bench.runner import BenchConfig, run_benchmark
    from workbench.model import DEMO_PATH

    return run_benchmark(BenchConfig(dataset="locomo", source=str(DEMO_PATH), engines=engines, answer=answer,
                                     out=str(workspace / "benchmarks" / "demo")))


def first_miss(result: Path, system: str) -> dict:
    """`system`'s first question (in table order) that missed on the first metric."""
    from workbench.bench_result import load_result
    from workbench.benchmark_view import QuestionFilter, filtered_questions

    loaded = load_result(result)
    misses = filtered_questions(loaded, QuestionFilter(tuple(loaded.systems), (), True, loaded.metrics[0]))
    return next(q for q in misses if q["system"] == system)


def benchmark_walkthrough(page, url: str, result: Path, shots: Path | None = None, miss: str = "demo:q7",
                          system: str = "naive") -> dict[str, str]:
    """The Benchmark page on `result`, the workspace's newest run (start the app with MEMWB_WORKSPACE =
    `bench_fixture_workspace()`'s folder): the charts, then `system`'s miss on question `miss` selected in the
    question table (misses only) and read beside the other system (screenshot 12_benchmark), then opened on the
    Retrieval page. Returns the Benchmark page's text and the Retrieval page's."""
    from playwright.sync_api import expect

    from workbench.bench_result import load_result
    from workbench.benchmark_view import QuestionFilter, filtered_questions

    loaded = load_result(result)
    misses = filtered_questions(loaded, QuestionFilter(tuple(loaded.systems), (), True, loaded.metrics[0]))
    row = next(i for i, q in enumerate(misses) if q["system"] == system and q["question_id"] == miss)
    page.goto(url)
    expect(page.get_by_role("button", name="Next ▶")).to_be_visible(timeout=180_000)
    wait_idle(page)
    open_page(page, "Benchmark")
    expect(page.get_by_text("Per-round curves")).to_be_visible()
    page.get_by_text("Misses only", exact=True).click()
    wait_idle(page)
    grid = page.get_by_test_id("stDataFrame").filter(has_text="question").last
    grid.scroll_into_view_if_needed()
    grid.click(position={"x": 15, "y": GRID_ROW_PX * (row + 1) + GRID_ROW_PX // 2})     # the row's select box
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
    texts["retrieval"] = page.inner_text("body")
    return texts


GAM_SHOWCASE_TURN = 64           # the demo after its fourth session: four topics, three of them waiting to be linked
GAM_QUERY = "When did Jon run the Bridges half marathon?"


def gam_session(workdir: Path, embedder=None) -> Path:
    """A GAM session on the demo whose topic edges wait for a person (link_review person), stepped to
    `GAM_SHOWCASE_TURN`: the database the GAM tour opens with `memwb ui --db`."""
    from workbench.model import DEMO_PATH, Workbench

    wb = Workbench.open(DEMO_PATH, None, engine="gam", settings={"link_review": "person"}, workdir=workdir,
                        embedder=embedder)
    wb.jump(GAM_SHOWCASE_TURN)
    return wb.db_path


def gam_walkthrough(page, url: str, db: Path, shots: Path | None = None) -> dict:
    """The GAM tour on a `gam_session` database opened with `memwb ui --db`: the session-end trigger with the
    detector's boundaries and the buffer gauge (13_gam_replay); a topic edge reviewed with its segment and
    accepted (14_gam_consolidation); the topic network with that edge and a topic expanded into its archived
    events (15_gam_graph); a question's provenance from anchor topic through the cross edge, with each factor
    of the re-rank (16_gam_retrieval); then the accepting run undone and the same edge rejected on a second
    diagnosis. Returns the pages' texts and what the database held after each decision."""
    from playwright.sync_api import expect

    from engine.core.proposal import GateVerdict, Status
    from engine.store.log_store import Store
    from workbench.review_view import sort_queue

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
    shot("13_gam_replay")
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
    shot("14_gam_consolidation", 3000)
    decide(chosen.id, queue, "Accept")
    expect(page.get_by_text(re.compile(rf"{run_id} committed: 1 applied")).first).to_be_visible()
    texts["accepted"] = Store(db).load_state()

    open_page(page, "Memory graph")                               # the accepted edge on the topic network
    page.get_by_role("tab", name="Topic network").click()
    wait_idle(page)
    page.get_by_test_id("stMultiSelect").filter(has_text="Expanded (drawn with their members)").click()
    page.get_by_role("option").first.click()
    page.keyboard.press("Escape")
    wait_idle(page, 2500)
    texts["graph"] = page.inner_text("body")
    shot("15_gam_graph", 2600)
    _ask_free_query(page, texts, shot, GAM_QUERY, "16_gam_retrieval")       # the provenance paths tab
    page.get_by_role("tab", name="Multi-factor re-rank").click()
    wait_idle(page, 1000)
    texts["ranking"] = page.inner_text("body")

    linking()                                                     # undo the accepted edge, then reject it
    page.get_by_role("tab", name="Run diff & undo").click()
    wait_idle(page)
    click(page, f"Undo last run ({run_id})…")
    click(page, "Yes, undo")
    expect(page.get_by_text(f"{run_id} undone").first).to_be_visible()
    texts["undone"] = Store(db).load_state()
    page.get_by_role("tab", name="Review queue").click()
    wait_idle(page)
    click(page, "Run diagnosis")
    again, queue = open_run()
    same = next(p for p in queue if p.targets == chosen.targets)
    decide(same.id, queue, "Reject")
    expect(page.get_by_text(re.compile(rf"{again} committed: 0 applied, 1 rejected")).first).to_be_visible()
    texts.update(again=again, rejected_id=same.id, rejected=Store(db).load_state())
    return texts

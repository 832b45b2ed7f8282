"""Drive a page of the running workbench in headless Debian Chromium as a person does: through the sidebar,
buttons and inputs, waiting for each rerun to finish; and take screenshots of whole pages.
"""
from __future__ import annotations

import contextlib
import os
import re
from pathlib import Path

from workbench.driver.demo import demo_turn_after

CHROMIUM = os.environ.get("MEMWB_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--no-first-run"]


@contextlib.contextmanager
def browser_page(width: int = 1500, height: int = 1100):
    """A Playwright page in Debian's chromium (Playwright must not download its own browser)."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": width, "height": height})
        page.add_init_script(RUN_OBSERVER)
        page.set_default_timeout(120_000)
        try:
            yield page
        finally:
            browser.close()


# Streamlit marks its root with the state of the script run (`data-test-script-state`); an observer counts the
# runs that start and records when the state last changed, so a wait sees a run however short it was (the
# running icon shows only on runs long enough to notice, and a wait for it alone sat out its whole timeout).
RUN_OBSERVER = """
if (!window.__memwbRuns) {
  window.__memwbRuns = {started: 0, seen: 0, changed: performance.now()};
  new MutationObserver((changes) => {
    for (const c of changes) {
      window.__memwbRuns.changed = performance.now();
      if (c.target.getAttribute('data-test-script-state') === 'running') window.__memwbRuns.started++;
    }
  }).observe(document, {subtree: true, attributes: true, attributeFilter: ['data-test-script-state']});
}
"""
# Whether the rerun an action triggered has come and gone: one has started since the last wait ended (or none
# started within `patience` ms: the action asked for none), nothing runs or spins, and the state has held for
# `settle` ms (a script that calls for a rerun of itself starts the next run within a few ms of the first).
_IDLE = """([entry, settle, patience]) => {
  const runs = window.__memwbRuns, now = performance.now();
  const root = document.querySelector('[data-testid="stApp"]');
  const state = root ? root.getAttribute('data-test-script-state') : null;
  const busy = !['notRunning', 'compilationError'].includes(state) ||
               document.querySelector('[data-testid="stStatusWidgetRunningIcon"], [data-testid="stSpinner"]');
  return !busy && (runs.started > runs.seen || now - entry > patience) && now - runs.changed >= settle;
}"""


def wait_idle(page, settle_ms: int = 600, patience_ms: int = 3000) -> None:
    """Wait for the rerun an action triggered to start (if it does within `patience_ms`) and then to finish."""
    page.evaluate(RUN_OBSERVER)                 # a page opened elsewhere (a second person's) starts counting here
    entry = page.evaluate("() => performance.now()")
    page.wait_for_function(_IDLE, arg=[entry, settle_ms, patience_ms], timeout=300_000, polling=50)
    page.evaluate("() => { window.__memwbRuns.seen = window.__memwbRuns.started; }")


def wait_loaded(page, settle_ms: int = 600) -> None:
    """After a page load, once something its first run draws is on screen: wait for that run (and any it starts
    at once) to end. The load started the run waited for, so this waits for no other to start (a `wait_idle`
    would sit out its whole patience for one)."""
    wait_idle(page, settle_ms, patience_ms=0)


def open_expander(page, label, settle_ms: int = 600) -> None:
    """Open the expander labelled `label` (a string matched exactly, or a pattern). An expander opens in the
    browser with no run of the script, so this waits for none; one made with `on_change="rerun"` (the Replay
    page's session picker) does start one, and is opened with a click and `wait_idle`."""
    page.get_by_text(label, exact=isinstance(label, str)).click()
    wait_idle(page, settle_ms, patience_ms=0)


def open_tab(page, name: str, settle_ms: int = 600, reruns: bool = False) -> None:
    """Show the tab named `name`. Streamlit switches tabs in the browser, with no run of the script, so this
    waits for the tab to be selected and the page to hold still for `settle_ms`, not for a run to start (a wait
    for one would sit out its whole patience). Tabs made with `on_change="rerun"` (the Retrieval page's, so
    the tab chosen outlives a run) do start one: `reruns` waits for it."""
    tab = page.get_by_role("tab", name=name).first
    tab.click()
    page.wait_for_function("(el) => el.getAttribute('aria-selected') === 'true'", arg=tab.element_handle(),
                           timeout=30_000, polling=50)
    wait_idle(page, settle_ms, patience_ms=3000 if reruns else 0)


def open_page(page, title: str) -> None:
    """Navigate with the sidebar (a URL change would start a new session and lose state)."""
    page.get_by_test_id("stSidebarNav").get_by_text(title, exact=True).click()
    wait_idle(page)


def click(page, name: str, exact: bool = False) -> None:
    page.get_by_role("button", name=name, exact=exact).first.click()
    wait_idle(page)


def choose_radio(scope, label: str) -> None:
    scope.get_by_text(label, exact=True).first.click()


def choose_option(page, label: str, option: str) -> None:
    """Pick `option` in the select box labelled `label` by typing it, as a keyboard user does."""
    combo = page.get_by_test_id("stSelectbox").filter(has_text=label).get_by_role("combobox")
    combo.click()
    page.keyboard.type(option)
    page.get_by_role("option", name=option, exact=True).click()
    wait_idle(page)


def open_multiselect(page, label: str):
    """Open the multiselect labelled `label` and return its options: a click on its box, then the arrow key a
    keyboard user presses (a click right after a long rerun can focus the box without opening it)."""
    box = page.get_by_test_id("stMultiSelect").filter(has_text=label).get_by_role("combobox")
    box.click()
    options = page.get_by_role("option")
    if not options.count():
        box.press("ArrowDown")
        options.first.wait_for(timeout=10_000)
    return options


def pick_in_multiselect(page, label: str, option: str, required: bool = True) -> bool:
    """Pick the option named exactly `option` in the multiselect labelled `label`, then close the list.

    A rerun that lands while the list is open redraws it and detaches the option under the pointer; the
    person then opens the list again, and so does this (up to three times). Returns whether it was picked;
    raises if `required` and it never was."""
    pattern = re.compile(rf"^{re.escape(option)}$")
    for attempt in range(3):
        wait_idle(page, 300)
        match = open_multiselect(page, label).filter(has_text=pattern)
        try:
            if not match.count():
                if not required:
                    return False
                match.first.wait_for(timeout=10_000)
            match.first.click(timeout=15_000)
            return True
        except Exception:
            if attempt == 2:
                raise
        finally:
            page.keyboard.press("Escape")
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


def shooter(page, shots: Path | None):
    def shot(name: str) -> None:
        if shots is not None:
            shots.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(shots / f"{name}.png"), full_page=True)
    return shot


def open_at_turn(page, url: str, turn: int, steps: int = 0) -> None:
    """Open the app, press Next `steps` times, then jump to cursor position `turn`."""
    from playwright.sync_api import expect

    page.goto(url)
    expect(page.get_by_role("button", name="Next ▶")).to_be_visible(timeout=180_000)
    wait_loaded(page)
    for _ in range(steps):
        click(page, "Next ▶")
    jump_to_turn(page, turn)
    expect(page.get_by_text(f"Turn · {turn} /")).to_be_visible()


def switch_engine(page, url: str, engine_label: str) -> None:
    """Open the app and load the bundled demo into another engine from the Replay page's source form, as a
    person switching engines does."""
    from playwright.sync_api import expect

    page.goto(url)
    expect(page.get_by_role("button", name="Next ▶")).to_be_visible(timeout=180_000)
    wait_loaded(page)
    open_expander(page, "Source, conversation, engine and settings")
    choose_option(page, "Engine", engine_label)
    page.get_by_role("button", name="Load", exact=True).click()
    wait_idle(page, 1500)
    expect(page.get_by_text(f"Engine · {engine_label}").first).to_be_visible(timeout=180_000)


def open_at_demo_turn(page, url: str, turn_id: str, steps: int = 0) -> None:
    """Open the app and stand just after the demo's turn `turn_id`."""
    open_at_turn(page, url, demo_turn_after(turn_id), steps)


def look(page, texts: dict, shot, key: str, shot_name: str, page_title: str | None = None,
          wait_ms: int = 0) -> None:
    """Open a page (unless already there), read it (`read_page`), take its screenshot."""
    if page_title:
        open_page(page, page_title)
    if wait_ms:
        page.wait_for_timeout(wait_ms)
    read_page(page, texts, key)
    shot(shot_name)


def read_page(page, texts: dict, key: str) -> None:
    """The page's visible text under `key`, the labels drawn cut short under `key`_cut and the ids written as
    bare integers under `key`_bare ("" when there are none)."""
    texts[key] = page.inner_text("body")
    texts[f"{key}_cut"] = "; ".join(cut_labels(page))
    texts[f"{key}_bare"] = "; ".join(bare_ids(texts[key]))


# Labels a person reads to know what a figure or a control is: metric and widget labels, tabs, buttons.
_LABELS = ('[data-testid="stMetricLabel"], [data-testid="stWidgetLabel"], [data-baseweb="tab"], '
           '[data-testid="stBaseButton-secondary"], [data-testid="stBaseButton-primary"], '
           '[data-testid="stPopover"] button, [data-testid="stExpander"] summary')
# A select box's chosen value is a label too when it is a short choice ("above 300 nodes"); a long one (a node's
# summary) is cut on purpose.
_SHORT_VALUES = '[data-testid="stSelectbox"] [data-baseweb="select"]'
SHORT_VALUE = 30
_CUT = """([sel, values, short]) => {
  const cut = [];
  const candidates = [...document.querySelectorAll(sel),
                      ...[...document.querySelectorAll(values)].filter(e => e.innerText.trim().length <= short)];
  for (const el of candidates) {
    if (!el.offsetParent) continue;
    for (const e of [el, ...el.querySelectorAll('*')]) {
      const st = getComputedStyle(e);
      if (!(st.textOverflow === 'ellipsis' || st.overflow === 'hidden' || st.overflowX === 'hidden')
          || !(e.innerText || '').trim()) continue;
      const range = document.createRange();          // the text's own width: a clipped child may report none
      range.selectNodeContents(e);
      if (Math.max(e.scrollWidth, range.getBoundingClientRect().width) > e.clientWidth + 1) {
        cut.push(el.innerText.trim()); break;
      }
    }
  }
  return cut;
}"""


def cut_labels(page) -> list[str]:
    """The labels on the page drawn shorter than their text (an ellipsis, or clipped): "Buffered after i…", and
    short select-box values ("above 300 no…")."""
    return page.evaluate(_CUT, [_LABELS, _SHORT_VALUES, SHORT_VALUE])


# An id where the pages write u4: a hop's end ("—evidence→ 4"), a citation or membership list ("Evidence cited:
# 4, 7"), a hop written "u5 → 4".
_BARE = re.compile(r"—[\w ()]+→ \d+\b|\b(?:[Ee]vidence cited|[Mm]embers|[Cc]ites?)\b:? \d+(?:, \d+)*\b|\bu\d+ → \d+\b")


def bare_ids(text: str) -> list[str]:
    """Ids written as bare integers in a page's visible text."""
    return _BARE.findall(text)

"""Opening a workbench page under Streamlit's AppTest, shared by the page tests."""
from __future__ import annotations

from pathlib import Path

from markdown_it import MarkdownIt
from streamlit.testing.v1 import AppTest

from engine.engines import engine_schema
from engine.session import DEFAULT_ENGINE
from workbench.model import DEMO_PATH, Workbench
from workbench.session_link import NEW_PARAM
from tests.conftest import engines_under_test

APP = str(Path(__file__).resolve().parents[1] / "workbench" / "app.py")
ENGINES = engines_under_test()
BASELINES = [name for name in ENGINES if name != DEFAULT_ENGINE]
WITH_PROCESS = [name for name in ENGINES if engine_schema(name).processes]
WITHOUT_PROCESS = [name for name in ENGINES if not engine_schema(name).processes]
# Settings under which an engine's offline process has work early in the 102-turn demo. RecMem consolidates only
# on recurrence, and at its LoCoMo defaults (θ_sim 0.7, θ_count 5) so short a conversation rightly triggers
# nothing; at 0.6 / 3 its gate fires by turn 21 (and merge-first once an episode exists).
DEMO_SETTINGS = {"recmem": {"theta_sim": 0.6, "theta_count": 3, "theta_merge": 0.6}}


def start_app(engine: str = DEFAULT_ENGINE) -> tuple[AppTest, Workbench]:
    """Run the app once (the bundled demo) and, for another engine, put the demo opened in that engine into
    the session the way `workbench.state.set_workbench` does."""
    at = AppTest.from_file(APP, default_timeout=180)
    at.query_params[NEW_PARAM] = "demo"              # a new demo session, not the last one a test left behind
    at.run()
    wb = at.session_state["workbench"]
    if engine != wb.engine_name:
        wb = Workbench.open(DEMO_PATH, None, engine=engine, label="bundled demo",
                           embedder=wb.engine.embedder, settings=DEMO_SETTINGS.get(engine))
        at.session_state["workbench"] = wb
        at.run()
    assert not at.exception
    return at, wb


def open_app_page(page: str, turn: int = 0, engine: str = DEFAULT_ENGINE) -> tuple[AppTest, Workbench]:
    """Start the app on the demo in `engine`, optionally jump to `turn`, then switch to `page` (relative to
    workbench/)."""
    at, wb = start_app(engine)
    if turn:
        wb.jump(turn)
    at.switch_page(page).run()
    assert not at.exception
    return at, wb


_MD = MarkdownIt("commonmark")


def shown_text(source: str) -> tuple[str, set[str]]:
    """What a reader sees of a markdown source Streamlit renders (word joiners dropped), and the kinds of inline
    element it holds ("text", "strong_open", "link_open", …), parsed by a CommonMark parser."""
    kinds, out = set(), []
    for block in _MD.parse(source):
        for tok in block.children or []:
            kinds.add(tok.type)
            if tok.type in ("text", "code_inline"):
                out.append(tok.content)
            elif tok.type in ("softbreak", "hardbreak"):
                out.append(" ")
    return "".join(out).replace("\u2060", ""), kinds

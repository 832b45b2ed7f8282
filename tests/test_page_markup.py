"""Every page through AppTest: dataset strings stay literal wherever markdown renders them, and no table, card or
caption shows a literal "None".

Markdown sources the pages sent (texts, captions, alerts, headers, widget and expander labels, radio options)
are parsed with a CommonMark parser (`apptest.shown_text`): a dataset string must come out as the same characters, never as
a link, emphasis or a broken code span.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest
from apptest import shown_text, start_app
from streamlit.testing.v1 import AppTest

from engine.store.annotations import AnnotationStore
from workbench.driver import demo_turn_after
from workbench.model import Workbench
from workbench.text import MISSING, md_code, md_escape

ROOT = Path(__file__).resolve().parents[1]
MARKDOWN_FIXTURE = ROOT / "tests" / "fixtures" / "markdown.jsonl"
MARKDOWN_CASES = ROOT / "tests" / "fixtures" / "markdown_cases.json"
CONVERSATION, SESSION, SAMPLE_ID = "md`conv", "**S1**", "[open the report](https://example.com)"
PAGES = {"replay": "../pages/1_replay.py", "graph": "../pages/2_memory_graph.py",
         "consolidation": "../pages/3_consolidation.py", "retrieval": "../pages/4_retrieval.py",
         "annotate": "../pages/5_annotate.py"}

pytestmark = pytest.mark.slow


def markdown_sources(at: AppTest) -> list[str]:
    """Every string of the last run that Streamlit renders as markdown."""
    texts = [e.value for kind in ("markdown", "caption", "info", "success", "warning", "error", "subheader",
                                  "header", "title") for e in getattr(at, kind)]
    labels = [w.label for kind in ("button", "radio", "selectbox", "multiselect", "text_input", "number_input",
                                   "checkbox", "toggle", "expander", "tabs", "metric") for w in getattr(at, kind)
              if isinstance(getattr(w, "label", None), str)]
    options = [o for r in at.radio for o in r.options]
    return texts + labels + options


def check_literal(at: AppTest) -> str:
    """No markdown source of the page holds a link; returns all the text a reader sees."""
    seen = []
    for source in markdown_sources(at):
        text, kinds = shown_text(source)
        assert "link_open" not in kinds, f"a live link in {source!r}"
        seen.append(text)
    return "\n".join(seen)


def test_md_escape_and_md_code_keep_every_payload_literal():
    payloads = [CONVERSATION, SESSION, SAMPLE_ID, "a ``b`` c", "_x_ ~~y~~ <b>z</b> &amp; $1$", "# h", "1. item",
                "- item", "| a | b |", ":smile: :red[alert] https://example.org www.example.org ana@example.org"]
    for payload in payloads:
        for shown in (md_escape(payload), md_code(payload)):
            text, kinds = shown_text(shown)
            assert text == payload, (payload, shown, text)
            assert kinds <= {"text", "code_inline"}, (payload, kinds)


def test_dataset_strings_stay_literal_on_every_page(tmp_path):
    """A conversation id with a backtick, a session label with **, a question id holding a markdown link."""
    at, wb = start_app()
    wb = Workbench.open(MARKDOWN_FIXTURE, label="**bold** source", embedder=wb.engine.embedder, workdir=tmp_path,
                        schedule="every-1-sessions")
    at.session_state["workbench"] = wb
    wb.jump(4)                                              # into the second session: one scheduled run behind
    AnnotationStore.at(wb.db_path, author="test").import_json(MARKDOWN_CASES.read_text(encoding="utf-8"), "cases.json",
                                               wb.conversation)
    seen = {}
    for name, page in PAGES.items():
        at.switch_page(page).run()
        assert not at.exception, (name, at.exception)
        seen[name] = check_literal(at)
    assert f"Conversation · {CONVERSATION}" in seen["replay"] and "Source · **bold** source" in seen["replay"]
    assert "Session · S_2_" in seen["replay"] and "What turn D2:1 caused" in seen["replay"]
    assert "Schedule · every 1 sessions" in seen["replay"] and "▶▶ Play to end of session S_2_" in seen["replay"]
    wb.jump(2)
    at.switch_page(PAGES["replay"]).run()
    replay = check_literal(at)
    assert f"Session · {SESSION}" in replay and f"▶▶ Play to end of session {SESSION}" in replay
    assert f"Question · {SAMPLE_ID}" in seen["annotate"]


def null_cells(at: AppTest) -> list[str]:
    return [f"{list(d.value.columns)}: {c}" for d in at.dataframe for c in d.value.columns if d.value[c].isna().any()]


def none_words(at: AppTest) -> list[str]:
    return [s for s in markdown_sources(at) if re.search(r"\bNone\b", s)] + \
        [f"{m.label}={m.value}" for m in at.metric if "None" in str(m.value)]


@pytest.mark.parametrize("engine", ["allmem", "memloom"])
def test_no_page_shows_none(engine):
    """Tables, cards and captions of every page after a diagnosed, applied run and a scored case: a missing value
    is an en dash, never "None"."""
    at, wb = start_app(engine)
    wb.jump(demo_turn_after("D5:9"))
    found = []

    def look(where: str) -> None:
        assert not at.exception, (where, at.exception)
        found.extend(f"{where}: {x}" for x in null_cells(at) + none_words(at))

    at.switch_page(PAGES["consolidation"]).run()
    at.button(key="run_diagnosis").click().run()
    look("review queue")
    at.radio(key="decision_mode").set_value("Let the gate decide").run()
    at.button(key="apply_run").click().run()
    look("run diff")
    at.session_state["consolidation_tab"] = "Audit log"
    at.run()
    look("audit log")
    for name in ("replay", "graph"):
        at.switch_page(PAGES[name]).run()
        look(name)
    at.switch_page(PAGES["retrieval"]).run()
    tabs = [t.label for t in at.tabs]
    for tab in tabs:
        at.session_state["retrieval_tab"] = tab
        at.run()
        look(f"retrieval {tab}")
    at.session_state["retrieval_tab"] = tabs[0]                # provenance paths: one result's hops
    at.run()
    for index in range(1, 3):
        at.selectbox(key="retrieval_highlight").select_index(index).run()
        look("retrieval path")
    at.switch_page(PAGES["annotate"]).run()
    at.button(key="annotate_demo").click().run()
    at.button(key="annotate_score").click().run()
    look("annotate")
    scores = next(d.value for d in at.dataframe if "sample_id" in d.value.columns)
    assert (scores == MISSING).any().any()                   # a question without a causal chain: an en dash
    assert found == [], "\n".join(found)

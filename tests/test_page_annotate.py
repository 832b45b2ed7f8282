"""Page 5 (Annotate) driven through Streamlit's AppTest, checked against the session database."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from apptest import ENGINES, shown_text, start_app
from streamlit.testing.v1 import AppTest

from engine.engines import engine_schema
from engine.store.annotations import AnnotationStore
from workbench.model import Workbench
from workbench.session_link import NEW_PARAM
from workbench.text import MISSING

ROOT = Path(__file__).resolve().parents[1]
APP = ROOT / "workbench" / "app.py"
PAGE = "../pages/5_annotate.py"          # relative to the main script, which lives in workbench/
DEMO_CASES = ROOT / "datasets" / "demo" / "cases.json"
XSS = ROOT / "tests" / "fixtures" / "xss.jsonl"

pytestmark = pytest.mark.slow


def open_page(workbench: Workbench | None = None) -> AppTest:
    at = AppTest.from_file(str(APP), default_timeout=180)
    at.query_params[NEW_PARAM] = "demo"              # a new demo session, not the last one a test left behind
    if workbench is not None:
        at.session_state["workbench"] = workbench
    at.run()
    at.switch_page(PAGE)
    at.run()
    assert not at.exception, at.exception
    return at


def cases_of(at: AppTest):
    wb = at.session_state["workbench"]
    return AnnotationStore.at(wb.db_path).cases(wb.conversation.id)


def by_label(widgets, label: str):
    return next(w for w in widgets if w.label == label)


def tick(at: AppTest, turn_id: str, **cells: bool) -> None:
    """Tick cells of the transcript editor the way the browser reports them (edited_rows by position)."""
    editor = at.data_editor[0]
    row = list(editor.value["turn"]).index(turn_id)
    at.session_state[editor.key] = {"edited_rows": {row: cells}, "added_rows": [], "deleted_rows": []}
    at.run()
    assert not at.exception, at.exception


def create_case(at: AppTest, scenario_id: str, title: str) -> None:
    at.text_input(key="annotate_new_id").input(scenario_id)
    at.text_input(key="annotate_new_title").input(title)
    at.button(key="annotate_create").click().run()
    assert not at.exception, at.exception


@pytest.mark.parametrize("engine", ENGINES)
def test_page_opens_and_scores_for_every_engine(engine):
    at, wb = start_app(engine)
    at.switch_page(PAGE).run()
    assert not at.exception
    at.button(key="annotate_demo").click().run()
    wb.jump(30)
    at.button(key="annotate_score").click().run()
    assert not at.exception
    main, peer = engine_schema(engine).label, engine_schema(wb.default_peer()).label
    labels = [m.label for m in at.metric]
    assert f"{main} · mean R@5" in labels and f"{peer} · mean R@5" in labels
    table = next(d.value for d in at.dataframe if f"{main} R@5" in d.value.columns)
    assert table[f"{main} R@5"].between(0, 1).all() and table[f"{peer} R@5"].between(0, 1).all()
    assert wb.peer(wb.default_peer()).state.turn == 30


def test_page_runs_and_offers_the_demo_cases():
    at = open_page()
    assert any("No cases for this conversation yet" in i.value for i in at.info)
    at.button(key="annotate_demo").click().run()
    assert not at.exception
    assert [c.scenario_id for c in cases_of(at)] == ["commute", "half-marathons"]
    assert any("added 2 case(s)" in s.value for s in at.success)
    assert by_label(at.selectbox, "Case").value == "commute"
    table = at.data_editor[0].value.set_index("turn")
    assert table.loc[["D2:6", "D3:9", "D4:2", "D6:6"], "evidence"].all()
    assert table.loc["D2:6", "pointer"] == "commute:t20"
    assert not table.loc["D1:1", "in scenario"]


def test_creating_a_case_and_ticking_turns_is_stored_at_once():
    at = open_page()
    create_case(at, "trip", "Maya's move")
    [case] = cases_of(at)
    assert (case.scenario_id, case.title, len(case.questions)) == ("trip", "Maya's move", 1)

    by_label(at.text_area, "query_text").input("Why did Maya move to Riverside?").run()
    by_label(at.selectbox, "dependency_type").set_value("CAUSAL_FOLLOW").run()
    by_label(at.text_input, "attribution_target").input("trip:t46").run()
    tick(at, "D2:6", evidence=True, chain=True)
    tick(at, "D4:2", evidence=True)

    [case] = cases_of(at)
    q = case.questions[0]
    assert q.query_text == "Why did Maya move to Riverside?"
    assert q.gold_evidence_keys == ["trip:t20", "trip:t46"]
    assert case.resolve(q.gold_evidence_keys) == ["D2:6", "D4:2"]
    assert q.gold_causal_structure.supporting_evidence_keys == ["trip:t20"]
    assert q.gold_causal_structure.attribution_target == "trip:t46"
    table = at.data_editor[0].value.set_index("turn")          # the editor shows what is stored
    assert table.loc["D4:2", "evidence"] and not table.loc["D4:2", "chain"]

    tick(at, "D2:6", **{"in scenario": False})                 # dropping a turn drops it everywhere
    q = cases_of(at)[0].questions[0]
    assert q.gold_evidence_keys == ["trip:t46"] and q.gold_causal_structure.supporting_evidence_keys == []

    at.button(key="annotate_add_question").click().run()
    assert by_label(at.selectbox, "Question").value == "trip-q2"
    assert [x.sample_id for x in cases_of(at)[0].questions] == ["trip-q1", "trip-q2"]


def test_a_bad_scenario_id_is_refused_with_a_message():
    at = open_page()
    create_case(at, "has space", "x")
    assert cases_of(at) == []
    assert any("scenario_id 'has space'" in shown_text(e.value)[0] for e in at.error)


def test_import_errors_are_located_and_keep_stored_cases():
    at = open_page()
    create_case(at, "mine", "kept")
    doc = json.loads(DEMO_CASES.read_text(encoding="utf-8"))
    doc["cases"][0]["questions"][1]["gold_evidence_keys"].append("commute:t99")
    at.file_uploader(key="annotate_upload").upload("broken.json", json.dumps(doc).encode(), "application/json")
    at.run()
    assert not at.exception
    assert any("nothing was imported" in e.value for e in at.error)
    detail = " ".join(c.value for c in at.code)
    assert "broken.json" in detail and "questions[1] 'commute-q2'" in detail and "'gold_evidence_keys[3]'" in detail
    assert [c.scenario_id for c in cases_of(at)] == ["mine"]

    at.file_uploader(key="annotate_upload").set_value(("good.json", DEMO_CASES.read_bytes(), "application/json"))
    at.run()
    assert [c.scenario_id for c in cases_of(at)] == ["mine", "commute", "half-marathons"]


def test_scoring_shows_recall_and_scr_for_all_mem_and_naive_rag():
    at = open_page()
    at.button(key="annotate_demo").click().run()
    at.button(key="annotate_ingest").click().run()
    assert not at.exception
    wb = at.session_state["workbench"]
    assert wb.cursor == wb.total_turns
    at.button(key="annotate_score").click().run()
    assert not at.exception
    labels = [m.label for m in at.metric]
    assert "All-Mem · mean R@5" in labels and "Naive RAG · mean SCR@5" in labels
    table = next(d.value for d in at.dataframe if "All-Mem R@5" in d.value.columns)
    assert list(table["sample_id"]) == ["commute-q1", "commute-q2", "commute-q3"]
    assert table["All-Mem R@5"].between(0, 1).all() and table["Naive RAG R@5"].between(0, 1).all()
    assert (table["All-Mem SCR@5"] == MISSING).tolist() == [False, False, True]     # q3 has no causal chain


def test_conversation_text_never_reaches_html_unescaped():
    at = open_page(Workbench.open(XSS, "xss", label="xss fixture"))
    create_case(at, "x", "hostile text")
    tick(at, "D1:1", evidence=True, chain=True)
    shown = [m.value for m in at.markdown] + [c.value for c in at.caption]
    assert not any("<script" in text or "<img" in text for text in shown)
    assert cases_of(at)[0].resolve(cases_of(at)[0].questions[0].gold_evidence_keys) == ["D1:1"]


def test_a_decision_label_is_stored_under_the_signed_in_name_and_exported_as_an_overlay():
    from engine.core.access import local_identity
    from engine.store.decision_labels import DecisionLabels

    at = open_page()
    wb = at.session_state["workbench"]
    ids = [t.id for t in wb.conversation.turns]
    at.selectbox(key="decision_label_later").set_value(ids[12])
    at.selectbox(key="decision_label_relation").set_value("supersedes")
    at.selectbox(key="decision_label_earlier").set_value(ids[2])
    at.button(key="decision_label_add").click().run()
    assert not at.exception, at.exception
    [(decision, who, _)] = DecisionLabels.at(wb.db_path).labels(wb.conversation.id)
    assert (decision.kind, decision.earlier, decision.later, who) == ("update", ids[2], ids[12],
                                                                     local_identity().name)
    assert json.loads(DecisionLabels.at(wb.db_path).overlay_lines(wb.conversation.id))["kind"] == "update"


def test_flagged_gold_is_checked_in_the_multi_annotator_flow_and_exported_as_corrections(tmp_path):
    from engine.core.access import Action, Identity, Role
    from engine.core.labels import majority
    from engine.eval.gold_audit import (AUDIT_CASE, CORRECTED, apply_overlay, load_overlay, overlay_from_case,
                                        overlay_line)
    from engine.loaders import load_conversations
    from engine.store.database import database_url, open_database
    from engine.store.labels import LabelStore

    texts = ["I adopted a kitten today.", "Nice!", "What colour?", "Grey.", "Her name is Miso, by the way."]
    rows = [{"id": f"t{i}", "speaker": "Ana" if i % 2 == 0 else "Ben", "text": text,
             "time": f"2024-03-02T10:0{i}:00", "session": "1"} for i, text in enumerate(texts)]
    rows.append({"type": "question", "id": "q1", "question": "What is the kitten called?", "answer": "Miso",
                 "evidence": ["t0"]})
    source = tmp_path / "kitten.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    at = open_page(Workbench.open(source, engine="naive", workdir=tmp_path / "s", label="kitten"))
    at.button(key="annotate_audit").click().run()
    assert not at.exception, at.exception
    [case] = cases_of(at)
    assert case.scenario_id == AUDIT_CASE and [q.sample_id for q in case.questions] == ["q1"]
    assert case.questions[0].metadata["audit"]["reasons"] == ["answer_not_in_evidence"]
    assert "t4" in {t.turn_id for t in case.turns}                 # the turn holding the answer is offered

    engine = open_database(database_url(at.session_state["workbench"].db_path))

    class As(LabelStore):
        def __init__(self, name, role=Role.ANNOTATOR):
            super().__init__(engine, name)
            self.identity = Identity(name, role, "token")

        def check(self, action: Action) -> None:
            self.identity.require(action)

    t4 = case.pointer_of("t4")
    As("ann").save_label(case, "q1", [t4], [], "Miso", "CAUSAL_FOLLOW")
    As("ben").save_label(case, "q1", [case.pointer_of("t0"), t4], [], "Miso", "CAUSAL_FOLLOW")
    rita = As("rita", Role.REVIEWER)
    rita.open_adjudication(case.conversation_id, AUDIT_CASE)
    labels = list(rita.labels(case.conversation_id, AUDIT_CASE)["q1"].values())
    rita.record_adjudication(majority(case, labels, "rita"), case, AnnotationStore(engine, "rita").save_within)
    at.run()
    assert not at.exception, at.exception
    stored = AnnotationStore(engine).get(case.conversation_id, AUDIT_CASE)
    [correction] = overlay_from_case(stored, ["q1"], "rita")
    assert correction.status == CORRECTED and correction.evidence == ("t4",) and correction.answer is None
    overlay = tmp_path / "corrections.jsonl"
    overlay.write_text(overlay_line(correction) + "\n", encoding="utf-8")
    [fixed] = apply_overlay(load_conversations(source), load_overlay(overlay), overlay)
    assert fixed.questions[0].evidence == ("t4",)


def test_a_case_goes_to_the_test_split_the_split_locks_and_the_export_is_refused_by_tuning_code(tmp_path):
    from engine.core.splits import LockedSplit, refuse_locked
    from engine.eval.team_export import team_document
    from engine.store.labels import LabelStore

    at = open_page()
    at.button(key="annotate_demo").click().run()
    at.selectbox(key="annotate_split|commute").set_value("test").run()
    at.toggle(key="annotate_lock_test").set_value(True).run()
    assert not at.exception, at.exception
    wb = at.session_state["workbench"]
    labels = LabelStore.at(wb.db_path)
    assert labels.splits("demo") == {"commute": "test"} and labels.locked("demo") == ["test"]
    at.selectbox(key="annotate_split|commute").set_value("validation").run()          # locked: it stays
    assert labels.splits("demo") == {"commute": "test"}
    assert any("split is locked" in e.value for e in at.error)
    doc = team_document(cases_of(at), wb.conversation, labels)
    assert doc["case_set"]["locked"] == ["test"]
    assert doc["case_set"]["version"] in " ".join(shown_text(c.value)[0] for c in at.caption)
    path = tmp_path / "cases.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    with pytest.raises(LockedSplit, match="commute"):
        refuse_locked([path], "a fit script")

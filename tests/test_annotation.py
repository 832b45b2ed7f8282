"""SCDS-style cases: models, JSON exchange, located import errors, persistence and scoring."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.core.cases import Case, CaseQuestion, CausalStructure
from engine.eval.annotation import score_case, summarize
from engine.eval.metrics import recall_at_k
from engine.loaders import LoaderError, load_conversation
from engine.loaders.cases import export_document, export_json, parse_document
from engine.runtime.replay import Schedule, replay
from engine.session import open_session, scratch_engine
from engine.store.annotations import AnnotationStore

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "datasets" / "demo" / "demo.jsonl"
DEMO_CASES = ROOT / "datasets" / "demo" / "cases.json"


@pytest.fixture(scope="module")
def conv():
    return load_conversation(DEMO)


@pytest.fixture
def turns(conv):
    return {t.id: t for t in conv.turns}


def demo_cases(conv) -> list[Case]:
    return parse_document(json.loads(DEMO_CASES.read_text(encoding="utf-8")), DEMO_CASES.name, conv)


def chain_case(conv, turns) -> Case:
    case = Case("commute", conv.id, "deadlines")
    q = case.add_question(query_text="Why has Maya been missing deadlines?", viewer_id="Jon")
    for tid in ("D6:6", "D2:6", "D4:2"):
        case.mark(q.sample_id, turns[tid], True)
    case.mark(q.sample_id, turns["D2:6"], True, chain=True)
    return case


# --- models --------------------------------------------------------------------------
def test_pointers_follow_conversation_position_and_map_to_dataset_ids(conv, turns):
    case = chain_case(conv, turns)
    assert [t.pointer for t in case.turns] == ["commute:t20", "commute:t46", "commute:t80"]
    q = case.questions[0]
    assert q.sample_id == "commute-q1"
    assert q.gold_evidence_keys == ["commute:t20", "commute:t46", "commute:t80"]   # scenario order, not click order
    assert case.resolve(q.gold_evidence_keys) == ["D2:6", "D4:2", "D6:6"]
    assert q.gold_causal_structure.supporting_evidence_keys == ["commute:t20"]
    assert q.gold_causal_structure.dependency_type == "CAUSAL_FOLLOW"


def test_unmarking_keeps_the_turn_and_excluding_cascades(conv, turns):
    case = chain_case(conv, turns)
    case.mark("commute-q1", turns["D4:2"], False)
    assert "commute:t46" not in case.questions[0].gold_evidence_keys
    assert case.pointer_of("D4:2") == "commute:t46"                      # still a scenario turn
    case.exclude("D2:6")
    assert case.pointer_of("D2:6") is None
    assert case.questions[0].gold_evidence_keys == ["commute:t80"]
    assert case.questions[0].gold_causal_structure.supporting_evidence_keys == []


def test_pointer_collision_with_imported_numbering_takes_the_next_free_number(conv, turns):
    case = Case("s", conv.id)
    case.include(turns["D1:1"])                       # index 0 -> s:t01
    case.turns[0].pointer = "s:t20"                   # as if a file numbered it 20
    assert case.include(turns["D2:6"]) == "s:t21"     # D2:6 would be t20: taken
    assert case.turn_id("s:t21") == "D2:6"


def test_question_ids_are_unique_after_removal(conv):
    case = Case("c", conv.id)
    a, b = case.add_question(), case.add_question()
    case.remove_question(a.sample_id)
    assert case.add_question().sample_id not in {b.sample_id}
    assert len({q.sample_id for q in case.questions}) == 2


@pytest.mark.parametrize("bad", ["", "has space", "a:b", "-lead"])
def test_scenario_id_must_be_pointer_safe(conv, bad):
    with pytest.raises(ValueError, match="scenario_id"):
        Case(bad, conv.id)


# --- JSON -----------------------------------------------------------------------------
def test_json_round_trip(conv, turns):
    case = chain_case(conv, turns)
    q = case.questions[0]
    q.gold_answer, q.task_type, q.metadata = "train commute", "causal_verification", {"source": "test", "n": 2}
    q.gold_causal_structure.attribution_target = "commute:t80"
    q.gold_causal_structure.local_id = "c9"
    other = Case("empty", conv.id, "no turns yet")
    other.questions.append(CaseQuestion("empty-q", query_text="?", gold_causal_structure=CausalStructure(
        dependency_type="SAME_EVENT", attribution_target="free text is fine")))
    text = export_json([case, other], conv)
    back = parse_document(json.loads(text), "round.json", conv)
    assert back == [case, other]
    doc = json.loads(text)
    assert doc["format"] == "memwb-scds-cases" and doc["conversation_id"] == "demo"
    first = doc["cases"][0]
    assert first["participants"] == ["Maya", "Jon"]
    assert first["turns"][0] == {"pointer": "commute:t20", "turn_id": "D2:6", "speaker_id": "Maya",
                                 "text": turns["D2:6"].text, "order": 1}


def test_bundled_demo_cases_import_and_cover_the_causal_chain(conv, tmp_path):
    cases = demo_cases(conv)
    assert [c.scenario_id for c in cases] == ["commute", "half-marathons"]
    commute = cases[0]
    q1 = commute.question("commute-q1")
    assert commute.resolve(q1.gold_causal_structure.supporting_evidence_keys) == ["D2:6", "D3:9", "D4:2", "D6:6"]
    assert cases[1].questions[0].gold_causal_structure.dependency_type == "STATE_SUCCESSOR"
    assert export_document(cases, conv) == json.loads(DEMO_CASES.read_text(encoding="utf-8"))


def _demo_doc() -> dict:
    return json.loads(DEMO_CASES.read_text(encoding="utf-8"))


def _break(path, value):
    """A copy of the demo document with one value replaced (or deleted when value is ...)."""
    doc = _demo_doc()
    node = doc
    for key in path[:-1]:
        node = node[key]
    if value is ...:
        del node[path[-1]]
    else:
        node[path[-1]] = value
    return doc


BAD = [
    (["conversation_id"], "conv-26", "top level", "conversation_id"),
    (["format"], "something-else", "top level", "format"),
    (["cases"], {"a": 1}, "top level", "cases"),
    (["cases", 0, "scenario_id"], "bad id", "cases[0]", "scenario_id"),
    (["cases", 1], _demo_doc()["cases"][0], "cases[1] 'commute'", "scenario_id"),
    (["cases", 0, "turns", 1, "turn_id"], "D9:99", "cases[0] 'commute' / turns[1]", "turn_id"),
    (["cases", 0, "turns", 1, "pointer"], "other:t38", "cases[0] 'commute' / turns[1]", "pointer"),
    (["cases", 0, "turns", 1, "text"], "edited text", "cases[0] 'commute' / turns[1]", "text"),
    (["cases", 0, "questions", 1, "query_text"], 42, "questions[1] 'commute-q2'", "query_text"),
    (["cases", 0, "questions", 1, "sample_id"], ..., "cases[0] 'commute' / questions[1]", "sample_id"),
    (["cases", 0, "questions", 1, "gold_evidence_keys", 1], "commute:t99", "questions[1] 'commute-q2'",
     "gold_evidence_keys[1]"),
    (["cases", 0, "questions", 0, "gold_causal_structure", "dependency_type"], "CAUSES",
     "questions[0] 'commute-q1' / gold_causal_structure", "dependency_type"),
    (["cases", 0, "questions", 0, "gold_causal_structure", "supporting_evidence_keys", 0], 7,
     "questions[0] 'commute-q1' / gold_causal_structure", "supporting_evidence_keys[0]"),
    (["cases", 1, "questions", 1, "sample_id"], "half-marathons-q1", "questions[1] 'half-marathons-q1'",
     "sample_id"),
]


@pytest.mark.parametrize("path,value,record,field", BAD, ids=[f"{'.'.join(map(str, b[0]))}" for b in BAD])
def test_import_errors_name_file_record_and_field_and_keep_stored_cases(conv, tmp_path, path, value, record,
                                                                        field):
    store = AnnotationStore.at(tmp_path / "s.sqlite", author="test")
    kept = Case("kept", conv.id, "already here")
    kept.add_question(query_text="What does Maya study?")
    store.save(kept)
    with pytest.raises(LoaderError) as err:
        store.import_json(json.dumps(_break(path, value)), "bad-cases.json", conv)
    message = str(err.value)
    assert message.startswith("bad-cases.json: ")
    assert record in err.value.record and f"field {field!r}" in message
    assert store.cases(conv.id) == [kept]


def test_import_syntax_error_names_the_line(conv, tmp_path):
    store = AnnotationStore.at(tmp_path / "s.sqlite", author="test")
    with pytest.raises(LoaderError, match=r"broken.json: record line 3: not valid JSON"):
        store.import_json('{\n "cases": [\n oops ]}', "broken.json", conv)


def test_import_never_overwrites_a_stored_case(conv, tmp_path):
    store = AnnotationStore.at(tmp_path / "s.sqlite", author="test")
    text = DEMO_CASES.read_text(encoding="utf-8")
    first = store.import_json(text, "cases.json", conv)
    assert first.added == ("commute", "half-marathons") and first.unchanged == ()
    again = store.import_json(text, "cases.json", conv)
    assert again.added == () and again.unchanged == ("commute", "half-marathons")

    edited = store.get(conv.id, "commute")
    edited.questions[0].gold_answer = "my own answer"
    store.save(edited)
    with pytest.raises(LoaderError, match=r"record cases\[0\] 'commute': field 'scenario_id'"):
        store.import_json(text, "cases.json", conv)
    assert store.get(conv.id, "commute").questions[0].gold_answer == "my own answer"


# --- persistence ------------------------------------------------------------------------
def test_cases_persist_across_reopening_the_session_database(conv, turns, tmp_path):
    db = tmp_path / "x.sqlite"
    engine = open_session(db)
    store = AnnotationStore(engine.store.engine, author="test")
    case = chain_case(conv, turns)
    store.save(case)
    case.add_question(query_text="Where did Maya move?")
    case.mark("commute-q2", turns["D4:2"], True)
    case.title = "renamed"
    store.save(case)
    case.remove_question("commute-q1")
    store.save(case)
    engine.store.engine.dispose()

    reopened = AnnotationStore(open_session(db).store.engine, author="dr-lee")
    assert reopened.cases(conv.id) == [case]
    assert reopened.cases("another-conversation") == []
    assert AnnotationStore.at(db).get(conv.id, "commute").title == "renamed"
    reopened.delete(conv.id, "commute")
    assert AnnotationStore.at(db).cases(conv.id) == []
    # who changed what, one row per case or question a write changed, in order
    assert [(e.sample_id, e.action, e.author) for e in reopened.edits(conv.id)] == [
        ("", "saved", "test"), ("commute-q1", "saved", "test"),
        ("", "saved", "test"), ("commute-q2", "saved", "test"),
        ("commute-q1", "deleted", "test"),
        ("", "deleted", "dr-lee")]


def test_a_store_without_an_author_reads_only(conv, tmp_path):
    db = tmp_path / "x.sqlite"
    open_session(db)
    with pytest.raises(ValueError, match="without an author"):
        AnnotationStore.at(db).save(Case("c", conv.id))
    assert AnnotationStore.at(db).cases(conv.id) == []


def test_tables_live_in_the_session_file(conv, tmp_path):
    import sqlite3

    db = tmp_path / "x.sqlite"
    engine = open_session(db)
    AnnotationStore(engine.store.engine, author="test").save(Case("c", conv.id))
    names = {r[0] for r in sqlite3.connect(db).execute("select name from sqlite_master where type='table'")}
    assert {"annotation_case", "annotation_question", "op_log"} <= names


# --- scoring -----------------------------------------------------------------------------
def test_scores_against_a_fixed_ranking(conv, turns):
    case = chain_case(conv, turns)                       # evidence D2:6, D4:2, D6:6; chain D2:6
    case.add_question()                                  # no query text: not scored
    single = case.add_question(query_text="Where did Maya move?")
    case.mark(single.sample_id, turns["D4:2"], True)     # evidence only, no chain
    ranked = ["D6:6", "D1:1", "D2:6", "D3:3", "D9:9", "D4:2"]
    scores = score_case(case, {"fixed": lambda q: ranked}, k=5)
    assert [s.sample_id for s in scores] == ["commute-q1", single.sample_id]
    chain_q, single_q = scores
    assert chain_q.recall == pytest.approx(2 / 3) and chain_q.scr == 1.0
    assert chain_q.retrieved == tuple(ranked[:5]) and chain_q.missed == ("D4:2",)
    assert single_q.recall == 0.0 and single_q.scr is None
    summary = summarize(scores)["fixed"]
    assert summary["recall"] == pytest.approx(1 / 3) and summary["scr"] == 1.0
    assert summary["recall_n"] == 2 and summary["scr_n"] == 1
    case.questions[0].gold_causal_structure.supporting_evidence_keys = ["commute:t20", "commute:t46"]
    assert score_case(case, {"fixed": lambda q: ranked}, k=5)[0].scr == 0.0   # D4:2 is 6th


@pytest.fixture(scope="module")
def replayed(conv, tmp_path_factory):
    engine = open_session(tmp_path_factory.mktemp("annot") / "x.sqlite")
    replay(engine, conv, Schedule.parse("every-3-sessions"))
    return engine


def test_scoring_all_mem_and_naive_rag_on_the_replayed_demo(conv, replayed):
    k = 5
    naive = scratch_engine("naive", conv, replayed.embedder)
    retrievers = {"All-Mem": lambda q: replayed.retrieve(q, k=k).source_ids,
                  "Naive RAG": lambda q: naive.retrieve(q, k=k).source_ids}
    for case in demo_cases(conv):
        scores = score_case(case, retrievers, k)
        assert len(scores) == 2 * len(case.questions)
        for s in scores:
            q = case.question(s.sample_id)
            top = list(retrievers[s.retriever](q.query_text))[:k]
            assert list(s.retrieved) == top and len(top) == k
            assert s.recall == recall_at_k(top, case.resolve(q.gold_evidence_keys), k)
            chain = case.resolve(q.gold_causal_structure.supporting_evidence_keys)
            assert s.scr == (float(set(chain) <= set(top)) if chain else None)
    commute = demo_cases(conv)[0]
    by = {(s.sample_id, s.retriever): s for s in score_case(commute, retrievers, k)}
    assert by[("commute-q3", "Naive RAG")].recall == 1.0       # "commute ... an hour each way" is D4:2


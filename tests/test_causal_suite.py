"""The causal diagnostic suite (datasets/causal/) stays valid, and its checker catches what it claims to."""
from __future__ import annotations

import copy
import importlib.util
import json
import shutil
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from engine.eval.annotation import score_case
from engine.eval.causal_suite.baselines import retrieval_report
from engine.eval.causal_suite.rules import check_global, check_question, check_suite
from engine.eval.causal_suite.suite import Suite, counts, jsonl_category, kind_of, load_suite, shared_stems, tokens
from engine.retrieval.lexical import BM25
from engine.store.annotations import AnnotationStore

ROOT = Path(__file__).resolve().parents[1]
SUITE = ROOT / "datasets" / "causal"


def _command_line():
    """The script (its `main`): the library is imported directly above."""
    spec = importlib.util.spec_from_file_location("check_causal_suite", ROOT / "scripts" / "check_causal_suite.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module          # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


check = _command_line()


@pytest.fixture(scope="module")
def suite():
    return load_suite(SUITE)


def _chain_questions(suite):
    return [(sc, q) for sc in suite.scenarios for q in sc.case.questions
            if kind_of(q, jsonl_category(sc, q)) == "chain"]


# -- the shipped suite ----------------------------------------------------------------------------
def test_every_rule_holds(suite):
    assert suite.problems == []
    assert check_suite(suite) == []


def test_counts_meet_the_brief(suite):
    c = counts(suite)
    assert c["all"]["scenarios"] >= 14 and c["all"]["questions"] >= 46
    assert 5 <= c["validation"]["scenarios"] <= 6
    assert c["all"]["kinds"]["chain"] / c["all"]["questions"] >= 0.6
    assert c["all"]["kinds"]["state"] >= 6 and c["all"]["kinds"]["single"] >= 5
    assert set(c["all"]["categories"]) <= {1, 2, 4}
    assert {s.id for s in suite.split("validation")}.isdisjoint({s.id for s in suite.split("test")})
    assert {s.id for s in suite.split("train")}.isdisjoint({s.id for s in suite.split("validation")}
                                                            | {s.id for s in suite.split("test")})


def test_command_line_reports_ok(capsys):
    assert check.main(["--suite", str(SUITE)]) == 0
    out = capsys.readouterr().out
    assert "[validation]" in out and "[test]" in out and out.rstrip().endswith("OK: every rule holds")


def test_bm25_never_reaches_a_root_cause(suite):
    """Zero shared content words means a lexical retriever cannot put the root cause in its top-K: SCR = 0."""
    for sc in suite.scenarios:
        index = BM25()
        for i, t in enumerate(sc.conversation.turns):
            index.add(i, t.raw)

        def retrieve(query, turns=sc.conversation.turns, index=index):
            scores = index.scores(query)
            return [turns[i].id for i in sorted(scores, key=lambda i: (-scores[i], i))]

        chains = {q.sample_id for q in sc.case.questions if kind_of(q, jsonl_category(sc, q)) == "chain"}
        for score in score_case(sc.case, {"bm25": retrieve}, k=10):
            if score.sample_id in chains:
                assert score.scr == 0.0, score.sample_id


def test_cases_import_through_the_annotation_store(tmp_path, suite):
    sc = suite.split("test")[0]
    store = AnnotationStore.at(tmp_path / "s.sqlite", author="test")
    text = (SUITE / "cases" / "test" / f"{sc.id}.json").read_text(encoding="utf-8")
    assert store.import_json(text, "cases.json", sc.conversation).added == (sc.id,)
    assert store.import_json(text, "cases.json", sc.conversation).unchanged == (sc.id,)
    assert store.cases(sc.id) == [sc.case]
    store.engine.dispose()


# -- the checker catches violations ----------------------------------------------------------------
def test_stem_aware_overlap():
    assert shared_stems("She missed the deadline", "Why did she miss deadlines?") == {"miss", "deadline"}
    assert shared_stems("Tomas rebuilt the lines", "Why was Tomas's defence moved?")      # possessive
    assert shared_stems("She is defending in May", "When is the defence?")                # same first 5 letters
    assert shared_stems("The compressor died", "Why was the thesis late?") == set()


def test_root_cause_sharing_a_word_with_the_question_is_flagged(suite):
    sc, q = _chain_questions(suite)[0]
    root = sc.turn(q.gold_causal_structure.supporting_evidence_keys[0])
    word = next(w for w in root.text.split() if tokens(w))
    leaky = replace(q, query_text=f"{q.query_text} ({word})")
    assert any("shares content words" in p for p in check_question(sc, leaky, 1))


def test_root_cause_in_the_effect_session_is_flagged(suite):
    def earlier_in_session(sc, q):
        effect = sc.turn(q.gold_causal_structure.supporting_evidence_keys[-1])
        return next((t for t in sc.conversation.turns if t.session == effect.session and t.index < effect.index
                     and not shared_stems(t.text, q.query_text)), None)

    sc, q, near = next((sc, q, t) for sc, q in _chain_questions(suite) if (t := earlier_in_session(sc, q)))
    keys = q.gold_causal_structure.supporting_evidence_keys
    case = copy.deepcopy(sc.case)
    pointer = case.include(near)                                # the suite's cases cite only evidence/distractors
    chain = replace(q.gold_causal_structure, supporting_evidence_keys=[pointer, keys[-1]])
    short = replace(q, gold_evidence_keys=[pointer, keys[-1]], gold_causal_structure=chain)
    problems = check_question(replace(sc, case=case), short, 1)
    assert any("not a whole session apart" in p for p in problems)
    assert any("unrelated talk" in p for p in problems)


def test_missing_distractor_and_bad_chain_length_are_flagged(suite):
    sc, q = _chain_questions(suite)[0]
    odd = replace(q, query_text="Which xylophone quartet zebra?", metadata={**q.metadata, "distractor_keys": []})
    assert any("no lexical distractor" in p for p in check_question(sc, odd, 1))
    keys = q.gold_causal_structure.supporting_evidence_keys
    one = replace(q.gold_causal_structure, supporting_evidence_keys=keys[-1:])
    assert any("chain of 1 turns" in p for p in check_question(sc, replace(q, gold_causal_structure=one), 1))


@pytest.mark.parametrize("source, into", [("validation", "test"), ("train", "validation")])
def test_scenario_in_two_splits_is_flagged(suite, source, into):
    twin = replace(suite.split(source)[0], split=into)
    doubled = Suite(scenarios=[*suite.scenarios, twin])
    assert any("two splits" in p and twin.id in p for p in check_global(doubled))


def test_broken_cases_file_and_shape_problems_are_reported(tmp_path):
    copy = tmp_path / "causal"
    shutil.copytree(SUITE, copy)
    path = next((copy / "cases" / "validation").glob("*.json"))
    doc = json.loads(path.read_text(encoding="utf-8"))
    doc["cases"][0]["questions"][0]["gold_evidence_keys"].append(f"{doc['conversation_id']}:t999")
    path.write_text(json.dumps(doc), encoding="utf-8")
    lines = (copy / "test.jsonl").read_text(encoding="utf-8").splitlines()
    first = json.loads(lines[0])
    first["time"] = "2030-01-01T00:00:00"                 # the first turn now sorts last
    (copy / "test.jsonl").write_text("\n".join([json.dumps(first), *lines[1:]]) + "\n", encoding="utf-8")
    problems = check_suite(load_suite(copy))
    assert any("import failed" in p and "t999" in p for p in problems)
    assert any("turn numbers do not increase" in p for p in problems)


def test_retrieval_report_without_dense(suite):
    report = retrieval_report(suite, k=5, dense=False)["bm25"]
    assert report["chain_questions"] >= 28 and report["root"] == 0.0 and report["chain"] == 0.0
    assert report["effect"] > 0.9                        # the focal turn is the one the question is about


@pytest.mark.parametrize("split", ["validation", "test"])
@pytest.mark.parametrize("folder", ["", "styles"])
def test_paraphrases_reword_the_chain_questions_of_their_split(split, folder):
    """Every chain question of a split has other wordings, each a different question text, and no other
    question (of either split) has any: in the first set and in the second set of wording styles."""
    from engine.loaders import load_conversations
    wordings = json.loads((SUITE / "paraphrases" / folder / f"{split}.json").read_text(encoding="utf-8"))
    chain = {q.id: q.question for conv in load_conversations(SUITE / f"{split}.jsonl") for q in conv.questions
             if q.category == 1}
    assert set(wordings) == set(chain)
    for qid, texts in wordings.items():
        assert texts and all(t.strip() and t != chain[qid] for t in texts) and len(set(texts)) == len(texts)

"""The `answer` role and engine.answer: extractive offline answers that cite their evidence, the token
budget, fail-closed answers, and the openai path against a real local HTTP server."""
from __future__ import annotations

import json
import math
from typing import Iterator

import pytest
from conftest import turn
from test_llm_openai import FakeServer, Scripted, completion

from engine.eval.answer import Answer, Passage, answer_question, fit, passages_from_turns, passages_from_units
from engine.eval.metrics import attribution_auditability, llm_tokens_by_role, token_f1
from engine.llm import LLM, BackendReply, LLMBackend, LLMRequest, OpenAIBackend, make_backend
from engine.llm.embedder import Embedder
from engine.llm.offline_answer import answer as offline_answer
from engine.llm.schemas import ANSWER_CHARS, model_schema

KITTEN = Passage(("D1:1",), "Maya: I adopted a kitten named Miso from the shelter.", "2024-01-01T10:01:00")
SISTER = Passage(("D1:2",), "Maya: My sister Lena lives in Porto. She works as a nurse.", "2024-01-01T10:02:00")
SINK = Passage(("D1:3",), "Jon: The plumber finally fixed our leaking kitchen sink today.", "2024-01-01T10:03:00")
CONTEXT = [KITTEN, SISTER, SINK]


@pytest.fixture(scope="module")
def embedder() -> Embedder:
    return Embedder()


@pytest.fixture(scope="module")
def offline(embedder: Embedder) -> LLM:
    return LLM(make_backend("offline", embedder=embedder))


def _sent_passages(call) -> list[dict]:
    """The passages a call's prompt carried, as the model read them."""
    body = call.prompt[-1]["content"].split("INPUT:\n", 1)[1]
    return json.loads(body)["passages"]


# --- the offline rule --------------------------------------------------------


def test_offline_lexical_rule_by_hand() -> None:
    """Without an embedder the match is the idf-weighted share of question words; worked by hand.

    Question words (content_tokens, stemmed): {lena, live}. Sentences (speaker words count):
      0 "I adopted a kitten named Miso ..."  {adopt, kitten, nam, miso, shelter, maya}
      1 "My sister Lena lives in Porto."     {sister, lena, live, porto, maya}
      2 "She works as a nurse."              {work, nurse, maya}
      3 "The plumber finally fixed ..."      {plumber, finally, fix, leak, kitchen, sink, today, jon}
    df(lena) = df(live) = 1 of 4 sentences: weight log(1 + 4) each; sentence 1 covers both -> 1.0, the
    rest 0. Nothing is left uncovered, so the answer is sentence 1 alone, citing its passage."""
    passages = [p.to_payload() for p in CONTEXT]
    out = offline_answer("Where does Lena live?", passages, embedder=None)
    assert out == {"answer": "My sister Lena lives in Porto.", "evidence_keys": ["D1:2"]}
    # a question sharing no word with any sentence, and no embedder to say otherwise: no answer
    assert offline_answer("Which planet is largest?", passages, embedder=None) == {"answer": "", "evidence_keys": []}
    assert offline_answer("Where does Lena live?", [], embedder=None) == {"answer": "", "evidence_keys": []}


def test_offline_answer_extracts_and_cites_the_matching_sentence(offline: LLM) -> None:
    a = answer_question(offline, "Where does Maya's sister Lena live?", CONTEXT)
    assert a.ok and a.call is not None and a.call.ok
    assert "Porto" in a.text and a.cited == ["D1:2"] and a.rejected == []
    assert a.passages == 3 and a.dropped == 0
    assert token_f1(a.text, "Porto") > 0
    assert attribution_auditability(a.cited, ["D1:2"]) == 1.0
    # deterministic: the same question gives the same answer and citations
    again = answer_question(offline, "Where does Maya's sister Lena live?", CONTEXT)
    assert (again.text, again.cited) == (a.text, a.cited)


def test_offline_answer_covers_a_two_part_question_from_two_passages(offline: LLM) -> None:
    a = answer_question(offline, "What is the kitten called, and where does Lena live?", CONTEXT)
    assert "Miso" in a.text and "Porto" in a.text
    assert a.text.index("Miso") < a.text.index("Porto")          # in passage (time) order
    assert a.cited == ["D1:1", "D1:2"]
    assert attribution_auditability(a.cited, ["D1:1", "D1:2"]) == 1.0


def test_offline_answer_cites_every_key_of_a_merged_passage(offline: LLM) -> None:
    merged = Passage(("D2:4", "D3:1"), "Jon: I run along the river.\nJon: I have run 4 half marathons now.",
                     "2024-02-01T09:00:00")
    a = answer_question(offline, "How many half marathons has Jon run?", [KITTEN, merged])
    assert "4 half marathons" in a.text and a.cited == ["D2:4", "D3:1"]


def test_offline_answer_says_nothing_without_support(offline: LLM) -> None:
    a = answer_question(offline, "What is the boiling point of mercury in kelvin?", CONTEXT)
    assert a.ok and a.text == "" and a.cited == []


def test_offline_answer_stays_within_the_answer_cap(offline: LLM) -> None:
    long = Passage(("D9:1",), "Maya: " + "the cello lesson ran long and " * 200 + "we played Bach.", "")
    a = answer_question(offline, "How did the cello lesson go?", [long])
    assert a.ok and 0 < len(a.text) <= ANSWER_CHARS and a.cited == ["D9:1"]


# --- context: retrieval units, full history, the budget ------------------------


def test_answer_from_a_real_retrieval_cites_only_what_was_retrieved(make_engine, offline: LLM) -> None:
    engine = make_engine()
    for i, (speaker, text) in enumerate([
            ("Maya", "I adopted a kitten named Miso from the shelter."),
            ("Jon", "My sister Lena lives in Porto and works as a nurse."),
            ("Maya", "The plumber finally fixed our leaking kitchen sink today."),
            ("Jon", "I started cello lessons with Mr. Okafor.")], start=1):
        engine.ingest(turn(i, speaker, text))
    result = engine.retrieve("Who teaches Jon the cello?", k=2)
    context = passages_from_units(result.units)
    assert [p.keys for p in context] == [tuple(u.source_ids) for u in result.units if u.raw.strip()]
    a = answer_question(offline, "Who teaches Jon the cello?", context)
    assert "Okafor" in a.text and a.cited == ["D1:4"]
    assert set(a.cited) <= {k for u in result.units for k in u.source_ids}


def test_full_history_keeps_the_newest_turns_when_it_overflows(offline: LLM) -> None:
    turns = [turn(i, "Maya", f"Note number {i}: the garden shed is painted {c}.")
             for i, c in enumerate(["red", "blue", "green", "yellow", "white"], start=1)]
    context = passages_from_turns(turns)
    assert [p.keys for p in context] == [("D1:5",), ("D1:4",), ("D1:3",), ("D1:2",), ("D1:1",)]
    cost = context[0].tokens
    assert all(p.tokens == cost for p in context)                   # same length: same estimate
    # room for two passages and a half: the two newest are read, the three oldest dropped
    a = answer_question(offline, "What colour is the garden shed painted?", context,
                        budget_tokens=math.floor(2.5 * cost))
    assert (a.passages, a.dropped) == (2, 3)
    sent = _sent_passages(a.call)
    assert [p["keys"] for p in sent] == [["D1:4"], ["D1:5"]]        # read in time order
    assert set(a.cited) <= {"D1:4", "D1:5"}
    # the whole history fits the default budget
    whole = answer_question(offline, "What colour is the garden shed painted?", context)
    assert (whole.passages, whole.dropped) == (5, 0)


def test_fit_skips_a_passage_too_long_for_what_is_left() -> None:
    short_a, short_b = Passage(("a",), "one two"), Passage(("b",), "three four")
    big = Passage(("c",), "word " * 300)
    budget = short_a.tokens + short_b.tokens
    kept, dropped = fit([short_a, big, short_b], budget)
    assert kept == [short_a, short_b] and dropped == 1
    with pytest.raises(ValueError, match="budget"):
        fit([short_a], 0)


def test_no_context_means_no_call_and_no_answer(offline: LLM) -> None:
    a = answer_question(offline, "Where does Lena live?", [])
    assert a == Answer("", [], None) and a.ok
    with pytest.raises(ValueError, match="non-empty string"):
        answer_question(offline, "  ", CONTEXT)


# --- failing closed ------------------------------------------------------------


class _Broken(LLMBackend):
    """A backend with a bug: it raises something other than BackendError."""

    name = "broken"

    def generate(self, request: LLMRequest) -> BackendReply:
        raise KeyError("passages")


def test_a_backend_bug_gives_an_empty_answer_with_its_error() -> None:
    a = answer_question(LLM(_Broken()), "Where does Lena live?", CONTEXT)
    assert not a.ok and a.error_code == "LLM_FAIL" and "KeyError" in a.error
    assert (a.text, a.cited, a.call) == ("", [], None)


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeServer]:
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    with FakeServer() as srv:
        yield srv


def _openai(server: FakeServer, **kw) -> LLM:
    kw.setdefault("max_retries", 0)
    kw.setdefault("timeout", 5.0)
    kw.setdefault("structured_output", "json_schema")      # the scripted server answers in order: no probe first
    return LLM(OpenAIBackend("fake-model", base_url=server.base_url, api_key="test-key", sleep=lambda _s: None, **kw))


def test_the_answer_role_on_the_openai_backend(server: FakeServer) -> None:
    reply = {"answer": "Porto", "evidence_keys": ["D1:2", " D1:2", "D7:7"]}
    server.script(Scripted(200, completion(json.dumps(reply), prompt_tokens=120, completion_tokens=9)))
    a = answer_question(_openai(server), "Where does Lena live?", CONTEXT, question_time="2024-03-01T09:00:00")
    assert a.ok and a.text == "Porto"
    assert a.cited == ["D1:2"] and a.rejected == ["D7:7"]        # a key it never read is not a citation
    body = server.requests[0]["json"]
    assert body["temperature"] == 0
    assert body["response_format"] == {"type": "json_schema", "json_schema": {
        "name": "answer", "schema": model_schema("answer"), "strict": True}}      # bounded: docs/LLM.md
    sent = _sent_passages(a.call)
    assert [p["keys"] for p in sent] == [["D1:1"], ["D1:2"], ["D1:3"]]
    assert sent[1]["text"] == SISTER.text and "Where does Lena live?" in body["messages"][-1]["content"]
    assert llm_tokens_by_role([a.call]) == {"answer": {"calls": 1, "prompt": 120, "completion": 9}}
    assert a.to_dict() == {"text": "Porto", "cited": ["D1:2"], "error_code": None, "error": None,
                           "rejected": ["D7:7"], "passages": 3, "dropped": 0}


@pytest.mark.parametrize("script, code", [
    (Scripted(200, completion("Porto, I think.")), "JSON_PARSE_FAIL"),
    (Scripted(200, completion(json.dumps({"answer": "Porto"}))), "SCHEMA_FAIL"),
    (Scripted(200, completion(json.dumps({"answer": "x" * (ANSWER_CHARS + 1), "evidence_keys": []}))),
     "OUTPUT_TOO_LONG"),
    (Scripted(200, completion(json.dumps({"answer": "Porto", "evidence_keys": ["D1:2"]})), delay=3.0), "TIMEOUT"),
    (Scripted(503, {"error": {"message": "overloaded"}}), "HTTP_503"),
])
def test_garbage_and_timeouts_give_an_empty_answer_with_the_code(server: FakeServer, script: Scripted,
                                                                  code: str) -> None:
    server.script(script)
    a = answer_question(_openai(server, timeout=0.5), "Where does Lena live?", CONTEXT)
    assert not a.ok and a.error_code == code and a.error
    assert (a.text, a.cited) == ("", []) and a.call is not None and a.call.error_code == code
    assert attribution_auditability(a.cited, ["D1:2"]) == 0.0


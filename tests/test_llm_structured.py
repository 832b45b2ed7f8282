"""Structured output negotiated per server, on local HTTP servers that behave as OpenAI, llama.cpp's server
and a plain chat server do; the same against the real llama.cpp server is in test_llm_live.py."""
from __future__ import annotations

import json

import pytest

from engine.llm import LLM, OpenAIBackend
from engine.llm import structured
from engine.llm.schemas import TOKEN_CAPS, model_schema
from tests.test_llm_openai import GOOD, PAYLOAD, FakeServer, Scripted, completion, error_body


@pytest.fixture(autouse=True)
def _auto(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MEMWB_OPENAI_STRUCTURED", raising=False)
    structured.forget()


def _answer(request: dict) -> str:
    """What a model says: `{"ok": true, "say": "yes"}` to the probe, a good descriptor otherwise."""
    probe = "Reply exactly" in request["messages"][-1]["content"]
    return '{"ok": true, "say": "yes"}' if probe else json.dumps(GOOD)


def openai_like(request: dict) -> Scripted:
    return Scripted(200, completion(_answer(request)))


def llama_cpp_like(request: dict) -> Scripted:
    """llama-cpp-python: json_schema is a 500; json_object with a schema is honoured; plain text rambles."""
    fmt = request.get("response_format") or {}
    if fmt.get("type") == "json_schema":
        return Scripted(500, error_body(500))
    if fmt.get("type") == "json_object" and "schema" in fmt:
        return Scripted(200, completion(_answer(request)))
    return Scripted(200, completion("Sure! " + _answer(request)))


def plain_chat(request: dict) -> Scripted:
    """A server that ignores response_format: it answers in prose to the probe, JSON when shown the schema."""
    system = request["messages"][0]["content"]
    if "validate against this JSON schema" in system:
        return Scripted(200, completion(json.dumps(GOOD)))
    return Scripted(200, completion("Here you are: ok"))


def backend(url: str, **kw) -> OpenAIBackend:
    return OpenAIBackend("m", base_url=url, api_key="k", max_retries=0, timeout=5.0, **kw)


@pytest.mark.parametrize(("responder", "mode", "probes"), [
    (openai_like, "json_schema", 1), (llama_cpp_like, "json_object", 2), (plain_chat, "prompt", 2)])
def test_the_mode_is_detected_once_and_recorded_with_each_call(responder, mode, probes) -> None:
    with FakeServer() as srv:
        srv.responder = responder
        llm = LLM(backend(srv.base_url))
        calls = [llm.call("descriptor", PAYLOAD) for _ in range(3)]
        again = LLM(backend(srv.base_url)).call("descriptor", PAYLOAD)      # a second client, same endpoint
    assert all(c.ok for c in [*calls, again]), [c.error for c in calls]
    assert len(srv.requests) == probes + 4
    assert {(c.params["structured"], c.params["detected"]) for c in [*calls, again]} == {(mode, True)}
    sent = srv.requests[-1]["json"]
    assert sent["max_tokens"] == TOKEN_CAPS["descriptor"] and sent["temperature"] == 0
    bounded = model_schema("descriptor")
    if mode == "json_schema":
        assert sent["response_format"]["json_schema"]["schema"] == bounded
    elif mode == "json_object":
        assert sent["response_format"] == {"type": "json_object", "schema": structured.grammar_schema(bounded)}
    else:
        assert "response_format" not in sent
        assert json.dumps(bounded, sort_keys=True) in sent["messages"][0]["content"]
    assert calls[0].prompt == sent["messages"] or mode == "prompt"      # the record keeps the role's prompt


def test_a_setting_overrides_detection(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMWB_OPENAI_STRUCTURED", "prompt")
    with FakeServer() as srv:
        srv.responder = plain_chat
        call = LLM(backend(srv.base_url)).call("descriptor", PAYLOAD)
    assert call.ok and call.params["structured"] == "prompt" and call.params["detected"] is False
    assert len(srv.requests) == 1
    with pytest.raises(ValueError, match="unknown structured-output mode 'xml'"):
        backend("http://127.0.0.1:9/v1", structured_output="xml")


def test_an_unreachable_server_is_a_network_failure_and_nothing_is_cached() -> None:
    from engine.core.ports import free_port

    url = f"http://127.0.0.1:{free_port()}/v1"
    call = LLM(backend(url)).call("descriptor", PAYLOAD)
    assert call.error_code == "NETWORK" and "probe" in call.error
    assert not structured._DETECTED


def test_a_reply_cut_at_the_output_limit_says_so() -> None:
    with FakeServer() as srv:
        body = completion('{"summary": "Caroline went to')
        body["choices"][0]["finish_reason"] = "length"
        srv.script(Scripted(200, body))
        call = LLM(backend(srv.base_url, structured_output="json_object", max_tokens=8)).call("descriptor", PAYLOAD)
    assert call.error_code == "JSON_PARSE_FAIL" and call.finish_reason == "length"
    assert "cut at the output limit (8 tokens)" in call.error


def test_a_prompt_longer_than_the_context_is_context_overflow() -> None:
    with FakeServer() as srv:
        srv.script(Scripted(400, {"error": {"message": "This model's maximum context length is 512 tokens. "
                                                       "However, you requested 900 tokens", "type": "invalid_request_error",
                                            "code": "context_length_exceeded"}}))
        call = LLM(backend(srv.base_url, structured_output="json_object")).call("descriptor", PAYLOAD)
    assert call.error_code == "CONTEXT_OVERFLOW" and "maximum context length is 512" in call.error
    assert call.params["structured"] == "json_object"
    assert len(srv.requests) == 1


def test_server_error_statuses_are_not_context_overflow() -> None:
    with FakeServer() as srv:
        srv.script(Scripted(500, error_body(500)))
        call = LLM(backend(srv.base_url, structured_output="json_object")).call("descriptor", PAYLOAD)
    assert call.error_code == "HTTP_500"

"""OpenAI backend against a real local HTTP server, plus record/replay.

The server speaks the chat-completions wire format on 127.0.0.1, so these
tests cover the real SDK, HTTP, timeouts and retries without any network.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections import deque
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Iterator

import pytest

from engine.core.ports import free_port
from engine.llm import (
    BACKENDS,
    LLM,
    LLMCall,
    NotRecorded,
    OpenAIBackend,
    RecordedBackend,
    dump_calls_jsonl,
    load_calls_jsonl,
    make_backend,
    register_backend,
)
from engine.llm.openai_backend import DEFAULT_MODEL, forget_models
from engine.llm.schemas import SCHEMAS, TOKEN_CAPS, model_schema

REPO = Path(__file__).resolve().parents[1]
PAYLOAD = {"text": "Caroline: I went to the LGBTQ support group on 7 May 2023."}
GOOD = {"summary": "Caroline attended an LGBTQ support group on 7 May 2023.",
        "keywords": ["Caroline", "LGBTQ", "support group"]}


@dataclass
class Scripted:
    status: int = 200
    body: Any = None
    delay: float = 0.0


def completion(content: str | None, prompt_tokens: int = 42, completion_tokens: int = 17) -> dict:
    return {
        "id": "chatcmpl-test", "object": "chat.completion", "created": 1700000000, "model": "fake-model-1",
        "choices": [{"index": 0, "finish_reason": "stop",
                     "message": {"role": "assistant", "content": content}}],
        "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                  "total_tokens": prompt_tokens + completion_tokens},
    }


def error_body(status: int) -> dict:
    return {"error": {"message": f"scripted {status}", "type": "test", "code": None}}


class FakeServer:
    """Chat-completions server that answers from a per-test queue and keeps every request."""

    def __init__(self) -> None:
        self.queue: deque[Scripted] = deque()
        self.responder: Any = None          # request json -> Scripted, used when the queue is empty
        self.requests: list[dict] = []
        self.models: list[str] | None = None    # what GET /v1/models lists (None: no such route, a 404)
        self.listings = 0
        self.stopping = threading.Event()
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.02,), daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def script(self, *items: Scripted) -> None:
        self.queue.extend(items)

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path != "/v1/models" or server.models is None:
                    return self._send(404, {"error": {"message": "not found"}})
                server.listings += 1
                self._send(200, {"object": "list", "data": [{"id": m, "object": "model", "owned_by": "me"}
                                                            for m in server.models]})

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                server.requests.append({"path": self.path, "headers": {k.lower(): v for k, v in self.headers.items()},
                                        "json": json.loads(body or b"{}")})
                if self.path != "/v1/chat/completions":
                    return self._send(404, {"error": {"message": "not found"}})
                if server.queue:
                    step = server.queue.popleft()
                elif server.responder is not None:
                    step = server.responder(server.requests[-1]["json"])
                else:
                    step = Scripted(500, {"error": {"message": "unscripted"}})
                if step.delay and server.stopping.wait(step.delay):
                    return
                self._send(step.status, step.body)

            def _send(self, status: int, body: Any) -> None:
                data = body if isinstance(body, bytes) else json.dumps(body).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except OSError:
                    pass

            def log_message(self, format: str, *args: Any) -> None:
                pass

        return Handler

    def __enter__(self) -> FakeServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopping.set()
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=5)


@pytest.fixture
def server() -> Iterator[FakeServer]:
    with FakeServer() as srv:
        yield srv


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("MEMWB_OPENAI_BASE_URL", "OPENAI_BASE_URL", "MEMWB_OPENAI_API_KEY", "OPENAI_API_KEY",
                 "MEMWB_OPENAI_MODEL", "MEMWB_OPENAI_TIMEOUT", "MEMWB_OPENAI_MAX_RETRIES", "MEMWB_OPENAI_MAX_TOKENS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    forget_models()
    # The scripted servers here answer requests in order, so no negotiation probe may come first: the
    # tests of negotiation itself (below) lift this.
    monkeypatch.setenv("MEMWB_OPENAI_STRUCTURED", "json_schema")


def backend(base_url: str, sleeps: list[float] | None = None, **kw: Any) -> OpenAIBackend:
    kw.setdefault("max_retries", 2)
    kw.setdefault("timeout", 5.0)
    return OpenAIBackend("fake-model", base_url=base_url, api_key="test-key",
                         sleep=(sleeps.append if sleeps is not None else lambda _s: None), **kw)


def test_valid_answer_is_parsed_validated_and_measured(server: FakeServer) -> None:
    server.script(Scripted(200, completion(json.dumps(GOOD))))
    call = LLM(backend(server.base_url)).call("descriptor", PAYLOAD)

    assert call.ok, call.error
    assert call.data == GOOD
    assert call.backend == "openai" and call.model == "fake-model-1" and call.params["model_from"] == "reply"
    assert (call.prompt_tokens, call.completion_tokens) == (42, 17)
    assert call.latency_ms > 0
    assert len(server.requests) == 1
    sent = server.requests[0]
    assert sent["headers"]["authorization"] == "Bearer test-key"
    body = sent["json"]
    assert body["model"] == "fake-model"
    assert body["temperature"] == 0
    assert body["messages"] == call.prompt
    assert body["response_format"] == {"type": "json_schema", "json_schema": {
        "name": "descriptor", "schema": model_schema("descriptor"), "strict": True}}
    assert body["max_tokens"] == call.params["max_tokens"] == TOKEN_CAPS["descriptor"]


def echo(request: dict) -> Scripted:
    """llama.cpp's server: any model name is answered by the model it serves, and the reply echoes the name."""
    body = completion(json.dumps(GOOD))
    body["model"] = request["model"]
    return Scripted(200, body)


@pytest.mark.parametrize(("asked", "listed", "sent", "recorded", "source"), [
    (None, ["SmolLM2-135M-Instruct-Q4_1"], "SmolLM2-135M-Instruct-Q4_1", "SmolLM2-135M-Instruct-Q4_1", "models"),
    ("gpt-4o-mini", ["SmolLM2-135M-Instruct-Q4_1"], "gpt-4o-mini", "SmolLM2-135M-Instruct-Q4_1", "models"),
    ("qwen", ["llama", "qwen"], "qwen", "qwen", "models"),
    (None, ["llama", "qwen"], DEFAULT_MODEL, DEFAULT_MODEL, "reply"),
    ("qwen", None, "qwen", "qwen", "reply"),
])
def test_the_model_recorded_is_the_one_the_server_says_answered(server: FakeServer, asked: str | None,
                                                                  listed: list[str] | None, sent: str,
                                                                  recorded: str, source: str) -> None:
    """A reply that only echoes the name asked is checked against GET /v1/models: through llama.cpp's server
    no call is recorded as the default gpt-4o-mini when SmolLM2 answered. With no model set, the endpoint's
    only model is asked for. The listing is asked once per endpoint, not per call."""
    server.models, server.responder = listed, echo
    made = OpenAIBackend(asked, base_url=server.base_url, api_key="k", max_retries=0, timeout=5.0)
    calls = [LLM(made).call("descriptor", PAYLOAD) for _ in range(2)]
    assert all(c.ok for c in calls), calls[0].error
    assert [r["json"]["model"] for r in server.requests] == [sent, sent]
    assert {(c.model, c.params["model_from"]) for c in calls} == {(recorded, source)}
    assert server.listings == (0 if listed is None else 1)


def test_a_failed_call_records_the_model_asked_and_old_records_load(server: FakeServer, tmp_path: Path) -> None:
    server.models = ["SmolLM2-135M-Instruct-Q4_1"]
    server.script(Scripted(400, error_body(400)))
    failed = LLM(OpenAIBackend(base_url=server.base_url, api_key="k", max_retries=0)).call("descriptor", PAYLOAD)
    assert failed.error_code == "HTTP_400" and failed.model == "SmolLM2-135M-Instruct-Q4_1"
    assert "model SmolLM2-135M-Instruct-Q4_1" in failed.error
    old = {k: v for k, v in failed.to_dict().items() if k not in ("finish_reason", "params")}
    old.update(model="gpt-4o-mini", response=json.dumps(GOOD), error_code=None, error=None)
    path = tmp_path / "old.jsonl"
    path.write_text(json.dumps(old) + "\n", encoding="utf-8")
    again = LLM(RecordedBackend.from_jsonl(path)).call("descriptor", PAYLOAD)
    assert again.ok and again.model == "gpt-4o-mini"          # a recording says what it recorded


def test_invalid_json_is_parse_fail(server: FakeServer) -> None:
    server.script(Scripted(200, completion("Sure! Here is the summary: Caroline...")))
    call = LLM(backend(server.base_url)).call("descriptor", PAYLOAD)
    assert call.error_code == "JSON_PARSE_FAIL"
    assert call.response.startswith("Sure!") and call.data is None


def test_json_off_schema_is_schema_fail(server: FakeServer) -> None:
    server.script(Scripted(200, completion(json.dumps({"summary": "x", "keywords": "not-a-list"}))))
    call = LLM(backend(server.base_url)).call("descriptor", PAYLOAD)
    assert call.error_code == "SCHEMA_FAIL"
    assert "keywords" in call.error


def test_deeply_nested_reply_is_parse_fail(server: FakeServer) -> None:
    server.script(Scripted(200, completion("[" * 100_000 + "]" * 100_000)))
    call = LLM(backend(server.base_url)).call("descriptor", PAYLOAD)
    assert call.error_code == "JSON_PARSE_FAIL" and "recursion" in call.error


def test_empty_content_is_empty_response(server: FakeServer) -> None:
    server.script(Scripted(200, completion(None)))
    call = LLM(backend(server.base_url)).call("descriptor", PAYLOAD)
    assert call.error_code == "EMPTY_RESPONSE"


def test_non_json_body_is_bad_response(server: FakeServer) -> None:
    server.script(Scripted(200, b"<html>proxy login</html>"))
    call = LLM(backend(server.base_url)).call("descriptor", PAYLOAD)
    assert call.error_code == "BAD_RESPONSE"
    assert len(server.requests) == 1


def test_rate_limit_is_retried(server: FakeServer) -> None:
    sleeps: list[float] = []
    server.script(Scripted(429, error_body(429)), Scripted(200, completion(json.dumps(GOOD))))
    call = LLM(backend(server.base_url, sleeps)).call("descriptor", PAYLOAD)
    assert call.ok, call.error
    assert len(server.requests) == 2
    assert sleeps == [pytest.approx(0.2)]


def test_server_errors_exhaust_retries(server: FakeServer) -> None:
    sleeps: list[float] = []
    server.script(*[Scripted(500, error_body(500))] * 3)
    call = LLM(backend(server.base_url, sleeps, max_retries=2)).call("descriptor", PAYLOAD)
    assert call.error_code == "HTTP_500"
    assert len(server.requests) == 3
    assert sleeps == [pytest.approx(0.2), pytest.approx(0.4)]
    assert server.base_url in call.error and "3 attempts" in call.error


def test_client_error_is_not_retried(server: FakeServer) -> None:
    server.script(Scripted(400, error_body(400)), Scripted(200, completion(json.dumps(GOOD))))
    call = LLM(backend(server.base_url)).call("descriptor", PAYLOAD)
    assert call.error_code == "HTTP_400"
    assert len(server.requests) == 1
    assert "1 attempt" in call.error


def test_slow_server_times_out(server: FakeServer) -> None:
    server.script(*[Scripted(200, completion(json.dumps(GOOD)), delay=3.0)] * 2)
    call = LLM(backend(server.base_url, timeout=0.5, max_retries=1)).call("descriptor", PAYLOAD)
    assert call.error_code == "TIMEOUT"
    assert len(server.requests) == 2
    assert call.latency_ms < 2900


def test_connection_refused_is_network() -> None:
    sleeps: list[float] = []
    base_url = f"http://127.0.0.1:{free_port()}/v1"
    call = LLM(backend(base_url, sleeps, max_retries=1)).call("descriptor", PAYLOAD)
    assert call.error_code == "NETWORK"
    assert base_url in call.error and "2 attempts" in call.error
    assert len(sleeps) == 1


def test_recorded_calls_replay_without_server(tmp_path: Path) -> None:
    other = {"text": "Melanie: I painted a sunrise last week."}
    records: list[LLMCall] = []
    with FakeServer() as srv:
        srv.script(Scripted(200, completion(json.dumps(GOOD))),
                   Scripted(200, completion("not json")),
                   Scripted(400, error_body(400)))
        live = LLM(backend(srv.base_url), recorder=records.append)
        originals = [live.call("descriptor", PAYLOAD), live.call("descriptor", other),
                     live.call("merge_plan", {"sources": ["a", "b"]})]
    assert [c.error_code for c in originals] == [None, "JSON_PARSE_FAIL", "HTTP_400"]

    path = tmp_path / "calls" / "run.jsonl"
    assert dump_calls_jsonl(records, path) == 3
    for source in (records, [r.to_dict() for r in records], load_calls_jsonl(path)):
        replay = LLM(RecordedBackend(source))
        again = [replay.call("descriptor", PAYLOAD), replay.call("descriptor", other),
                 replay.call("merge_plan", {"sources": ["a", "b"]})]
        for before, after in zip(originals, again):
            assert after.backend == "recorded"
            assert (after.key, after.data, after.response, after.error_code, after.error,
                    after.prompt_tokens, after.completion_tokens) == (
                before.key, before.data, before.response, before.error_code, before.error,
                before.prompt_tokens, before.completion_tokens)
        assert [a.model for a in again[:2]] == [b.model for b in originals[:2]] == ["fake-model-1"] * 2

    with pytest.raises(NotRecorded, match=r"no recorded call for role 'descriptor'; prompt: .*never asked"):
        LLM(RecordedBackend(records)).call("descriptor", {"text": "never asked"})
    missing = LLM(RecordedBackend(records, strict=False)).call("descriptor", {"text": "never asked"})
    assert missing.error_code == "NOT_RECORDED"
    assert "descriptor" in missing.error and "never asked" in missing.error


def test_repeated_calls_replay_in_their_order_and_one_more_is_loud() -> None:
    first = LLM(RecordedBackend([], strict=False)).call("descriptor", PAYLOAD)
    older = LLMCall(**{**first.to_dict(), "response": json.dumps({"summary": "old", "keywords": []}),
                       "error_code": None, "error": None})
    newer = LLMCall(**{**older.to_dict(), "response": json.dumps(GOOD)})
    replay = LLM(RecordedBackend([older, newer]))
    assert [replay.call("descriptor", PAYLOAD).data["summary"] for _ in range(2)] == ["old", GOOD["summary"]]
    with pytest.raises(NotRecorded, match=r"recorded 2 times and is asked once more"):
        replay.call("descriptor", PAYLOAD)


def test_settings_come_from_environment(monkeypatch: pytest.MonkeyPatch, server: FakeServer) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("MEMWB_OPENAI_BASE_URL", server.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", "generic-key")
    monkeypatch.setenv("MEMWB_OPENAI_API_KEY", "memwb-key")
    monkeypatch.setenv("MEMWB_OPENAI_MODEL", "env-model")
    made = make_backend("openai", sleep=lambda _s: None)
    assert isinstance(made, OpenAIBackend)
    assert (made.model, made.timeout, made.max_retries) == ("env-model", 60.0, 3)
    server.script(Scripted(200, completion(json.dumps(GOOD))))
    assert LLM(made).call("descriptor", PAYLOAD).ok
    sent = server.requests[0]
    assert sent["headers"]["authorization"] == "Bearer memwb-key"
    assert sent["json"]["model"] == "env-model"


def test_missing_api_key_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="MEMWB_OPENAI_API_KEY"):
        OpenAIBackend(base_url="http://127.0.0.1:9/v1")


def test_registry(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"known backends: \['offline', 'openai', 'recorded'"):
        make_backend("no-such-backend")
    path = tmp_path / "empty.jsonl"
    dump_calls_jsonl([], path)
    assert isinstance(make_backend("recorded", path=path), RecordedBackend)
    assert isinstance(make_backend("recorded", calls=[]), RecordedBackend)
    with pytest.raises(ValueError, match="already registered"):
        register_backend("recorded", lambda **_: RecordedBackend([]))
    try:
        register_backend("echo-test", lambda **kw: RecordedBackend([], **kw))
        assert make_backend("echo-test", model="m").model == "m"
    finally:
        BACKENDS.pop("echo-test", None)


def test_import_does_not_need_openai() -> None:
    code = ("import sys; import engine.llm as m; m.make_backend('recorded', calls=[]); "
            "assert 'openai' not in sys.modules, 'openai imported eagerly'")
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr


def _payload_of(request: dict) -> dict:
    return json.loads(request["messages"][-1]["content"].split("INPUT:\n", 1)[1])


def _memloom_model(request: dict) -> Scripted:
    """A model for MemLoom's roles: rewrite nothing; merge nothing; relate every target to its first candidate
    (citing a sentence of each), plus one relation of a type outside the closed set."""
    role = request["response_format"]["json_schema"]["name"]
    data = _payload_of(request)
    if role == "router":
        answer = {"rewritten": data["utterance"], "intent": "inform", "topics": [], "references": [], "dates": []}
    elif role == "event_merge":
        answer = {"merge": False, "confidence": 0.1, "summary": "", "keywords": [], "rationale": "different"}
    elif role == "relation_synthesis":
        target, relations = data["target"], []
        for k, cand in enumerate(data["candidates"][:2]):
            relations.append({"type": "CAUSAL_FOLLOW" if k == 0 else "CAUSES", "source_id": cand["id"],
                              "target_id": target["id"], "confidence": 0.9,
                              "evidence": [cand["sentences"][0]["id"], target["sentences"][0]["id"]],
                              "rationale": "the model says so"})
        answer = {"relations": relations}
    else:
        return Scripted(400, error_body(400))
    return Scripted(200, completion(json.dumps(answer)))


def test_memloom_steward_on_the_openai_backend(monkeypatch: pytest.MonkeyPatch, server: FakeServer,
                                               tmp_path: Path) -> None:
    """Router and relation synthesis go through the LLM role with its JSON schema; every call is recorded;
    the steward's contract rejects a type outside the closed set with its reason code."""
    from engine.core.oplog import OpKind
    from engine.loaders import load_conversation
    from engine.runtime.replay import Schedule, replay
    from engine.session import open_session

    monkeypatch.setenv("MEMWB_OPENAI_BASE_URL", server.base_url)
    monkeypatch.setenv("MEMWB_OPENAI_API_KEY", "test-key")
    server.responder = _memloom_model
    conv = load_conversation(REPO / "datasets" / "demo" / "demo.jsonl")
    conv.turns = conv.turns[:30]
    eng = open_session(tmp_path / "ml.sqlite", engine="memloom", llm="openai")
    replay(eng, conv, Schedule.parse("manual"))
    proposals = eng.propose()
    roles = [r["json"]["response_format"]["json_schema"]["name"] for r in server.requests]
    assert roles.count("router") == 30 and "relation_synthesis" in roles
    synth = [r["json"] for r in server.requests
             if r["json"]["response_format"]["json_schema"]["name"] == "relation_synthesis"]
    assert all(r["response_format"]["json_schema"]["strict"] for r in synth)
    causal = [p for p in proposals if p.plan and p.plan.get("type") == "CAUSAL_FOLLOW"]
    closed = [p for p in proposals if p.plan and p.plan.get("type") == "CAUSES"]
    assert causal and all(p.confidence == 0.9 and p.status == "pending" for p in causal)
    assert closed and {p.reason_code for p in closed} == {"TYPE_CLOSURE_FAIL"}
    eng.apply(None, "gate", eng.open_run())
    edges = [e for e in eng.state.edges.values() if e.type == "CAUSAL_FOLLOW"]
    assert sorted(e.key[:2] for e in edges) == sorted(tuple(p.targets) for p in causal)
    assert all(len(e.evidence) == 2 and e.confidence == 0.9 for e in edges)
    calls = [op.payload for op in eng.store.ops(kinds=[OpKind.LLM_CALL])]
    assert len(calls) == len(server.requests)
    assert {c["role"] for c in calls} >= {"router", "relation_synthesis"} and all(c["backend"] == "openai"
                                                                              for c in calls)


# --- caps on what a model may write, credentials, keys and failures at the command line -----------

SECRET_USER, SECRET_PASSWORD = "memwb-user", "s3cret-pass"


def _with_credentials(base_url: str) -> str:
    return base_url.replace("http://", f"http://{SECRET_USER}:{SECRET_PASSWORD}@")


def _segment(text: str) -> dict:
    return {"segment_text": text, "segment_summary": "s", "segment_keywords": ["k"], "topic_label": "t"}


def _split(*texts: str) -> dict:
    return {"do_split": True, "segments": [_segment(t) for t in texts], "split_rationale": "two topics"}


def test_output_caps_give_their_own_reason_codes(server: FakeServer) -> None:
    """Summary length, keyword count and length, Split segment count and length, and repeated segments are
    refused after the schema passes, each with a reason code that proposals keep."""
    from engine.core.proposal import call_reason_code
    from engine.llm.schemas import KEYWORD_CHARS, KEYWORDS, SEGMENT_CHARS, SEGMENTS, SUMMARY_CHARS

    cases = [
        ("descriptor", {**GOOD, "summary": "s" * SUMMARY_CHARS}, None, None),
        ("descriptor", {**GOOD, "summary": "s" * (SUMMARY_CHARS + 1)}, "OUTPUT_TOO_LONG",
         f"summary has {SUMMARY_CHARS + 1} characters, more than the cap of {SUMMARY_CHARS}"),
        ("descriptor", {**GOOD, "keywords": [f"k{i}" for i in range(KEYWORDS + 1)]}, "OUTPUT_TOO_LONG",
         f"keywords has {KEYWORDS + 1} items, more than the cap of {KEYWORDS}"),
        ("descriptor", {**GOOD, "keywords": ["ok", "k" * (KEYWORD_CHARS + 1)]}, "OUTPUT_TOO_LONG",
         f"keywords[1] has {KEYWORD_CHARS + 1} characters"),
        ("split_plan", _split("Ana moved to Lyon.", "Ben got a dog."), None, None),
        ("split_plan", _split(*[f"part {i}" for i in range(SEGMENTS + 1)]), "OUTPUT_TOO_LONG",
         f"segments has {SEGMENTS + 1} items, more than the cap of {SEGMENTS}"),
        ("split_plan", _split("short", "x" * (SEGMENT_CHARS + 1)), "OUTPUT_TOO_LONG",
         "segments[1].segment_text has"),
        ("split_plan", {**_split("a", "b"), "segments": [_segment("a"), {**_segment("b"), "segment_summary": "s" * (
            SUMMARY_CHARS + 1)}]}, "OUTPUT_TOO_LONG", "segments[1].segment_summary has"),
        ("split_plan", _split("Ana moved to Lyon.", "Ben got a dog.", "Ana moved to Lyon. "), "DUPLICATE_SEGMENTS",
         "segments[0].segment_text and segments[2].segment_text repeat one text"),
        ("merge_plan", {"summary": "s", "keywords": ["k"] * (KEYWORDS + 1), "salient_points": []},
         "OUTPUT_TOO_LONG", "keywords has"),
        ("update_plan", {"updated_summary": "s" * (SUMMARY_CHARS + 1), "updated_keywords": [], "deprecations": [],
                         "alignment_note": ""}, "OUTPUT_TOO_LONG", "updated_summary has"),
    ]
    llm = LLM(backend(server.base_url))
    for role, answer, code, message in cases:
        server.script(Scripted(200, completion(json.dumps(answer))))
        call = llm.call(role, {"text": "x"})
        assert call.error_code == code, (role, call.error)
        if code is None:
            assert call.data == answer
        else:
            assert call.data is None and message in call.error and call_reason_code(code) == code


def test_caps_name_fields_that_exist_in_their_role_schema() -> None:
    from engine.llm.schemas import CAPS

    def has(schema: dict, path: list[str]) -> bool:
        if not path:
            return True
        if schema.get("type") == "array":
            return has(schema["items"], path)
        return path[0] in schema.get("properties", {}) and has(schema["properties"][path[0]], path[1:])

    assert set(CAPS) <= set(SCHEMAS)
    for role, caps in CAPS.items():
        for cap in caps:
            assert has(SCHEMAS[role], cap.field.split(".")), (role, cap.field)


def _allmem_model(request: dict) -> Scripted:
    """A model for All-Mem's roles: short descriptors, a confident Split of every target, and a Split plan
    that gives the same segment twice."""
    role = request["response_format"]["json_schema"]["name"]
    data = _payload_of(request)
    if role == "descriptor":
        answer = {"summary": data["text"][:120], "keywords": data["text"].split()[:3]}
    elif role == "diagnosis":
        answer = {"split_tasks": [{"node_id": data["target"]["id"], "reason": "two topics", "confidence": 0.95}],
                  "merge_tasks": [], "update_tasks": []}
    elif role == "split_plan":
        answer = _split(data["original_text"], data["original_text"])
    else:
        return Scripted(400, error_body(400))
    return Scripted(200, completion(json.dumps(answer)))


def _demo_turns(path: Path, n: int) -> Path:
    lines = (REPO / "datasets" / "demo" / "demo.jsonl").read_text(encoding="utf-8").splitlines()[:n]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_duplicate_split_segments_fail_the_proposal_and_change_nothing(monkeypatch: pytest.MonkeyPatch,
                                                                       server: FakeServer, tmp_path: Path) -> None:
    from engine.loaders import load_conversation
    from engine.runtime.replay import Schedule, replay
    from engine.session import open_session

    monkeypatch.setenv("MEMWB_OPENAI_BASE_URL", server.base_url)
    monkeypatch.setenv("MEMWB_OPENAI_API_KEY", "test-key")
    server.responder = _allmem_model
    eng = open_session(tmp_path / "m.sqlite", llm="openai")
    replay(eng, load_conversation(_demo_turns(tmp_path / "c.jsonl", 4)), Schedule.parse("manual"))
    before = eng.export()
    report = eng.consolidate()
    splits = [p for p in report.proposals if p.op == "split"]
    assert len(splits) == 4
    assert {(p.status, p.reason_code) for p in splits} == {("failed", "DUPLICATE_SEGMENTS")}
    assert all("repeat one text" in p.note for p in splits)
    assert "DUPLICATE_SEGMENTS" in {r.code for r in eng.schema.reason_codes}
    assert eng.export() == before


def _store_bytes(db: Path) -> bytes:
    """Every byte SQLite keeps for the database (the file, its WAL and shared memory)."""
    return b"".join(p.read_bytes() for p in sorted(db.parent.glob(db.name + "*")))


def test_credentials_in_the_base_url_never_reach_the_store(monkeypatch: pytest.MonkeyPatch, server: FakeServer,
                                                           tmp_path: Path) -> None:
    """A base URL with user:password reaches the server, but call records, errors and proposals keep only
    ``http://***@host``; the database file holds neither the user nor the password."""
    from engine.core.oplog import OpKind
    from engine.loaders import load_conversation
    from engine.runtime.replay import Schedule, replay
    from engine.session import open_session

    secret_url = _with_credentials(server.base_url)
    monkeypatch.setenv("MEMWB_OPENAI_BASE_URL", secret_url)
    monkeypatch.setenv("MEMWB_OPENAI_API_KEY", "test-key")
    monkeypatch.setenv("MEMWB_OPENAI_MAX_RETRIES", "0")
    answers = iter(range(1000))
    server.responder = lambda req: (_allmem_model(req) if next(answers) % 2 else Scripted(400, error_body(400)))
    db = tmp_path / "m.sqlite"
    eng = open_session(db, llm="openai")
    replay(eng, load_conversation(_demo_turns(tmp_path / "c.jsonl", 6)), Schedule.parse("manual"))
    eng.consolidate()
    calls = [op.payload for op in eng.store.ops(kinds=[OpKind.LLM_CALL])]
    failed = [c for c in calls if c["error_code"] == "HTTP_400"]
    assert len(calls) == len(server.requests) and failed and len(failed) < len(calls)
    redacted = server.base_url.replace("http://", "http://***@")
    assert all(c["error"].startswith(redacted) for c in failed)
    assert any(p.reason.startswith(redacted) for p in eng.state.proposals.values())
    stored = _store_bytes(db)
    assert SECRET_PASSWORD.encode() not in stored and SECRET_USER.encode() not in stored
    assert redacted.encode() in stored

    dead = _with_credentials(f"http://127.0.0.1:{free_port()}/v1")
    call = LLM(backend(dead, max_retries=0)).call("descriptor", PAYLOAD)
    assert call.error_code == "NETWORK" and SECRET_PASSWORD not in call.error and "http://***@127.0.0.1" in call.error


def _cli_env(server: FakeServer, **extra: str) -> dict[str, str]:
    return {**os.environ, "MEMWB_OPENAI_BASE_URL": server.base_url, "MEMWB_OPENAI_API_KEY": "test-key", **extra}


def test_read_only_commands_need_no_api_key(server: FakeServer, tmp_path: Path) -> None:
    """A memory made with --llm openai opens for export, diagnostics, retrieval and schema with no key and no
    endpoint in the environment, and none of them calls the model; consolidating says the key is needed."""
    from tests.test_cli import memwb

    server.responder = _allmem_model
    db = tmp_path / "m.sqlite"
    memwb("replay", _demo_turns(tmp_path / "c.jsonl", 8), "--db", db, "--llm", "openai", "--consolidate", "manual",
          "--quiet", env=_cli_env(server))
    asked = len(server.requests)
    assert asked == 8 and "MEMWB_OPENAI_API_KEY" not in os.environ and "OPENAI_API_KEY" not in os.environ
    assert len(json.loads(memwb("export", "--db", db, "--json").stdout)["units"]) == 8
    assert "visible_ratio" in json.loads(memwb("diagnostics", "--db", db).stdout)
    found = json.loads(memwb("retrieve", "--db", db, "--query", "Who is Pepper?", "--json").stdout)
    assert "D1:2" in found["source_ids"]
    assert json.loads(memwb("schema", "--engine", "allmem").stdout)["name"] == "allmem"
    assert len(server.requests) == asked
    proc = memwb("consolidate", "--db", db, check=False)
    assert proc.returncode == 2 and "MEMWB_OPENAI_API_KEY" in proc.stderr


def test_a_run_whose_every_llm_call_fails_exits_non_zero_with_counts(server: FakeServer, tmp_path: Path) -> None:
    """A wrong key fails every call closed; replay and consolidate say so and exit 1, what was ingested stays,
    and no credential of the URL reaches the terminal. A run where only some calls fail warns and exits 0."""
    from tests.test_cli import memwb

    server.responder = lambda req: Scripted(401, error_body(401))
    env = _cli_env(server, MEMWB_OPENAI_BASE_URL=_with_credentials(server.base_url), MEMWB_OPENAI_MAX_RETRIES="0")
    db = tmp_path / "m.sqlite"
    conv = _demo_turns(tmp_path / "c.jsonl", 6)
    proc = memwb("replay", conv, "--db", db, "--llm", "openai", "--consolidate", "manual", "--quiet", env=env,
                 check=False)
    assert proc.returncode == 1 and proc.stdout.startswith("turns=6 ")
    assert "memwb replay: error: every LLM call failed (6 of 6): HTTP_401=6" in proc.stderr
    assert "http://***@127.0.0.1" in proc.stderr and SECRET_PASSWORD not in proc.stderr + proc.stdout
    proc = memwb("consolidate", "--db", db, env=env, check=False)
    assert proc.returncode == 1 and "every LLM call failed (6 of 6): HTTP_401=6" in proc.stderr

    answers = iter(range(1000))
    server.responder = lambda req: (Scripted(429, error_body(429)) if next(answers) == 2
                                    else Scripted(200, completion(json.dumps(GOOD))))
    proc = memwb("replay", conv, "--db", tmp_path / "ok.sqlite", "--llm", "openai", "--consolidate", "manual",
                 "--quiet", env=env, check=False)
    assert proc.returncode == 0, proc.stderr
    assert "memwb replay: warning: 1 of 6 LLM calls failed: HTTP_429=1" in proc.stderr

"""One interface for every LLM backend, and the client engines call.

Engines never talk to a backend directly: they call `LLM.call(role, payload)`,
which renders the prompt, asks the backend for text, parses and validates it
against the role's schema, and hands the complete call record to a recorder.
A backend only turns a request into text, so the offline rules, a real model
and a replay of recorded calls all go through the same fail-closed checks.
"""
from __future__ import annotations

import hashlib
import json
import time
from abc import ABC, abstractmethod
from dataclasses import asdict, dataclass, field
from typing import Callable

import jsonschema

from engine.core.errors import WorkbenchError
from engine.core.proposal import LLMReason
from engine.core.redact import redact
from engine.llm.prompts import render
from engine.llm.schemas import CAPS, SCHEMAS, Cap


@dataclass(frozen=True)
class LLMRequest:
    role: str
    payload: dict
    messages: list[dict]
    schema: dict

    @property
    def key(self) -> str:
        """Content key of the request: the same role and prompt give the same key."""
        blob = json.dumps({"role": self.role, "messages": self.messages}, sort_keys=True, ensure_ascii=False)
        return hashlib.sha256(blob.encode("utf-8")).hexdigest()


@dataclass
class BackendReply:
    text: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    model: str = ""
    params: dict = field(default_factory=dict)     # what the backend asked with (structured-output mode, limits)
    finish_reason: str | None = None               # the server's: "stop", or "length" for a reply cut short


class BackendError(WorkbenchError):
    """A backend could not produce text; `code` becomes the call's error code."""

    def __init__(self, code: str, message: str, params: dict | None = None):
        super().__init__(message)
        self.code = code
        self.params = params or {}


@dataclass
class LLMCall:
    """The record of one call: everything needed to audit or replay it."""

    role: str
    backend: str
    model: str
    key: str
    prompt: list[dict]
    response: str | None
    data: dict | None
    error_code: str | None = None
    error: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_ms: float = 0.0
    params: dict = field(default_factory=dict)
    finish_reason: str | None = None

    @property
    def ok(self) -> bool:
        return self.error_code is None

    def to_dict(self) -> dict:
        return asdict(self)


class LLMBackend(ABC):
    name: str = "abstract"
    model: str = ""

    @abstractmethod
    def generate(self, request: LLMRequest) -> BackendReply:
        """Return the model's raw text for `request`, or raise BackendError."""

    def prefetch(self, role: str, payloads: list[dict]) -> None:
        """Get ready, in one batch, to answer `role` on each of `payloads` before the calls come one by one (the
        offline rules embed what they will score). Only an optimisation; nothing to do for a model."""

    def foresee(self, role: str, payload: dict) -> dict | None:
        """The reply to `role` on `payload` when it is known without a call (the offline rules compute it, at a
        call's cost but unlogged), so an engine can embed ahead what the reply will hold; None when only a call
        can tell."""
        return None


class DeferredBackend(LLMBackend):
    """A backend built on its first request, so a memory made with a hosted model can be opened,
    exported and searched without its API key: only a call to the model needs one."""

    def __init__(self, name: str, build: Callable[[], LLMBackend]):
        self.name = name
        self._build = build
        self._backend: LLMBackend | None = None

    @property
    def model(self) -> str:
        return self._backend.model if self._backend is not None else ""

    def generate(self, request: LLMRequest) -> BackendReply:
        if self._backend is None:
            self._backend = self._build()
        return self._backend.generate(request)

    def prefetch(self, role: str, payloads: list[dict]) -> None:
        """The built backend's; before the first call there is none to ask, and building one needs its key."""
        if self._backend is not None:
            self._backend.prefetch(role, payloads)

    def foresee(self, role: str, payload: dict) -> dict | None:
        return self._backend.foresee(role, payload) if self._backend is not None else None


@dataclass
class LLM:
    backend: LLMBackend
    recorder: Callable[[LLMCall], None] | None = None
    calls: list[LLMCall] = field(default_factory=list)
    keep_calls: bool = False

    def prefetch(self, role: str, payloads: list[dict]) -> None:
        """Let the backend get ready for calls of `role` on `payloads` (`LLMBackend.prefetch`)."""
        self.backend.prefetch(_known(role), payloads)

    def foresee(self, role: str, payload: dict) -> dict | None:
        """The reply to `role` on `payload` if the backend knows it without a call (`LLMBackend.foresee`)."""
        return self.backend.foresee(_known(role), payload)

    def call(self, role: str, payload: dict) -> LLMCall:
        _known(role)
        request = LLMRequest(role=role, payload=payload, messages=render(role, payload), schema=SCHEMAS[role])
        started = time.perf_counter()
        record = LLMCall(role=role, backend=self.backend.name, model="", key=request.key,
                         prompt=request.messages, response=None, data=None)
        try:
            reply = self.backend.generate(request)
        except BackendError as exc:
            record.error_code, record.error = exc.code, redact(str(exc))
            record.params = dict(exc.params)
        else:
            record.response = reply.text
            record.prompt_tokens, record.completion_tokens = reply.prompt_tokens, reply.completion_tokens
            record.model = reply.model           # the model that answered, as the backend learnt it
            record.params, record.finish_reason = dict(reply.params), reply.finish_reason
            record.data, record.error_code, error = parse_and_validate(reply.text, request.schema,
                                                                       CAPS.get(role, ()))
            if error and reply.finish_reason == "length":
                error += (f"; the reply was cut at the output limit"
                          f" ({reply.params.get('max_tokens', 'the server default')} tokens)")
            record.error = redact(error) if error else error       # it may quote a reply that echoes a key
        record.model = record.model or self.backend.model       # read after the call: a backend (a deferred
                                                                # one, the openai one) knows its model then
        record.latency_ms = (time.perf_counter() - started) * 1000.0
        if self.recorder is not None:
            self.recorder(record)
        if self.keep_calls:
            self.calls.append(record)
        return record


def _known(role: str) -> str:
    if role not in SCHEMAS:
        raise ValueError(f"unknown LLM role {role!r}; known roles: {sorted(SCHEMAS)}")
    return role


_VALIDATORS: dict[str, jsonschema.protocols.Validator] = {}


def _validator(schema: dict) -> jsonschema.protocols.Validator:
    """Build each schema's validator once: constructing one checks the metaschema, which is slow."""
    key = json.dumps(schema, sort_keys=True)
    if key not in _VALIDATORS:
        cls = jsonschema.validators.validator_for(schema)
        cls.check_schema(schema)
        _VALIDATORS[key] = cls(schema)
    return _VALIDATORS[key]


def parse_and_validate(text: str, schema: dict, caps: tuple[Cap, ...] = ()
                       ) -> tuple[dict | None, str | None, str | None]:
    """Parse JSON text, check it against `schema`, then against the role's `caps`: (data, error_code, message)."""
    try:
        data = json.loads(text)
    except (TypeError, ValueError, RecursionError) as exc:
        return None, LLMReason.JSON_PARSE_FAIL, f"response is not JSON: {exc}"
    error = jsonschema.exceptions.best_match(_validator(schema).iter_errors(data))
    if error is not None:
        where = "/".join(str(p) for p in error.absolute_path) or "<root>"
        return None, LLMReason.SCHEMA_FAIL, f"response fails the schema at {where}: {error.message}"
    for cap in caps:
        violation = _violation(data, cap)
        if violation is not None:
            return None, *violation
    return data, None, None


def _at(data: object, path: str) -> list[tuple[str, object]]:
    """(location, value) of every value at a dotted path, descending into each item of a list on the way."""
    found: list[tuple[str, object]] = [("", data)]
    for part in path.split("."):
        step: list[tuple[str, object]] = []
        for where, value in found:
            items = [(f"{where}[{i}]", item) for i, item in enumerate(value)] if isinstance(value, list) \
                else [(where, value)]
            step += [(f"{at}.{part}" if at else part, item[part]) for at, item in items
                     if isinstance(item, dict) and part in item]
        found = step
    return found


def _violation(data: object, cap: Cap) -> tuple[str, str] | None:
    """(reason code, message) for the first value at `cap.field` that breaks the cap, else None."""
    texts: list[tuple[str, str]] = []
    for where, value in _at(data, cap.field):
        if isinstance(value, list):
            if cap.max_items is not None and len(value) > cap.max_items:
                return LLMReason.OUTPUT_TOO_LONG, (f"response field {where} has {len(value)} items, more than "
                                                   f"the cap of {cap.max_items}")
            texts += [(f"{where}[{i}]", item) for i, item in enumerate(value) if isinstance(item, str)]
        elif isinstance(value, str):
            texts.append((where, value))
    for where, text in texts:
        if cap.max_chars is not None and len(text) > cap.max_chars:
            return LLMReason.OUTPUT_TOO_LONG, (f"response field {where} has {len(text)} characters, more than "
                                               f"the cap of {cap.max_chars}")
    if cap.distinct:
        first: dict[str, str] = {}
        for where, text in texts:
            earlier = first.setdefault(text.strip(), where)
            if earlier != where:
                return LLMReason.DUPLICATE_SEGMENTS, f"response fields {earlier} and {where} repeat one text"
    return None


def estimate_tokens(text: str) -> int:
    """Rough token count (words x 4/3) for backends that report no usage."""
    return int(len(text.split()) * 4 / 3) + 1


def estimate_prompt_tokens(messages: list[dict]) -> int:
    """`estimate_tokens` of a chat prompt, message by message."""
    return sum(estimate_tokens(str(m.get("content", ""))) for m in messages)

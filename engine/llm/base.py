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

from engine.llm.prompts import render
from engine.llm.schemas import SCHEMAS


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


class BackendError(Exception):
    """A backend could not produce text; `code` becomes the call's error code."""

    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code


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


@dataclass
class LLM:
    backend: LLMBackend
    recorder: Callable[[LLMCall], None] | None = None
    calls: list[LLMCall] = field(default_factory=list)
    keep_calls: bool = False

    def call(self, role: str, payload: dict) -> LLMCall:
        if role not in SCHEMAS:
            raise ValueError(f"unknown LLM role {role!r}; known roles: {sorted(SCHEMAS)}")
        request = LLMRequest(role=role, payload=payload, messages=render(role, payload), schema=SCHEMAS[role])
        started = time.perf_counter()
        record = LLMCall(role=role, backend=self.backend.name, model=self.backend.model, key=request.key,
                         prompt=request.messages, response=None, data=None)
        try:
            reply = self.backend.generate(request)
        except BackendError as exc:
            record.error_code, record.error = exc.code, str(exc)
        else:
            record.response = reply.text
            record.prompt_tokens, record.completion_tokens = reply.prompt_tokens, reply.completion_tokens
            record.model = reply.model or record.model
            record.data, record.error_code, record.error = parse_and_validate(reply.text, request.schema)
        record.latency_ms = (time.perf_counter() - started) * 1000.0
        if self.recorder is not None:
            self.recorder(record)
        if self.keep_calls:
            self.calls.append(record)
        return record


_VALIDATORS: dict[str, jsonschema.protocols.Validator] = {}


def _validator(schema: dict) -> jsonschema.protocols.Validator:
    """Build each schema's validator once: constructing one checks the metaschema, which is slow."""
    key = json.dumps(schema, sort_keys=True)
    if key not in _VALIDATORS:
        cls = jsonschema.validators.validator_for(schema)
        cls.check_schema(schema)
        _VALIDATORS[key] = cls(schema)
    return _VALIDATORS[key]


def parse_and_validate(text: str, schema: dict) -> tuple[dict | None, str | None, str | None]:
    """Parse JSON text and check it against `schema`: (data, error_code, message)."""
    try:
        data = json.loads(text)
    except (TypeError, ValueError) as exc:
        return None, "JSON_PARSE_FAIL", f"response is not JSON: {exc}"
    error = jsonschema.exceptions.best_match(_validator(schema).iter_errors(data))
    if error is not None:
        where = "/".join(str(p) for p in error.absolute_path) or "<root>"
        return None, "SCHEMA_FAIL", f"response fails the schema at {where}: {error.message}"
    return data, None, None


def estimate_tokens(text: str) -> int:
    """Rough token count (words x 4/3) for backends that report no usage."""
    return int(len(text.split()) * 4 / 3) + 1

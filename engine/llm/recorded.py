"""Replay of recorded LLM calls, so a run can be reproduced without any model.

Lookup is by the request's content key (role + rendered prompt), so a replay
only answers prompts that were really sent; a changed prompt or payload is a
NOT_RECORDED failure rather than a silently wrong answer.
"""
from __future__ import annotations

import json
from dataclasses import fields
from pathlib import Path
from typing import Iterable

from engine.llm.base import BackendError, BackendReply, LLMBackend, LLMCall, LLMRequest

_CALL_FIELDS = frozenset(f.name for f in fields(LLMCall))


def as_call(record: LLMCall | dict) -> LLMCall:
    """An LLMCall from a record or its `to_dict()`; unknown keys are ignored for forward compatibility."""
    if isinstance(record, LLMCall):
        return record
    call = LLMCall(**{k: v for k, v in record.items() if k in _CALL_FIELDS})
    if not call.key:
        call.key = LLMRequest(role=call.role, payload={}, messages=call.prompt, schema={}).key
    return call


class RecordedBackend(LLMBackend):
    """Answers each request with the last recorded reply for its key.

    A recorded backend failure (no response, an error code) is replayed as the
    same BackendError, so failed calls reproduce too.
    """

    name = "recorded"

    def __init__(self, calls: Iterable[LLMCall | dict], model: str = "recorded"):
        self.model = model
        self._by_key: dict[str, LLMCall] = {}
        for record in calls:
            call = as_call(record)
            self._by_key[call.key] = call

    @classmethod
    def from_jsonl(cls, path: str | Path, model: str = "recorded") -> RecordedBackend:
        return cls(load_calls_jsonl(path), model=model)

    def __len__(self) -> int:
        return len(self._by_key)

    def __contains__(self, key: object) -> bool:
        return key in self._by_key

    def generate(self, request: LLMRequest) -> BackendReply:
        call = self._by_key.get(request.key)
        if call is None:
            raise BackendError("NOT_RECORDED",
                               f"no recorded call for role {request.role!r} with key {request.key[:12]}…")
        if call.response is None:
            raise BackendError(call.error_code or "NOT_RECORDED",
                               call.error or f"recorded call for role {request.role!r} has no response")
        return BackendReply(text=call.response, prompt_tokens=call.prompt_tokens,
                            completion_tokens=call.completion_tokens, model=call.model)


def load_calls_jsonl(path: str | Path) -> list[LLMCall]:
    """Read one LLMCall dict per line; blank lines are skipped, bad lines fail with their number."""
    calls: list[LLMCall] = []
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                calls.append(as_call(json.loads(line)))
            except (ValueError, TypeError, AttributeError) as exc:
                raise ValueError(f"{path}:{number}: not an LLMCall record: {exc}") from exc
    return calls


def dump_calls_jsonl(calls: Iterable[LLMCall | dict], path: str | Path) -> int:
    """Write calls one JSON object per line (overwriting `path`); returns how many were written."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    count = 0
    with open(target, "w", encoding="utf-8") as handle:
        for record in calls:
            handle.write(json.dumps(as_call(record).to_dict(), ensure_ascii=False, sort_keys=True) + "\n")
            count += 1
    return count

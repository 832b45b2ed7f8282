"""Replay of recorded LLM calls, so a run can be reproduced without any model.

Lookup is by the request's content key (role + rendered prompt), so a replay
only answers prompts that were really sent, in the order they were sent; a
changed prompt or payload stops the replay (`NotRecorded`) rather than giving
a silently wrong answer.
"""
from __future__ import annotations

import json
from collections import deque
from dataclasses import fields
from pathlib import Path
from typing import Iterable

from engine.core.errors import WorkbenchError
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


class NotRecorded(WorkbenchError):
    """A replay asked for a call the recording does not hold: the run being replayed is not the recorded one.

    Not a BackendError on purpose: a replay must stop here rather than go on as a run of failed calls."""


class RecordedBackend(LLMBackend):
    """Answers each request with the recorded replies for its key, in the order they were recorded.

    A prompt sent twice in the recorded run (the same diagnosis in two runs, say) is answered by its
    first reply, then its second. A request with no reply left raises `NotRecorded` naming the role and
    the prompt; with `strict=False` it fails closed as a NOT_RECORDED call instead. A recorded failure
    (no response, an error code) is replayed as the same BackendError, so failed calls reproduce too.
    """

    name = "recorded"

    def __init__(self, calls: Iterable[LLMCall | dict], model: str = "recorded", strict: bool = True):
        self.model = model
        self.strict = strict
        self._by_key: dict[str, deque[LLMCall]] = {}
        self._used: dict[str, int] = {}
        for record in calls:
            call = as_call(record)
            self._by_key.setdefault(call.key, deque()).append(call)

    @classmethod
    def from_jsonl(cls, path: str | Path, model: str = "recorded", strict: bool = True) -> RecordedBackend:
        return cls(load_calls_jsonl(path), model=model, strict=strict)

    def __len__(self) -> int:
        return sum(len(q) for q in self._by_key.values()) + sum(self._used.values())

    def __contains__(self, key: object) -> bool:
        return key in self._by_key

    def remaining(self) -> int:
        """Recorded replies not asked for yet."""
        return sum(len(q) for q in self._by_key.values())

    def generate(self, request: LLMRequest) -> BackendReply:
        queue = self._by_key.get(request.key)
        if not queue:
            used = self._used.get(request.key, 0)
            message = (f"no recorded call for role {request.role!r}"
                       + (f" (this prompt was recorded {used} time{'s' * (used != 1)} and is asked once more)"
                          if used else "") + f"; prompt: {_excerpt(request.messages)}")
            if self.strict:
                raise NotRecorded(message)
            raise BackendError("NOT_RECORDED", message)
        call = queue.popleft()
        self._used[request.key] = self._used.get(request.key, 0) + 1
        if call.response is None:
            raise BackendError(call.error_code or "NOT_RECORDED",
                               call.error or f"recorded call for role {request.role!r} has no response",
                               call.params)
        return BackendReply(text=call.response, prompt_tokens=call.prompt_tokens,
                            completion_tokens=call.completion_tokens, model=call.model, params=call.params,
                            finish_reason=call.finish_reason)


def _excerpt(messages: list[dict], limit: int = 400) -> str:
    """The last message of a prompt (the role's input), cut to `limit` characters."""
    text = " ".join(str(messages[-1].get("content", "")).split()) if messages else ""
    return text if len(text) <= limit else text[:limit] + " …"


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

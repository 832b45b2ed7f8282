"""A plain JSONL conversation format for demos and hand-written scenarios.

One JSON object per line. Turn lines::

    {"id": "t1", "speaker": "Ana", "text": "...", "time": "2023-05-08T13:56:00", "session": "1"}

with optional ``conversation`` (default: the file stem) and ``image_caption``.
Question lines carry ``"type": "question"``::

    {"type": "question", "id": "q1", "question": "...", "answer": "...", "evidence": ["t1"], "category": 4}

with optional ``conversation`` and ``time``. Because the files are written by
hand, problems are errors (with the line number) rather than silently dropped.
"""
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from engine.core.conversation import Conversation, Question, Turn
from engine.loaders.errors import (
    LoaderError,
    answer_text,
    check,
    decode_json,
    optional,
    read_text,
    require,
    turn_text,
)

__all__ = ["jsonl_lines", "load_jsonl", "looks_like_jsonl", "parse_iso_time", "parse_jsonl"]

_TURN_FIELDS = ("id", "speaker", "text", "time", "session")


def parse_iso_time(value: str) -> datetime:
    """Accept an ISO 8601 date or datetime; a date alone means midnight."""
    return datetime.fromisoformat(value)


def jsonl_lines(text: str) -> Iterator[tuple[int, str]]:
    """Numbered lines, split on "\\n" only: a JSON string may hold U+2028, U+2029 or U+0085, which
    `str.splitlines` would break a valid line at. A Windows "\\r\\n" ending loses its "\\r"."""
    for number, line in enumerate(text.split("\n"), start=1):
        yield number, line.removesuffix("\r")


def looks_like_jsonl(text: str) -> bool:
    """Content sniff for files without a ``.jsonl`` suffix: the first non-blank line decodes to an object."""
    for _, line in jsonl_lines(text):
        if line.strip():
            try:
                return isinstance(decode_json(line, "<sniff>"), dict)
            except LoaderError:
                return False
    return False


@dataclass
class _Pending:
    """Turns and questions of one conversation, gathered before sorting and checks."""

    turns: list[tuple[datetime, int, Turn]] = field(default_factory=list)
    turn_lines: dict[str, int] = field(default_factory=dict)
    questions: list[tuple[int, Question]] = field(default_factory=list)
    question_lines: dict[str, int] = field(default_factory=dict)


def load_jsonl(path: str | Path) -> list[Conversation]:
    """Load every conversation in a JSONL file, in order of first appearance."""
    return parse_jsonl(read_text(path), path)


def parse_jsonl(text: str, path: str | Path) -> list[Conversation]:
    """Parse JSONL text; `path` names the file in errors and provides the default id."""
    default_id = Path(path).stem
    pending: dict[str, _Pending] = {}
    for number, line in jsonl_lines(text):
        if not line.strip():
            continue
        record = f"line {number}"
        obj = decode_json(line, path, record=record)
        if not isinstance(obj, dict):
            raise LoaderError(path, f"expected a JSON object, got {type(obj).__name__}", record=record)
        conv_id = check(obj.get("conversation", default_id), str, path=path, record=record, field="conversation")
        if not conv_id:
            raise LoaderError(path, "expected a non-empty string", record=record, field="conversation")
        bucket = pending.setdefault(conv_id, _Pending())
        kind = obj.get("type", "turn")
        if kind == "turn":
            _add_turn(obj, bucket, number, path)
        elif kind == "question":
            _add_question(obj, bucket, number, path)
        else:
            message = f"unknown type {kind!r} (expected 'turn' or 'question')"
            raise LoaderError(path, message, record=record, field="type")
    return [_finish(conv_id, bucket, path) for conv_id, bucket in pending.items()]


def _time(value: str, *, path: str | Path, record: str) -> datetime:
    try:
        return parse_iso_time(value)
    except ValueError as exc:
        message = f"not an ISO 8601 date or datetime: {value!r}"
        raise LoaderError(path, message, record=record, field="time") from exc


def _add_turn(obj: dict[str, Any], bucket: _Pending, number: int, path: str | Path) -> None:
    record = f"line {number}"
    for name in _TURN_FIELDS:
        if name not in obj:
            raise LoaderError(path, "missing", record=record, field=name)
    turn_id = require(obj, "id", str, path=path, record=record)
    if not turn_id:
        raise LoaderError(path, "must not be empty", record=record, field="id")
    if turn_id in bucket.turn_lines:
        first = bucket.turn_lines[turn_id]
        message = f"duplicate turn id {turn_id!r} (first on line {first})"
        raise LoaderError(path, message, record=record, field="id")
    moment = _time(require(obj, "time", str, path=path, record=record), path=path, record=record)
    caption = optional(obj, "image_caption", str, path=path, record=record)
    bucket.turn_lines[turn_id] = number
    turn = Turn(
        id=turn_id,
        speaker=require(obj, "speaker", str, path=path, record=record),
        text=turn_text(obj, "text", path=path, record=record),
        time=moment.isoformat(),
        session=str(require(obj, "session", (str, int), path=path, record=record)),
        index=len(bucket.turns),
        image_caption=caption or None,
    )
    bucket.turns.append((moment, len(bucket.turns), turn))


def _add_question(obj: dict[str, Any], bucket: _Pending, number: int, path: str | Path) -> None:
    record = f"line {number}"
    question_id = require(obj, "id", str, path=path, record=record)
    if question_id in bucket.question_lines:
        first = bucket.question_lines[question_id]
        message = f"duplicate question id {question_id!r} (first on line {first})"
        raise LoaderError(path, message, record=record, field="id")
    evidence = obj.get("evidence", [])
    if not isinstance(evidence, list) or not all(isinstance(e, str) for e in evidence):
        raise LoaderError(path, "expected a list of turn ids", record=record, field="evidence")
    raw_time = optional(obj, "time", str, path=path, record=record)
    bucket.question_lines[question_id] = number
    question = Question(
        id=question_id,
        question=require(obj, "question", str, path=path, record=record),
        answer=answer_text(obj.get("answer"), path=path, record=record),
        evidence=tuple(evidence),
        category=optional(obj, "category", int, path=path, record=record),
        time=None if raw_time is None else _time(raw_time, path=path, record=record).isoformat(),
    )
    bucket.questions.append((number, question))


def _sort_key(entry: tuple[datetime, int, Turn]) -> tuple[datetime, int]:
    """Order by time, then file order; naive times are read as UTC so mixed files still compare."""
    moment, position, _ = entry
    if moment.tzinfo is not None:
        moment = moment.astimezone(timezone.utc).replace(tzinfo=None)
    return moment, position


def _finish(conv_id: str, bucket: _Pending, path: str | Path) -> Conversation:
    """Sort turns into ingestion order and check that questions point at real turns."""
    if not bucket.turns:
        first = min(number for number, _ in bucket.questions)
        message = f"conversation {conv_id!r} has questions but no turns"
        raise LoaderError(path, message, record=f"line {first}", field="conversation")
    ordered = sorted(bucket.turns, key=_sort_key)
    turns = [replace(turn, index=index) for index, (_, _, turn) in enumerate(ordered)]
    ids = {t.id for t in turns}
    for number, question in bucket.questions:
        unknown = [e for e in question.evidence if e not in ids]
        if unknown:
            message = f"unknown turn id(s) {', '.join(map(repr, unknown))} in conversation {conv_id!r}"
            raise LoaderError(path, message, record=f"line {number}", field="evidence")
    speakers = tuple(dict.fromkeys(turn.speaker for _, _, turn in bucket.turns))
    return Conversation(
        id=conv_id,
        turns=turns,
        questions=[q for _, q in bucket.questions],
        speakers=speakers,
        source=str(path),
    )

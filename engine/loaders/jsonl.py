"""A plain JSONL conversation format for demos and hand-written scenarios.

One JSON object per line. Turn lines::

    {"id": "t1", "speaker": "Ana", "text": "...", "time": "2023-05-08T13:56:00", "session": "1"}

with optional ``conversation`` (default: the file stem) and ``image_caption``.
Question lines carry ``"type": "question"``::

    {"type": "question", "id": "q1", "question": "...", "answer": "...", "evidence": ["t1"], "category": 4}

with optional ``conversation`` and ``time``. Decision lines (a decision set, docs/DECISIONS.md) carry
``"type": "decision"``::

    {"type": "decision", "id": "d1", "kind": "update", "earlier": "t1", "later": "t9", "change": "number"}

A file of decision lines alone is an overlay on another file's conversations (`load_decision_overlay`).
Because the files are written by hand, problems are errors (with the line number) rather than silently
dropped.
"""
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from engine.core.conversation import Conversation, Question, Turn
from engine.core.decision import CHANGES, Decision, DecisionKind
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

__all__ = ["attach_decisions", "jsonl_lines", "load_decision_overlay", "load_jsonl", "looks_like_jsonl",
           "parse_iso_time", "parse_jsonl"]

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
    decisions: list[tuple[int, Decision]] = field(default_factory=list)
    decision_lines: dict[str, int] = field(default_factory=dict)


def load_jsonl(path: str | Path) -> list[Conversation]:
    """Load every conversation in a JSONL file, in order of first appearance."""
    return parse_jsonl(read_text(path), path)


def parse_jsonl(text: str, path: str | Path) -> list[Conversation]:
    """Parse JSONL text; `path` names the file in errors and provides the default id."""
    default_id = Path(path).stem
    pending: dict[str, _Pending] = {}
    for number, record, obj in _objects(text, path):
        conv_id = check(obj.get("conversation", default_id), str, path=path, record=record, field="conversation")
        if not conv_id:
            raise LoaderError(path, "expected a non-empty string", record=record, field="conversation")
        bucket = pending.setdefault(conv_id, _Pending())
        kind = obj.get("type", "turn")
        if kind == "turn":
            _add_turn(obj, bucket, number, path)
        elif kind == "question":
            _add_question(obj, bucket, number, path)
        elif kind == "decision":
            _add_decision(obj, bucket, number, path)
        else:
            message = f"unknown type {kind!r} (expected 'turn', 'question' or 'decision')"
            raise LoaderError(path, message, record=record, field="type")
    return [_finish(conv_id, bucket, path) for conv_id, bucket in pending.items()]


def _objects(text: str, path: str | Path) -> Iterator[tuple[int, str, dict[str, Any]]]:
    """Each non-blank line's number, its name in errors ("line 7") and its JSON object."""
    for number, line in jsonl_lines(text):
        if not line.strip():
            continue
        record = f"line {number}"
        obj = decode_json(line, path, record=record)
        if not isinstance(obj, dict):
            raise LoaderError(path, f"expected a JSON object, got {type(obj).__name__}", record=record)
        yield number, record, obj


def load_decision_overlay(path: str | Path) -> dict[str, list[Decision]]:
    """Decision lines alone, by conversation id (each line names its `conversation`): labels for the
    conversations of another file (a LoCoMo file, say), which `attach_decisions` checks against them."""
    out: dict[str, _Pending] = {}
    for number, record, obj in _objects(read_text(path), path):
        if obj.get("type") != "decision":
            raise LoaderError(path, "a decision overlay holds decision lines only", record=record, field="type")
        conv_id = require(obj, "conversation", str, path=path, record=record)
        _add_decision(obj, out.setdefault(conv_id, _Pending()), number, path)
    return {conv: [d for _, d in bucket.decisions] for conv, bucket in out.items()}


def attach_decisions(conversations: list[Conversation], overlay: dict[str, list[Decision]],
                     path: str | Path) -> list[Conversation]:
    """The conversations with an overlay's decisions added; a decision naming a conversation or turn the
    file does not have is an error naming it."""
    by_id = {c.id: c for c in conversations}
    unknown = sorted(set(overlay) - set(by_id))
    if unknown:
        raise LoaderError(path, f"unknown conversation(s) {', '.join(map(repr, unknown))}", field="conversation")
    out = []
    for conv in conversations:
        extra = overlay.get(conv.id, [])
        _check_decision_turns(conv.id, conv.turns, [(0, d) for d in extra], path)
        out.append(replace(conv, decisions=[*conv.decisions, *extra]))
    return out


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


def _add_decision(obj: dict[str, Any], bucket: _Pending, number: int, path: str | Path) -> None:
    record = f"line {number}"
    decision_id = require(obj, "id", str, path=path, record=record)
    if decision_id in bucket.decision_lines:
        first = bucket.decision_lines[decision_id]
        raise LoaderError(path, f"duplicate decision id {decision_id!r} (first on line {first})", record=record,
                          field="id")
    kind = require(obj, "kind", str, path=path, record=record)
    if kind not in DecisionKind.ALL:
        raise LoaderError(path, f"unknown kind {kind!r} (expected one of {', '.join(DecisionKind.ALL)})",
                          record=record, field="kind")
    if kind == DecisionKind.SPLIT:
        earlier = later = require(obj, "turn", str, path=path, record=record)
    else:
        earlier = require(obj, "earlier", str, path=path, record=record)
        later = require(obj, "later", str, path=path, record=record)
        if earlier == later:
            raise LoaderError(path, "earlier and later name the same turn", record=record, field="later")
    change = optional(obj, "change", str, path=path, record=record) or ""
    if change and change not in CHANGES:
        raise LoaderError(path, f"unknown change {change!r} (expected one of {', '.join(CHANGES)})",
                          record=record, field="change")
    text = {name: optional(obj, name, str, path=path, record=record) or ""
            for name in ("holder", "cue", "note", "support")}
    bucket.decision_lines[decision_id] = number
    bucket.decisions.append((number, Decision(id=decision_id, kind=kind, earlier=earlier, later=later,
                                              change=change, **text)))


def _check_decision_turns(conv_id: str, turns: list[Turn], decisions: list[tuple[int, Decision]],
                          path: str | Path) -> None:
    """Every decision names turns of its conversation, the earlier one first."""
    order = {t.id: t.index for t in turns}
    for number, d in decisions:
        record = f"line {number}" if number else f"decision {d.id}"
        unknown = [t for t in d.turns if t not in order]
        if unknown:
            message = f"unknown turn id(s) {', '.join(map(repr, unknown))} in conversation {conv_id!r}"
            raise LoaderError(path, message, record=record, field="earlier")
        if order[d.earlier] > order[d.later]:
            raise LoaderError(path, f"{d.earlier!r} comes after {d.later!r} in the conversation", record=record,
                              field="earlier")


def _sort_key(entry: tuple[datetime, int, Turn]) -> tuple[datetime, int]:
    """Order by time, then file order; naive times are read as UTC so mixed files still compare."""
    moment, position, _ = entry
    if moment.tzinfo is not None:
        moment = moment.astimezone(timezone.utc).replace(tzinfo=None)
    return moment, position


def _finish(conv_id: str, bucket: _Pending, path: str | Path) -> Conversation:
    """Sort turns into ingestion order and check that questions point at real turns."""
    if not bucket.turns:
        first = min(number for number, _ in [*bucket.questions, *bucket.decisions])
        message = f"conversation {conv_id!r} has questions or decisions but no turns"
        raise LoaderError(path, message, record=f"line {first}", field="conversation")
    ordered = sorted(bucket.turns, key=_sort_key)
    turns = [replace(turn, index=index) for index, (_, _, turn) in enumerate(ordered)]
    ids = {t.id for t in turns}
    for number, question in bucket.questions:
        unknown = [e for e in question.evidence if e not in ids]
        if unknown:
            message = f"unknown turn id(s) {', '.join(map(repr, unknown))} in conversation {conv_id!r}"
            raise LoaderError(path, message, record=f"line {number}", field="evidence")
    _check_decision_turns(conv_id, turns, bucket.decisions, path)
    speakers = tuple(dict.fromkeys(turn.speaker for _, _, turn in bucket.turns))
    return Conversation(
        id=conv_id,
        turns=turns,
        questions=[q for _, q in bucket.questions],
        speakers=speakers,
        source=str(path),
        decisions=[d for _, d in bucket.decisions],
    )

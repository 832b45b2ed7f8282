"""LongMemEval (Wu et al., 2025) -> `Conversation`.

Each instance is one question with its own private haystack of user/assistant
sessions, so each instance becomes its own conversation with one question.
The oracle variant does not sort sessions by date; turns are therefore put in
(session date, original position) order so ingestion never goes back in time.
"""
from __future__ import annotations

import logging
import re
from datetime import datetime
from pathlib import Path
from typing import Any

from engine.core.conversation import Conversation, Question, Turn
from engine.loaders.errors import (
    LoaderError,
    answer_text,
    check,
    optional,
    parse_list,
    read_json,
    require,
    turn_text,
)

__all__ = ["is_longmemeval", "load_longmemeval", "parse_longmemeval", "parse_longmemeval_time"]

log = logging.getLogger(__name__)

_WEEKDAY = re.compile(r"\s*\([^)]*\)\s*")
_DATE_FORMATS = ("%Y/%m/%d %H:%M", "%Y/%m/%d %H:%M:%S", "%Y/%m/%d")
_PARALLEL = ("haystack_session_ids", "haystack_dates", "haystack_sessions")


def is_longmemeval(item: object) -> bool:
    """Whether a decoded JSON item looks like a LongMemEval instance (for format dispatch)."""
    return isinstance(item, dict) and "question_id" in item and "haystack_sessions" in item


def parse_longmemeval_time(value: str) -> str:
    """``"2023/05/20 (Sat) 02:21"`` -> ``"2023-05-20T02:21:00"``; ValueError if unparseable.

    The weekday label is dropped rather than parsed: it is redundant and
    locale-dependent.
    """
    text = _WEEKDAY.sub(" ", value).strip()
    for fmt in _DATE_FORMATS:
        try:
            return datetime.strptime(text, fmt).isoformat()
        except ValueError:
            continue
    try:
        return datetime.fromisoformat(text).isoformat()
    except ValueError:
        expected = "expected like '2023/05/20 (Sat) 02:21'"
        raise ValueError(f"unrecognised LongMemEval date {value!r} ({expected})") from None


def load_longmemeval(path: str | Path) -> list[Conversation]:
    """Load every instance of a LongMemEval JSON file."""
    return parse_longmemeval(read_json(path), path)


def parse_longmemeval(data: Any, path: str | Path) -> list[Conversation]:
    """Convert already-decoded LongMemEval JSON; `path` is used for errors and `source`."""
    return parse_list(data, path, "LongMemEval instances", "question_id", _parse_instance)


def _time(value: str, *, path: str | Path, record: str, field: str = "haystack_dates") -> str:
    try:
        return parse_longmemeval_time(value)
    except ValueError as exc:
        raise LoaderError(path, str(exc), record=record, field=field) from exc


def _parse_instance(instance: dict[str, Any], path: str | Path, position: int) -> Conversation:
    qid = require(instance, "question_id", str, path=path, record=f"item {position}")
    columns = [require(instance, name, list, path=path, record=qid) for name in _PARALLEL]
    session_ids, dates, sessions = columns
    if not len(session_ids) == len(dates) == len(sessions):
        sizes = ", ".join(f"{name}={len(col)}" for name, col in zip(_PARALLEL, columns))
        raise LoaderError(path, f"lists differ in length ({sizes})", record=qid, field="haystack_sessions")

    dated: list[tuple[str, int, str, list[Any]]] = []
    for k, (session_id, date, session) in enumerate(zip(session_ids, dates, sessions)):
        record = f"{qid}[{k}]"
        check(session_id, str, path=path, record=record, field="haystack_session_ids")
        check(session, list, path=path, record=record, field="haystack_sessions")
        time = _time(check(date, str, path=path, record=record, field="haystack_dates"), path=path, record=record)
        dated.append((time, k, session_id, session))
    dated.sort(key=lambda entry: (entry[0], entry[1]))

    turns: list[Turn] = []
    flagged: list[str] = []
    by_session: dict[str, list[str]] = {}
    for time, _, session_id, session in dated:
        if session_id in by_session:
            message = f"duplicate session id {session_id!r}"
            raise LoaderError(path, message, record=qid, field="haystack_session_ids")
        ids = by_session.setdefault(session_id, [])
        for k, raw in enumerate(session):
            record = f"{qid}/{session_id}[{k}]"
            check(raw, dict, path=path, record=record)
            turn = Turn(
                id=f"{session_id}:{k}",
                speaker=require(raw, "role", str, path=path, record=record),
                text=turn_text(raw, "content", path=path, record=record),
                time=time,
                session=session_id,
                index=len(turns),
            )
            turns.append(turn)
            ids.append(turn.id)
            if raw.get("has_answer") is True:
                flagged.append(turn.id)

    question = _parse_question(instance, qid, turns, flagged, by_session, path)
    speakers = tuple(dict.fromkeys(t.speaker for t in turns))
    return Conversation(id=qid, turns=turns, questions=[question], speakers=speakers, source=str(path))


def _parse_question(
    instance: dict[str, Any],
    qid: str,
    turns: list[Turn],
    flagged: list[str],
    by_session: dict[str, list[str]],
    path: str | Path,
) -> Question:
    """Turn-level evidence when the data marks it, else every turn of the answer sessions."""
    evidence = list(flagged)
    if not evidence:
        answer_sessions = optional(instance, "answer_session_ids", list, path=path, record=qid) or []
        for session_id in answer_sessions:
            if isinstance(session_id, str) and session_id in by_session:
                evidence.extend(by_session[session_id])
            else:
                log.debug("%s: record %s: answer session %r not in haystack", Path(path).name, qid, session_id)
    wanted = set(evidence)
    question_date = optional(instance, "question_date", str, path=path, record=qid)
    return Question(
        id=qid,
        question=require(instance, "question", str, path=path, record=qid),
        answer=answer_text(instance.get("answer"), path=path, record=qid),
        evidence=tuple(t.id for t in turns if t.id in wanted),
        category=None,
        time=_time(question_date, path=path, record=qid, field="question_date") if question_date else None,
    )

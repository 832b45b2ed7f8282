"""LoCoMo (Maharana et al., 2024) -> `Conversation`.

The public file is a JSON list of samples ``{sample_id, conversation, qa, ...}``.
Its known quirks are absorbed here so nothing downstream has to know them:
date keys without a session, ``session_10`` sorting before ``session_2`` as a
string, integer answers, adversarial questions without ``answer`` and a few
malformed evidence pointers (``"D8:6; D9:17"``, ``"D30:05"``, ``"D:11:26"``).
"""
from __future__ import annotations

import logging
import re
from collections.abc import Iterable
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

__all__ = ["is_locomo", "load_locomo", "normalise_evidence", "parse_locomo", "parse_locomo_time"]

log = logging.getLogger(__name__)

_SESSION_KEY = re.compile(r"session_(\d+)")
_DATE_FORMATS = ("%I:%M %p on %d %B, %Y", "%I:%M %p on %d %b, %Y")
# Lenient on purpose: tolerates "D:11:26", "D30:05" and several ids in one string.
_EVIDENCE_ID = re.compile(r"D\s*:?\s*(\d+)\s*:\s*(\d+)", re.IGNORECASE)


def is_locomo(item: object) -> bool:
    """Whether a decoded JSON item looks like a LoCoMo sample (for format dispatch)."""
    return isinstance(item, dict) and "sample_id" in item and "conversation" in item


def parse_locomo_time(value: str) -> str:
    """``"1:56 pm on 8 May, 2023"`` -> ``"2023-05-08T13:56:00"``; ValueError if unparseable."""
    text = " ".join(value.split())
    for fmt in _DATE_FORMATS:
        try:
            return datetime.strptime(text, fmt).isoformat()
        except ValueError:
            continue
    raise ValueError(f"unrecognised LoCoMo date {value!r} (expected like '1:56 pm on 8 May, 2023')")


def normalise_evidence(raw: Iterable[object], turn_ids: set[str] | frozenset[str]) -> tuple[list[str], list[str]]:
    """Map raw evidence entries to existing turn ids.

    Returns ``(kept, dropped)``: `kept` holds canonical ``D<session>:<turn>`` ids
    that exist, in first-seen order without duplicates; `dropped` holds the raw
    fragments that could not be mapped, so callers can report them.
    """
    kept: list[str] = []
    dropped: list[str] = []
    for entry in raw:
        if not isinstance(entry, str):
            dropped.append(repr(entry))
            continue
        matches = list(_EVIDENCE_ID.finditer(entry))
        if not matches:
            dropped.append(entry)
        for match in matches:
            canonical = f"D{int(match.group(1))}:{int(match.group(2))}"
            if canonical not in turn_ids:
                dropped.append(match.group(0))
            elif canonical not in kept:
                kept.append(canonical)
    return kept, dropped


def load_locomo(path: str | Path) -> list[Conversation]:
    """Load every sample of a LoCoMo JSON file."""
    return parse_locomo(read_json(path), path)


def parse_locomo(data: Any, path: str | Path) -> list[Conversation]:
    """Convert already-decoded LoCoMo JSON; `path` is used for errors and `source`."""
    return parse_list(data, path, "LoCoMo samples", "sample_id", _parse_sample)


def _parse_sample(sample: dict[str, Any], path: str | Path, position: int) -> Conversation:
    sample_id = require(sample, "sample_id", str, path=path, record=f"item {position}")
    conv = require(sample, "conversation", dict, path=path, record=sample_id)
    speakers = (
        require(conv, "speaker_a", str, path=path, record=f"{sample_id}/conversation"),
        require(conv, "speaker_b", str, path=path, record=f"{sample_id}/conversation"),
    )
    turns = _parse_turns(conv, sample_id, path)
    qa = optional(sample, "qa", list, path=path, record=sample_id) or []
    questions = _parse_questions(qa, sample_id, {t.id for t in turns}, path)
    return Conversation(id=sample_id, turns=turns, questions=questions, speakers=speakers, source=str(path))


def _session_numbers(conv: dict[str, Any]) -> list[int]:
    """Numbers of the ``session_N`` keys present, in numeric order (not string order).

    Date keys with no matching session exist in the public data and are ignored.
    """
    numbers = [int(m.group(1)) for key in conv if (m := _SESSION_KEY.fullmatch(key))]
    return sorted(numbers)


def _parse_turns(conv: dict[str, Any], sample_id: str, path: str | Path) -> list[Turn]:
    turns: list[Turn] = []
    owner: dict[str, str] = {}
    for number in _session_numbers(conv):
        key = f"session_{number}"
        session = require(conv, key, list, path=path, record=sample_id)
        date_key = f"{key}_date_time"
        raw_date = require(conv, date_key, str, path=path, record=sample_id)
        try:
            time = parse_locomo_time(raw_date)
        except ValueError as exc:
            raise LoaderError(path, str(exc), record=sample_id, field=date_key) from exc
        for offset, raw_turn in enumerate(session):
            record = f"{sample_id}/{key}[{offset}]"
            check(raw_turn, dict, path=path, record=record)
            dia_id = require(raw_turn, "dia_id", str, path=path, record=record)
            if dia_id in owner:
                raise LoaderError(path, f"duplicate of {owner[dia_id]}", record=record, field="dia_id")
            owner[dia_id] = record
            caption = optional(raw_turn, "blip_caption", str, path=path, record=record)
            turns.append(
                Turn(
                    id=dia_id,
                    speaker=require(raw_turn, "speaker", str, path=path, record=record),
                    text=turn_text(raw_turn, "text", path=path, record=record),
                    time=time,
                    session=str(number),
                    index=len(turns),
                    image_caption=caption or None,
                )
            )
    return turns


def _parse_questions(qa: list[Any], sample_id: str, turn_ids: set[str], path: str | Path) -> list[Question]:
    questions: list[Question] = []
    for index, item in enumerate(qa):
        record = f"{sample_id}/qa[{index}]"
        check(item, dict, path=path, record=record)
        # Adversarial (category 5) items carry `adversarial_answer` instead of `answer`.
        answer_field = "answer" if "answer" in item else "adversarial_answer"
        raw_evidence = optional(item, "evidence", list, path=path, record=record) or []
        evidence, dropped = normalise_evidence(raw_evidence, turn_ids)
        if dropped:
            log.debug("%s: record %s: dropped evidence %s (no such turn)", Path(path).name, record, dropped)
        questions.append(
            Question(
                id=f"{sample_id}:q{index}",
                question=require(item, "question", str, path=path, record=record),
                answer=answer_text(item.get(answer_field), path=path, record=record, field=answer_field),
                evidence=tuple(evidence),
                category=optional(item, "category", int, path=path, record=record),
            )
        )
    return questions

"""QMSum (Zhong et al., 2021) meeting files -> `Conversation` plus gold topic segmentation.

One QMSum file is one meeting, a JSON object::

    {"topic_list": [{"topic": "...", "relevant_text_span": [["12", "130"], ...]}, ...],
     "general_query_list": [{"query": "...", "answer": "..."}, ...],
     "specific_query_list": [{"query": "...", "answer": "...", "relevant_text_span": [["10", "97"]]}, ...],
     "meeting_transcripts": [{"speaker": "...", "content": "..."}, ...]}

Spans are inclusive ranges of transcript indexes, written as strings.

Mapping onto `Conversation`:

* ``id`` is the file stem (``Bed003``); the file holds no id of its own.
* Turn ``k`` of ``meeting_transcripts`` becomes `Turn` with ``id = str(k)`` and
  ``index = k``, so span indexes, turn ids and turn positions all coincide.
  ``text`` is ``content`` exactly as given (spacing such as ``"Yeah . "`` and
  markers such as ``{disfmarker}`` are kept). Turns with empty or blank
  content (a handful in the ICSI meetings, e.g. ``Bmr006`` turn 724) are kept
  as they are, so indexes still match the spans; they are not dropped.
* All turns are in session ``"1"`` (a meeting is one sitting).
* QMSum has no timestamps. Times are synthetic and deterministic: turn ``k``
  is at ``2000-01-01T00:00:00`` plus ``k`` seconds (`SYNTHETIC_START`,
  `SECONDS_PER_TURN`). One second per turn keeps every meeting (at most a few
  thousand turns) inside one day and on the order of a real meeting's length;
  the times say nothing about the real pace of speech.
* Specific queries become questions ``<stem>:s<i>`` whose ``evidence`` is
  every turn id inside their ``relevant_text_span`` ranges (ranges expanded,
  in ascending order, duplicates removed). General queries ("Summarize the
  whole meeting.") become questions ``<stem>:g<i>`` with no evidence: they are
  about the whole meeting. QMSum has no question categories, so ``category``
  is None.

Gold topic segmentation (`topic_segments`, `gold_boundaries`): annotators'
spans do not always partition the meeting. In the 35 test meetings some leave
uncovered turns before the first span (``Bed008`` starts at 45), between spans
(``ES2004a`` turn 172) and after the last (``IS1003d`` ends at 882 of 1004);
some overlap (``ES2011a``: 10-97, 84-215, 97-236) and some nest
(``IS1003d``: 195-206 inside 143-538). A topic may have several spans (a
meeting returns to a topic). `topic_segments` returns the spans as given;
`gold_boundaries` resolves them into a partition with the rule documented in
`engine.core.segments.boundaries_from_ranges`: a turn belongs to the covering
span that started most recently, and uncovered turns never open a segment
(they continue the segment before them; those before the first span join
the first span's segment).

Malformed input (no ``meeting_transcripts``, a span that is not a pair of
non-negative integers, a reversed span, an index past the last turn) raises
`LoaderError` naming the file, the record (``Bed003/topic_list[2]``) and the
field. Integers are accepted where QMSum writes integer strings.
"""
from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from engine.core.conversation import Conversation, Question, Turn
from engine.core.segments import boundaries_from_ranges
from engine.loaders.errors import LoaderError, answer_text, check, optional, read_json, require, turn_text

__all__ = [
    "SECONDS_PER_TURN",
    "SYNTHETIC_START",
    "gold_boundaries",
    "is_qmsum",
    "load_qmsum",
    "parse_qmsum",
    "parse_topic_segments",
    "synthetic_time",
    "topic_segments",
]

SYNTHETIC_START = datetime(2000, 1, 1)
SECONDS_PER_TURN = 1
SESSION = "1"

_DIGITS = re.compile(r"[0-9]+")

# Any of these marks a QMSum meeting, so a file missing one of them still gets
# a QMSum-specific error ("field 'meeting_transcripts': missing") rather than
# "unknown format".
_QMSUM_KEYS = ("meeting_transcripts", "topic_list", "specific_query_list", "general_query_list")


def is_qmsum(item: object) -> bool:
    """Whether a decoded JSON value looks like a QMSum meeting (for format dispatch)."""
    return isinstance(item, dict) and any(key in item for key in _QMSUM_KEYS)


def synthetic_time(index: int) -> str:
    """The dataset time given to turn `index` (QMSum has none): start + index seconds, ISO 8601."""
    return (SYNTHETIC_START + timedelta(seconds=index * SECONDS_PER_TURN)).isoformat()


def load_qmsum(path: str | Path) -> Conversation:
    """Load one QMSum meeting file as a conversation whose id is the file stem."""
    return parse_qmsum(read_json(path), path)


def parse_qmsum(data: Any, path: str | Path) -> Conversation:
    """Convert an already-decoded QMSum meeting; `path` gives the id, errors and `source`."""
    meeting = _meeting_id(path)
    check(data, dict, path=path, record=meeting)
    turns = _parse_turns(data, meeting, path)
    n_turns = len(turns)
    # Topic spans are validated here too, so a file that loads is also one whose
    # gold segmentation can be read.
    parse_topic_segments(data, path, n_turns=n_turns)
    questions = _parse_specific(data, meeting, n_turns, path) + _parse_general(data, meeting, path)
    speakers = tuple(dict.fromkeys(t.speaker for t in turns))
    return Conversation(id=meeting, turns=turns, questions=questions, speakers=speakers, source=str(path))


def topic_segments(path: str | Path) -> list[tuple[int, int]]:
    """The gold topic spans of a QMSum file: inclusive ``(start, end)`` index ranges.

    Every span of every topic, sorted by ``(start, end)``, exact duplicates
    removed. Overlaps and gaps are left as annotated; `gold_boundaries`
    resolves them.
    """
    return parse_topic_segments(read_json(path), path)


def parse_topic_segments(data: Any, path: str | Path, *, n_turns: int | None = None) -> list[tuple[int, int]]:
    """`topic_segments` for already-decoded JSON; `n_turns` defaults to the transcript length."""
    meeting = _meeting_id(path)
    check(data, dict, path=path, record=meeting)
    if n_turns is None:
        n_turns = len(require(data, "meeting_transcripts", list, path=path, record=meeting))
    topics = require(data, "topic_list", list, path=path, record=meeting)
    spans: set[tuple[int, int]] = set()
    for position, topic in enumerate(topics):
        record = f"{meeting}/topic_list[{position}]"
        check(topic, dict, path=path, record=record)
        optional(topic, "topic", str, path=path, record=record)
        spans.update(_parse_spans(topic, record, n_turns, path))
    return sorted(spans)


def gold_boundaries(source: str | Path | Sequence[Sequence[int]], n_turns: int | None = None) -> list[int]:
    """Gold segment boundaries (positions where a new topic segment starts), sorted.

    `source` is a QMSum file path or a list of inclusive ``(start, end)``
    ranges such as `topic_segments` returns. `n_turns` is the meeting length;
    it may be omitted only for a path (the transcript length is used).
    Overlaps, nesting and gaps are resolved by
    `engine.core.segments.boundaries_from_ranges` (see the module docstring).
    """
    if isinstance(source, (str, Path)):
        data = read_json(source)
        if n_turns is None:
            meeting = _meeting_id(source)
            check(data, dict, path=source, record=meeting)
            n_turns = len(require(data, "meeting_transcripts", list, path=source, record=meeting))
        ranges: Sequence[Sequence[int]] = parse_topic_segments(data, source, n_turns=n_turns)
    else:
        if n_turns is None:
            raise ValueError("gold_boundaries needs n_turns when given ranges rather than a file")
        ranges = source
    return boundaries_from_ranges(ranges, n_turns)


def _meeting_id(path: str | Path) -> str:
    return Path(path).stem


def _parse_turns(data: dict[str, Any], meeting: str, path: str | Path) -> list[Turn]:
    transcript = require(data, "meeting_transcripts", list, path=path, record=meeting)
    turns: list[Turn] = []
    for index, raw in enumerate(transcript):
        record = f"{meeting}/meeting_transcripts[{index}]"
        check(raw, dict, path=path, record=record)
        turns.append(
            Turn(
                id=str(index),
                speaker=require(raw, "speaker", str, path=path, record=record),
                text=turn_text(raw, "content", path=path, record=record),
                time=synthetic_time(index),
                session=SESSION,
                index=index,
            )
        )
    return turns


def _parse_specific(data: dict[str, Any], meeting: str, n_turns: int, path: str | Path) -> list[Question]:
    items = optional(data, "specific_query_list", list, path=path, record=meeting) or []
    questions: list[Question] = []
    for position, item in enumerate(items):
        record = f"{meeting}/specific_query_list[{position}]"
        check(item, dict, path=path, record=record)
        spans = _parse_spans(item, record, n_turns, path)
        turn_indexes = sorted({i for start, end in spans for i in range(start, end + 1)})
        questions.append(
            Question(
                id=f"{meeting}:s{position}",
                question=require(item, "query", str, path=path, record=record),
                answer=answer_text(item.get("answer"), path=path, record=record),
                evidence=tuple(str(i) for i in turn_indexes),
            )
        )
    return questions


def _parse_general(data: dict[str, Any], meeting: str, path: str | Path) -> list[Question]:
    items = optional(data, "general_query_list", list, path=path, record=meeting) or []
    questions: list[Question] = []
    for position, item in enumerate(items):
        record = f"{meeting}/general_query_list[{position}]"
        check(item, dict, path=path, record=record)
        questions.append(
            Question(
                id=f"{meeting}:g{position}",
                question=require(item, "query", str, path=path, record=record),
                answer=answer_text(item.get("answer"), path=path, record=record),
            )
        )
    return questions


def _parse_spans(item: dict[str, Any], record: str, n_turns: int, path: str | Path) -> list[tuple[int, int]]:
    """The item's ``relevant_text_span`` as checked inclusive ``(start, end)`` pairs."""
    field = "relevant_text_span"
    raw_spans = require(item, field, list, path=path, record=record)
    spans: list[tuple[int, int]] = []
    for k, raw in enumerate(raw_spans):
        where = f"{record}.{field}[{k}]"
        if not isinstance(raw, list) or len(raw) != 2:
            raise LoaderError(
                path, f"expected a pair of turn indexes like [\"12\", \"130\"], got {raw!r}", record=where, field=field
            )
        start, end = (_index(value, where, path) for value in raw)
        if start > end:
            raise LoaderError(path, f"span starts after it ends ({start} > {end})", record=where, field=field)
        if end >= n_turns:
            raise LoaderError(
                path,
                f"turn index {end} out of range: meeting_transcripts has {n_turns} turns (0..{n_turns - 1})",
                record=where,
                field=field,
            )
        spans.append((start, end))
    return spans


def _index(value: object, where: str, path: str | Path) -> int:
    """A non-negative turn index written as an integer string (or an integer)."""
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    if isinstance(value, str) and _DIGITS.fullmatch(value.strip()):
        return int(value.strip())
    raise LoaderError(
        path, f"expected a non-negative integer string, got {value!r}", record=where, field="relevant_text_span"
    )

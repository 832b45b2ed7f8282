"""Dataset files -> `Conversation`s, whatever the dataset's own layout.

Callers pass a path; the format (LoCoMo JSON, LongMemEval JSON, a QMSum
meeting JSON object, or JSONL) is recognised from the extension and content
so the CLI and the workbench need no format flag. Every failure is a `LoaderError` naming file, record and field.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from engine.core.conversation import Conversation
from engine.loaders.errors import LoaderError, decode_json, read_text
from engine.loaders.jsonl import load_jsonl, looks_like_jsonl, parse_jsonl
from engine.loaders.locomo import is_locomo, load_locomo, parse_locomo
from engine.loaders.longmemeval import is_longmemeval, load_longmemeval, parse_longmemeval
from engine.loaders.qmsum import is_qmsum, load_qmsum, parse_qmsum

def file_format(path: Path) -> str:
    """locomo | longmemeval | qmsum | jsonl | unknown, from the extension and the first item."""
    if path.suffix.lower() in (".jsonl", ".ndjson"):
        return "jsonl"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return "unknown"
    if is_qmsum(data):
        return "qmsum"
    first = data[0] if isinstance(data, list) and data else data
    if is_locomo(first):
        return "locomo"
    if is_longmemeval(first):
        return "longmemeval"
    return "unknown"


__all__ = ["file_format", 
    "LoaderError",
    "load_conversation",
    "load_conversations",
    "load_jsonl",
    "load_locomo",
    "load_longmemeval",
    "load_qmsum",
]

_JSONL_SUFFIXES = {".jsonl", ".ndjson"}
_MAX_LISTED_IDS = 20


def load_conversations(path: str | Path) -> list[Conversation]:
    """Load every conversation in a LoCoMo, LongMemEval, QMSum (one meeting) or JSONL file."""
    text = read_text(path)
    if Path(path).suffix.lower() in _JSONL_SUFFIXES:
        return parse_jsonl(text, path)
    try:
        data = decode_json(text, path)
    except LoaderError as exc:
        if looks_like_jsonl(text):
            return parse_jsonl(text, path)
        if Path(path).suffix.lower() == ".json" or not isinstance(exc.__cause__, json.JSONDecodeError):
            raise
        raise LoaderError(
            path, "unknown format: not JSON (LoCoMo, LongMemEval, QMSum) nor JSONL", record=exc.record
        ) from exc
    return _parse_json(data, path)


def _parse_json(data: Any, path: str | Path) -> list[Conversation]:
    """Pick the parser from the first item; a lone object is treated as a one-item list.

    A QMSum file is a single meeting object (never a list) and is one conversation.
    """
    if is_qmsum(data):
        return [parse_qmsum(data, path)]
    items = [data] if isinstance(data, dict) else data
    if not isinstance(items, list):
        raise LoaderError(
            path,
            "unknown format: expected a JSON list of LoCoMo samples or LongMemEval instances "
            "(or a QMSum meeting object), "
            f"got {type(data).__name__}",
            record="top level",
        )
    if not items:
        return []
    first = items[0]
    if is_locomo(first):
        return parse_locomo(items, path)
    if is_longmemeval(first):
        return parse_longmemeval(items, path)
    found = f"keys {sorted(first)[:8]}" if isinstance(first, dict) else f"a {type(first).__name__}"
    raise LoaderError(
        path,
        "unknown format: expected LoCoMo (sample_id, conversation) or "
        "LongMemEval (question_id, haystack_sessions) items or a QMSum (meeting_transcripts) object, "
        f"found {found}",
        record="item 0",
    )


def load_conversation(path: str | Path, conversation_id: str | None = None) -> Conversation:
    """Load one conversation; the id may be omitted only when the file holds exactly one."""
    conversations = load_conversations(path)
    ids = [c.id for c in conversations]
    if conversation_id is None:
        if len(conversations) == 1:
            return _with_turns(conversations[0], path)
        problem = "file holds no conversations" if not conversations else (
            f"file holds {len(conversations)} conversations; pass one of: {_listing(ids)}"
        )
        raise LoaderError(path, problem, field="conversation_id")
    for conversation in conversations:
        if conversation.id == conversation_id:
            return _with_turns(conversation, path)
    raise LoaderError(
        path,
        f"no such conversation; available: {_listing(ids) or '(none)'}",
        record=conversation_id,
        field="conversation_id",
    )


def _with_turns(conversation: Conversation, path: str | Path) -> Conversation:
    """A conversation to replay must have at least one turn; say so instead of failing later."""
    if not conversation.turns:
        raise LoaderError(path, "the conversation has no turns to replay", record=conversation.id, field="turns")
    return conversation


def _listing(ids: list[str]) -> str:
    """Comma-separated ids, truncated so a 500-instance file gives a readable message."""
    shown = ", ".join(ids[:_MAX_LISTED_IDS])
    hidden = len(ids) - _MAX_LISTED_IDS
    return f"{shown}, ... ({hidden} more)" if hidden > 0 else shown

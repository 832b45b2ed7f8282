"""SCDS diagnostic cases as a JSON document: what the Annotate page exports and imports.

JSON exchange format (what `export_document` writes and `import_json` reads)::

    {"format": "memwb-scds-cases", "version": 1, "conversation_id": "demo",
     "cases": [{
        "scenario_id": "commute", "title": "Why Maya misses deadlines",
        "participants": ["Maya", "Jon"],                      # written on export, ignored on import
        "turns": [{"pointer": "commute:t20", "turn_id": "D2:6",
                   "speaker_id": "Maya", "text": "...", "order": 1}],   # speaker_id/text checked if present
        "questions": [{
            "sample_id": "commute-q1", "viewer_id": "Jon",
            "query_text": "Why has Maya been missing deadlines?", "gold_answer": "...",
            "task_type": "chain_reconstruction",
            "gold_evidence_keys": ["commute:t20", "..."],
            "gold_causal_structure": {"dependency_type": "CAUSAL_FOLLOW", "local_id": "c1",
                                      "attribution_target": "commute:t80",
                                      "supporting_evidence_keys": ["commute:t20", "..."]},
            "metadata": {}}]}]}

``format`` and ``version`` are optional but checked when present. ``scenario_id``
is letters, digits, ``_ . -``; every pointer is ``<scenario_id>:t<digits>`` and
maps to a turn of the named conversation; evidence keys must be pointers of the
case; ``dependency_type`` is one of MemLoom's four relations. Import validates
the whole file first and raises `engine.loaders.LoaderError` naming file, record
and field; nothing is written unless every record is valid, and a stored case is
never overwritten.
"""
from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from engine.core.cases import (
    DEPENDENCY_TYPES,
    POINTER,
    SCENARIO_ID,
    Case,
    CaseQuestion,
    CaseTurn,
    CausalStructure,
)
from engine.core.conversation import Conversation
from engine.loaders.errors import LoaderError, answer_text, check, optional, require

FORMAT = "memwb-scds-cases"
VERSION = 1


def export_document(cases: Iterable[Case], conversation: Conversation) -> dict[str, Any]:
    """The exchange document; turns carry speaker and text so the file reads on its own."""
    by_id = {t.id: t for t in conversation.turns}
    out = []
    for case in cases:
        turns = [by_id[t.turn_id] for t in case.turns]
        viewers = [q.viewer_id for q in case.questions if q.viewer_id]
        out.append({
            "scenario_id": case.scenario_id,
            "title": case.title,
            "participants": list(dict.fromkeys([t.speaker for t in turns] + viewers)),
            "turns": [{"pointer": ct.pointer, "turn_id": ct.turn_id, "speaker_id": t.speaker, "text": t.text,
                       "order": i} for i, (ct, t) in enumerate(zip(case.turns, turns), start=1)],
            "questions": [asdict(q) for q in case.questions],
        })
    return {"format": FORMAT, "version": VERSION, "conversation_id": conversation.id, "cases": out}


def export_json(cases: Iterable[Case], conversation: Conversation) -> str:
    return json.dumps(export_document(cases, conversation), ensure_ascii=False, indent=2) + "\n"


def case_set_version(document: dict[str, Any]) -> str:
    """The version of a case set: a digest of its gold (turns and questions of every case, in order), so the
    same gold has the same version wherever it is stored and any change to it gives another."""
    gold = [{k: c[k] for k in ("scenario_id", "turns", "questions")} for c in document["cases"]]
    text = json.dumps([document["conversation_id"], gold], ensure_ascii=False, sort_keys=True)
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def parse_json(text: str, source: str | Path) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise LoaderError(source, f"not valid JSON: {exc.msg} (column {exc.colno})",
                          record=f"line {exc.lineno}") from exc


def parse_document(data: Any, source: str | Path, conversation: Conversation) -> list[Case]:
    """Validate an exchange document against `conversation`; every problem is a located LoaderError."""
    top = check(data, dict, path=source, record="top level")
    fmt = optional(top, "format", str, path=source, record="top level")
    if fmt is not None and fmt != FORMAT:
        raise LoaderError(source, f"expected {FORMAT!r}, got {fmt!r}", record="top level", field="format")
    version = optional(top, "version", int, path=source, record="top level")
    if version is not None and version != VERSION:
        raise LoaderError(source, f"unsupported version {version}; this build reads version {VERSION}",
                          record="top level", field="version")
    conv_id = require(top, "conversation_id", str, path=source, record="top level")
    if conv_id != conversation.id:
        raise LoaderError(source, f"cases are for conversation {conv_id!r} but {conversation.id!r} is loaded",
                          record="top level", field="conversation_id")
    items = require(top, "cases", list, path=source, record="top level")
    cases: list[Case] = []
    seen_samples: set[str] = set()
    for i, item in enumerate(items):
        cases.append(_parse_case(item, i, source, conversation, {c.scenario_id for c in cases}, seen_samples))
    return cases


def case_record(i: int, scenario_id: Any) -> str:
    return f"cases[{i}] {scenario_id!r}" if isinstance(scenario_id, str) else f"cases[{i}]"


def _parse_case(item: Any, i: int, source, conversation: Conversation, seen_cases: set[str],
                seen_samples: set[str]) -> Case:
    record = case_record(i, item.get("scenario_id") if isinstance(item, dict) else None)
    obj = check(item, dict, path=source, record=record)
    sid = require(obj, "scenario_id", str, path=source, record=record)
    if not SCENARIO_ID.fullmatch(sid):
        raise LoaderError(source, "use letters, digits, '_', '.' or '-' (it prefixes every pointer)",
                          record=record, field="scenario_id")
    if sid in seen_cases:
        raise LoaderError(source, "duplicate scenario_id in this file", record=record, field="scenario_id")
    case = Case(scenario_id=sid, conversation_id=conversation.id,
                title=optional(obj, "title", str, path=source, record=record) or "")
    by_id = {t.id: t for t in conversation.turns}
    for j, raw in enumerate(require(obj, "turns", list, path=source, record=record)):
        trec = f"{record} / turns[{j}]"
        t = check(raw, dict, path=source, record=trec)
        pointer = require(t, "pointer", str, path=source, record=trec)
        m = POINTER.fullmatch(pointer)
        if not m or m["scenario"] != sid:
            raise LoaderError(source, f"{pointer!r} is not of the form '{sid}:tNN'", record=trec, field="pointer")
        turn_id = require(t, "turn_id", str, path=source, record=trec)
        turn = by_id.get(turn_id)
        if turn is None:
            raise LoaderError(source, f"no turn {turn_id!r} in conversation {conversation.id!r}",
                              record=trec, field="turn_id")
        for key, actual in (("speaker_id", turn.speaker), ("text", turn.text)):
            given = optional(t, key, str, path=source, record=trec)
            if given is not None and given != actual:
                raise LoaderError(source, f"does not match turn {turn_id} of conversation {conversation.id!r} "
                                  f"({actual[:60]!r})", record=trec, field=key)
        if case.pointer_of(turn_id) or any(ct.pointer == pointer for ct in case.turns):
            raise LoaderError(source, "pointer or turn listed twice", record=trec, field="pointer")
        case.turns.append(CaseTurn(pointer, turn_id))
    pointers = {t.pointer for t in case.turns}
    for j, raw in enumerate(require(obj, "questions", list, path=source, record=record)):
        case.questions.append(_parse_question(raw, f"{record} / questions[{j}]", source, pointers, seen_samples))
    return case


def _parse_question(raw: Any, record: str, source, pointers: set[str], seen_samples: set[str]) -> CaseQuestion:
    sample = raw.get("sample_id") if isinstance(raw, dict) else None
    if isinstance(sample, str):
        record = f"{record} {sample!r}"
    q = check(raw, dict, path=source, record=record)

    def text(key: str) -> str:
        return optional(q, key, str, path=source, record=record) or ""

    sample_id = require(q, "sample_id", str, path=source, record=record)
    if not sample_id.strip():
        raise LoaderError(source, "empty", record=record, field="sample_id")
    if sample_id in seen_samples:
        raise LoaderError(source, "duplicate sample_id in this file", record=record, field="sample_id")
    seen_samples.add(sample_id)
    chain_raw = optional(q, "gold_causal_structure", dict, path=source, record=record) or {}
    chain_rec = f"{record} / gold_causal_structure"
    dependency = optional(chain_raw, "dependency_type", str, path=source, record=chain_rec) or "CAUSAL_FOLLOW"
    if dependency not in DEPENDENCY_TYPES:
        raise LoaderError(source, f"{dependency!r} is not one of {', '.join(DEPENDENCY_TYPES)}",
                          record=chain_rec, field="dependency_type")
    chain = CausalStructure(
        dependency_type=dependency,
        local_id=optional(chain_raw, "local_id", str, path=source, record=chain_rec) or "",
        attribution_target=optional(chain_raw, "attribution_target", str, path=source, record=chain_rec) or "",
        supporting_evidence_keys=_keys(chain_raw, "supporting_evidence_keys", source, chain_rec, pointers))
    return CaseQuestion(sample_id=sample_id, viewer_id=text("viewer_id"), query_text=text("query_text"),
                        gold_answer=answer_text(q.get("gold_answer"), path=source, record=record,
                                                field="gold_answer") or "",
                        task_type=text("task_type") or "chain_reconstruction",
                        gold_evidence_keys=_keys(q, "gold_evidence_keys", source, record, pointers),
                        gold_causal_structure=chain,
                        metadata=optional(q, "metadata", dict, path=source, record=record) or {})


def _keys(obj: dict, key: str, source, record: str, pointers: set[str]) -> list[str]:
    values = optional(obj, key, list, path=source, record=record) or []
    for n, value in enumerate(values):
        check(value, str, path=source, record=record, field=f"{key}[{n}]")
        if value not in pointers:
            raise LoaderError(source, f"{value!r} is not a turn pointer of this case", record=record,
                              field=f"{key}[{n}]")
    if len(set(values)) != len(values):
        raise LoaderError(source, "a pointer is listed twice", record=record, field=key)
    return list(values)

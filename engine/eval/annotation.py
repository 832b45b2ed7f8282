"""SCDS-style diagnostic cases over a loaded conversation: models, storage, JSON, scoring.

MemLoom's Synthetic Causal Diagnostic Suite (seeds/memloom.txt App. C) annotates
at four levels: a scenario (``scenario_id``, participants, ordered turns), turns
addressed by a canonical pointer ``scenario_id:tNN``, questions (``sample_id``,
``viewer_id``, ``query_text``, ``gold_answer``, ``task_type``,
``gold_evidence_keys``, ``metadata``) and a causal annotation
(``gold_causal_structure``: dependency type, local identifier, attribution target,
``supporting_evidence_keys``). Here a scenario is cut out of a conversation the
workbench has loaded, so every pointer maps to a dataset turn id (``D2:6``);
retrievers rank dataset turn ids and scoring goes through that mapping.

Cases live in two tables of the session's own database (``annotation_case`` and
``annotation_question``), written on every change, so annotations travel with
the memory they were made against. A third, ``annotation_edit``, records who
made each change (the store's `author`: the signed-in identity on the
workbench): one row per case or question a write actually changed, in order.

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

import json
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import Engine
from sqlmodel import Field, Session, SQLModel, delete, func, select

from engine.core.conversation import Conversation, Turn
from engine.eval.metrics import recall_at_k, strict_chain_recall
from engine.loaders.errors import LoaderError, answer_text, check, optional, require
from engine.store.database import create_tables, database_url, open_database, write_transaction

FORMAT = "memwb-scds-cases"
VERSION = 1
# MemLoom's compact relation closure (seeds/memloom.txt §3.5.4).
DEPENDENCY_TYPES = ("CAUSAL_FOLLOW", "TEMPORAL_NEXT", "STATE_SUCCESSOR", "SAME_EVENT")
# SCDS causal diagnostic task families (seeds/memloom.txt App. C, Stage 3).
TASK_TYPES = ("premise_retrieval", "chain_reconstruction", "causal_verification")
SCENARIO_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
_POINTER = re.compile(r"(?P<scenario>[A-Za-z0-9][A-Za-z0-9_.-]*):t(?P<n>\d+)")

Retriever = Callable[[str], Sequence[str]]


# -- models ---------------------------------------------------------------------------
@dataclass
class CausalStructure:
    """``gold_causal_structure``: the chain a causal question depends on."""

    dependency_type: str = "CAUSAL_FOLLOW"
    local_id: str = ""
    attribution_target: str = ""
    supporting_evidence_keys: list[str] = field(default_factory=list)


@dataclass
class CaseQuestion:
    sample_id: str
    viewer_id: str = ""
    query_text: str = ""
    gold_answer: str = ""
    task_type: str = "chain_reconstruction"
    gold_evidence_keys: list[str] = field(default_factory=list)
    gold_causal_structure: CausalStructure = field(default_factory=CausalStructure)
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass
class CaseTurn:
    pointer: str      # scenario_id:tNN
    turn_id: str      # the dataset's own turn id in the loaded conversation


@dataclass
class Case:
    """One scenario: turns of the conversation under stable pointers, and questions about them."""

    scenario_id: str
    conversation_id: str
    title: str = ""
    turns: list[CaseTurn] = field(default_factory=list)
    questions: list[CaseQuestion] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not SCENARIO_ID.fullmatch(self.scenario_id):
            raise ValueError(f"scenario_id {self.scenario_id!r}: use letters, digits, '_', '.' or '-' "
                             "(it prefixes every turn pointer)")

    # -- turns ---------------------------------------------------------------
    def pointer_of(self, turn_id: str) -> str | None:
        return next((t.pointer for t in self.turns if t.turn_id == turn_id), None)

    def turn_id(self, pointer: str) -> str:
        for t in self.turns:
            if t.pointer == pointer:
                return t.turn_id
        raise KeyError(f"{pointer!r} is not a turn of case {self.scenario_id!r}")

    def resolve(self, keys: Iterable[str]) -> list[str]:
        """Pointers -> dataset turn ids, which is what retrievers rank."""
        return [self.turn_id(k) for k in keys]

    def include(self, turn: Turn) -> str:
        """Add `turn` to the scenario (if absent); its pointer follows its position in the conversation."""
        existing = self.pointer_of(turn.id)
        if existing:
            return existing
        taken = {_pointer_number(t.pointer) for t in self.turns}
        number = turn.index + 1 if turn.index + 1 not in taken else max(taken) + 1
        pointer = f"{self.scenario_id}:t{number:02d}"
        self.turns.append(CaseTurn(pointer, turn.id))
        self.turns.sort(key=lambda t: _pointer_number(t.pointer))
        return pointer

    def exclude(self, turn_id: str) -> None:
        """Drop a turn from the scenario and from every question that cites it."""
        pointer = self.pointer_of(turn_id)
        if pointer is None:
            return
        self.turns = [t for t in self.turns if t.turn_id != turn_id]
        for q in self.questions:
            q.gold_evidence_keys = [k for k in q.gold_evidence_keys if k != pointer]
            chain = q.gold_causal_structure
            chain.supporting_evidence_keys = [k for k in chain.supporting_evidence_keys if k != pointer]

    def mark(self, sample_id: str, turn: Turn, on: bool, chain: bool = False) -> None:
        """Add `turn` to (or drop it from) a question's gold evidence, or its causal chain if `chain`."""
        q = self.question(sample_id)
        keys = q.gold_causal_structure.supporting_evidence_keys if chain else q.gold_evidence_keys
        pointer = self.include(turn) if on else self.pointer_of(turn.id)
        wanted = set(keys) | {pointer} if on else set(keys) - {pointer}
        keys[:] = [t.pointer for t in self.turns if t.pointer in wanted]

    # -- questions -----------------------------------------------------------
    def question(self, sample_id: str) -> CaseQuestion:
        for q in self.questions:
            if q.sample_id == sample_id:
                return q
        raise KeyError(f"no question {sample_id!r} in case {self.scenario_id!r}")

    def add_question(self, **fields) -> CaseQuestion:
        taken = {q.sample_id for q in self.questions}
        n = len(self.questions) + 1
        while f"{self.scenario_id}-q{n}" in taken:
            n += 1
        q = CaseQuestion(sample_id=f"{self.scenario_id}-q{n}", **fields)
        self.questions.append(q)
        return q

    def remove_question(self, sample_id: str) -> None:
        self.questions = [q for q in self.questions if q.sample_id != sample_id]


def _pointer_number(pointer: str) -> int:
    return int(pointer.rsplit(":t", 1)[1])


# -- persistence ------------------------------------------------------------------------
class CaseRow(SQLModel, table=True):
    __tablename__ = "annotation_case"
    __table_args__ = {"extend_existing": True}
    conversation_id: str = Field(primary_key=True)
    scenario_id: str = Field(primary_key=True)
    position: int
    title: str
    turns: str                     # JSON [{pointer, turn_id}]


class QuestionRow(SQLModel, table=True):
    __tablename__ = "annotation_question"
    __table_args__ = {"extend_existing": True}
    conversation_id: str = Field(primary_key=True)
    scenario_id: str = Field(primary_key=True)
    sample_id: str = Field(primary_key=True)
    position: int
    viewer_id: str
    query_text: str
    gold_answer: str
    task_type: str
    gold_evidence_keys: str        # JSON list of pointers
    dependency_type: str
    local_id: str
    attribution_target: str
    supporting_evidence_keys: str  # JSON list of pointers
    extra: str                     # JSON of the question's `metadata` (a reserved name in SQLModel)


class EditRow(SQLModel, table=True):
    """Who changed a case (`sample_id` empty: its title or turns) or one of its questions, and how."""
    __tablename__ = "annotation_edit"
    __table_args__ = {"extend_existing": True}
    seq: int | None = Field(default=None, primary_key=True)
    conversation_id: str
    scenario_id: str
    sample_id: str                 # "" for the case itself
    action: str                    # "saved", "deleted" or "imported"
    author: str


@dataclass(frozen=True)
class Edit:
    scenario_id: str
    sample_id: str
    action: str
    author: str


_TABLES = (CaseRow.__table__, QuestionRow.__table__, EditRow.__table__)


@dataclass(frozen=True)
class ImportReport:
    added: tuple[str, ...]
    unchanged: tuple[str, ...]     # already stored with identical content

    def line(self) -> str:
        return f"added {len(self.added)} case(s), {len(self.unchanged)} already stored unchanged"


class AnnotationStore:
    """Cases in the session database; every call is its own transaction. Every write is recorded as made by
    `author`; a store opened without one reads only."""

    def __init__(self, engine: Engine, author: str | None = None):
        self.engine, self.author = engine, (author or "").strip()
        create_tables(engine, list(_TABLES))

    @classmethod
    def at(cls, target: str | Path, author: str | None = None) -> AnnotationStore:
        """Open the cases of a database file or URL (e.g. a workbench's `db_path`)."""
        return cls(open_database(database_url(target)), author)

    def _writing(self):
        if not self.author:
            raise ValueError("this annotation store was opened without an author, so it only reads: every "
                             "change is recorded with who made it")
        return write_transaction(self.engine)

    def edits(self, conversation_id: str) -> list[Edit]:
        """Every recorded change to the conversation's cases, oldest first."""
        with Session(self.engine) as s:
            rows = s.exec(select(EditRow).where(EditRow.conversation_id == conversation_id)
                          .order_by(EditRow.seq)).all()
        return [Edit(r.scenario_id, r.sample_id, r.action, r.author) for r in rows]

    def last_authors(self, conversation_id: str, scenario_id: str) -> dict[str, str]:
        """Who last changed the case ("") and each of its questions (by sample_id)."""
        return {e.sample_id: e.author for e in self.edits(conversation_id) if e.scenario_id == scenario_id}

    def cases(self, conversation_id: str) -> list[Case]:
        with Session(self.engine) as s:
            rows = s.exec(select(CaseRow).where(CaseRow.conversation_id == conversation_id)
                          .order_by(CaseRow.position)).all()
            questions = s.exec(select(QuestionRow).where(QuestionRow.conversation_id == conversation_id)
                               .order_by(QuestionRow.position)).all()
        by_case: dict[str, list[CaseQuestion]] = {}
        for q in questions:
            by_case.setdefault(q.scenario_id, []).append(_question_from_row(q))
        return [Case(scenario_id=r.scenario_id, conversation_id=r.conversation_id, title=r.title,
                     turns=[CaseTurn(**t) for t in json.loads(r.turns)],
                     questions=by_case.get(r.scenario_id, [])) for r in rows]

    def get(self, conversation_id: str, scenario_id: str) -> Case | None:
        return next((c for c in self.cases(conversation_id) if c.scenario_id == scenario_id), None)

    def save(self, case: Case) -> None:
        """Write the case and its questions as they are now (questions it no longer has are removed)."""
        with self._writing() as s:
            _write(s, case, self.author, "saved")

    def delete(self, conversation_id: str, scenario_id: str) -> None:
        with self._writing() as s:
            s.exec(delete(QuestionRow).where((QuestionRow.conversation_id == conversation_id)
                                             & (QuestionRow.scenario_id == scenario_id)))
            s.exec(delete(CaseRow).where((CaseRow.conversation_id == conversation_id)
                                         & (CaseRow.scenario_id == scenario_id)))
            s.add(EditRow(conversation_id=conversation_id, scenario_id=scenario_id, sample_id="", action="deleted",
                          author=self.author))

    def import_json(self, text: str, source: str | Path, conversation: Conversation) -> ImportReport:
        """Validate the whole document, then add its cases in one transaction."""
        return self.add_all(parse_document(_json(text, source), source, conversation), source)

    def add_all(self, cases: list[Case], source: str | Path = "cases") -> ImportReport:
        """Add new cases; identical ones are skipped, a differing case under a stored id is an error."""
        fresh: list[Case] = []
        unchanged: list[str] = []
        stored: dict[str, dict[str, Case]] = {}
        for i, case in enumerate(cases):
            if case.conversation_id not in stored:
                stored[case.conversation_id] = {c.scenario_id: c for c in self.cases(case.conversation_id)}
            old = stored[case.conversation_id].get(case.scenario_id)
            if old is None:
                fresh.append(case)
            elif old == case:
                unchanged.append(case.scenario_id)
            else:
                raise LoaderError(source, "a different case with this id is already stored; rename it in the "
                                  "file (pointers included) or delete the stored case first",
                                  record=_case_record(i, case.scenario_id), field="scenario_id")
        with self._writing() as s:
            for case in fresh:
                _write(s, case, self.author, "imported")
        return ImportReport(tuple(c.scenario_id for c in fresh), tuple(unchanged))


def _write(s: Session, case: Case, author: str, action: str) -> None:
    """Store the case as it is now and record `author` against the case and each question this changed."""
    key = (case.conversation_id, case.scenario_id)
    row = s.get(CaseRow, key)
    before = None if row is None else (row.title, row.turns)
    if row is None:
        last = s.exec(select(func.max(CaseRow.position))
                      .where(CaseRow.conversation_id == case.conversation_id)).one()
        row = CaseRow(conversation_id=case.conversation_id, scenario_id=case.scenario_id,
                      position=(last or 0) + 1, title="", turns="[]")
    row.title = case.title
    row.turns = json.dumps([asdict(t) for t in case.turns], ensure_ascii=False)
    s.add(row)
    changed = [("", action)] if before != (row.title, row.turns) else []
    keep = [q.sample_id for q in case.questions]
    stored = {r.sample_id: r for r in s.exec(select(QuestionRow).where(
        (QuestionRow.conversation_id == case.conversation_id) & (QuestionRow.scenario_id == case.scenario_id)))}
    changed += [(sample_id, "deleted") for sample_id in sorted(set(stored) - set(keep))]
    s.exec(delete(QuestionRow).where((QuestionRow.conversation_id == case.conversation_id)
                                     & (QuestionRow.scenario_id == case.scenario_id)
                                     & QuestionRow.sample_id.not_in(keep)))
    for position, q in enumerate(case.questions):
        fresh = _question_row(case, q, position)
        old = stored.get(q.sample_id)
        if old is None or old.model_dump(exclude={"position"}) != fresh.model_dump(exclude={"position"}):
            changed.append((q.sample_id, action))
        s.merge(fresh)
    for sample_id, done in changed:
        s.add(EditRow(conversation_id=case.conversation_id, scenario_id=case.scenario_id, sample_id=sample_id,
                      action=done, author=author))


def _question_row(case: Case, q: CaseQuestion, position: int) -> QuestionRow:
    chain = q.gold_causal_structure
    return QuestionRow(conversation_id=case.conversation_id, scenario_id=case.scenario_id,
                       sample_id=q.sample_id, position=position, viewer_id=q.viewer_id, query_text=q.query_text,
                       gold_answer=q.gold_answer, task_type=q.task_type,
                       gold_evidence_keys=json.dumps(q.gold_evidence_keys),
                       dependency_type=chain.dependency_type, local_id=chain.local_id,
                       attribution_target=chain.attribution_target,
                       supporting_evidence_keys=json.dumps(chain.supporting_evidence_keys),
                       extra=json.dumps(q.metadata, ensure_ascii=False))


def _question_from_row(r: QuestionRow) -> CaseQuestion:
    return CaseQuestion(sample_id=r.sample_id, viewer_id=r.viewer_id, query_text=r.query_text,
                        gold_answer=r.gold_answer, task_type=r.task_type,
                        gold_evidence_keys=json.loads(r.gold_evidence_keys),
                        gold_causal_structure=CausalStructure(
                            dependency_type=r.dependency_type, local_id=r.local_id,
                            attribution_target=r.attribution_target,
                            supporting_evidence_keys=json.loads(r.supporting_evidence_keys)),
                        metadata=json.loads(r.extra))


# -- JSON --------------------------------------------------------------------------------
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


def _json(text: str, source: str | Path) -> Any:
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


def _case_record(i: int, scenario_id: Any) -> str:
    return f"cases[{i}] {scenario_id!r}" if isinstance(scenario_id, str) else f"cases[{i}]"


def _parse_case(item: Any, i: int, source, conversation: Conversation, seen_cases: set[str],
                seen_samples: set[str]) -> Case:
    record = _case_record(i, item.get("scenario_id") if isinstance(item, dict) else None)
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
        m = _POINTER.fullmatch(pointer)
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


# -- scoring -----------------------------------------------------------------------------
@dataclass(frozen=True)
class QuestionScore:
    """One question against one retriever: R@K over gold evidence and SCR over the causal chain."""

    sample_id: str
    retriever: str
    k: int
    recall: float | None        # None: no gold_evidence_keys annotated
    scr: float | None           # None: no supporting_evidence_keys annotated
    retrieved: tuple[str, ...]  # top-K dataset turn ids
    missed: tuple[str, ...]     # gold or chain turn ids absent from the top-K


def score_case(case: Case, retrievers: dict[str, Retriever], k: int = 5) -> list[QuestionScore]:
    """Score every question that has query text; a retriever maps a query to ranked dataset turn ids."""
    scores = []
    for q in case.questions:
        if not q.query_text.strip():
            continue
        gold = case.resolve(q.gold_evidence_keys)
        chain = case.resolve(q.gold_causal_structure.supporting_evidence_keys)
        wanted = list(dict.fromkeys(gold + chain))
        for name, retrieve in retrievers.items():
            top = list(retrieve(q.query_text))[:k]
            scores.append(QuestionScore(
                sample_id=q.sample_id, retriever=name, k=k,
                recall=recall_at_k(top, gold, k) if gold else None,
                scr=strict_chain_recall(top, chain, k) if chain else None,
                retrieved=tuple(top), missed=tuple(t for t in wanted if t not in top)))
    return scores


def summarize(scores: Iterable[QuestionScore]) -> dict[str, dict[str, float | int | None]]:
    """Mean R@K and SCR per retriever, each over the questions where it is defined (counts alongside)."""
    grouped: dict[str, list[QuestionScore]] = {}
    for s in scores:
        grouped.setdefault(s.retriever, []).append(s)
    out = {}
    for name, group in grouped.items():
        recalls = [s.recall for s in group if s.recall is not None]
        scrs = [s.scr for s in group if s.scr is not None]
        out[name] = {"questions": len(group),
                     "recall": sum(recalls) / len(recalls) if recalls else None, "recall_n": len(recalls),
                     "scr": sum(scrs) / len(scrs) if scrs else None, "scr_n": len(scrs)}
    return out

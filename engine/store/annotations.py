"""SCDS diagnostic cases in the session's own database, with who changed what.

Cases live in two tables of the session's own database (``annotation_case`` and
``annotation_question``), written on every change, so annotations travel with
the memory they were made against. A third, ``annotation_edit``, records who
made each change (the store's `author`: the signed-in identity on the
workbench): one row per case or question a write actually changed, in order.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

from sqlalchemy import Engine
from sqlmodel import Field, Session, SQLModel, delete, func, select

from engine.core.cases import Case, CaseQuestion, CaseTurn, CausalStructure
from engine.core.conversation import Conversation
from engine.loaders.cases import case_record, parse_document, parse_json
from engine.loaders.errors import LoaderError
from engine.store.database import create_tables, database_url, open_database, write_transaction


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
        create_tables(engine, list(_TABLES) + _team_tables())

    @classmethod
    def at(cls, target: str | Path, author: str | None = None) -> AnnotationStore:
        """Open the cases of a database file or URL (e.g. a workbench's `db_path`)."""
        return cls(open_database(database_url(target)), author)

    def _require_author(self) -> None:
        if not self.author:
            raise ValueError("this annotation store was opened without an author, so it only reads: every "
                             "change is recorded with who made it")

    def _writing(self):
        self._require_author()
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

    def save_within(self, s: Session, case: Case) -> None:
        """`save` inside a transaction someone else holds on this database (an adjudication and the gold it
        writes commit together or not at all)."""
        self._require_author()
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
        return self.add_all(parse_document(parse_json(text, source), source, conversation), source)

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
                                  record=case_record(i, case.scenario_id), field="scenario_id")
        with self._writing() as s:
            for case in fresh:
                _write(s, case, self.author, "imported")
        return ImportReport(tuple(c.scenario_id for c in fresh), tuple(unchanged))


def _team_tables() -> list:
    """The team's tables (labels, adjudications, splits, decision labels) live beside the cases in every database
    that has cases, so a session's tables and its dump's are the same whichever store wrote first."""
    from engine.store.decision_labels import DecisionLabelRow
    from engine.store.labels import TABLES

    return [*TABLES, DecisionLabelRow.__table__]


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


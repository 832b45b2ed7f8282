"""Annotators' labels, submissions, adjudications, splits and the test lock, in the session's own database.

Beside the gold cases of `engine.store.annotations`, in the same database (SQLite or PostgreSQL):

- ``annotation_label``: every version of every annotator's label, append-only, with author and time. The label
  in effect is an annotator's latest version not undone; undo appends a row naming the version it undoes, so
  nothing is ever lost and the history reads in order.
- ``annotation_submission``: who has submitted a case (they see the others' labels from then on).
- ``annotation_case_state``: a case's split (validation or test) and whether a reviewer opened adjudication
  (everyone sees everyone's labels from then on).
- ``annotation_adjudication``: each gold a reviewer merged, with its lineage (`engine.core.labels`).
- ``annotation_case_set``: the splits locked in this conversation's case set (the test split, so tuning code
  refuses it).
"""
from __future__ import annotations

import copy
import json
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path

from sqlalchemy import Engine
from sqlmodel import Field, Session, SQLModel, select

from engine.core.access import Action
from engine.core.cases import DEPENDENCY_TYPES, Case
from engine.core.errors import WorkbenchError
from engine.core.labels import Adjudication, Label
from engine.core.splits import SPLITS
from engine.store.database import create_tables, database_url, open_database, write_transaction


class LabelRow(SQLModel, table=True):
    __tablename__ = "annotation_label"
    __table_args__ = {"extend_existing": True}
    seq: int | None = Field(default=None, primary_key=True)
    conversation_id: str = Field(index=True)
    scenario_id: str
    sample_id: str
    annotator: str
    evidence: str                  # JSON list of pointers
    chain: str                     # JSON list of pointers, in chain order
    gold_answer: str
    dependency_type: str
    at: str                        # UTC, ISO 8601
    undoes: int | None = None      # an undo row: the version it takes back


class SubmissionRow(SQLModel, table=True):
    __tablename__ = "annotation_submission"
    __table_args__ = {"extend_existing": True}
    conversation_id: str = Field(primary_key=True)
    scenario_id: str = Field(primary_key=True)
    annotator: str = Field(primary_key=True)
    at: str


class CaseStateRow(SQLModel, table=True):
    __tablename__ = "annotation_case_state"
    __table_args__ = {"extend_existing": True}
    conversation_id: str = Field(primary_key=True)
    scenario_id: str = Field(primary_key=True)
    split: str = ""                # "", "validation" or "test"
    adjudication_opened_by: str = ""
    adjudication_opened_at: str = ""


class AdjudicationRow(SQLModel, table=True):
    __tablename__ = "annotation_adjudication"
    __table_args__ = {"extend_existing": True}
    seq: int | None = Field(default=None, primary_key=True)
    conversation_id: str = Field(index=True)
    scenario_id: str
    sample_id: str
    reviewer: str
    at: str
    method: str
    labels: str                    # JSON [[annotator, version]]
    gold: str                      # JSON {evidence, chain, gold_answer, dependency_type}
    sources: str                   # JSON


class CaseSetRow(SQLModel, table=True):
    __tablename__ = "annotation_case_set"
    __table_args__ = {"extend_existing": True}
    conversation_id: str = Field(primary_key=True)
    locked: str = "[]"             # JSON list of locked splits
    locked_by: str = ""
    locked_at: str = ""


TABLES = [t.__table__ for t in (LabelRow, SubmissionRow, CaseStateRow, AdjudicationRow, CaseSetRow)]


class LabelError(WorkbenchError, ValueError):
    """A label or adjudication that cannot be stored as asked; nothing was written."""


def utc_now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


class LabelStore:
    """Labels and their workflow in a session database; every call is its own transaction, and every write is
    recorded as made by `author` (a store opened without one reads only). `check(action)` is asked before each
    write: the workbench passes its signed-in role check, so a crafted event cannot write past it."""

    def __init__(self, engine: Engine, author: str | None = None, clock: Callable[[], str] = utc_now):
        self.engine, self.author, self.clock = engine, (author or "").strip(), clock
        create_tables(engine, TABLES)

    @classmethod
    def at(cls, target: str | Path, author: str | None = None) -> LabelStore:
        return cls(open_database(database_url(target)), author)

    def check(self, action: Action) -> None:
        """Refuse `action` for this author (the workbench's store checks the signed-in role here)."""

    def _writing(self, action: Action):
        self.check(action)
        if not self.author:
            raise LabelError("this label store was opened without an author, so it only reads: every label is "
                             "recorded with who made it")
        return write_transaction(self.engine)

    # -- labels --------------------------------------------------------------------------------------------
    def history(self, conversation_id: str, scenario_id: str | None = None) -> list[LabelRow]:
        """Every stored version (undo rows included), oldest first."""
        query = select(LabelRow).where(LabelRow.conversation_id == conversation_id)
        if scenario_id is not None:
            query = query.where(LabelRow.scenario_id == scenario_id)
        with Session(self.engine) as s:
            return list(s.exec(query.order_by(LabelRow.seq)).all())

    def labels(self, conversation_id: str, scenario_id: str) -> dict[str, dict[str, Label]]:
        """The labels in effect: sample_id -> annotator -> Label (an emptied label is left out)."""
        out: dict[str, dict[str, Label]] = {}
        for row in _in_effect(self.history(conversation_id, scenario_id)).values():
            label = _label(row)
            if not label.empty:
                out.setdefault(label.sample_id, {})[label.annotator] = label
        return {k: dict(sorted(v.items())) for k, v in out.items()}

    def label(self, conversation_id: str, scenario_id: str, sample_id: str, annotator: str) -> Label | None:
        return self.labels(conversation_id, scenario_id).get(sample_id, {}).get(annotator)

    def save_label(self, case: Case, sample_id: str, evidence: list[str], chain: list[str], gold_answer: str,
                   dependency_type: str) -> Label | None:
        """Store the author's label of a question as it is now (a new version); None if nothing changed."""
        case.question(sample_id)                                     # KeyError names a missing question
        pointers = {t.pointer for t in case.turns}
        bad = [p for p in [*evidence, *chain] if p not in pointers]
        if bad:
            raise LabelError(f"{', '.join(bad)}: not a turn pointer of case {case.scenario_id!r}")
        if len(set(chain)) != len(chain) or len(set(evidence)) != len(evidence):
            raise LabelError("a turn is picked twice")
        if dependency_type not in DEPENDENCY_TYPES:
            raise LabelError(f"{dependency_type!r} is not one of {', '.join(DEPENDENCY_TYPES)}")
        order = [t.pointer for t in case.turns]
        evidence = sorted(evidence, key=order.index)
        current = self.label(case.conversation_id, case.scenario_id, sample_id, self.author)
        fresh = (tuple(evidence), tuple(chain), gold_answer, dependency_type)
        if current is not None and (current.evidence, current.chain, current.gold_answer,
                                    current.dependency_type) == fresh:
            return None
        if current is None and not (evidence or chain or gold_answer.strip()):
            return None
        with self._writing(Action.LABEL) as s:
            row = LabelRow(conversation_id=case.conversation_id, scenario_id=case.scenario_id, sample_id=sample_id,
                           annotator=self.author, evidence=json.dumps(evidence), chain=json.dumps(chain),
                           gold_answer=gold_answer, dependency_type=dependency_type, at=self.clock())
            s.add(row)
            s.flush()
            return _label(row)

    def undo(self, conversation_id: str, scenario_id: str) -> LabelRow | None:
        """Take back the author's last label change in the case (the version before it is in effect again);
        returns the version undone, or None when there is nothing left to undo."""
        rows = self.history(conversation_id, scenario_id)
        undone = {r.undoes for r in rows if r.undoes is not None}
        target = next((r for r in reversed(rows) if r.annotator == self.author and r.undoes is None
                       and r.seq not in undone), None)
        if target is None:
            return None
        with self._writing(Action.LABEL) as s:
            s.add(LabelRow(conversation_id=conversation_id, scenario_id=scenario_id, sample_id=target.sample_id,
                           annotator=self.author, evidence="[]", chain="[]", gold_answer="",
                           dependency_type=target.dependency_type, at=self.clock(), undoes=target.seq))
        return target

    # -- who sees whom -------------------------------------------------------------------------------------------
    def submit(self, conversation_id: str, scenario_id: str) -> None:
        with self._writing(Action.LABEL) as s:
            s.merge(SubmissionRow(conversation_id=conversation_id, scenario_id=scenario_id, annotator=self.author,
                                  at=self.clock()))

    def submitted(self, conversation_id: str, scenario_id: str) -> dict[str, str]:
        """annotator -> when they submitted the case."""
        with Session(self.engine) as s:
            rows = s.exec(select(SubmissionRow).where((SubmissionRow.conversation_id == conversation_id)
                                                      & (SubmissionRow.scenario_id == scenario_id))).all()
        return {r.annotator: r.at for r in sorted(rows, key=lambda r: r.annotator)}

    def open_adjudication(self, conversation_id: str, scenario_id: str) -> None:
        with self._writing(Action.ADJUDICATE) as s:
            row = s.get(CaseStateRow, (conversation_id, scenario_id)) or \
                CaseStateRow(conversation_id=conversation_id, scenario_id=scenario_id)
            if not row.adjudication_opened_by:
                row.adjudication_opened_by, row.adjudication_opened_at = self.author, self.clock()
            s.add(row)

    def state(self, conversation_id: str, scenario_id: str) -> CaseStateRow:
        with Session(self.engine) as s:
            row = s.get(CaseStateRow, (conversation_id, scenario_id))
        return row or CaseStateRow(conversation_id=conversation_id, scenario_id=scenario_id)

    def adjudication_open(self, conversation_id: str, scenario_id: str) -> bool:
        return bool(self.state(conversation_id, scenario_id).adjudication_opened_by)

    def sees_all(self, conversation_id: str, scenario_id: str, who: str) -> bool:
        """Whether `who` may see the other annotators' labels: once they submitted, or adjudication is open."""
        return who in self.submitted(conversation_id, scenario_id) or self.adjudication_open(conversation_id,
                                                                                               scenario_id)

    def visible_labels(self, conversation_id: str, scenario_id: str, who: str) -> dict[str, dict[str, Label]]:
        """The labels `who` may see: their own only, until they submit or a reviewer opens adjudication."""
        labels = self.labels(conversation_id, scenario_id)
        if self.sees_all(conversation_id, scenario_id, who):
            return labels
        return {sample: {who: by[who]} for sample, by in labels.items() if who in by}

    # -- adjudication --------------------------------------------------------------------------------------------
    def record_adjudication(self, adjudication: Adjudication, case: Case,
                            write_gold: Callable[[Session, Case], None]) -> Adjudication:
        """Keep the adjudication with its lineage and write its gold into the case with `write_gold` (the
        annotation store's `save_within`, which records the reviewer against the question), in one transaction of
        this database: a gold never stands without the adjudication it came from, nor an adjudication without
        its gold."""
        if not self.adjudication_open(case.conversation_id, case.scenario_id):
            raise LabelError(f"adjudication of case {case.scenario_id!r} is not open: a reviewer opens it first "
                             "(annotators see each other's labels from then on)")
        stamped = Adjudication(**{**adjudication.__dict__, "reviewer": self.author, "at": self.clock()})
        adjudicated = copy.deepcopy(case)
        stamped.apply(adjudicated)
        with self._writing(Action.ADJUDICATE) as s:
            row = AdjudicationRow(conversation_id=case.conversation_id, scenario_id=case.scenario_id,
                                  sample_id=stamped.sample_id, reviewer=stamped.reviewer, at=stamped.at,
                                  method=stamped.method, labels=json.dumps([list(x) for x in stamped.labels]),
                                  gold=json.dumps({"evidence": list(stamped.evidence), "chain": list(stamped.chain),
                                                   "gold_answer": stamped.gold_answer,
                                                   "dependency_type": stamped.dependency_type}),
                                  sources=json.dumps(stamped.sources, ensure_ascii=False))
            s.add(row)
            s.flush()
            seq = row.seq
            write_gold(s, adjudicated)
        stamped.apply(case)
        return Adjudication(**{**stamped.__dict__, "seq": seq})

    def adjudications(self, conversation_id: str, scenario_id: str | None = None) -> list[Adjudication]:
        """Every adjudication, oldest first (the last one of a question is its gold's lineage)."""
        query = select(AdjudicationRow).where(AdjudicationRow.conversation_id == conversation_id)
        if scenario_id is not None:
            query = query.where(AdjudicationRow.scenario_id == scenario_id)
        with Session(self.engine) as s:
            rows = s.exec(query.order_by(AdjudicationRow.seq)).all()
        out = []
        for r in rows:
            gold = json.loads(r.gold)
            out.append(Adjudication(r.scenario_id, r.sample_id, r.reviewer, r.method,
                                    tuple((a, v) for a, v in json.loads(r.labels)), tuple(gold["evidence"]),
                                    tuple(gold["chain"]), gold["gold_answer"], gold["dependency_type"],
                                    json.loads(r.sources), r.at, r.seq))
        return out

    # -- splits and the lock ---------------------------------------------------------------------------------------
    def set_split(self, conversation_id: str, scenario_id: str, split: str) -> None:
        if split not in ("", *SPLITS):
            raise LabelError(f"split {split!r}: use one of {', '.join(SPLITS)} (or none)")
        if split != self.state(conversation_id, scenario_id).split and \
                {split, self.state(conversation_id, scenario_id).split} & set(self.locked(conversation_id)):
            raise LabelError(f"the {' and '.join(sorted(set(self.locked(conversation_id))))} split is locked: a "
                             "case cannot move into or out of it")
        with self._writing(Action.ANNOTATE) as s:
            row = s.get(CaseStateRow, (conversation_id, scenario_id)) or \
                CaseStateRow(conversation_id=conversation_id, scenario_id=scenario_id)
            row.split = split
            s.add(row)

    def splits(self, conversation_id: str) -> dict[str, str]:
        """scenario_id -> split, for the cases that have one."""
        with Session(self.engine) as s:
            rows = s.exec(select(CaseStateRow).where(CaseStateRow.conversation_id == conversation_id)).all()
        return {r.scenario_id: r.split for r in sorted(rows, key=lambda r: r.scenario_id) if r.split}

    def lock(self, conversation_id: str, split: str = "test", locked: bool = True) -> None:
        """Lock (or unlock) a split of this conversation's case set: tuning code refuses a locked split."""
        if split not in SPLITS:
            raise LabelError(f"split {split!r}: use one of {', '.join(SPLITS)}")
        with self._writing(Action.ADJUDICATE) as s:
            row = s.get(CaseSetRow, conversation_id) or CaseSetRow(conversation_id=conversation_id)
            now = set(json.loads(row.locked))
            now = now | {split} if locked else now - {split}
            row.locked, row.locked_by, row.locked_at = json.dumps(sorted(now)), self.author, self.clock()
            s.add(row)

    def locked(self, conversation_id: str) -> list[str]:
        with Session(self.engine) as s:
            row = s.get(CaseSetRow, conversation_id)
        return json.loads(row.locked) if row else []


def _in_effect(rows: list[LabelRow]) -> dict[tuple[str, str], LabelRow]:
    """(sample_id, annotator) -> the latest version not undone."""
    undone = {r.undoes for r in rows if r.undoes is not None}
    out: dict[tuple[str, str], LabelRow] = {}
    for r in rows:
        if r.undoes is None and r.seq not in undone:
            out[(r.sample_id, r.annotator)] = r
    return out


def _label(r: LabelRow) -> Label:
    return Label(r.scenario_id, r.sample_id, r.annotator, tuple(json.loads(r.evidence)), tuple(json.loads(r.chain)),
                 r.gold_answer, r.dependency_type, r.seq, r.at)

"""Decision labels an annotator makes on any session: two turns and how the later one relates to the earlier.

A researcher builds a decision set (docs/DECISIONS.md) from their own conversations this way: on the Annotate
page they pick two turns and say the later one supersedes the earlier (`update`), restates it (`merge`), is
caused by it (`cause`) or is unrelated (`unrelated`). Each label is a row of ``decision_label`` in the session's
database with its annotator and time; undo appends a row naming the label it takes back. `overlay_lines` writes
them as a decision overlay, which `memwb bench --dataset decisions FILE --decisions OVERLAY` scores.
"""
from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from sqlalchemy import Engine
from sqlmodel import Field, Session, SQLModel, select

from engine.core.access import Action
from engine.core.conversation import Conversation
from engine.core.decision import Decision, DecisionKind
from engine.store.database import create_tables, database_url, open_database, write_transaction
from engine.store.labels import LabelError, utc_now

# What the annotator says of the later turn -> the decision kind of the decision-set format.
RELATIONS = {"supersedes": DecisionKind.UPDATE, "restates": DecisionKind.MERGE, "is caused by": DecisionKind.CAUSE,
             "is unrelated to": DecisionKind.UNRELATED}


class DecisionLabelRow(SQLModel, table=True):
    __tablename__ = "decision_label"
    __table_args__ = {"extend_existing": True}
    seq: int | None = Field(default=None, primary_key=True)
    conversation_id: str = Field(index=True)
    earlier: str
    later: str
    kind: str
    note: str = ""
    annotator: str
    at: str
    undoes: int | None = None


class DecisionLabels:
    """Decision labels in a session database; writes are recorded under `author` after `check(action)`."""

    def __init__(self, engine: Engine, author: str | None = None, clock: Callable[[], str] = utc_now):
        self.engine, self.author, self.clock = engine, (author or "").strip(), clock
        create_tables(engine, [DecisionLabelRow.__table__])

    @classmethod
    def at(cls, target: str | Path, author: str | None = None) -> DecisionLabels:
        return cls(open_database(database_url(target)), author)

    def check(self, action: Action) -> None:
        """Refuse `action` for this author (the workbench checks the signed-in role here)."""

    def _writing(self):
        self.check(Action.LABEL)
        if not self.author:
            raise LabelError("this store was opened without an author, so it only reads")
        return write_transaction(self.engine)

    def add(self, conversation: Conversation, first: str, second: str, relation: str, note: str = "") -> Decision:
        """Label the pair `first`, `second` (turn ids, either order: the earlier in the conversation comes first)."""
        order = {t.id: t.index for t in conversation.turns}
        unknown = [t for t in (first, second) if t not in order]
        if unknown:
            raise LabelError(f"{', '.join(unknown)}: no such turn in conversation {conversation.id!r}")
        if first == second:
            raise LabelError("pick two different turns")
        if relation not in RELATIONS:
            raise LabelError(f"relation {relation!r}: use one of {', '.join(RELATIONS)}")
        earlier, later = sorted((first, second), key=order.get)
        with self._writing() as s:
            row = DecisionLabelRow(conversation_id=conversation.id, earlier=earlier, later=later,
                                   kind=RELATIONS[relation], note=note.strip(), annotator=self.author,
                                   at=self.clock())
            s.add(row)
            s.flush()
            return _decision(row)

    def undo(self, conversation_id: str) -> Decision | None:
        """Take back the author's last decision label of the conversation (None: nothing left to undo)."""
        rows = self._rows(conversation_id)
        undone = {r.undoes for r in rows if r.undoes is not None}
        target = next((r for r in reversed(rows) if r.annotator == self.author and r.undoes is None
                       and r.seq not in undone), None)
        if target is None:
            return None
        with self._writing() as s:
            s.add(DecisionLabelRow(conversation_id=conversation_id, earlier=target.earlier, later=target.later,
                                   kind=target.kind, annotator=self.author, at=self.clock(), undoes=target.seq))
        return _decision(target)

    def _rows(self, conversation_id: str) -> list[DecisionLabelRow]:
        with Session(self.engine) as s:
            return list(s.exec(select(DecisionLabelRow).where(DecisionLabelRow.conversation_id == conversation_id)
                               .order_by(DecisionLabelRow.seq)).all())

    def labels(self, conversation_id: str) -> list[tuple[Decision, str, str]]:
        """(decision, annotator, at) of every label in effect, oldest first."""
        rows = self._rows(conversation_id)
        undone = {r.undoes for r in rows if r.undoes is not None}
        return [(_decision(r), r.annotator, r.at) for r in rows if r.undoes is None and r.seq not in undone]

    def overlay_lines(self, conversation_id: str) -> str:
        """The labels as a decision overlay (docs/DECISIONS.md): one decision line each, naming the conversation,
        with who labelled it and when."""
        lines = [json.dumps({"type": "decision", "conversation": conversation_id, **d.to_dict(),
                             "labelled_by": who, "at": at}, ensure_ascii=False)
                 for d, who, at in self.labels(conversation_id)]
        return "".join(line + "\n" for line in lines)


def _decision(r: DecisionLabelRow) -> Decision:
    return Decision(id=f"{r.conversation_id}:L{r.seq}", kind=r.kind, earlier=r.earlier, later=r.later, note=r.note)

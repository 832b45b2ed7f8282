"""Labelled consolidation decisions: what an engine should (or should not) decide about two turns.

A decision set scores consolidation operation by operation (docs/DECISIONS.md): a positive kind names the
decision a pair calls for (supersede, restate, split a turn, link a cause to its effect); a negative kind
names a distractor on which any decision is a false one (someone else's fact, a hypothetical, ...).
"""
from __future__ import annotations

from dataclasses import dataclass


class DecisionKind:
    UPDATE = "update"
    MERGE = "merge"
    SPLIT = "split"
    CAUSE = "cause"
    POSITIVE = (UPDATE, MERGE, SPLIT, CAUSE)
    OTHER_HOLDER = "other_holder"
    HYPOTHETICAL = "hypothetical"
    QUESTION = "question"
    PLAN_ONLY = "plan_only"
    JOKE = "joke"
    QUOTE = "quote"
    UNRELATED = "unrelated"
    NEGATIVE = (OTHER_HOLDER, HYPOTHETICAL, QUESTION, PLAN_ONLY, JOKE, QUOTE, UNRELATED)
    ALL = POSITIVE + NEGATIVE


CHANGES = ("number", "place", "job", "relationship", "preference", "diet", "possession", "routine", "age",
           "membership", "plan_done", "plan_cancelled", "health")


@dataclass(frozen=True)
class Decision:
    """One labelled pair (or, for a split, one turn) of a conversation.

    `earlier` and `later` are dataset turn ids in conversation order; a split names its `turn` in both."""

    id: str
    kind: str
    earlier: str
    later: str
    holder: str = ""
    change: str = ""
    cue: str = ""
    note: str = ""
    support: str = ""

    @property
    def positive(self) -> bool:
        return self.kind in DecisionKind.POSITIVE

    @property
    def turns(self) -> tuple[str, ...]:
        return (self.earlier,) if self.earlier == self.later else (self.earlier, self.later)

    def to_dict(self) -> dict:
        out = {"id": self.id, "kind": self.kind}
        if self.kind == DecisionKind.SPLIT:
            out["turn"] = self.earlier
        else:
            out.update(earlier=self.earlier, later=self.later)
        out.update({k: v for k, v in (("holder", self.holder), ("change", self.change), ("cue", self.cue),
                                      ("note", self.note), ("support", self.support)) if v})
        return out

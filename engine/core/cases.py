"""SCDS-style diagnostic cases: a scenario cut out of a loaded conversation, its turns and its questions.

MemLoom's Synthetic Causal Diagnostic Suite (seeds/memloom.txt App. C) annotates
at four levels: a scenario (``scenario_id``, participants, ordered turns), turns
addressed by a canonical pointer ``scenario_id:tNN``, questions (``sample_id``,
``viewer_id``, ``query_text``, ``gold_answer``, ``task_type``,
``gold_evidence_keys``, ``metadata``) and a causal annotation
(``gold_causal_structure``: dependency type, local identifier, attribution target,
``supporting_evidence_keys``). Here a scenario is cut out of a conversation the
workbench has loaded, so every pointer maps to a dataset turn id (``D2:6``);
retrievers rank dataset turn ids and scoring goes through that mapping.
Stored by `engine.store.annotations`, exchanged as JSON by `engine.loaders.cases`,
scored by `engine.eval.annotation`.
"""
from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from engine.core.conversation import Turn

# MemLoom's compact relation closure (seeds/memloom.txt §3.5.4).
DEPENDENCY_TYPES = ("CAUSAL_FOLLOW", "TEMPORAL_NEXT", "STATE_SUCCESSOR", "SAME_EVENT")
# SCDS causal diagnostic task families (seeds/memloom.txt App. C, Stage 3).
TASK_TYPES = ("premise_retrieval", "chain_reconstruction", "causal_verification")
SCENARIO_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
POINTER = re.compile(r"(?P<scenario>[A-Za-z0-9][A-Za-z0-9_.-]*):t(?P<n>\d+)")


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

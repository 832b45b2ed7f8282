"""Annotators' labels of a case's questions, and the gold a reviewer adjudicates from them.

Several annotators label the same case independently, as a diagnostic suite researchers trust is built
(MemLoom's SCDS, App. C: gates, then a gold kept apart from tuning). A `Label` is what one annotator says a
question's gold is: the evidence turns, the causal chain in its order, the gold answer and the dependency type.
A reviewer merges the labels into the case's gold question, per item or by majority; the `Adjudication` keeps
the lineage: who merged, which stored label versions, and which annotators each part of the gold came from.
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from engine.core.cases import Case, CaseQuestion

MAJORITY, PER_ITEM = "majority", "per-item"


@dataclass(frozen=True)
class Label:
    """One annotator's label of one question; `seq` is the stored version and `at` when it was written (UTC)."""

    scenario_id: str
    sample_id: str
    annotator: str
    evidence: tuple[str, ...] = ()
    chain: tuple[str, ...] = ()          # in the annotator's order: cause first
    gold_answer: str = ""
    dependency_type: str = "CAUSAL_FOLLOW"
    seq: int = 0
    at: str = ""

    @property
    def empty(self) -> bool:
        return not (self.evidence or self.chain or self.gold_answer.strip())

    def to_dict(self) -> dict:
        return {"scenario_id": self.scenario_id, "sample_id": self.sample_id, "annotator": self.annotator,
                "evidence": list(self.evidence), "chain": list(self.chain), "gold_answer": self.gold_answer,
                "dependency_type": self.dependency_type, "version": self.seq, "at": self.at}


@dataclass(frozen=True)
class Adjudication:
    """The gold a reviewer made of some labels: the result, and for each part the annotators it came from
    (`sources`: evidence and chain per pointer, gold_answer and dependency_type as lists)."""

    scenario_id: str
    sample_id: str
    reviewer: str
    method: str                                   # MAJORITY or PER_ITEM
    labels: tuple[tuple[str, int], ...]           # (annotator, label version) of every label merged
    evidence: tuple[str, ...]
    chain: tuple[str, ...]
    gold_answer: str
    dependency_type: str
    sources: dict = field(default_factory=dict)
    at: str = ""
    seq: int = 0

    def to_dict(self) -> dict:
        return {"scenario_id": self.scenario_id, "sample_id": self.sample_id, "reviewer": self.reviewer,
                "at": self.at, "method": self.method,
                "from_labels": [{"annotator": a, "version": v} for a, v in self.labels],
                "gold": {"gold_evidence_keys": list(self.evidence), "supporting_evidence_keys": list(self.chain),
                         "gold_answer": self.gold_answer, "dependency_type": self.dependency_type},
                "sources": self.sources}

    def apply(self, case: Case) -> CaseQuestion:
        """Write the adjudicated gold into the case's question (evidence in the case's turn order, the chain in
        the adjudicated order)."""
        q = case.question(self.sample_id)
        wanted = set(self.evidence)
        q.gold_evidence_keys = [t.pointer for t in case.turns if t.pointer in wanted]
        q.gold_causal_structure.supporting_evidence_keys = list(self.chain)
        q.gold_answer = self.gold_answer
        q.gold_causal_structure.dependency_type = self.dependency_type
        return q


def _who(labels: Sequence[Label], pointer: str, part: str) -> list[str]:
    return sorted(lab.annotator for lab in labels if pointer in getattr(lab, part))


def _most_common(labels: Sequence[Label], part: str) -> tuple[str, list[str]]:
    """The value most labels give (ties: the first annotator by name), and who gave it."""
    ranked = sorted(labels, key=lambda lab: lab.annotator)
    values = [getattr(lab, part).strip() for lab in ranked if getattr(lab, part).strip()]
    if not values:
        return "", []
    counts = Counter(values)
    best = max(values, key=lambda v: (counts[v], -values.index(v)))
    return best, [lab.annotator for lab in ranked if getattr(lab, part).strip() == best]


def _chain_order(labels: Sequence[Label], members: set[str], turn_order: list[str]) -> list[str]:
    """Members by their mean position in the chains that hold them; ties in the case's turn order."""
    def mean_position(pointer: str) -> float:
        spots = [lab.chain.index(pointer) for lab in labels if pointer in lab.chain]
        return sum(spots) / len(spots)
    return sorted(members, key=lambda p: (mean_position(p), turn_order.index(p) if p in turn_order else 10**6))


def majority(case: Case, labels: Sequence[Label], reviewer: str) -> Adjudication:
    """Accept the majority: a turn is evidence (or in the chain) when more than half the labels pick it; the
    answer and dependency type most labels give."""
    if not labels:
        raise ValueError("no labels to adjudicate")
    order = [t.pointer for t in case.turns]
    half = len(labels) / 2
    evidence = [p for p in order if len(_who(labels, p, "evidence")) > half]
    members = {p for lab in labels for p in lab.chain if len(_who(labels, p, "chain")) > half}
    chain = _chain_order(labels, members, order)
    answer, answer_by = _most_common(labels, "gold_answer")
    dependency, dependency_by = _most_common(labels, "dependency_type")
    return Adjudication(
        case.scenario_id, labels[0].sample_id, reviewer, MAJORITY, _lineage(labels), tuple(evidence), tuple(chain),
        answer, dependency or "CAUSAL_FOLLOW",
        {"evidence": {p: _who(labels, p, "evidence") for p in evidence},
         "chain": {p: _who(labels, p, "chain") for p in chain},
         "gold_answer": answer_by, "dependency_type": dependency_by})


def per_item(case: Case, labels: Sequence[Label], reviewer: str, evidence: Sequence[str], chain_from: str,
             answer_from: str, dependency_from: str) -> Adjudication:
    """The reviewer's pick per item: each evidence turn, and whose chain, answer and dependency type to take."""
    by = {lab.annotator: lab for lab in labels}
    for name in (chain_from, answer_from, dependency_from):
        if name not in by:
            raise ValueError(f"{name!r} has not labelled {labels[0].sample_id if labels else 'this question'}")
    order = [t.pointer for t in case.turns]
    unknown = [p for p in evidence if p not in order]
    if unknown:
        raise ValueError(f"{', '.join(unknown)}: not a turn of case {case.scenario_id!r}")
    picked = [p for p in order if p in set(evidence)]
    return Adjudication(
        case.scenario_id, labels[0].sample_id, reviewer, PER_ITEM, _lineage(labels), tuple(picked),
        by[chain_from].chain, by[answer_from].gold_answer, by[dependency_from].dependency_type,
        {"evidence": {p: _who(labels, p, "evidence") for p in picked},
         "chain": {p: [chain_from] for p in by[chain_from].chain},
         "gold_answer": [answer_from], "dependency_type": [dependency_from]})


def _lineage(labels: Sequence[Label]) -> tuple[tuple[str, int], ...]:
    return tuple(sorted((lab.annotator, lab.seq) for lab in labels))

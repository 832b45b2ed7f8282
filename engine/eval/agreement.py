"""Agreement between annotators' labels: Cohen's kappa for two, Krippendorff's alpha for more.

Three things are compared, per question and pooled over a case:

- evidence: every turn of the case is an item, rated 1 if the annotator picked it as evidence, else 0;
- chain membership: the same for the causal chain;
- chain order: every pair of turns that two chains share is an item, rated by which of the two comes first
  (a pair missing from an annotator's chain is left unrated; Krippendorff's alpha takes missing values, and
  Cohen's kappa uses the pairs both rated).

The coefficients come from scikit-learn (`cohen_kappa_score`) and `krippendorff` (nominal level). Where they
are undefined (every rating the same value, so chance agreement is total) the value is None and the observed
agreement still says how much the annotators agree.
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations

import numpy as np

from engine.core.cases import Case
from engine.core.labels import Label

COHEN, KRIPPENDORFF = "cohen_kappa", "krippendorff_alpha"
PARTS = ("evidence", "chain", "order")

Ratings = Mapping[str, Mapping[object, int]]       # annotator -> item -> category


@dataclass(frozen=True)
class Agreement:
    """One coefficient: which (`measure`), its value (None: undefined or fewer than two annotators), the share
    of items rated alike by every annotator who rated them, and over how many items and annotators."""

    measure: str
    value: float | None
    observed: float | None
    items: int
    annotators: tuple[str, ...]

    def to_dict(self) -> dict:
        return {"measure": self.measure, "value": _round(self.value), "observed": _round(self.observed),
                "items": self.items, "annotators": list(self.annotators)}


def _round(x: float | None) -> float | None:
    return None if x is None else round(x, 4)


def agreement(ratings: Ratings) -> Agreement:
    """Cohen's kappa for two annotators, Krippendorff's alpha (nominal) for three or more."""
    names = tuple(sorted(ratings))
    items = sorted({i for r in ratings.values() for i in r}, key=repr)
    measure = COHEN if len(names) == 2 else KRIPPENDORFF if len(names) > 2 else ""
    shared = [i for i in items if sum(i in ratings[n] for n in names) >= 2]
    if len(names) < 2 or not shared:
        return Agreement(measure, None, None, len(shared), names)
    alike = sum(len({ratings[n][i] for n in names if i in ratings[n]}) == 1 for i in shared)
    observed = alike / len(shared)
    values = {ratings[n][i] for n in names for i in shared if i in ratings[n]}
    if len(values) < 2:                       # one category only: chance agreement is total, kappa/alpha 0/0
        return Agreement(measure, None, observed, len(shared), names)
    if measure == COHEN:
        from sklearn.metrics import cohen_kappa_score

        both = [i for i in shared if all(i in ratings[n] for n in names)]
        a, b = ([ratings[n][i] for i in both] for n in names)
        value = float(cohen_kappa_score(a, b)) if len(set(a) | set(b)) > 1 else None
    else:
        import krippendorff

        data = np.array([[ratings[n].get(i, np.nan) for i in shared] for n in names], dtype=float)
        value = float(krippendorff.alpha(reliability_data=data, level_of_measurement="nominal"))
    if value is not None and math.isnan(value):
        value = None
    return Agreement(measure, value, observed, len(shared), names)


def evidence_ratings(labels: Sequence[Label], turns: Sequence[str], part: str = "evidence") -> dict:
    """annotator -> pointer -> 1 if picked (as evidence, or in the chain with part="chain"), for every turn."""
    return {lab.annotator: {p: int(p in getattr(lab, part)) for p in turns} for lab in labels}


def order_ratings(labels: Sequence[Label]) -> dict:
    """annotator -> (a, b) -> 1 if a comes before b in their chain, 0 if after; pairs outside it unrated."""
    pairs = sorted({tuple(sorted(pair)) for lab in labels for pair in combinations(lab.chain, 2)})
    out = {}
    for lab in labels:
        spot = {p: n for n, p in enumerate(lab.chain)}
        out[lab.annotator] = {pair: int(spot[pair[0]] < spot[pair[1]]) for pair in pairs
                              if pair[0] in spot and pair[1] in spot}
    return out


def _ratings(labels: Sequence[Label], turns: Sequence[str]) -> dict[str, dict]:
    return {"evidence": evidence_ratings(labels, turns), "chain": evidence_ratings(labels, turns, "chain"),
            "order": order_ratings(labels)}


@dataclass(frozen=True)
class QuestionAgreement:
    sample_id: str
    annotators: tuple[str, ...]
    evidence: Agreement
    chain: Agreement
    order: Agreement

    @property
    def disagreement(self) -> float:
        """Share of evidence and chain items the annotators rated differently (0 with fewer than two)."""
        parts = [a for a in (self.evidence, self.chain) if a.observed is not None and a.items]
        if not parts:
            return 0.0
        return sum((1 - a.observed) * a.items for a in parts) / sum(a.items for a in parts)

    def to_dict(self) -> dict:
        return {"sample_id": self.sample_id, "annotators": list(self.annotators),
                "disagreement": round(self.disagreement, 4),
                **{part: getattr(self, part).to_dict() for part in PARTS}}


@dataclass(frozen=True)
class CaseAgreement:
    """Per question, and pooled over the case (items are (question, item) pairs)."""

    scenario_id: str
    questions: tuple[QuestionAgreement, ...]
    evidence: Agreement
    chain: Agreement
    order: Agreement

    def most_disagreed(self) -> list[QuestionAgreement]:
        """Questions with two or more annotators, the most disagreement first (ties in question order)."""
        rated = [q for q in self.questions if len(q.annotators) >= 2]
        return sorted(rated, key=lambda q: -q.disagreement)

    def to_dict(self) -> dict:
        return {"scenario_id": self.scenario_id, **{part: getattr(self, part).to_dict() for part in PARTS},
                "questions": [q.to_dict() for q in self.questions]}


def case_agreement(case: Case, labels: Mapping[str, Mapping[str, Label]]) -> CaseAgreement:
    """Agreement on a case from its labels by question (sample_id -> annotator -> label, as stored)."""
    turns = [t.pointer for t in case.turns]
    pooled: dict[str, dict[str, dict]] = {part: {} for part in PARTS}
    questions = []
    for q in case.questions:
        got = [lab for lab in labels.get(q.sample_id, {}).values() if not lab.empty]
        ratings = _ratings(got, turns)
        questions.append(QuestionAgreement(q.sample_id, tuple(sorted(lab.annotator for lab in got)),
                                           *(agreement(ratings[part]) for part in PARTS)))
        for part in PARTS:
            for name, items in ratings[part].items():
                pooled[part].setdefault(name, {}).update({(q.sample_id, i): v for i, v in items.items()})
    return CaseAgreement(case.scenario_id, tuple(questions), *(agreement(pooled[part]) for part in PARTS))

"""The calibrated offline update model: how probable "the later statement gives a fact of the earlier one a new
value" is, read from the structure of what is said.

It is a logistic regression over the features `engine.llm.statements` computes, fit by
`scripts/fit_decisions.py` on the dev decision set only (datasets/decisions/dev) and stored in
`decision_models.json` beside this module with its reliability on dev (cross-validated). Its output is a
probability, so a gate's θ reads as one: All-Mem's θ_update 0.9 passes what the model finds 90% likely.
(MemLoom's causes keep the link model's probability, `engine.retrieval.links`, fit on the causal suite's
validation chains; a cause model over these structures was fit and measured below it: docs/DECISIONS.md.)
"""
from __future__ import annotations

import functools
import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from engine.llm.statements import UPDATE_FEATURES, Clause, analyse, update_features

MODEL_FILE = Path(__file__).with_name("decision_models.json")


@dataclass(frozen=True)
class Logistic:
    features: tuple[str, ...]
    mean: np.ndarray
    scale: np.ndarray
    weights: np.ndarray
    bias: float

    def probability(self, x: np.ndarray) -> float:
        z = float(((x - self.mean) / self.scale) @ self.weights + self.bias)
        return 1.0 / (1.0 + math.exp(-max(-30.0, min(30.0, z))))

    def contributions(self, x: np.ndarray) -> list[tuple[str, float]]:
        """Each feature's share of the logit, strongest first: what a reviewer reads as "why"."""
        parts = ((x - self.mean) / self.scale) * self.weights
        return sorted(zip(self.features, map(float, parts)), key=lambda kv: -abs(kv[1]))

    @classmethod
    def from_dict(cls, data: dict) -> "Logistic":
        return cls(tuple(data["features"]), np.array(data["mean"]), np.array(data["scale"]),
                   np.array(data["weights"]), float(data["bias"]))


@functools.lru_cache(maxsize=1)
def models() -> dict[str, Logistic]:
    data = json.loads(MODEL_FILE.read_text(encoding="utf-8"))
    out = {name: Logistic.from_dict(m) for name, m in data["models"].items()}
    if out["update"].features != UPDATE_FEATURES:
        raise ValueError(f"{MODEL_FILE} was fit on other features; run scripts/fit_decisions.py")
    return out


@dataclass(frozen=True)
class Judgement:
    probability: float
    reason: str
    features: dict[str, float]


def judge_update(old_text: str, old_speaker: str, new_text: str, new_speaker: str, embed, asked: str = ""
                 ) -> Judgement:
    """How probable it is that `new` gives a new value of a fact `old` stated, and why (`asked`: what the other
    speaker said just before `new`, which an answer takes its subject from)."""
    x, pair = update_features(analyse(old_text, old_speaker), analyse(new_text, new_speaker), embed, asked)
    model = models()["update"]
    p = model.probability(x)
    return Judgement(p, _update_reason(pair, x, model), dict(zip(UPDATE_FEATURES, map(float, x))))


def _update_reason(pair: tuple[Clause, Clause] | None, x: np.ndarray, model: Logistic) -> str:
    if pair is None:
        return "no clause to compare"
    a, b = pair
    f = dict(zip(UPDATE_FEATURES, x))
    what = [name for name, flag in (("a number changes", f["number_change"]), ("the place or name changes",
                                                                               f["entity_change"]),
                                    ("polarity flips", f["polarity_flip"]), ("says it changed", f["change_word"]),
                                    ("a plan, then its outcome", f["plan_then_outcome"])) if flag]
    holder = a.holder or "?"
    top = ", ".join(f"{name} {value:+.1f}" for name, value in model.contributions(x)[:3])
    return (f"'{_clip(a.text)}' ({holder}, {a.mood}) -> '{_clip(b.text)}' ({b.holder or '?'}, {b.mood}); "
            f"turns alike at {f['turn_cosine']:.2f}, clauses at {f['clause_cosine']:.2f}; {'; '.join(what) or 'no value change seen'} "
            f"(strongest: {top})")


def _clip(text: str, n: int = 60) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[:n - 1] + "…"

"""The calibrated offline decision models: how probable "the later statement gives a fact of the earlier one a
new value" (update), "the later statement says the earlier one again, with nothing new" (merge) and "the earlier
statement states a cause of the later" (cause) are, read from the structure of what is said.

Each is a logistic regression over the features `engine.llm.statements` computes (the cause model also over
the steward's link signals, `engine.retrieval.links`), fit by `scripts/fit_decisions.py` on the dev decision set
and the causal suite's validation split only, and stored in `decision_models.json` beside this module with its
reliability on dev (cross-validated by conversation). Its output is a probability, so a gate's θ reads as one:
All-Mem's θ_update 0.9 passes what the update model finds 90% likely, its θ_merge 0.9 what the merge model finds
90% likely, MemLoom's θ_rel 0.10 what the cause model finds 10% likely. The update and merge models read the same
features of a pair: two statements alike enough to be one fact are an update when a value changed and a merge
when the later one keeps it ("still", the same number or place).
"""
from __future__ import annotations

import functools
import json
import math
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import numpy as np

from engine.llm.statements import PARSE_VETOES, UPDATE_FEATURES, Clause, analyse, update_features
from engine.retrieval.links import pair_signals

MODEL_FILE = Path(__file__).with_name("decision_models.json")


@dataclass(frozen=True)
class Logistic:
    """A logistic regression over the pairs no veto holds, and for each veto (a feature that rules the decision
    out: the later statement is about someone else, or asks) the share of positives among the dev pairs it
    holds, so both read as probabilities. An additive model cannot let "my sister has 3 cats" outweigh how
    alike it is to "I have 2 cats"; a veto can."""

    features: tuple[str, ...]
    mean: np.ndarray
    scale: np.ndarray
    weights: np.ndarray
    bias: float
    vetoes: tuple[tuple[str, float], ...] = ()

    def veto(self, x: np.ndarray) -> tuple[str, float] | None:
        at = {name: i for i, name in enumerate(self.features)}
        return next(((name, rate) for name, rate in self.vetoes if x[at[name]] >= 0.5), None)

    def probability(self, x: np.ndarray) -> float:
        vetoed = self.veto(x)
        if vetoed is not None:
            return vetoed[1]
        z = float(((x - self.mean) / self.scale) @ self.weights + self.bias)
        return 1.0 / (1.0 + math.exp(-max(-30.0, min(30.0, z))))

    def contributions(self, x: np.ndarray) -> list[tuple[str, float]]:
        """Each feature's share of the logit, strongest first: what a reviewer reads as "why"."""
        parts = ((x - self.mean) / self.scale) * self.weights
        return sorted(zip(self.features, map(float, parts)), key=lambda kv: -abs(kv[1]))

    @classmethod
    def from_dict(cls, data: dict) -> "Logistic":
        return cls(tuple(data["features"]), np.array(data["mean"]), np.array(data["scale"]),
                   np.array(data["weights"]), float(data["bias"]),
                   tuple((name, float(rate)) for name, rate in data.get("vetoes", {}).items()))


@functools.lru_cache(maxsize=1)
def models() -> dict[str, Logistic]:
    data = json.loads(MODEL_FILE.read_text(encoding="utf-8"))
    out = {name: Logistic.from_dict(m) for name, m in data["models"].items()}
    if out["update"].features != UPDATE_FEATURES or out["merge"].features != UPDATE_FEATURES or \
            out["cause"].features != CAUSE_FEATURES:
        raise ValueError(f"{MODEL_FILE} was fit on other features; run scripts/fit_decisions.py")
    for name in ("update", "merge"):
        first = {veto for veto, _ in out[name].vetoes[:len(PARSE_VETOES)]}
        if first != set(PARSE_VETOES):       # update_features reads no more of a pair these rule out
            raise ValueError(f"{MODEL_FILE}: the {name} model must veto {', '.join(PARSE_VETOES)} first")
    return out


# The cause model reads the steward's link (its logit: engine/retrieval/links.py, fit on the causal suite's long
# scenarios, and the signals of it a pair holds on its own) together with what the two statements say in chat: a
# consequence marked on the effect ("so", "had to", "because of"), a change reported by either, a question on
# either side, how likely the pair is one fact's new value rather than a cause and its effect, and how long
# apart they were said. It is fit on two-person chats; where more people talk (a ward's handover, a lab's week),
# the link model, fit on such scenarios, keeps deciding.
CHAT_PARTY = 2          # the cause model is fit on, and read for, conversations of at most this many people
CAUSE_FEATURES = ("link_logit", "cosine", "entities", "mention", "same_speaker", "cue", "change", "substance",
                  "hours_apart", "consequence", "effect_changes", "cause_changes", "cause_asks", "effect_asks",
                  "update_probability")


def cause_features(link_logit: float, old: dict, new: dict, embed, update_model: Logistic | None = None,
                   update: float | None = None) -> np.ndarray:
    """The cause model's features of "`old` states a cause and `new` its effect": each a sentence
    (`text`, `speaker`, `time`); `link_logit` is the link scorer's logit of the pair; `update` the pair's update
    probability when the caller has judged it already, else read from `update_model` (by default the stored
    one)."""
    old_st, new_st = analyse(old["text"], old["speaker"]), analyse(new["text"], new["speaker"])
    if update is None:
        update = 0.0
        if old["speaker"] == new["speaker"]:
            x, _ = update_features(old_st, new_st, embed)
            update = (update_model or models()["update"]).probability(x)
    vec = embed([old["text"], new["text"]])
    signals = pair_signals(old["text"], old["speaker"], new["text"], new["speaker"])
    return np.array([link_logit, float(vec[0] @ vec[1]), signals["entities"], signals["mention"],
                     signals["same_speaker"], signals["cue"], signals["change"], signals["substance"],
                     math.log1p(_hours_apart(old.get("time"), new.get("time"))),
                     float(any(c.consequence for c in new_st.clauses)), float(any(c.change for c in new_st.clauses)),
                     float(any(c.change for c in old_st.clauses)), float(old["text"].rstrip().endswith("?")),
                     float(new["text"].rstrip().endswith("?")), update])


def _hours_apart(a: str | None, b: str | None) -> float:
    try:
        return max(0.0, (datetime.fromisoformat(b) - datetime.fromisoformat(a)).total_seconds() / 3600)
    except (TypeError, ValueError):
        return 0.0


def judge_cause(link_logit: float, old: dict, new: dict, embed, update: float | None = None) -> Judgement:
    """How probable it is that `old` states a cause and `new` its effect, and why (`update`: the pair's update
    probability, when already judged)."""
    x = cause_features(link_logit, old, new, embed, update=update)
    model = models()["cause"]
    p = model.probability(x)
    top = ", ".join(f"{name} {value:+.1f}" for name, value in model.contributions(x)[:3])
    return Judgement(p, f"cause model {p:.2f} (strongest: {top})", dict(zip(CAUSE_FEATURES, map(float, x))))


VETO_WORDS = {"other_holder": "the clauses are about two people", "asked": "the later statement asks",
              "new_not_fact": "the later clause is not stated as a fact"}


@dataclass(frozen=True)
class Judgement:
    probability: float
    reason: str
    features: dict[str, float]


def judge_update(old_text: str, old_speaker: str, new_text: str, new_speaker: str, embed, asked: str = "",
                 old_asked: str = "") -> Judgement:
    """How probable it is that `new` gives a new value of a fact `old` stated, and why (`asked`, `old_asked`:
    what the other speaker said just before `new`, `old`, which an answer takes its subject from)."""
    return judge_statements(old_text, old_speaker, new_text, new_speaker, embed, asked, old_asked)["update"]


def judge_statements(old_text: str, old_speaker: str, new_text: str, new_speaker: str, embed, asked: str = "",
                     old_asked: str = "") -> dict[str, Judgement]:
    """The update and the merge model's judgements of one pair of statements, from one reading of both
    (`judge_update` says what `asked` and `old_asked` are)."""
    x, pair = update_features(analyse(old_text, old_speaker), analyse(new_text, new_speaker), embed, asked,
                              old_asked)
    features = dict(zip(UPDATE_FEATURES, map(float, x)))
    return {name: Judgement(models()[name].probability(x), _statement_reason(pair, x, models()[name], name), features)
            for name in ("update", "merge")}


# The update model's features that say a value changed in the clauses about one thing: an update needs one (two
# long turns on one subject read alike without giving anything a new value); without it, two statements alike
# enough to say one thing are a merge.
VALUE_CHANGES = ("number_change", "entity_change", "polarity_flip", "change_word", "plan_then_outcome",
                 "restated_new_value")


def supersedes(judged: dict[str, Judgement], floor: float) -> bool:
    """Whether `judge_statements`' judgements make the later statement an update of the earlier one: at least
    `floor` likely, with a value that changed, and no likelier to be the same fact said again (a merge)."""
    update, merge = judged["update"], judged["merge"]
    return update.probability >= floor and any(update.features[f] for f in VALUE_CHANGES) and \
        update.probability >= merge.probability


def _statement_reason(pair: tuple[Clause, Clause] | None, x: np.ndarray, model: Logistic, kind: str) -> str:
    if pair is None:
        return "no clause to compare"
    a, b = pair
    f = dict(zip(UPDATE_FEATURES, x))
    what = [name for name, flag in (("a number changes", f["number_change"]), ("the place or name changes",
                                                                               f["entity_change"]),
                                    ("polarity flips", f["polarity_flip"]), ("says it changed", f["change_word"]),
                                    ("a plan, then its outcome", f["plan_then_outcome"])) if flag]
    holder = a.holder or "?"
    vetoed = model.veto(x)
    top = (f"ruled out: {VETO_WORDS.get(vetoed[0], vetoed[0])}, {vetoed[1]:.0%} of such pairs on dev are {kind}s"
           if vetoed else "strongest: " + ", ".join(f"{name} {value:+.1f}" for name, value in model.contributions(x)[:3]))
    said = f"'{_clip(a.text)}' ({holder}, {a.mood}) -> '{_clip(b.text)}' ({b.holder or '?'}, {b.mood})"
    if vetoed and vetoed[0] in PARSE_VETOES:        # ruled out from the parse: nothing else was read
        return f"{said}; {top}"
    return (f"{said}; turns alike at {f['turn_cosine']:.2f}, clauses at {f['clause_cosine']:.2f}; "
            f"{'; '.join(what) or 'no value change seen'} ({top})")


def _clip(text: str, n: int = 60) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[:n - 1] + "…"

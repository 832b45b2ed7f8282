"""Fit the offline update model (engine/llm/decision_models.json) on the dev decision set and the causal suite's
validation split, and report its reliability there (predictions cross-validated by conversation) or, with
--report test, on the test decision set and the causal suite's test split.

    python scripts/fit_decisions.py                      # fit on dev, write the model
    python scripts/fit_decisions.py --report test        # score the written model on test, write nothing

Training pairs are the pairs All-Mem's diagnosis meets: for every turn, the earlier turns of the same speaker
most alike in meaning, plus every labelled pair. A pair is positive when labelled an update (a causal suite
state-succession chain's consecutive turns count as one), negative otherwise. Nothing here reads a test split
unless --report test is given, and then only to score.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from engine.core.conversation import Conversation  # noqa: E402
from engine.core.decision import DecisionKind  # noqa: E402
from engine.core.splits import tuning_guard  # noqa: E402
from engine.llm.decision_models import MODEL_FILE, Logistic  # noqa: E402
from engine.llm.embedder import Embedder  # noqa: E402
from engine.llm.statements import UPDATE_FEATURES, analyse, update_features  # noqa: E402
from engine.loaders import load_conversations  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
NEAREST = 4           # earlier same-speaker turns per turn offered as update candidates
BINS = 10
UNLABELLED_WEIGHT = 1.0


CAUSAL_SUITE = ROOT / "datasets" / "causal"


def conversations(split: str) -> list[Conversation]:
    """A decision set's conversations, and for dev the causal suite's validation split read as decisions: each
    chain question's consecutive gold turns a cause (category 1) or a state succession (category 2, an update),
    so the models meet long multi-party scenarios whose causes share no words with their effects as well as
    short chats."""
    folder = ROOT / "datasets" / "decisions" / split
    convs = [c for f in sorted(folder.glob("*.jsonl")) for c in load_conversations(f)]
    suite = CAUSAL_SUITE / f"{'validation' if split == 'dev' else 'test'}.jsonl"
    return convs + [chains_as_decisions(c) for c in load_conversations(suite)]


def chains_as_decisions(conv: Conversation) -> Conversation:
    from dataclasses import replace

    from engine.core.decision import Decision

    kinds = {1: DecisionKind.CAUSE, 2: DecisionKind.UPDATE}
    seen, out = set(), []
    for q in conv.questions:
        for a, b in zip(q.evidence, q.evidence[1:]):
            if q.category in kinds and (a, b) not in seen:
                seen.add((a, b))
                out.append(Decision(f"{q.id}:{a}", kinds[q.category], a, b))
    return replace(conv, decisions=out)


def asked_before(turns, j: int) -> str:
    """What the other speaker said just before turn j (what an answer takes its subject from), else ""."""
    return turns[j - 1].text if j and turns[j - 1].speaker != turns[j].speaker else ""


def pairs_of(conv: Conversation, embedder: Embedder) -> list[tuple]:
    """Update rows: (features, label, conversation, earlier id, later id, labelled?) for every labelled pair and
    each turn's `NEAREST` earlier turns of its speaker."""
    turns = conv.turns
    vec = embedder.embed([t.text for t in turns])
    index = {t.id: i for i, t in enumerate(turns)}
    labels: dict[tuple[int, int], set[str]] = {}
    for d in conv.decisions:
        labels.setdefault((index[d.earlier], index[d.later]), set()).add(d.kind)
    pairs = {pair for pair in labels if pair[0] != pair[1]}      # a split names one turn
    for j in range(1, len(turns)):
        same = [i for i in range(j) if turns[i].speaker == turns[j].speaker]
        pairs |= {(i, j) for i in sorted(same, key=lambda i: -float(vec[i] @ vec[j]))[:NEAREST]}
    rows = []
    for i, j in sorted(pairs):
        x, _ = update_features(analyse(turns[i].text, turns[i].speaker), analyse(turns[j].text, turns[j].speaker),
                               embedder.embed, asked_before(turns, j))
        rows.append((x, int(DecisionKind.UPDATE in labels.get((i, j), ())), conv.id, turns[i].id, turns[j].id,
                     (i, j) in labels))
    return rows


def fit(rows, names: tuple[str, ...], c: float = 1.0) -> Logistic:
    """A logistic regression; an unlabelled pair counts `UNLABELLED_WEIGHT` of a labelled one (the writers
    labelled the decisions they built, not every pair: an unlabelled pair is only probably no decision)."""
    from sklearn.linear_model import LogisticRegression

    x = np.array([r[0] for r in rows])
    y = np.array([r[1] for r in rows])
    weight = np.array([1.0 if r[5] else UNLABELLED_WEIGHT for r in rows])
    mean, scale = x.mean(axis=0), x.std(axis=0)
    scale[scale == 0] = 1.0
    model = LogisticRegression(C=c, max_iter=2000).fit((x - mean) / scale, y, sample_weight=weight)
    return Logistic(names, mean, scale, model.coef_[0], float(model.intercept_[0]))


def cross_validated(rows, names, folds: int = 5) -> np.ndarray:
    """Each row's probability from a model fit without its conversation's fold."""
    convs = sorted({r[2] for r in rows})
    fold_of = {c: k % folds for k, c in enumerate(convs)}
    out = np.zeros(len(rows))
    for k in range(folds):
        train = [r for r in rows if fold_of[r[2]] != k]
        test = [n for n, r in enumerate(rows) if fold_of[r[2]] == k]
        if not test or len({r[1] for r in train}) < 2:
            continue
        m = fit(train, names)
        for n in test:
            out[n] = m.probability(rows[n][0])
    return out


def reliability(p: np.ndarray, y: np.ndarray) -> dict:
    """Per probability bin: pairs, mean predicted, share positive; expected calibration error; and at the
    gates that matter, the precision of what passes and the recall of the positives."""
    bins = []
    for b in range(BINS):
        lo, hi = b / BINS, (b + 1) / BINS
        mask = (p >= lo) & ((p < hi) if b < BINS - 1 else (p <= hi))
        if mask.any():
            bins.append({"from": lo, "to": hi, "pairs": int(mask.sum()), "predicted": round(float(p[mask].mean()), 4),
                         "observed": round(float(y[mask].mean()), 4)})
    ece = sum(b["pairs"] * abs(b["predicted"] - b["observed"]) for b in bins) / max(1, len(p))
    gates = {}
    for theta in (0.1, 0.5, 0.9):
        passed = p >= theta
        gates[str(theta)] = {"passed": int(passed.sum()),
                             "precision": round(float(y[passed].mean()), 4) if passed.any() else None,
                             "recall": round(float(y[passed].sum() / max(1, y.sum())), 4)}
    return {"pairs": int(len(p)), "positives": int(y.sum()), "ece": round(float(ece), 4), "bins": bins, "gates": gates}


def rows_for(split: str, embedder: Embedder) -> list[tuple]:
    return [r for conv in conversations(split) for r in pairs_of(conv, embedder)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--report", choices=["dev", "test"], help="score the written model on a split; fit nothing")
    args = ap.parse_args()
    embedder = Embedder()
    if args.report:
        from engine.llm.decision_models import models

        rows = rows_for(args.report, embedder)
        p = np.array([models()["update"].probability(r[0]) for r in rows])
        print("update", json.dumps(reliability(p, np.array([r[1] for r in rows]))))
        return
    tuning_guard([ROOT / "datasets" / "decisions" / "dev", CAUSAL_SUITE / "validation.jsonl"], "scripts/fit_decisions.py")
    rows = rows_for("dev", embedder)
    model = fit(rows, UPDATE_FEATURES)
    out = {"fitted_on": "datasets/decisions/dev and datasets/causal/validation.jsonl",
           "command": "python scripts/fit_decisions.py",
           "models": {"update": {"features": list(UPDATE_FEATURES), "mean": [round(float(v), 6) for v in model.mean],
                                 "scale": [round(float(v), 6) for v in model.scale],
                                 "weights": [round(float(v), 6) for v in model.weights],
                                 "bias": round(model.bias, 6)}},
           "reliability_dev": {"update": reliability(cross_validated(rows, UPDATE_FEATURES),
                                                     np.array([r[1] for r in rows]))}}
    print("update", json.dumps(out["reliability_dev"]["update"]))
    print("  weights", dict(zip(UPDATE_FEATURES, np.round(model.weights, 3))))
    MODEL_FILE.write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    print("wrote", MODEL_FILE)


if __name__ == "__main__":
    main()

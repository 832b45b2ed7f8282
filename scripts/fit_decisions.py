"""Fit the offline decision models (engine/llm/decision_models.json: update, merge, split and cause) on the dev decision set
and the causal suite's validation split, and report their reliability there (predictions cross-validated by
conversation) or, with --report test, on the test decision set and the causal suite's test split.

    python scripts/fit_decisions.py                      # fit on dev, write the models
    python scripts/fit_decisions.py --report test        # score the written models on test, write nothing

Update pairs are the pairs All-Mem's diagnosis meets: for every turn, the earlier turns of the same speaker most
alike in meaning, plus every labelled pair; positive when labelled an update (a causal suite state-succession
chain's consecutive turns count as one). Merge pairs are the same pairs, positive when labelled a merge (the later
statement restates the earlier: "Still Saturday Pilates for me" after "I've moved Pilates to Saturday mornings").
Split rows are every candidate cut of every turn (`engine.llm.offline_split.read_cuts`), positive when its turn
is labelled a split. Cause pairs are every turn of a two-person conversation with each of the
`CAUSE_WINDOW` turns before it, plus every labelled pair; positive when labelled a cause. Nothing here
reads a test split unless --report test is given, and then only to score.
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
from engine.llm.decision_models import CAUSE_FEATURES, CHAT_PARTY, MODEL_FILE, Logistic, cause_features  # noqa: E402
from engine.llm.embedder import Embedder  # noqa: E402
from engine.llm.offline_split import SPLIT_FEATURES, read_cuts  # noqa: E402
from engine.llm.statements import UPDATE_FEATURES, analyse, update_features  # noqa: E402
from engine.loaders import load_conversations  # noqa: E402
from engine.retrieval.links import LinkScorer, Utterance  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
NEAREST = 4           # earlier same-speaker turns per turn offered as update candidates
CAUSE_WINDOW = 12     # earlier turns per turn offered as cause candidates
BINS = 10
UNLABELLED_WEIGHT = 1.0
VETOES = ("other_holder", "asked", "new_not_fact")     # features that rule an update out (decision_models.Logistic)


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
                               embedder.embed, asked_before(turns, j), asked_before(turns, i))
        rows.append((x, int(DecisionKind.UPDATE in labels.get((i, j), ())), conv.id, turns[i].id, turns[j].id,
                     (i, j) in labels))
    return rows


def cause_rows_of(conv: Conversation, embedder: Embedder, update_model: Logistic) -> list[tuple]:
    """Cause rows: (features, label, conversation, earlier id, later id, labelled?) for each turn and every
    turn of the `CAUSE_WINDOW` before it (the candidates a chat's steward weighs), and every labelled pair."""
    turns = conv.turns
    sessions = {s: i for i, s in enumerate(dict.fromkeys(t.session for t in turns))}
    scorer = LinkScorer([Utterance(i, t.speaker, t.text, sessions[t.session]) for i, t in enumerate(turns)],
                        embedder.embed([t.text for t in turns]))
    index = {t.id: i for i, t in enumerate(turns)}
    labels: dict[tuple[int, int], set[str]] = {}
    for d in conv.decisions:
        if d.earlier and d.later:
            labels.setdefault((index[d.earlier], index[d.later]), set()).add(d.kind)
    rows = []
    sentence = [{"text": t.text, "speaker": t.speaker, "time": t.time} for t in turns]
    for j in range(1, len(turns)):
        earlier = sorted(set(range(max(0, j - CAUSE_WINDOW), j)) | {i for i, k in labels if k == j and i < j})
        logits = scorer.logits([j], earlier)[0]
        for k, i in enumerate(earlier):
            x = cause_features(float(logits[k]), sentence[i], sentence[j], embedder.embed, update_model)
            rows.append((x, int(DecisionKind.CAUSE in labels.get((i, j), ())), conv.id, turns[i].id, turns[j].id,
                         (i, j) in labels))
    return rows


def fit(rows, names: tuple[str, ...], c: float = 1.0, vetoes: tuple[str, ...] = ()) -> Logistic:
    """Each veto's rate (the share of positives among the pairs it holds, smoothed), then a logistic regression
    over the pairs no veto holds; an unlabelled pair counts `UNLABELLED_WEIGHT` of a labelled one (the writers
    labelled the decisions they built, not every pair: an unlabelled pair is only probably no decision)."""
    from sklearn.linear_model import LogisticRegression

    x = np.array([r[0] for r in rows])
    y = np.array([r[1] for r in rows])
    weight = np.array([1.0 if r[5] else UNLABELLED_WEIGHT for r in rows])
    free = np.ones(len(rows), dtype=bool)
    rates = []
    for name in vetoes:
        held = free & (x[:, names.index(name)] >= 0.5)
        rates.append((name, round(float((y[held].sum() + 0.5) / (held.sum() + 1)), 4)))
        free &= ~held
    mean, scale = x[free].mean(axis=0), x[free].std(axis=0)
    scale[scale == 0] = 1.0
    model = LogisticRegression(C=c, max_iter=2000).fit((x[free] - mean) / scale, y[free], sample_weight=weight[free])
    return Logistic(names, mean, scale, model.coef_[0], float(model.intercept_[0]), tuple(rates))


def cross_validated(rows, names, folds: int = 5, vetoes: tuple[str, ...] = (), also: list = ()) -> np.ndarray:
    """Each row's probability from a model fit without its conversation's fold (and with the rows `also` in
    every fold's fit: pairs from elsewhere, scored by none)."""
    convs = sorted({r[2] for r in rows})
    fold_of = {c: k % folds for k, c in enumerate(convs)}
    out = np.zeros(len(rows))
    for k in range(folds):
        train = [r for r in rows if fold_of[r[2]] != k] + list(also)
        test = [n for n, r in enumerate(rows) if fold_of[r[2]] == k]
        if not test or len({r[1] for r in train}) < 2:
            continue
        m = fit(train, names, vetoes=vetoes)
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


def update_rows(split: str, embedder: Embedder) -> list[tuple]:
    return [r for conv in conversations(split) for r in pairs_of(conv, embedder)]


def relabelled(rows: list[tuple], split: str, kind: str) -> list[tuple]:
    """The same statement pairs, positive when labelled `kind` (their features do not depend on the label)."""
    labels = {(conv.id, d.earlier, d.later) for conv in conversations(split) for d in conv.decisions if d.kind == kind}
    return [(r[0], int((r[2], r[3], r[4]) in labels), *r[2:]) for r in rows]


def split_rows(split: str, embedder: Embedder) -> list[tuple]:
    """Split rows: (features, label, conversation, turn id, turn id, labelled?) for every candidate cut of every
    turn; positive when the turn is labelled a split (a turn of two topics has one cut between them, or two when
    one topic takes two sentences: each is the split)."""
    rows = []
    for conv in conversations(split):
        gold = {d.earlier for d in conv.decisions if d.kind == DecisionKind.SPLIT}
        labelled = {t for d in conv.decisions for t in (d.earlier, d.later)}
        for t in conv.turns:
            for reading in read_cuts(f"{t.speaker}: {t.text}", embedder):
                rows.append((reading.features, int(t.id in gold), conv.id, t.id, t.id, t.id in labelled))
    return rows


def cause_rows(split: str, embedder: Embedder, update_model: Logistic) -> list[tuple]:
    """Cause rows of the two-person conversations only: with more people talking, MemLoom keeps the link
    model's probability (`engine.llm.offline_events.relation_between`), fit on the causal suite's scenarios."""
    return [r for conv in conversations(split) if len({t.speaker for t in conv.turns}) <= CHAT_PARTY
            for r in cause_rows_of(conv, embedder, update_model)]


def stored(model: Logistic) -> dict:
    return {"features": list(model.features), "mean": [round(float(v), 6) for v in model.mean],
            "scale": [round(float(v), 6) for v in model.scale], "weights": [round(float(v), 6) for v in model.weights],
            "bias": round(model.bias, 6), "vetoes": dict(model.vetoes)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--report", choices=["dev", "test"], help="score the written models on a split; fit nothing")
    args = ap.parse_args()
    embedder = Embedder()
    if args.report:
        from engine.llm.decision_models import models

        written = models()
        rows = update_rows(args.report, embedder)
        for name, rows in (("update", rows), ("merge", relabelled(rows, args.report, DecisionKind.MERGE)),
                           ("split", split_rows(args.report, embedder)),
                           ("cause", cause_rows(args.report, embedder, written["update"]))):
            p = np.array([written[name].probability(r[0]) for r in rows])
            print(name, json.dumps(reliability(p, np.array([r[1] for r in rows]))))
        return
    tuning_guard([ROOT / "datasets" / "decisions" / "dev", CAUSAL_SUITE / "validation.jsonl"], "scripts/fit_decisions.py")
    rows = update_rows("dev", embedder)
    update = fit(rows, UPDATE_FEATURES, vetoes=VETOES)
    reliable = {"update": reliability(cross_validated(rows, UPDATE_FEATURES, vetoes=VETOES),
                                      np.array([r[1] for r in rows]))}
    rows = relabelled(rows, "dev", DecisionKind.MERGE)
    merge = fit(rows, UPDATE_FEATURES, vetoes=VETOES)
    reliable["merge"] = reliability(cross_validated(rows, UPDATE_FEATURES, vetoes=VETOES), np.array([r[1] for r in rows]))
    rows = split_rows("dev", embedder)
    split = fit(rows, SPLIT_FEATURES)
    reliable["split"] = reliability(cross_validated(rows, SPLIT_FEATURES), np.array([r[1] for r in rows]))
    rows = cause_rows("dev", embedder, update)
    cause = fit(rows, CAUSE_FEATURES)
    reliable["cause"] = reliability(cross_validated(rows, CAUSE_FEATURES), np.array([r[1] for r in rows]))
    out = {"fitted_on": "datasets/decisions/dev and datasets/causal/validation.jsonl",
           "command": "python scripts/fit_decisions.py",
           "models": {"update": stored(update), "merge": stored(merge), "split": stored(split),
                      "cause": stored(cause)},
           "reliability_dev": reliable}
    for name, model in (("update", update), ("merge", merge), ("split", split), ("cause", cause)):
        print(name, json.dumps(reliable[name]))
        print("  weights", dict(zip(model.features, np.round(model.weights, 3))), "vetoes", dict(model.vetoes))
    MODEL_FILE.write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    print("wrote", MODEL_FILE)


if __name__ == "__main__":
    main()

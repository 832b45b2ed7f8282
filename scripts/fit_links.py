"""Fit the link model of `engine/retrieval/links.py` on the causal suite, and report every split.

Positives: each gold chain's consecutive turns (earlier -> later); negatives: every
other earlier turn of the same scenario. Logistic regression with a small L2
penalty, fit by Newton's method in numpy on the `--fit` splits (by default validation,
which the weights in links.py were fit on; `--fit train,validation` adds the train
split's eight scenarios), once per cap on the substance feature (`SUBSTANCES`); the
cap whose fit ranks the true predecessor first most often on the fit splits is kept.
Beside each cap, the same fit left out one scenario at a time: how often each
left-out scenario's true predecessors rank first, an estimate on scenarios the fit
never saw. Prints the weights to paste into
`engine/retrieval/links.py` and, per split, how often the true predecessor of a chain
turn ranks first / in the top 3 among all earlier turns, and the precision and recall
of MemLoom's relation gate (a pair passes when its probability reaches `--gate`,
θ_rel) over those pairs: recall = gold links that pass / gold links, precision =
passing pairs that are gold links / passing pairs (a lower bound: the suite
annotates its questions' chains, not every cause said). The test split is only
reported, never fit on; the figures are written to --out.

    python scripts/fit_links.py [--fit validation|train|train,validation] [--gate 0.10] [--out out/link_fit.json]
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from results import write_json  # noqa: E402

from engine.core.text import strip_speaker  # noqa: E402
from engine.core.splits import tuning_guard  # noqa: E402
from engine.llm.embedder import Embedder  # noqa: E402
from engine.loaders import load_conversations  # noqa: E402
from engine.retrieval.links import BIAS, FEATURES, SUBSTANCE_CAP, WEIGHTS, LinkScorer, Utterance  # noqa: E402

SUITE = ROOT / "datasets" / "causal"
SUBSTANCES = (5, 6, 8, 10, 12, 1000)      # caps on the content words the substance feature counts


def pairs(split: str, embedder: Embedder, cap: int = SUBSTANCE_CAP):
    """(features, label, group) for every (chain turn, earlier turn) pair of the split."""
    X, y, groups = [], [], []
    for conv in load_conversations(SUITE / f"{split}.jsonl"):
        sess = {s: i for i, s in enumerate(conv.sessions)}
        utts = [Utterance(i, t.speaker, strip_speaker(t.raw)[1], sess[t.session]) for i, t in enumerate(conv.turns)]
        scorer = LinkScorer(utts, embedder.embed([u.text for u in utts]), substance_cap=cap)
        index = {t.id: i for i, t in enumerate(conv.turns)}
        for q in conv.questions:
            chain = [index[e] for e in q.evidence]
            for a, b in zip(chain, chain[1:]):
                earlier = list(range(b))
                F = scorer.features([b], earlier)[0]
                X.extend(F)
                y.extend(int(i == a) for i in earlier)
                groups.extend([(conv.id, q.id, b)] * len(earlier))
    return np.array(X), np.array(y), groups


def fit(X: np.ndarray, y: np.ndarray, l2: float = 1.0, steps: int = 50) -> tuple[np.ndarray, float]:
    A = np.hstack([X, np.ones((len(X), 1))])
    w = np.zeros(A.shape[1])
    reg = np.full(A.shape[1], l2)
    reg[-1] = 0.0
    for _ in range(steps):
        p = 1 / (1 + np.exp(-A @ w))
        grad = A.T @ (p - y) + reg * w
        H = (A * (p * (1 - p))[:, None]).T @ A + np.diag(reg)
        w -= np.linalg.solve(H, grad)
    return w[:-1], float(w[-1])


def ranks(X, y, groups, w, b) -> np.ndarray:
    scores = X @ w + b
    by: dict = {}
    for g, label, s in zip(groups, y, scores):
        by.setdefault(g, []).append((s, label))
    return np.array([1 + sum(s > next(t for t, lab in items if lab) for s, _ in items) for items in by.values()])


def gate(X, y, w, b, threshold: float) -> dict:
    passed = (X @ w + b) >= np.log(threshold / (1 - threshold))
    hits = int((passed & (y == 1)).sum())
    return {"gate": threshold, "passing_pairs": int(passed.sum()), "recall": round(hits / max(1, int(y.sum())), 3),
            "precision": round(hits / int(passed.sum()), 3) if passed.any() else None}


def held_out(X, y, groups) -> np.ndarray:
    """Each scenario's true-predecessor ranks under a fit on every other scenario (leave one scenario out)."""
    scenario = np.array([g[0] for g in groups])
    out = []
    for sid in dict.fromkeys(scenario):
        inside = scenario != sid
        w, b = fit(X[inside], y[inside])
        out.extend(ranks(X[~inside], y[~inside], [g for g, i in zip(groups, inside) if not i], w, b))
    return np.array(out)


class Pairs:
    """`pairs` of each (split, cap), built once: the caps' fits, the chosen fit and the report read the same ones."""

    def __init__(self, embedder: Embedder):
        self.embedder, self.built = embedder, {}

    def of(self, split: str, cap: int):
        if (split, cap) not in self.built:
            self.built[(split, cap)] = pairs(split, self.embedder, cap)
        return self.built[(split, cap)]

    def joined(self, splits: list[str], cap: int):
        parts = [self.of(split, cap) for split in splits]
        return (np.vstack([p[0] for p in parts]), np.concatenate([p[1] for p in parts]),
                [g for p in parts for g in p[2]])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fit", default="validation", help="the splits to fit on, comma-separated (never test)")
    ap.add_argument("--gate", type=float, default=0.10, help="the probability a relation needs (MemLoom's θ_rel)")
    ap.add_argument("--out", default=str(ROOT / "out" / "link_fit.json"))
    args = ap.parse_args()
    fit_on = args.fit.split(",")
    tuning_guard([SUITE / f"{split}.jsonl" for split in fit_on], "scripts/fit_links.py")
    if "test" in fit_on:
        raise SystemExit("the link model is never fit on the test split")
    built = Pairs(Embedder())
    fits = {}
    for cap in SUBSTANCES:
        X, y, g = built.joined(fit_on, cap)
        w, b = fit(X, y)
        r = held_out(X, y, g)
        fits[cap] = (float(np.mean(ranks(X, y, g, w, b) == 1)), float(np.mean(r == 1)), float(np.mean(r <= 3)), w, b)
        print(f"substance cap {cap:5}: top1 {fits[cap][0]:.3f}; left out one scenario at a time, top1 "
              f"{fits[cap][1]:.3f} top3 {fits[cap][2]:.3f}")
    cap = max(SUBSTANCES, key=lambda c: (fits[c][0], -c))
    w, b = fits[cap][3:]
    _, y, g = built.joined(fit_on, cap)
    print(f"fit on {'+'.join(fit_on)}:", len(g), "pairs,", int(y.sum()), "links")
    print(f"SUBSTANCE_CAP = {cap}\nWEIGHTS = np.array([" + ", ".join(f"{x:.3f}" for x in w) + f"])\nBIAS = {b:.3f}")
    print("  (" + ", ".join(FEATURES) + ")")
    out = {"fit_on": fit_on, "features": list(FEATURES), "substance_cap": cap,
           "weights": [round(float(x), 3) for x in w],
           "bias": round(b, 3), "substance_caps": {c: {"top1": round(f[0], 3), "held_out_top1": round(f[1], 3),
                                                 "held_out_top3": round(f[2], 3)} for c, f in fits.items()},
           "splits": {}}
    for split in ("train", "validation", "test"):
        if not (SUITE / f"{split}.jsonl").exists():
            continue
        for label, (ww, bb, at) in (("fit now", (w, b, cap)), ("in engine/retrieval/links.py", (WEIGHTS, BIAS,
                                                                                                 SUBSTANCE_CAP))):
            Xs, ys, gs = built.of(split, at)
            r = ranks(Xs, ys, gs, ww, bb)
            row = {"links": len(r), "top1": round(float(np.mean(r == 1)), 3), "top3": round(float(np.mean(r <= 3)), 3),
                   "median_rank": float(np.median(r)), "fit_on_it": split in fit_on and label == "fit now",
                   **gate(Xs, ys, ww, bb, args.gate)}
            out["splits"].setdefault(split, {})[label] = row
            print(f"{split:10} {label:28} links={len(r)} top1={row['top1']:.3f} top3={row['top3']:.3f} "
                  f"median rank={row['median_rank']:.1f} | gate {args.gate}: recall={row['recall']:.3f} "
                  f"precision={row['precision']} ({row['passing_pairs']} pairs pass)"
                  + (" [fit on it]" if row["fit_on_it"] else ""))
    write_json(args.out, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())

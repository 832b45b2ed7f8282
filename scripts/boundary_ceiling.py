"""How much a meeting's topic boundaries can be found from where its talk changes: QMSum train only.

WindowDiff rewards a boundary only near a gold one and charges a wrong count in every window, so a rule that
never cuts (no boundary) scores well. This script asks how far the depth curve that MemLoom's steward cuts
on (`engine.core.segments.topic_depths`) could go *if it were told how many boundaries each meeting has*:
each train meeting is cut at its deepest gaps, as many as it has gold boundaries, spaced as the fitted rule
spaces them (`min_size` words apart, `lookahead` words before the end). That is a ceiling on the
boundaries' placement, not a rule (a rule must guess the count). Beside it: no boundary, and the same count
placed at random (mean of `--seeds` seeded draws). Windows and smoothings of the depth curve are varied
around the fitted rule. `--mix` weighs what is said against who holds the floor (the rule's `mix`; default the
fitted rule's), and `--counts` cuts at a fixed number of gaps per meeting as well as at gold's count (hindsight
either way: the whole meeting's curve is read). `--signal lexical` scores the gaps by TextTiling's own lexical
cohesion instead (each turn's content words, TF-IDF over the meeting) in place of the utterance vectors and the
floor. Prints the table and writes it to --out. Only `train/` is read.

    python scripts/boundary_ceiling.py [--dir ../shared/data/qmsum/train] [--signal vectors|lexical]
                                       [--mix 1.0 [0.5 ...]] [--counts gold [1 2 ...]]
                                       [--out out/boundary_ceiling.json]
"""
from __future__ import annotations

import argparse
import math
import statistics
import sys
from collections import Counter
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from fit_boundaries import DEFAULT_DIR, Meeting  # noqa: E402
from results import write_json  # noqa: E402

from engine.core.segments import (DepthRule, deepest_boundaries, depth_scores, smooth, topic_depths,  # noqa: E402
                                  window_similarity)
from engine.core.text import content_tokens  # noqa: E402
from engine.engines import settings_class  # noqa: E402
from engine.eval.segmentation import evaluate  # noqa: E402
from engine.llm.embedder import Embedder  # noqa: E402

WINDOWS = (500.0, 1000.0, 2000.0)
SMOOTHINGS = (1, 9, 21)


def deepest_count(m: Meeting, depth: np.ndarray, count: int, min_size: float, lookahead: float) -> list[int]:
    """The first `count` boundaries `deepest_boundaries` takes with no depth threshold: the deepest gaps (ties:
    the earlier) that keep `min_size` words from each other and from the start, and `lookahead` before the end.
    It takes them deepest first, so its deepest `count` are the ones it took first."""
    taken = deepest_boundaries(depth, m.sizes, 0.0, min_size, lookahead)
    return sorted(sorted(taken, key=lambda b: (-round(float(depth[b - 1]), 9), b))[:count])


def lexical_depths(m: Meeting, rule: DepthRule) -> np.ndarray:
    """TextTiling's depth over lexical cohesion: each turn's content words weighted (1 + ln tf) x ln(n / df) over
    the meeting's turns, summed in windows of words either side of a gap."""
    tokens = [content_tokens(t) for t in m.texts]
    df = Counter(w for ts in tokens for w in set(ts))
    column = {w: i for i, w in enumerate(sorted(df))}
    tfidf = np.zeros((m.n, len(column)))
    for i, ts in enumerate(tokens):
        for w, c in Counter(ts).items():
            tfidf[i, column[w]] = (1 + math.log(c)) * math.log(m.n / df[w])
    return depth_scores(smooth(window_similarity(tfidf, np.ones(m.n), m.sizes, rule.window), rule.smoothing))


def mean_errors(meetings: list[Meeting], cuts: dict[str, list[int]]) -> tuple[float, float]:
    rows = [evaluate(m.gold, cuts[m.id], m.n) for m in meetings]
    return (round(statistics.mean(r["pk"] for r in rows), 4), round(statistics.mean(r["window_diff"] for r in rows), 4))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", default=str(DEFAULT_DIR))
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--signal", choices=["vectors", "lexical"], default="vectors",
                    help="what the depth curve compares: utterance vectors and the floor (MemLoom's), or TF-IDF words")
    ap.add_argument("--mix", type=float, nargs="+", help="weights of what is said against who holds the floor "
                    "(default: the fitted rule's)")
    ap.add_argument("--counts", nargs="+", default=["gold"],
                    help="boundaries per meeting: gold (each meeting's own count) and/or whole numbers")
    ap.add_argument("--out", default=str(ROOT / "out" / "boundary_ceiling.json"))
    args = ap.parse_args()
    if Path(args.dir).resolve().name != "train":
        raise SystemExit(f"{args.dir}: this reads QMSum's train split only")
    bad = [c for c in args.counts if c != "gold" and not (c.isdigit() and int(c) > 0)]
    if bad:
        raise SystemExit(f"--counts {' '.join(bad)}: give gold or a positive whole number")
    fitted = settings_class("memloom")().depth_rule()
    mixes = args.mix or [fitted.mix]
    embedder = Embedder()
    meetings = [Meeting(p, embedder) for p in sorted(Path(args.dir).glob("*.json"))]
    rows = []
    for mix in mixes:
        for window in WINDOWS:
            for smoothing in SMOOTHINGS:
                rule = DepthRule(window=window, mix=mix, smoothing=smoothing)
                depth = (lambda m: lexical_depths(m, rule)) if args.signal == "lexical" else \
                    (lambda m: topic_depths(m.vectors, m.texts, m.speakers, rule))
                depths = {m.id: depth(m) for m in meetings}
                for count in args.counts:
                    cuts = {m.id: deepest_count(m, depths[m.id], len(m.gold) if count == "gold" else int(count),
                                                fitted.min_size, fitted.lookahead) for m in meetings}
                    pk, wd = mean_errors(meetings, cuts)
                    rows.append({"mix": mix, "window": window, "smoothing": smoothing, "count": count, "pk": pk,
                                 "window_diff": wd, "fitted": (mix, window, smoothing) == (fitted.mix, fitted.window,
                                                                                          fitted.smoothing)})
    none = mean_errors(meetings, {m.id: [] for m in meetings})
    draws = []
    for seed in range(args.seeds):
        rng = np.random.default_rng(seed)
        draws.append(mean_errors(meetings, {m.id: sorted(int(b) for b in rng.choice(np.arange(1, m.n), len(m.gold),
                                                                                   replace=False))
                                        for m in meetings}))
    random = (round(statistics.mean(d[0] for d in draws), 4), round(statistics.mean(d[1] for d in draws), 4))
    print(f"{len(meetings)} train meetings, {statistics.mean(len(m.gold) for m in meetings):.2f} gold boundaries "
          "per meeting; 'random gaps' places exactly the gold count")
    print(f"{'cut at':62} {'Pk':>6} {'WD':>6}")
    for r in rows:
        label = (f"{r['count']} deepest gaps, mix {r['mix']:g}, window {r['window']:.0f}, smoothing {r['smoothing']}"
                 + (" *" if r["fitted"] else ""))
        print(f"{label:62} {r['pk']:6.3f} {r['window_diff']:6.3f}")
    print(f"{'random gaps':62} {random[0]:6.3f} {random[1]:6.3f}")
    print(f"{'no boundary':62} {none[0]:6.3f} {none[1]:6.3f}")
    print("* the fitted rule's mix, window and smoothing")
    write_json(args.out, {"split": str(Path(args.dir).resolve()), "meetings": len(meetings), "signal": args.signal,
                          "fitted_rule": {"mix": fitted.mix, "window": fitted.window, "smoothing": fitted.smoothing,
                                          "min_size": fitted.min_size, "lookahead": fitted.lookahead},
                          "deepest": rows, "random_with_gold_count": {"pk": random[0],
                                                                                      "window_diff": random[1]},
                          "no_boundary": {"pk": none[0], "window_diff": none[1]}})
    return 0


if __name__ == "__main__":
    sys.exit(main())

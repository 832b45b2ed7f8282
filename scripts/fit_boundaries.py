"""Fit MemLoom's event-boundary rule (`engine.core.segments.DepthRule`) on QMSum's train split only.

The steward cuts a session where `topic_depths` (what is said and who holds the floor, over windows of
words) is deepest, and decides at each run only what lies after the last run: the stretch it has merged
stays merged. This script replays that on every train meeting exactly as the QMSum benchmark schedules
it (a steward run every 200 turns and one when the meeting ends): at each run the depths of the turns
heard so far, boundaries taken by `deepest_boundaries` after the last boundary, among the gaps heard
since the last run that merged the open stretch (one shorter than `min_size` words waits). Each setting
of the grid is scored against the human topic segmentation (Pk, WindowDiff, boundaries per meeting).
Among the settings whose boundaries per meeting are within 2x of gold's (the issue's target; a rule that
never cuts wins Pk alone), the winner is the one that cuts least among those within one standard error
of the lowest mean (Pk + WindowDiff) / 2 (`best`). A 5-fold cross-validation over meetings (fit on four
fifths, score the fifth) estimates how the choice carries to meetings it never saw. Fixed 50-turn
windows and no boundary are printed beside it. `--check N` replays N train meetings through the real
engine with the winning rule and prints its boundaries beside the simulation's (the engine cuts only
between its online events).

Prints the figures and writes them with the fitted values to --out. Only `train/` is read.

    python scripts/fit_boundaries.py [--dir ../shared/data/qmsum/train] [--check 2] [--out out/memloom_boundaries_fit.json]
"""
from __future__ import annotations

import argparse
import itertools
import statistics
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from results import write_json  # noqa: E402

from engine.core.segments import (DepthRule, boundaries_from_labels, deepest_boundaries, fixed_windows,  # noqa: E402
                                  no_boundaries, topic_depths, turn_sizes)
from engine.core.text import strip_speaker  # noqa: E402
from engine.core.splits import tuning_guard  # noqa: E402
from engine.eval.segmentation import evaluate, turn_labels  # noqa: E402
from engine.llm.embedder import Embedder  # noqa: E402
from engine.loaders import load_conversation  # noqa: E402
from engine.loaders.qmsum import gold_boundaries  # noqa: E402
from engine.runtime.replay import Schedule, replay  # noqa: E402
from engine.session import open_session  # noqa: E402

DEFAULT_DIR = ROOT.parent / "shared" / "data" / "qmsum" / "train"
EVERY = 200                               # the QMSum benchmark's schedule: a steward run every 200 turns
GRID = {"window": [1000.0, 1500.0, 2000.0], "mix": [0.5, 0.7, 1.0], "smoothing": [9],
        "threshold": [0.06, 0.08, 0.1, 0.12, 0.15, 0.2, 0.25, 0.3], "min_size": [400.0, 700.0, 1000.0],
        "lookahead": [100.0, 300.0, 600.0]}
FOLDS = 5


class Meeting:
    def __init__(self, path: Path, embedder: Embedder):
        self.conv = load_conversation(path)
        self.id, self.n = self.conv.id, len(self.conv.turns)
        self.gold = gold_boundaries(path, self.n)
        self.texts = [strip_speaker(t.raw)[1] for t in self.conv.turns]
        self.speakers = [t.speaker for t in self.conv.turns]
        self.vectors = embedder.embed(self.texts)
        self.sizes = turn_sizes(self.texts)
        self.runs = list(range(EVERY, self.n, EVERY)) + [self.n]
        self.depths: dict[tuple, np.ndarray] = {}

    def depth(self, heard: int, rule: DepthRule) -> np.ndarray:
        key = (heard, rule.window, rule.mix, rule.smoothing)
        if key not in self.depths:
            self.depths[key] = topic_depths(self.vectors[:heard], self.texts[:heard], self.speakers[:heard], rule)
        return self.depths[key]


def simulate(m: Meeting, rule: DepthRule) -> list[int]:
    """The boundaries the steward makes of meeting `m`, run by run (module docstring)."""
    cuts: list[int] = []
    decided = 0                     # turns merged by the runs so far: no cut falls before them
    for heard in m.runs:
        start = cuts[-1] if cuts else 0
        new = deepest_boundaries(m.depth(heard, rule), m.sizes[:heard], rule.threshold, rule.min_size,
                                 rule.lookahead, start=start, allowed=range(max(decided, 1), heard))
        cuts += new
        if m.sizes[cuts[-1] if cuts else 0:heard].sum() >= rule.min_size:
            decided = heard         # the open stretch is long enough to be repaired into one event: merged
    return cuts


def figures(rows: list[dict]) -> dict:
    return {k: round(statistics.mean(r[k] for r in rows), 4) for k in ("pk", "window_diff", "delta_b_rate",
                                                                       "boundaries", "gold_boundaries")}


def score(meetings: list[Meeting], hyps: dict[str, list[int]]) -> dict:
    return figures([{**evaluate(m.gold, hyps[m.id], m.n), "boundaries": len(hyps[m.id]),
                     "gold_boundaries": len(m.gold)} for m in meetings])


def eligible(f: dict) -> bool:
    """Boundaries per meeting within 2x of gold's, either way."""
    return f["gold_boundaries"] / 2 <= f["boundaries"] <= 2 * f["gold_boundaries"]


def best(results: dict[DepthRule, dict[str, list[int]]], meetings: list[Meeting]) -> tuple[DepthRule, dict]:
    """The one-standard-error rule: among the eligible settings whose mean (Pk + WindowDiff) / 2 is within one
    standard error (over meetings) of the lowest, the one that cuts least. The lowest mean itself is the best
    of 648 noisy estimates on 33 meetings, and chosen so it does worse on meetings it did not see (5-fold:
    held-out Pk 0.396, WindowDiff 0.419, worse than no boundary); the sparest near-best setting generalises."""
    scored = [(rule, score(meetings, hyps)) for rule, hyps in results.items()]
    ok = [(r, f) for r, f in scored if eligible(f)] or scored
    lowest, _ = min(ok, key=lambda rf: (mean_error(rf[1]), rf[1]["boundaries"]))
    per_meeting = [mean_error(evaluate(m.gold, results[lowest][m.id], m.n)) for m in meetings]
    limit = statistics.mean(per_meeting) + statistics.stdev(per_meeting) / len(per_meeting) ** 0.5
    return min(((r, f) for r, f in ok if mean_error(f) <= limit), key=lambda rf: (rf[1]["boundaries"],
                                                                                 mean_error(rf[1])))


def mean_error(f: dict) -> float:
    return (f["pk"] + f["window_diff"]) / 2


def check(meetings: list[Meeting], rule: DepthRule, embedder: Embedder) -> list[dict]:
    """The real engine with `rule` on the first meetings, next to the simulation."""
    work = Path(tempfile.mkdtemp(prefix="memwb-fitb-"))
    out = []
    for m in meetings:
        settings = {f"boundary_{k}": v for k, v in asdict(rule).items()}
        eng = open_session(work / f"{m.id}.sqlite", engine="memloom", settings=settings, embedder=embedder)
        replay(eng, m.conv, Schedule.parse(f"every-{EVERY}-turns"))
        engine_cuts = boundaries_from_labels(turn_labels(eng.state))
        sim = simulate(m, rule)
        out.append({"meeting": m.id, "simulated": sim, "engine": engine_cuts,
                    "simulated_pk": round(evaluate(m.gold, sim, m.n)["pk"], 4),
                    "engine_pk": round(evaluate(m.gold, engine_cuts, m.n)["pk"], 4)})
        print(f"  check {m.id}: simulated {sim} (Pk {out[-1]['simulated_pk']}), "
              f"engine {engine_cuts} (Pk {out[-1]['engine_pk']})", flush=True)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", default=str(DEFAULT_DIR))
    ap.add_argument("--check", type=int, default=2, help="train meetings replayed through the real engine")
    ap.add_argument("--out", default=str(ROOT / "out" / "memloom_boundaries_fit.json"))
    args = ap.parse_args()
    tuning_guard([args.dir], "scripts/fit_boundaries.py")
    if Path(args.dir).resolve().name != "train":
        raise SystemExit(f"{args.dir}: the rule is fit on QMSum's train split only")
    started = time.perf_counter()
    embedder = Embedder()
    meetings = [Meeting(p, embedder) for p in sorted(Path(args.dir).glob("*.json"))]
    print(f"{len(meetings)} train meetings, {sum(m.n for m in meetings)} turns, "
          f"{statistics.mean(len(m.gold) for m in meetings):.2f} gold boundaries per meeting", flush=True)
    rules = [DepthRule(*values) for values in itertools.product(*GRID.values())]
    results = {rule: {m.id: simulate(m, rule) for m in meetings} for rule in rules}
    rule, fit = best(results, meetings)
    baselines = {"fixed-50": score(meetings, {m.id: fixed_windows(m.n, 50) for m in meetings}),
                 "no-boundary": score(meetings, {m.id: no_boundaries(m.n) for m in meetings})}
    folds = []
    for k in range(FOLDS):
        held = meetings[k::FOLDS]
        rest = [m for m in meetings if m not in held]
        chosen, inside = best(results, rest)
        folds.append({"held_out": [m.id for m in held], "rule": asdict(chosen), "fit": inside,
                      "held_out_figures": score(held, results[chosen]),
                      "no_boundary_held_out": score(held, {m.id: [] for m in held})})
    cv = {key: round(statistics.mean(f["held_out_figures"][key] for f in folds), 4)
          for key in ("pk", "window_diff", "boundaries")}
    print(f"\n{len(rules)} settings, {time.perf_counter() - started:.0f}s")
    print("fitted:", asdict(rule))
    print(f"{'system':12} {'Pk':>6} {'WD':>6} {'ΔB rate':>8} {'boundaries':>10} {'gold':>6}")
    for name, f in [("memloom", fit), *baselines.items()]:
        print(f"{name:12} {f['pk']:6.3f} {f['window_diff']:6.3f} {f['delta_b_rate']:8.2f} {f['boundaries']:10.2f} "
              f"{f['gold_boundaries']:6.2f}")
    print(f"{FOLDS}-fold cross-validation over meetings, held-out mean: Pk {cv['pk']:.3f} WD {cv['window_diff']:.3f} "
          f"boundaries {cv['boundaries']:.2f} (no boundary on the same folds: Pk "
          f"{statistics.mean(f['no_boundary_held_out']['pk'] for f in folds):.3f})")
    checked = check(meetings[: args.check], rule, embedder) if args.check else []
    write_json(args.out, {"split": str(Path(args.dir).resolve()), "meetings": len(meetings), "schedule_every": EVERY,
                          "grid": GRID, "rule": asdict(rule), "train": fit, "baselines": baselines,
                          "cross_validation": {"mean_held_out": cv, "folds": folds}, "check": checked})
    return 0


if __name__ == "__main__":
    sys.exit(main())

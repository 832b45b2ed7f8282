"""Fit GAM's offline boundary detector and its relation calibration on QMSum's train split only.

1. Detector. For every setting of the grid (TextTiling window w, depth threshold, minimum segment, the overflow
   tail policy), the stream of each train meeting is replayed through GAM's buffer exactly as the engine does it:
   utterances accumulate until the buffer passes T_max tokens (the engine's tokenizer), the detector
   (`engine.core.tiling.texttiling` over the utterances' embeddings, what the offline detector role runs) cuts
   the buffer, and `GamEngine.plan_trigger` (through the registry) decides which segments become topics and what
   stays; the meeting's end is a session end. The boundaries are scored against the human topic segmentation
   (Pk and WindowDiff, window from the gold segmentation); the setting with the lowest mean (Pk + WindowDiff) / 2
   wins (ties: fewer boundaries). Fixed 50-turn windows and one segment per meeting are printed beside it.
2. Relation calibration. With the winning detector, each meeting's topics get the offline summary role's
   c_sum; every (later, earlier) pair of topics of a meeting is labelled related when both segments' majority
   gold topic is the same, and σ(a·cos + c·ln distance + b) of their c_sum cosine and their distance in the
   sequence of topics (1 = consecutive) is fit by logistic regression (AUCs printed per feature).
3. Check. The real engine replays `--check` train meetings with the fitted settings; its topic boundaries must
   equal the simulation's (printed).

Prints the train figures and writes them with the fitted values to --out. Only `train/` is read.

    python scripts/fit_gam.py [--dir ../shared/data/qmsum/train] [--check 2] [--out out/gam_fit.json]
"""
from __future__ import annotations

import argparse
import itertools
import json
import math
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from results import write_json  # noqa: E402

from engine.core.segments import boundaries_from_labels, fixed_windows, no_boundaries  # noqa: E402
from engine.core.text import strip_speaker  # noqa: E402
from engine.core.splits import tuning_guard  # noqa: E402
from engine.core.tiling import deepest_gaps, depth_scores  # noqa: E402
from engine.engines import engine_class, settings_class  # noqa: E402
from engine.eval.segmentation import evaluate, turn_labels  # noqa: E402
from engine.llm import LLM, make_backend  # noqa: E402
from engine.llm.embedder import Embedder  # noqa: E402
from engine.loaders import load_conversation  # noqa: E402
from engine.loaders.qmsum import gold_boundaries  # noqa: E402
from engine.runtime.replay import Schedule, replay  # noqa: E402
from engine.session import open_session  # noqa: E402

DEFAULT_DIR = ROOT.parent / "shared" / "data" / "qmsum" / "train"
GRID = {"tiling_window": [8, 16, 24, 32, 48], "depth_threshold": [round(0.1 * i, 2) for i in range(1, 13)],
        "min_segment": [5, 10, 20, 40],
        "tail": [("keep", 0.5), ("keep", 0.75), ("cut", 0.5)]}


class Stream:
    """A conversation's turns as GAM's buffer meets them: each turn's vector (what the offline detector
    embeds), its token count and its session."""

    def __init__(self, conv, embedder: Embedder, count):
        self.conv = conv
        self.n = len(self.conv.turns)
        self.vectors = embedder.embed([strip_speaker(t.raw)[1] for t in self.conv.turns])
        self.tokens = [count(t.raw) for t in self.conv.turns]
        self.sessions = [t.session for t in self.conv.turns]
        self.prefix = np.concatenate([[0], np.cumsum(self.tokens)])
        self.depths: dict[tuple, np.ndarray] = {}

    def depth(self, buffer: list[int], window: int) -> np.ndarray:
        """The buffer's gap depths (cached: the grid meets the same buffers under many thresholds)."""
        key = (buffer[0], buffer[-1], len(buffer), window)
        if key not in self.depths:
            self.depths[key] = depth_scores(self.vectors[buffer], window)
        return self.depths[key]


class Meeting(Stream):
    """A QMSum train meeting with its human topic boundaries."""

    def __init__(self, path: Path, embedder: Embedder, count):
        super().__init__(load_conversation(path), embedder, count)
        self.path = path
        self.gold = gold_boundaries(path, self.n)


def simulate(m: Stream, settings, plan) -> list[tuple[int, int]]:
    """The topics (inclusive turn ranges) GAM's buffer makes of the stream under `settings`."""
    topics: list[tuple[int, int]] = []
    buffer: list[int] = []

    def trigger(kind: str) -> None:
        nonlocal buffer
        if not buffer:
            return
        starts = deepest_gaps(m.depth(buffer, settings.tiling_window), settings.depth_threshold,
                              settings.min_segment) if len(buffer) > 1 else []
        decided = plan(len(buffer), starts, kind, [m.tokens[i] for i in buffer], settings)
        topics.extend((buffer[a], buffer[b]) for a, b in decided.consolidate)
        buffer = [buffer[i] for i in range(decided.kept[0], decided.kept[1] + 1)] if decided.kept else []

    for i in range(m.n):
        if buffer and m.sessions[buffer[-1]] != m.sessions[i]:
            trigger("session_end")
        buffer.append(i)
        if m.prefix[buffer[-1] + 1] - m.prefix[buffer[0]] > settings.t_max:      # the buffer is a run of turns
            trigger("overflow")
    trigger("session_end")
    return topics


def boundaries(topics: list[tuple[int, int]], n: int) -> list[int]:
    labels = [0] * n
    for k, (a, b) in enumerate(sorted(topics)):
        for i in range(a, b + 1):
            labels[i] = k
    return boundaries_from_labels(labels)


def score(meetings: list[Meeting], hyps: list[list[int]]) -> dict:
    rows = [evaluate(m.gold, h, m.n) for m, h in zip(meetings, hyps)]
    out = {key: statistics.fmean(r[key] for r in rows) for key in ("pk", "window_diff", "delta_b")}
    out["delta_b_rate"] = statistics.fmean(r["delta_b_rate"] for r in rows if "delta_b_rate" in r)
    out["boundaries"] = statistics.fmean(len(h) for h in hyps)
    out["objective"] = (out["pk"] + out["window_diff"]) / 2
    return out


def majority_topic(path: Path, a: int, b: int) -> int:
    """The gold topic (index in topic_list) covering most turns of a..b (-1 when none does)."""
    data = json.loads(path.read_text(encoding="utf-8"))
    votes: dict[int, int] = {}
    for j, topic in enumerate(data["topic_list"]):
        for span in topic["relevant_text_span"]:
            lo, hi = int(span[0]), int(span[1])
            votes[j] = votes.get(j, 0) + max(0, min(b, hi) - max(a, lo) + 1)
    best = max(votes.items(), key=lambda kv: (kv[1], -kv[0]), default=(-1, 0))
    return best[0] if best[1] > 0 else -1


def logistic(features: np.ndarray, y: np.ndarray, steps: int = 100) -> np.ndarray:
    """Maximum-likelihood weights (one per feature column, then the bias) of P(y=1) = σ(X·w + b), Newton's
    method with a tiny ridge."""
    X = np.hstack([features, np.ones((len(features), 1))])
    w = np.zeros(X.shape[1])
    for _ in range(steps):
        p = 1.0 / (1.0 + np.exp(-(X @ w)))
        grad = X.T @ (p - y) + 1e-3 * w
        hess = (X * (p * (1 - p))[:, None]).T @ X + 1e-3 * np.eye(X.shape[1])
        step = np.linalg.solve(hess, grad)
        w -= step
        if np.abs(step).max() < 1e-9:
            break
    return w


def auc(x: np.ndarray, y: np.ndarray) -> float:
    """The chance a related pair scores above an unrelated one (ties half)."""
    pos, neg = x[y == 1], x[y == 0]
    return float(np.mean([(v > neg).mean() + 0.5 * (v == neg).mean() for v in pos])) if len(pos) and len(neg) else 0.5


def calibrate(meetings: list[Meeting], settings, plan, embedder: Embedder) -> dict:
    llm = LLM(make_backend("offline", embedder=embedder))
    xs, ys = [], []
    for m in meetings:
        topics = sorted(simulate(m, settings, plan))
        labels = [majority_topic(m.path, a, b) for a, b in topics]
        texts = []
        for a, b in topics:
            turns = m.conv.turns[a:b + 1]
            call = llm.call("topic_summary", {"utterances": [{"speaker": t.speaker, "text": t.text, "time": t.time}
                                                             for t in turns]})
            texts.append(f"{call.data['summary']} || {', '.join(call.data['keywords'])}")
        vecs = embedder.embed(texts)
        for j, i in itertools.combinations(range(len(topics)), 2):
            xs.append((float(vecs[i] @ vecs[j]), math.log(i - j)))       # (cosine, ln topic distance)
            ys.append(1.0 if labels[i] == labels[j] and labels[i] >= 0 else 0.0)
    x, y = np.array(xs), np.array(ys)
    a, c, b = logistic(x, y)
    p = 1.0 / (1.0 + np.exp(-(x @ np.array([a, c]) + b)))
    distance = np.exp(x[:, 1]).round().astype(int)
    return {"a": round(float(a), 3), "c": round(float(c), 3), "b": round(float(b), 3), "pairs": len(xs),
            "related": int(y.sum()), "base_rate": round(float(y.mean()), 4),
            "auc_cosine": round(auc(x[:, 0], y), 4), "auc_distance": round(auc(-x[:, 1], y), 4),
            "auc_model": round(auc(p, y), 4),
            "cosine_related_mean": round(float(x[y == 1, 0].mean()), 4) if y.any() else None,
            "cosine_unrelated_mean": round(float(x[y == 0, 0].mean()), 4) if (y == 0).any() else None,
            "related_rate_by_distance": {str(d): round(float(y[distance == d].mean()), 3) for d in (1, 2, 3, 4, 5)
                                         if (distance == d).any()},
            "accuracy_at_0.5": round(float(((p >= 0.5) == (y == 1)).mean()), 4),
            "log_loss": round(float(-np.mean(y * np.log(p + 1e-12) + (1 - y) * np.log(1 - p + 1e-12))), 4)}


def fit_parts():
    """What a fit of GAM's detector works with: the embedder, the engine class, its settings class, the default
    settings and the token counter of their tokenizer."""
    engine = engine_class("gam")
    Settings = settings_class("gam")
    base = Settings()
    return Embedder(), engine, Settings, base, engine.token_counter(base.tokenizer)


def replayed(m: Stream, settings: dict, embedder: Embedder, schedule: str):
    """The real GAM engine after replaying the stream with `settings` (a new database): what a fit's check sets
    beside its simulation."""
    work = Path(tempfile.mkdtemp(prefix="memwb-gamfit-"))
    eng = open_session(work / f"{m.conv.id}.sqlite", engine="gam", settings=settings, embedder=embedder)
    replay(eng, m.conv, Schedule.parse(schedule))
    return eng


def check(meetings: list[Meeting], fitted: dict, embedder: Embedder, plan, settings) -> list[dict]:
    """The real engine's topic boundaries beside the simulation's, for a few meetings."""
    rows = []
    for m in meetings:
        eng = replayed(m, fitted, embedder, "every-200-turns")
        real = boundaries_from_labels(turn_labels(eng.state))
        simulated = boundaries(simulate(m, settings, plan), m.n)
        rows.append({"meeting": m.conv.id, "engine": real, "simulation": simulated, "equal": real == simulated})
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", default=str(DEFAULT_DIR))
    ap.add_argument("--check", type=int, default=2, help="meetings the real engine replays to check the simulation")
    ap.add_argument("--out", default=str(ROOT / "out" / "gam_fit.json"))
    args = ap.parse_args()
    tuning_guard([args.dir], "scripts/fit_gam.py")
    if Path(args.dir).resolve().name != "train":
        raise SystemExit(f"{args.dir}: fit on QMSum's train split only")
    started = time.perf_counter()
    embedder, engine, Settings, base, count = fit_parts()
    meetings = []
    for path in sorted(Path(args.dir).glob("*.json")):
        meetings.append(Meeting(path, embedder, count))
        print(f"  {path.stem}: {meetings[-1].n} turns embedded ({time.perf_counter() - started:.0f}s)", flush=True)
    print(f"{len(meetings)} train meetings, {sum(m.n for m in meetings)} turns, "
          f"{statistics.fmean(len(m.gold) for m in meetings):.2f} gold boundaries per meeting", flush=True)
    results = []
    for w, theta, min_seg, (tail, share) in itertools.product(*GRID.values()):
        s = Settings(tiling_window=w, depth_threshold=theta, min_segment=min_seg, overflow_tail=tail,
                     tail_keep_share=share)
        hyps = [boundaries(simulate(m, s, engine.plan_trigger), m.n) for m in meetings]
        results.append(({"tiling_window": w, "depth_threshold": theta, "min_segment": min_seg,
                         "overflow_tail": tail, "tail_keep_share": share}, score(meetings, hyps)))
    results.sort(key=lambda r: (round(r[1]["objective"], 6), r[1]["boundaries"]))
    best, figures = results[0]
    fitted = Settings(**best)
    baselines = {"fixed-50": score(meetings, [fixed_windows(m.n, 50) for m in meetings]),
                 "no-boundary": score(meetings, [no_boundaries(m.n) for m in meetings]),
                 "gam-chat-calibration (the defaults)":
                     score(meetings, [boundaries(simulate(m, base, engine.plan_trigger), m.n) for m in meetings])}
    print(f"\ngrid: {len(results)} settings ({time.perf_counter() - started:.0f}s)")
    print(f"{'train (QMSum)':36} {'Pk':>6} {'WD':>6} {'ΔB':>7} {'ΔB rate':>8} {'boundaries':>10}")
    for name, f in [("gam (fitted)", figures), *baselines.items()]:
        print(f"{name:36} {f['pk']:6.3f} {f['window_diff']:6.3f} {f['delta_b']:7.2f} {f['delta_b_rate']:8.2f} "
              f"{f['boundaries']:10.1f}")
    print(f"fitted: {best}")
    print("next best:", *(f"{r[0]} -> {r[1]['objective']:.4f}" for r in results[1:4]), sep="\n  ")
    calibration = calibrate(meetings, fitted, engine.plan_trigger, embedder)
    print(f"relation calibration on {calibration['pairs']} topic pairs ({calibration['related']} related, base rate "
          f"{calibration['base_rate']}): σ({calibration['a']}·cos + {calibration['c']}·ln distance + "
          f"{calibration['b']}); AUC cosine {calibration['auc_cosine']}, distance {calibration['auc_distance']}, "
          f"model {calibration['auc_model']}; accuracy {calibration['accuracy_at_0.5']}, log loss "
          f"{calibration['log_loss']}; related rate by distance {calibration['related_rate_by_distance']}")
    checked = check(meetings[: args.check], best, embedder, engine.plan_trigger, fitted)
    for row in checked:
        print(f"check {row['meeting']}: engine {len(row['engine'])} boundaries, simulation "
              f"{len(row['simulation'])}, equal: {row['equal']}")
    write_json(args.out, {"split": str(Path(args.dir).resolve()), "meetings": len(meetings), "grid": GRID,
                          "fitted": best, "train": figures, "baselines": baselines, "calibration": calibration,
                          "check": checked, "top": [{"settings": r[0], **r[1]} for r in results[:10]]})
    return 0 if all(r["equal"] for r in checked) else 1


if __name__ == "__main__":
    sys.exit(main())

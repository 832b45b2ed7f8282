"""Calibrate GAM's offline boundary detector for chats on LoCoMo dev: the topic granularity of the paper's own run.

GAM's detector is an LLM told to mark "a completely different subject" (App. E.3); its strictness is the paper's
ε, and the offline detector's window, depth threshold and least segment stand in for it. Fit on QMSum meetings
(`scripts/fit_gam.py`: topics of ~115 utterances), they never cut inside a LoCoMo session of ~22 turns, so GAM
became the paper's own "Session-based partitioning" baseline (§4.4, Figure 3). LoCoMo has no topic gold to fit
on; what the paper gives is how finely its detector cut LoCoMo: Table 10's topic nodes against its event nodes
after 3, 15 and 27 sessions. So for every setting of the grid each dev conversation is replayed through GAM's
buffer exactly as the engine does it (`fit_gam.simulate`: session ends and T_max overflows, the tail policies),
and the settings are ranked by how near their topics per event come to the paper's (mean |ln(ours / paper)|
over the three checkpoints, each the mean over the conversations that reach it; ties: the wider window, the
longer least segment, the higher threshold). Settings of nearly the same granularity still cut in different
places, so the `--candidates` nearest are each run as a static `memwb bench` on the dev conversations and the one
with the highest R@5 is kept (ties: the nearer granularity): the paper decides how finely, dev recall where.
The real engine replays `--check` conversations with the fitted settings; its topics must equal the simulation's.

    python scripts/fit_gam_chat.py [--data ../shared/data/locomo/locomo-dev8.json] [--candidates 10] [--check 1]
                                   [--out out/gam_chat_fit.json]
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

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from fit_gam import Stream, fit_parts, replayed, simulate  # noqa: E402
from results import write_json  # noqa: E402

from engine.bench.config import BenchConfig  # noqa: E402
from engine.core.splits import tuning_guard  # noqa: E402
from engine.bench.runner import run_benchmark  # noqa: E402
from engine.engines import engine_schema  # noqa: E402
from engine.eval.reproduction import PAPER_ROWS, growth_of  # noqa: E402
from engine.llm.embedder import Embedder  # noqa: E402
from engine.loaders import load_conversations  # noqa: E402

DEFAULT_DATA = ROOT.parent / "shared" / "data" / "locomo" / "locomo-dev8.json"
GRID = {"tiling_window": [2, 3, 4, 5, 6, 7, 8, 10, 12, 16, 24],
        "depth_threshold": [round(0.05 * i, 2) for i in range(1, 11)],
        "min_segment": [2, 3, 4, 5, 6, 8, 10]}


def paper_growth() -> dict[int, dict[str, float]]:
    """GAM Table 10 as `engine.eval.reproduction` holds it: sessions -> {"event": n, "topic": n}."""
    out: dict[int, dict[str, float]] = {}
    for row in PAPER_ROWS:
        grown = growth_of(row.metric) if row.engine == "gam" else None
        if grown and grown[1] in ("event", "topic"):
            out.setdefault(grown[0], {})[grown[1]] = row.value
    return dict(sorted(out.items()))


class Chat(Stream):
    """A dev conversation: each turn's session number (1 = its first session)."""

    def __init__(self, conv, embedder: Embedder, count):
        super().__init__(conv, embedder, count)
        order = list(dict.fromkeys(self.sessions))
        self.session_no = [order.index(s) + 1 for s in self.sessions]
        self.session_count = len(order)


def growth(chats: list[Chat], topics: list[list[tuple[int, int]]], sessions: int) -> dict[str, float] | None:
    """Mean events (turns) and topics whose turns all lie in the first `sessions` sessions, over the
    conversations that reach that many sessions (as `engine.bench.figures.memory_through` counts them)."""
    reached = [(c, t) for c, t in zip(chats, topics) if c.session_count >= sessions]
    if not reached:
        return None
    return {"conversations": len(reached),
            "event": statistics.fmean(sum(1 for s in c.session_no if s <= sessions) for c, _ in reached),
            "topic": statistics.fmean(sum(1 for _, b in t if c.session_no[b] <= sessions) for c, t in reached)}


def mismatch(ours: dict[int, dict], paper: dict[int, dict]) -> float:
    """Mean |ln| of our topics per event over the paper's, at each checkpoint both have."""
    logs = [abs(math.log((ours[n]["topic"] / ours[n]["event"]) / (p["topic"] / p["event"])))
            for n, p in paper.items() if ours.get(n) and ours[n]["topic"] > 0]
    return statistics.fmean(logs) if len(logs) == len(paper) else math.inf


def dev_recall(data: str, chosen: dict, work: Path) -> float:
    """R@5 of GAM with `chosen` on the dev conversations, a static `memwb bench` run."""
    out = work / "_".join(f"{k}{v}" for k, v in chosen.items())
    path = run_benchmark(BenchConfig(dataset="locomo", source=data, engines=("gam",), protocol="static",
                                     settings={"gam": chosen}, out=str(out)))
    return json.loads(Path(path).read_text())["summary"]["gam"]["overall"]["r@5"]


def check(chats: list[Chat], fitted: dict, embedder: Embedder, plan, settings) -> list[dict]:
    """The real engine's topics (first and last turn index of each topic node) beside the simulation's."""
    rows = []
    for c in chats:
        eng = replayed(c, fitted, embedder, "every-3-sessions")
        index = {t.id: i for i, t in enumerate(c.conv.turns)}
        real = sorted((min(index[s] for s in u.source_ids), max(index[s] for s in u.source_ids))
                      for u in eng.state.nodes.values() if u.kind == "topic")
        simulated = sorted(simulate(c, settings, plan))
        rows.append({"conversation": c.conv.id, "engine": len(real), "simulation": len(simulated),
                     "equal": real == simulated})
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=str(DEFAULT_DATA))
    ap.add_argument("--candidates", type=int, default=10, help="settings nearest the paper's granularity run with "
                    "the dev questions")
    ap.add_argument("--check", type=int, default=1, help="conversations the real engine replays to check")
    ap.add_argument("--out", default=str(ROOT / "out" / "gam_chat_fit.json"))
    args = ap.parse_args()
    tuning_guard([args.data], "scripts/fit_gam_chat.py")
    if "dev" not in Path(args.data).name:
        raise SystemExit(f"{args.data}: calibrate on LoCoMo's dev conversations only")
    started = time.perf_counter()
    embedder, engine, Settings, base, count = fit_parts()
    chats = [Chat(conv, embedder, count) for conv in load_conversations(args.data)]
    paper = paper_growth()
    print(f"{len(chats)} dev conversations, {sum(c.n for c in chats)} turns, "
          f"{sum(c.session_count for c in chats)} sessions ({time.perf_counter() - started:.0f}s)", flush=True)

    def figures(settings) -> dict:
        topics = [simulate(c, settings, engine.plan_trigger) for c in chats]
        ours = {n: growth(chats, topics, n) for n in paper}
        return {"growth": ours, "mismatch": mismatch(ours, paper),
                "topics_per_session": sum(map(len, topics)) / sum(c.session_count for c in chats)}

    results = []
    for w, theta, least in itertools.product(*GRID.values()):
        chosen = {"tiling_window": w, "depth_threshold": theta, "min_segment": least}
        results.append((chosen, figures(Settings.from_dict({**base.to_dict(), **chosen}))))
    results.sort(key=lambda r: (round(r[1]["mismatch"], 9), -r[0]["tiling_window"], -r[0]["min_segment"],
                                -r[0]["depth_threshold"]))
    work = Path(tempfile.mkdtemp(prefix="memwb-gamchat-"))
    candidates = [(chosen, {**f, "r@5": dev_recall(args.data, chosen, work)})
                  for chosen, f in results[:args.candidates]]
    for chosen, f in candidates:
        print(f"  {chosen}: mismatch {f['mismatch']:.4f}, {f['topics_per_session']:.2f} topics a session, "
              f"dev R@5 {f['r@5']:.4f}", flush=True)
    best, fit = max(candidates, key=lambda c: c[1]["r@5"])        # max keeps the first (nearest) of equals
    meeting = engine_schema("gam").fits["meetings"]
    before = {**figures(Settings.from_dict({**base.to_dict(), **meeting})), "r@5": dev_recall(args.data, meeting, work)}
    print(f"grid: {len(results)} settings ({time.perf_counter() - started:.0f}s)")
    print(f"{'after n sessions: events / topics':40}" + "".join(f"{n:>16}" for n in paper) + f"{'topics/session':>16}")

    def line(name: str, f: dict) -> str:
        cells = "".join(f"{g['event']:>8.1f} /{g['topic']:>6.1f}" if g else f"{'–':>16}" for g in f["growth"].values())
        return f"{name:40}{cells}{f['topics_per_session']:>16.2f}"
    print(f"{'GAM paper, Table 10':40}" + "".join(f"{p['event']:>8.0f} /{p['topic']:>6.0f}" for p in paper.values()))
    print(line("the QMSum meeting fit (the default before)", before))
    print(line("fitted", fit))
    print(f"fitted: {best} (mismatch {fit['mismatch']:.4f}, dev R@5 {fit['r@5']:.4f}; before "
          f"{before['mismatch']:.4f}, {before['r@5']:.4f})")
    print("nearest the paper's granularity:", *(f"{r[0]} -> {r[1]['mismatch']:.4f}" for r in results[:5]), sep="\n  ")
    fitted = {**base.to_dict(), **best}
    checked = check(chats[: args.check], fitted, embedder, engine.plan_trigger, Settings.from_dict(fitted))
    for row in checked:
        print(f"check {row['conversation']}: engine {row['engine']} topics, simulation {row['simulation']}, "
              f"equal: {row['equal']}")
    write_json(args.out, {"data": str(Path(args.data).resolve()), "conversations": len(chats), "grid": GRID,
                          "paper": paper, "fitted": best, "fit": fit, "before": before, "check": checked,
                          "candidates": [{"settings": c, **f} for c, f in candidates],
                          "top": [{"settings": r[0], **r[1]} for r in results[:10]]})
    return 0 if all(r["equal"] for r in checked) else 1


if __name__ == "__main__":
    sys.exit(main())

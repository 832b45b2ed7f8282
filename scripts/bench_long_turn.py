"""One very long turn through ingest and a consolidation run of each engine (offline backend): time and peak
memory per role.

Builds a conversation of three turns whose middle one holds about `--chars` characters of short sentences
(fixed seed): the first half from one vocabulary, the second from another, opened "By the way," at one of
Split's candidate cuts, so that a Split is proposed and planned. For each engine (All-Mem and MemLoom by
default), in a fresh process of its own so that each peak is its own, it replays the conversation into a
new database and runs each offline process once: diagnosis, a plan for every proposal (what the
Consolidation page's preview does), then the gate decides. Every LLM role call, the embedder and the engine-side steps that feed the roles (Split's candidate
cuts, the diagnosis neighbourhood, the steward's link scoring, relation and topic candidates, commits) are
timed, and a thread samples the resident set size every few milliseconds, so each role gets its wall time
and the highest RSS seen while it ran (times and peaks are inclusive: an embedder call inside a role counts
for both). Prints the figures and writes them to out/bench_long_turn.json. Targets (issue 9): the run
finishes and stays under 2 GB.

    python scripts/bench_long_turn.py [--chars 1000000] [--engines allmem,memloom]
"""
from __future__ import annotations

import argparse
import importlib
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from contextlib import contextmanager
from functools import wraps
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from results import write_json  # noqa: E402

TOPICS = (("Sample {n} of the bleached coral went into tank {m} under the blue lights.",
           "The heat stress data from reef site {n} showed bleaching in {m} colonies."),
          ("Jon practised scale {n} on the cello for lesson {m} with his teacher.",
           "The cello teacher gave Jon {n} new pieces and {m} bowing exercises."))
PAGE_MB = os.sysconf("SC_PAGE_SIZE") / 2**20
TARGET_MB = 2048


class RoleMeter:
    """Inclusive wall time, call count and peak RSS per label, over a stack of active labels."""

    def __init__(self, interval_s: float = 0.002):
        self.active: list[str] = []
        self.time: dict[str, float] = defaultdict(float)
        self.calls: dict[str, int] = defaultdict(int)
        self.peak: dict[str, float] = defaultdict(float)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, args=(interval_s,), daemon=True)
        self._thread.start()

    @staticmethod
    def rss_mb() -> float:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * PAGE_MB

    def _note(self, rss: float) -> None:
        for label in set(self.active):
            self.peak[label] = max(self.peak[label], rss)

    def _sample(self, interval_s: float) -> None:
        while not self._stop.wait(interval_s):
            self._note(self.rss_mb())

    @contextmanager
    def label(self, name: str):
        self.active.append(name)
        self.calls[name] += 1
        self._note(self.rss_mb())
        started = time.perf_counter()
        try:
            yield
        finally:
            self.time[name] += time.perf_counter() - started
            self._note(self.rss_mb())
            self.active.remove(name)

    def wrap(self, owner, attr: str, name: str | None = None, by_first_arg: bool = False) -> None:
        """Meter every call of `owner.attr` (a class or instance method) under `name`, or under its first
        argument (the LLM role) when `by_first_arg`."""
        inner = getattr(owner, attr)

        @wraps(inner)
        def metered(*args, **kwargs):
            label = args[1 if isinstance(owner, type) else 0] if by_first_arg else name
            with self.label(label):
                return inner(*args, **kwargs)

        setattr(owner, attr, metered)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


# Engine-side steps metered when a process has them (found on the process's class, through the registry).
PROCESS_STEPS = {"diagnose": "diagnosis (whole)", "execute": "execute accepted (plans + edits)"}
# MemLoom's steward stages, metered in the modules that hold them (the steward calls them through the module).
STEWARD_STEPS = {("timeline", "propose_repairs"): "steward event boundaries and repairs",
                 ("relations", "link_scorer"): "steward link scorer (build)",
                 ("relations", "propose_relations"): "steward relation candidates",
                 ("curation", "curate"): "steward curation (topic links)"}


def instrument(meter: RoleMeter, engine) -> None:
    from engine.llm import offline_split
    from engine.llm.base import LLM
    from engine.llm.embedder import Embedder
    from engine.llm.offline import OfflineBackend
    from engine.retrieval.links import LinkScorer
    from engine.runtime.engine import BaseEngine

    meter.wrap(LLM, "call", by_first_arg=True)
    meter.wrap(Embedder, "embed", "embedder")
    meter.wrap(offline_split, "split_cuts", "split candidate cuts")
    meter.wrap(OfflineBackend, "prefetch", "split cuts prefetch (embed)")
    meter.wrap(BaseEngine, "visible_neighbours", "diagnosis neighbourhood")
    meter.wrap(LinkScorer, "logits", "steward link logits")
    meter.wrap(BaseEngine, "commit", "commit (store + views)")
    for process in engine.processes().values():
        for attr, label in PROCESS_STEPS.items():
            if attr in vars(type(process)):
                meter.wrap(type(process), attr, label)
    for (module, attr), label in STEWARD_STEPS.items():
        meter.wrap(importlib.import_module(f"engine.engines.memloom.{module}"), attr, label)


def conversation_file(chars: int, work: Path) -> tuple[Path, int, int]:
    from engine.llm.offline_split import MAX_CUTS

    rng = random.Random(0)
    n = -(-chars // 70)                               # the templates' mean length and a space
    change = 1 + round((MAX_CUTS // 2) * (n - 2) / (MAX_CUTS - 1))    # a cut Split considers
    sentences = [rng.choice(TOPICS[i >= change]).format(n=rng.randint(1, 999), m=rng.randint(1, 99))
                 for i in range(n)]
    sentences[change] = "By the way, " + sentences[change][0].lower() + sentences[change][1:]
    big = " ".join(sentences)
    turns = [("t1", "Ana", "Hi Ben, how are you doing today with the garden?"), ("t2", "Ben", big),
             ("t3", "Ana", "Wow, that is a lot of news about the river and the lab.")]
    path = work / "long.jsonl"
    path.write_text("".join(
        json.dumps({"id": i, "speaker": sp, "text": text, "time": f"2024-01-01T10:0{k}:00", "session": "1"}) + "\n"
        for k, (i, sp, text) in enumerate(turns)))
    return path, len(big), len(sentences)


def run_engine(name: str, path: Path, work: Path) -> dict:
    """Replay and consolidate in this process, metered; the figures of one engine."""
    from engine.loaders import load_conversation
    from engine.runtime.replay import Schedule, replay
    from engine.session import open_session

    meter = RoleMeter()
    conversation = load_conversation(path)
    engine = open_session(work / f"{name}.sqlite", engine=name)
    instrument(meter, engine)
    engine.embedder.warm()
    with meter.label("ingest"):
        replay(engine, conversation, Schedule.parse("manual"))
    with meter.label("consolidation"):
        reports = []
        for process in engine.processes():
            for p in engine.propose(manual=True, process=process):
                if p.status == "pending":
                    engine.preview_plan(p.id)
            reports.append(engine.apply(None, "gate", engine.open_run()))
    meter.stop()
    roles = {label: {"calls": meter.calls[label], "time_s": round(meter.time[label], 2),
                     "peak_rss_mb": round(meter.peak[label])} for label in meter.calls}
    proposals = [p for r in reports for p in r.proposals]
    return {"engine": name, "runs": [r.run_id for r in reports],
            "proposals": len(proposals),
            "proposal_outcomes": sorted(f"{p.op}: {p.status}" + (f" ({p.reason_code})" if p.reason_code else "")
                                        for p in proposals),
            "ingest_s": roles["ingest"]["time_s"], "consolidation_s": roles["consolidation"]["time_s"],
            "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024), "roles": roles}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--chars", type=int, default=1_000_000)
    ap.add_argument("--engines", default="allmem,memloom")
    ap.add_argument("--out", default=str(ROOT / "out" / "bench_long_turn.json"))
    ap.add_argument("--child", nargs=3, metavar=("ENGINE", "FILE", "WORKDIR"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        name, path, work = args.child
        print(json.dumps(run_engine(name, Path(path), Path(work))))
        return 0
    work = Path(tempfile.mkdtemp(prefix="memwb-long-"))
    path, chars, n_sentences = conversation_file(args.chars, work)
    env = {**os.environ, "MEMWB_MAX_TURN_CHARS": str(max(chars, int(os.environ.get("MEMWB_MAX_TURN_CHARS", 0))))}
    result: dict = {"turn_chars": chars, "sentences": n_sentences, "target_peak_rss_mb": TARGET_MB, "engines": {}}
    print(f"one turn of {chars} characters ({n_sentences} sentences), ingest + one consolidation run per engine")
    for name in [e.strip() for e in args.engines.split(",") if e.strip()]:
        proc = subprocess.run([sys.executable, __file__, "--child", name, str(path), str(work)], env=env,
                              capture_output=True, text=True)
        if proc.returncode != 0:
            print(proc.stderr, file=sys.stderr)
            raise SystemExit(f"{name}: the run failed (exit {proc.returncode})")
        figures = json.loads(proc.stdout.strip().splitlines()[-1])
        result["engines"][name] = figures
        print(f"\n{name}: ingest {figures['ingest_s']} s, consolidation {figures['consolidation_s']} s "
              f"({figures['proposals']} proposals: {'; '.join(figures['proposal_outcomes']) or 'none'}), "
              f"peak RSS {figures['peak_rss_mb']} MB "
              f"({'under' if figures['peak_rss_mb'] < TARGET_MB else 'OVER'} the {TARGET_MB} MB target)")
        print(f"  {'role or step':<34}{'calls':>7}{'time s':>9}{'peak RSS MB':>13}")
        for label, row in sorted(figures["roles"].items(), key=lambda kv: -kv[1]["time_s"]):
            print(f"  {label:<34}{row['calls']:>7}{row['time_s']:>9}{row['peak_rss_mb']:>13}")
    write_json(args.out, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())

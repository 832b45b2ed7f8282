"""Replay throughput and retrieval latency per stage on a LoCoMo dev conversation.

Prints the figures and writes them to out/bench.json. Timing lives here, never
in tests.

    python scripts/bench.py [--conversation conv-26] [--data PATH]
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from results import write_json  # noqa: E402

from engine.eval.metrics import latency_summary  # noqa: E402
from engine.loaders import load_conversation  # noqa: E402
from engine.runtime.replay import Schedule, replay  # noqa: E402
from engine.session import open_session  # noqa: E402

DEFAULT_DATA = ROOT.parent / "shared" / "data" / "locomo" / "locomo-dev8.json"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=str(DEFAULT_DATA))
    ap.add_argument("--conversation", default="conv-26")
    ap.add_argument("--out", default=str(ROOT / "out" / "bench.json"))
    args = ap.parse_args()
    conv = load_conversation(args.data, args.conversation)
    work = Path(tempfile.mkdtemp(prefix="memwb-bench-"))
    result: dict = {"conversation": conv.id, "turns": len(conv.turns)}

    embedder = None
    for label in ("cold", "warm_cache"):
        # cold: every embedding computed by the model; warm: the same vectors served from the cache,
        # which isolates the engine's own per-turn cost.
        engine = open_session(work / f"{label}.sqlite", embedder=embedder)
        engine.embedder.warm()
        embedder = engine.embedder
        started = time.perf_counter()
        summary = replay(engine, conv, Schedule.parse("every-3-sessions"))
        seconds = time.perf_counter() - started
        result[f"replay_{label}"] = {"seconds": round(seconds, 2), "turns_per_s": round(len(conv.turns) / seconds, 2),
                                     "summary": summary.line()}
        print(f"replay ({label} embeddings): {len(conv.turns)} turns in {seconds:.1f}s = "
              f"{len(conv.turns) / seconds:.1f} turns/s  [{summary.line()}]")

    stages: dict[str, list[float]] = {}
    questions = [q for q in conv.questions if q.category in (1, 2, 3, 4)]
    engine.retrieve("warm up", k=5)
    for q in questions:
        for name, ms in engine.retrieve(q.question, k=5).stages.items():
            stages.setdefault(name, []).append(ms)
    result["retrieval_ms"] = {name: latency_summary(v) for name, v in stages.items()}
    result["queries"] = len(questions)
    print(f"retrieval over {len(questions)} questions (ms):")
    for name, s in result["retrieval_ms"].items():
        print(f"  {name:10s} p50={s['p50']:8.3f}  p95={s['p95']:8.3f}  mean={s['mean']:8.3f}")
    write_json(args.out, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())

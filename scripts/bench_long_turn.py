"""One very long turn through ingest and a consolidation run (offline backend): time and peak memory.

Builds a conversation of three turns whose middle one holds about `--chars` characters of short sentences
(fixed seed), replays it into a fresh All-Mem database and runs consolidation once (Split's candidate cuts are
the part that used to grow with the square of the sentence count). Prints the figures and writes them to
out/bench_long_turn.json.

    python scripts/bench_long_turn.py [--chars 1000000]
"""
from __future__ import annotations

import argparse
import json
import os
import random
import resource
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from results import write_json  # noqa: E402
from engine.loaders import load_conversation  # noqa: E402
from engine.replay import Schedule, replay  # noqa: E402
from engine.session import open_session  # noqa: E402

WORDS = ("river lab budget train commute landlord building notice kitten cello plumber sink pottery bowl running "
         "marathon").split()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--chars", type=int, default=1_000_000)
    ap.add_argument("--out", default=str(ROOT / "out" / "bench_long_turn.json"))
    args = ap.parse_args()
    rng = random.Random(0)
    sentences, size = [], 0
    while size < args.chars:
        sentences.append(" ".join(rng.choice(WORDS) for _ in range(12)).capitalize() + ".")
        size += len(sentences[-1]) + 1
    big = " ".join(sentences)
    os.environ.setdefault("MEMWB_MAX_TURN_CHARS", str(len(big)))
    work = Path(tempfile.mkdtemp(prefix="memwb-long-"))
    turns = [("t1", "Ana", "Hi Ben, how are you doing today with the garden?"), ("t2", "Ben", big),
             ("t3", "Ana", "Wow, that is a lot of news about the river and the lab.")]
    (work / "long.jsonl").write_text("".join(
        json.dumps({"id": i, "speaker": sp, "text": text, "time": f"2024-01-01T10:0{k}:00", "session": "1"}) + "\n"
        for k, (i, sp, text) in enumerate(turns)))
    conversation = load_conversation(work / "long.jsonl")
    t0 = time.perf_counter()
    engine = open_session(work / "m.sqlite", engine="allmem")
    replay(engine, conversation, Schedule.parse("manual"))
    t1 = time.perf_counter()
    report = engine.consolidate()
    t2 = time.perf_counter()
    result = {"turn_chars": len(big), "sentences": len(sentences), "ingest_s": round(t1 - t0, 2),
              "consolidation_s": round(t2 - t1, 2), "run": report.run_id,
              "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)}
    print(f"one turn of {result['turn_chars']} characters ({result['sentences']} sentences): ingest "
          f"{result['ingest_s']} s, consolidation {result['consolidation_s']} s, peak RSS {result['peak_rss_mb']} MB")
    write_json(args.out, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())

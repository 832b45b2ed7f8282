"""The encoding floor of a benchmark: how much of a cold `memwb bench` run is the embedding model, and how long
the texts it embeds take in one batch on this machine.

Runs the benchmark serially in this process, cold (a new workspace: an empty shared embedding cache), with the
process's one encoder noting every text it is given and timing each call. Then a fresh embedder encodes the
distinct texts once, in one call (texts grouped by token length, every core the encoder uses): no replay, no
scheduling, no engine work can make the run faster than that. Prints the figures and writes them to
out/bench_encoding.json (or --out).

    python scripts/bench_encoding.py --dataset locomo ../shared/data/locomo/locomo-dev8.json \
        --engines allmem,naive,hybrid,memloom
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ["MEMWB_WORKSPACE"] = tempfile.mkdtemp(prefix="memwb-bench-encoding-")   # cold: an empty cache

from results import noting_encoder, write_json  # noqa: E402

from engine.bench.config import BenchConfig  # noqa: E402
from engine.bench.runner import run_benchmark  # noqa: E402
from engine.llm.embedder import Embedder  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", required=True)
    ap.add_argument("source")
    ap.add_argument("--engines", required=True, help="comma-separated")
    ap.add_argument("--out", default=str(ROOT / "out" / "bench_encoding.json"))
    args = ap.parse_args()
    embedder = Embedder()
    embedder.warm()
    texts: list[str] = []
    seconds: list[float] = []
    undo = noting_encoder(embedder.model(), texts, seconds)
    started = time.perf_counter()
    run_benchmark(BenchConfig(dataset=args.dataset, source=args.source, engines=tuple(args.engines.split(",")),
                              out=tempfile.mkdtemp(prefix="memwb-bench-encoding-run-")))
    run_s = time.perf_counter() - started
    undo()
    distinct = list(dict.fromkeys(texts))
    batch_s = time.perf_counter()
    Embedder(shared=None).embed(distinct)
    batch_s = time.perf_counter() - batch_s
    result = {"dataset": args.dataset, "source": args.source, "engines": args.engines, "run_s": round(run_s, 1),
              "encoder_calls": len(seconds), "encoder_s": round(sum(seconds), 1), "texts": len(texts),
              "distinct_texts": len(distinct), "one_batch_s": round(batch_s, 1),
              "encoder_threads": os.environ.get("MEMWB_ENCODER_THREADS", "default"), "cpus": os.cpu_count(),
              "load_after": os.getloadavg()}
    print(f"memwb bench, serial and cold: {run_s:.1f} s, of which the encoder {sum(seconds):.1f} s "
          f"({len(seconds)} calls, {len(texts)} texts, {len(distinct)} distinct)")
    print(f"those {len(distinct)} texts in one batch: {batch_s:.1f} s")
    write_json(args.out, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())

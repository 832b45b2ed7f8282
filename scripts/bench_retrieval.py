"""Retrieval latency (All-Mem Stages 1-3, query encode excluded) as the visible surface grows to 10,000 units.

One memory holds every LoCoMo conversation of the shared data, then QMSum meeting turns, until it has
`--sizes`' largest count of visible units (no consolidation, so every turn stays a visible unit). At each size
the same LoCoMo questions are retrieved; their vectors are computed before timing, so the figures are the
engine's own cost. Embeddings come from the workspace's shared cache after the first run.
Prints the figures and writes them to out/bench_retrieval.json.

    python scripts/bench_retrieval.py [--sizes 2000,6000,10000] [--queries 300]
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from results import write_json  # noqa: E402

from engine.core.conversation import Conversation, Turn  # noqa: E402
from engine.eval.metrics import latency_summary  # noqa: E402
from engine.loaders import load_conversation  # noqa: E402
from engine.loaders.qmsum import load_qmsum  # noqa: E402
from engine.runtime.replay import Schedule, step  # noqa: E402
from engine.session import open_session  # noqa: E402

DATA = ROOT.parent / "shared" / "data"
LOCOMO = DATA / "locomo" / "locomo-dev8.json"
QMSUM = DATA / "qmsum" / "test"


def corpus(limit: int) -> tuple[Conversation, list[str]]:
    """All LoCoMo conversations, then QMSum meetings, as one conversation of `limit` turns (ids made unique);
    and the LoCoMo questions (categories 1-4) to retrieve with."""
    turns: list[Turn] = []
    questions: list[str] = []
    sources = [load_conversation(LOCOMO, c["sample_id"]) for c in json.loads(LOCOMO.read_text())]
    sources += [load_qmsum(p) for p in sorted(QMSUM.glob("*.json"))]
    for conv in sources:
        questions += [q.question for q in conv.questions if getattr(q, "category", None) in (1, 2, 3, 4)]
        for t in conv.turns:
            if len(turns) == limit:
                break
            turns.append(dataclasses.replace(t, id=f"{conv.id}:{t.id}", session=f"{conv.id}/{t.session}",
                                             index=len(turns)))
    if len(turns) < limit:
        raise SystemExit(f"the shared data holds only {len(turns)} turns, fewer than {limit}")
    return Conversation(id="bench-retrieval", turns=turns, source="locomo+qmsum"), questions


def measure(engine, queries: list[str]) -> dict:
    engine.retrieve(queries[0])
    stages: dict[str, list[float]] = {}
    for q in queries:
        for name, ms in engine.retrieve(q).stages.items():
            stages.setdefault(name, []).append(ms)
    return {name: latency_summary(v) for name, v in stages.items()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="2000,6000,10000", help="visible-unit counts to measure at")
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--out", default=str(ROOT / "out" / "bench_retrieval.json"))
    args = ap.parse_args()
    sizes = sorted(int(s) for s in args.sizes.split(","))
    conv, questions = corpus(sizes[-1])
    queries = questions[:: max(1, len(questions) // args.queries)][: args.queries]
    engine = open_session(Path(tempfile.mkdtemp(prefix="memwb-bench-retrieval-")) / "memory.sqlite",
                          schedule="manual")
    engine.embedder.warm()
    started = time.perf_counter()
    engine.prefetch(conv.turns)                 # the workspace cache serves these after the first run
    engine.embedder.embed(queries)              # so timing excludes the query encode
    print(f"{len(conv.turns)} turns and {len(queries)} queries embedded in {time.perf_counter() - started:.1f}s "
          f"({engine.embedder.encoded} through the model)")
    result: dict = {"queries": len(queries), "engine": engine.name, "settings": engine.settings.to_dict(),
                    "sizes": {}}
    schedule = Schedule.parse("manual")
    started = time.perf_counter()
    for size in sizes:
        while len(engine.index) < size:
            step(engine, conv, schedule)
        figures = measure(engine, queries)
        result["sizes"][str(size)] = {"visible_units": len(engine.index), "ms": figures}
        total = figures["total_ms"]
        print(f"{len(engine.index):6d} visible units ({time.perf_counter() - started:.0f}s ingesting so far): "
              f"Stages 1-3 p50={total['p50']:.3f} ms  p95={total['p95']:.3f} ms  "
              + "  ".join(f"{n.split('_')[0]} p50={figures[n]['p50']:.3f}" for n in figures if n != "total_ms"))
    write_json(args.out, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())

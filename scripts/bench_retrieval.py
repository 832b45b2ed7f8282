"""Query latency of every registered engine (the query encode excluded) at one conversation and as memory grows.

Two measurements per engine, each over the same LoCoMo questions, whose vectors are computed before timing
(so the figures are the engine's own cost, `RetrievalResult.stages["total_ms"]`):

- `conversation`: LoCoMo conv-26 replayed as `memwb bench` does (the dataset's schedule, every-3-sessions, so
  the memory has its consolidated structure), asked its own questions (categories 1-4).
- `sizes`: one memory fed every LoCoMo conversation, then QMSum test meetings, then the same turns again under
  new ids (a repeat reuses the cached vectors), until it holds each of `--sizes` turns, with no offline run
  (manual schedule); units are the engine's nodes then (for MemLoom, sentence records and events).

Each build runs at the collector pace of a replay (`engine.runtime.collector`); the timed queries run at Python's
default thresholds.

Prints the figures and writes them to out/bench_retrieval.json (or --out). Embeddings come from the
workspace's shared cache after the first run.

    python scripts/bench_retrieval.py [--engines allmem,memloom] [--sizes 10000,100000] [--queries 300] [--rounds 10]
"""
from __future__ import annotations

import argparse
import dataclasses
import gc
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from results import write_json  # noqa: E402

from engine.core.conversation import Conversation, Turn  # noqa: E402
from engine.engines import known_engines  # noqa: E402
from engine.eval.metrics import latency_summary  # noqa: E402
from engine.llm.embedder import Embedder  # noqa: E402
from engine.loaders import load_conversation  # noqa: E402
from engine.loaders.qmsum import load_qmsum  # noqa: E402
from engine.runtime.collector import batch_pace  # noqa: E402
from engine.runtime.replay import Schedule, prefetch_turns, step  # noqa: E402
from engine.session import open_session  # noqa: E402

DATA = ROOT.parent / "shared" / "data"
LOCOMO = DATA / "locomo" / "locomo-dev8.json"
QMSUM = DATA / "qmsum" / "test"
CONVERSATION = "conv-26"


def sources() -> tuple[list[Conversation], list[str]]:
    """Every LoCoMo dev conversation then every QMSum test meeting, and the LoCoMo questions (categories 1-4)."""
    convs = [load_conversation(LOCOMO, c["sample_id"]) for c in json.loads(LOCOMO.read_text())]
    questions = [q.question for c in convs for q in c.questions if q.category in (1, 2, 3, 4)]
    convs += [load_qmsum(p) for p in sorted(QMSUM.glob("*.json"))]
    return convs, questions


def corpus(convs: list[Conversation], limit: int) -> Conversation:
    """`limit` turns of `convs` as one conversation, cycling through them again (as round r) until it has them;
    ids and sessions are made unique, so each turn is a new unit."""
    turns: list[Turn] = []
    rnd = 0
    while len(turns) < limit:
        for conv in convs:
            for t in conv.turns:
                if len(turns) == limit:
                    break
                tag = f"r{rnd}/{conv.id}"
                turns.append(dataclasses.replace(t, id=f"{tag}:{t.id}", session=f"{tag}/{t.session}",
                                                 index=len(turns)))
        rnd += 1
    return Conversation(id="bench-retrieval", turns=turns, source="locomo+qmsum")


def measure(engine, queries: list[str], rounds: int = 1) -> dict:
    """p50 / p95 of the queries' `total_ms`; with several rounds, the same queries asked again that many times
    in this process, each round's figures kept (a target met "in every round" is read from them), with the
    collections of the collector's oldest generation the round ran (each walks every object the engine holds)."""
    engine.retrieve(queries[0])
    each = []
    for _ in range(rounds):
        full = gc.get_stats()[2]["collections"]
        each.append({**latency_summary([engine.retrieve(q).stages["total_ms"] for q in queries]),
                     "full_collections": gc.get_stats()[2]["collections"] - full})
    return each[0] if rounds == 1 else {**each[0], "rounds": each}


def open_engine(name: str, work: Path, embedder: Embedder, schedule: str):
    return open_session(work / f"{name}-{time.monotonic_ns()}.sqlite", engine=name, embedder=embedder,
                        schedule=schedule)


def one_conversation(name: str, work: Path, embedder: Embedder) -> dict:
    conv = load_conversation(LOCOMO, CONVERSATION)
    queries = [q.question for q in conv.questions if q.category in (1, 2, 3, 4)]
    engine = open_engine(name, work, embedder, "every-3-sessions")
    prefetch_turns(engine, conv.turns)
    embedder.embed(queries)
    schedule = Schedule.parse("every-3-sessions")
    with batch_pace():
        while step(engine, conv, schedule) is not None:
            pass
        engine.run_scheduled()
    return {"conversation": conv.id, "units": len(engine.state.nodes), "visible_units": len(engine.index),
            "queries": len(queries), "ms": measure(engine, queries)}


def growing(name: str, work: Path, embedder: Embedder, convs: list[Conversation], sizes: list[int],
            queries: list[str], rounds: int = 1) -> dict:
    conv = corpus(convs, sizes[-1])
    engine = open_engine(name, work, embedder, "manual")
    prefetch_turns(engine, conv.turns)
    schedule = Schedule.parse("manual")
    out, started = {}, time.perf_counter()
    for size in sizes:
        with batch_pace():          # the build, as a replay paces it; the queries measured at Python's defaults
            while engine.state.turn < size:
                step(engine, conv, schedule)
        out[str(size)] = {"turns": engine.state.turn, "units": len(engine.state.nodes),
                          "visible_units": len(engine.index), "ms": measure(engine, queries, rounds),
                          "ingest_s": round(time.perf_counter() - started, 1)}
    return out


def line(label: str, figures: dict) -> str:
    return f"  {label:>14s}: {figures.get('units', 0):7d} units  {timing(figures['ms'])}"


def timing(ms: dict) -> str:
    return f"query p50 {ms['p50']:8.3f} ms  p95 {ms['p95']:8.3f} ms  ({ms['full_collections']} full collections)"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--engines", default=",".join(known_engines()), help="comma-separated (default: every one)")
    ap.add_argument("--sizes", default="10000,100000", help="turn counts of the growing memory (empty: none)")
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=1, help="times the queries are asked at each size (each round's "
                                                            "p50 / p95 printed)")
    ap.add_argument("--out", default=str(ROOT / "out" / "bench_retrieval.json"))
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    engines = [e for e in args.engines.split(",") if e]
    sizes = sorted(int(s) for s in args.sizes.split(",") if s)
    convs, questions = sources()
    queries = questions[:: max(1, len(questions) // args.queries)][: args.queries]
    embedder = Embedder()
    embedder.warm()
    work = Path(tempfile.mkdtemp(prefix="memwb-bench-retrieval-"))
    started = time.perf_counter()
    embedder.embed(queries)
    result: dict = {"queries": len(queries), "encoder": type(embedder.model()).__name__, "load": os.getloadavg(),
                    "engines": {}}
    for name in engines:
        print(f"{name}:")
        figures = {"conversation": one_conversation(name, work, embedder)}
        print(line(CONVERSATION, figures["conversation"]))
        if sizes:
            figures["sizes"] = growing(name, work, embedder, convs, sizes, queries, args.rounds)
            for size, f in figures["sizes"].items():
                print(line(f"{int(size):,} turns", f) + f"  ({f['ingest_s']:.0f} s ingesting so far)")
                for r, ms in enumerate(f["ms"].get("rounds", [])[1:], start=2):
                    print(f"  {'round ' + str(r):>14s}: {timing(ms)}")
        result["engines"][name] = figures
        write_json(args.out, result, say=False)    # after every engine: a long run keeps what it measured
    result["seconds"] = round(time.perf_counter() - started, 1)
    result["load_after"] = os.getloadavg()
    write_json(args.out, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())

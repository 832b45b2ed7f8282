"""Record the demo through a real model: replay datasets/demo into the mem0 engine with `--llm openai` (the
local server `memwb llm serve` starts; MEMWB_OPENAI_BASE_URL / _MODEL / _API_KEY as it prints them) and write
every call to memwb_mem0/recordings/demo.jsonl, which tests and `--llm recorded` replay.

    python examples/memwb-mem0/record_demo.py --db /tmp/mem0-demo.db [--turns N] [--schedule every-1-sessions]

The recording is made on the schedule given (default: one mem0 add() per session, each session's turns given to
mem0 together: SmolLM2-135M takes 25-40 s per call on two shared cores, and one add() per turn would cost the
102 turns about 200 calls); a replay of it must use the same schedule.
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path

from engine.core.conversation import Conversation
from engine.core.oplog import OpKind
from engine.engines import ENGINES, register_engine
from engine.llm import dump_calls_jsonl
from engine.loaders import load_conversation
from engine.runtime.replay import Schedule, replay
from engine.session import open_session

HERE = Path(__file__).resolve().parent
DEMO = HERE.parents[1] / "datasets" / "demo" / "demo.jsonl"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db", required=True)
    ap.add_argument("--turns", type=int, default=None, help="only the first N turns")
    ap.add_argument("--schedule", default="every-1-sessions", help="replay schedule (a replay must use the same)")
    ap.add_argument("--out", default=str(HERE / "memwb_mem0" / "recordings" / "demo.jsonl"))
    args = ap.parse_args()
    if "mem0" not in ENGINES:                      # until entry-point discovery finds it
        register_engine("mem0", lambda: __import__("memwb_mem0.engine", fromlist=["Mem0Engine"]).Mem0Engine)
    conv = load_conversation(DEMO)
    if args.turns:
        conv = Conversation(conv.id, conv.turns[: args.turns], conv.questions, conv.speakers, conv.source)
    eng = open_session(args.db, engine="mem0", llm="openai")
    started = time.time()
    replay(eng, conv, Schedule.parse(args.schedule),
           progress=lambda i, n: print(f"turn {i}/{n} at {time.time() - started:.0f}s", flush=True))
    calls = [op.payload for op in eng.store.ops(kinds=[OpKind.LLM_CALL])]
    print(f"{dump_calls_jsonl(calls, args.out)} calls written to {args.out} in {time.time() - started:.0f}s")


if __name__ == "__main__":
    main()

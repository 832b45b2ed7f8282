"""A canonical record of what replays make, to prove a refactoring changed none of it.

Replays a conversation through each engine as `memwb replay` does (the offline LLM, the engine's own schedule,
default settings) and writes one JSON file per conversation and engine: every node, edge, proposal and run of
the final state, and every log record (an LLM call without its latency, the one field that varies between
runs). Two trees replay the same when `diff -r` finds nothing between their output folders.

    python scripts/replay_fingerprint.py --out /tmp/fingerprint_before                 # the demo, four engines
    python scripts/replay_fingerprint.py --out DIR --source locomo --engine gam       # LoCoMo conv-26 in GAM
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from engine.core.oplog import OpKind  # noqa: E402
from engine.engines import engine_schema  # noqa: E402
from engine.loaders import load_conversation  # noqa: E402
from engine.runtime.engine import BaseEngine  # noqa: E402
from engine.runtime.replay import Schedule, replay  # noqa: E402
from engine.session import open_session  # noqa: E402
from engine.store.data_paths import BUNDLED, shared_data  # noqa: E402

ENGINES = ("allmem", "memloom", "gam", "recmem")
SOURCES = {"demo": (BUNDLED / "demo" / "demo.jsonl", None),
           "locomo": (shared_data() / "locomo" / "locomo-dev8.json", "conv-26")}
VARYING = {OpKind.LLM_CALL: ("latency_ms",)}      # payload fields that differ from run to run by nature


def fingerprint(engine: BaseEngine) -> dict:
    """Everything the replay left, in a canonical order: the final state's rows and the whole log."""
    state = engine.state
    log = []
    for op in engine.store.ops():
        payload = {k: v for k, v in op.payload.items() if k not in VARYING.get(op.kind, ())}
        log.append({"seq": op.seq, "kind": op.kind, "turn": op.turn, "run_id": op.run_id, "actor": op.actor,
                    "v": op.v, "payload": payload})
    return {"nodes": [state.nodes[i].to_dict() for i in sorted(state.nodes)],
            "edges": [state.edges[k].to_dict() for k in sorted(state.edges)],
            "proposals": [state.proposals[i].to_dict() for i in sorted(state.proposals)],
            "runs": [vars(state.runs[r]) for r in sorted(state.runs)],
            "log": log}


def fresh_session(source: str, name: str):
    """A new session of engine `name` on `source` in a scratch folder, opened as `memwb replay` opens it (offline
    LLM, the engine's own schedule); returns it, the conversation and the schedule to replay on."""
    path, conversation_id = SOURCES[source]
    conversation = load_conversation(str(path), conversation_id)
    consolidate = engine_schema(name).schedule or "every-3-sessions"
    db = Path(tempfile.mkdtemp(prefix="memwb-replay-")) / f"{name}.sqlite"
    engine = open_session(db, engine=name, llm="offline", conversation=conversation.id,
                          source=str(path.resolve()), schedule=consolidate)
    return engine, conversation, Schedule.parse(consolidate)


def run(source: str, name: str, out: Path) -> Path:
    engine, conversation, schedule = fresh_session(source, name)
    summary = replay(engine, conversation, schedule)
    target = out / f"{source}-{name}.json"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(fingerprint(engine), indent=1, sort_keys=True, ensure_ascii=False) + "\n")
    print(f"{source} {name}: {summary.line()} -> {target}", flush=True)
    return target


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="folder for the JSON files")
    ap.add_argument("--source", choices=sorted(SOURCES), action="append", help="repeatable; default: demo")
    ap.add_argument("--engine", choices=ENGINES, action="append", help="repeatable; default: all four")
    args = ap.parse_args()
    for source in args.source or ["demo"]:
        for name in args.engine or ENGINES:
            run(source, name, Path(args.out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""The demo's questions as the Retrieval page answers them: each engine's rank of every gold turn, and the path.

Replays the bundled demo into each engine up to a turn (the whole demo by default), runs each offline
process once with the gate deciding (what "Run diagnosis" then "Apply gate verdicts" does on the
Consolidation page), asks the questions and prints, per question and engine, the rank of each gold turn
among the engine's results (– when absent) and, with --paths, the path of every gold turn found. Writes
the same to out/demo-questions.json. The demo README's figures come from this script.

    python scripts/demo_questions.py [--upto D6:6] [--questions q7 q8] [--engines memloom,allmem,naive,hybrid]
                                     [--paths]
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from results import write_json  # noqa: E402

from engine.core.conversation import Conversation  # noqa: E402
from engine.llm.embedder import Embedder  # noqa: E402
from engine.loaders import load_conversation  # noqa: E402
from engine.runtime.replay import Schedule, replay  # noqa: E402
from engine.session import open_session  # noqa: E402

DEMO = ROOT / "datasets" / "demo" / "demo.jsonl"


def hop_text(h) -> str:
    return f" —{h.type}{' (reverse)' if h.reverse else ''}→ u{h.dst}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--upto", help="last turn id ingested (default: the whole demo)")
    ap.add_argument("--questions", nargs="*", default=["q7", "q8"])
    ap.add_argument("--engines", default="memloom,allmem,naive,hybrid")
    ap.add_argument("--paths", action="store_true")
    ap.add_argument("--out", default=str(ROOT / "out" / "demo-questions.json"))
    args = ap.parse_args()

    full = load_conversation(DEMO)
    ids = [t.id for t in full.turns]
    if args.upto and args.upto not in ids:
        raise SystemExit(f"--upto {args.upto}: no such turn in {DEMO.name}")
    end = ids.index(args.upto) + 1 if args.upto else len(ids)
    conv = Conversation(full.id, full.turns[:end], questions=full.questions, speakers=full.speakers, source=full.source)
    questions = [q for q in full.questions if q.id.split(":")[-1] in set(args.questions)]
    embedder, workdir = Embedder(), Path(tempfile.mkdtemp(prefix="memwb-demo-"))
    out: dict = {"upto_turn": end, "last_turn_id": ids[end - 1], "questions": {}}
    for name in [e.strip() for e in args.engines.split(",") if e.strip()]:
        engine = open_session(workdir / f"{name}.sqlite", engine=name, embedder=embedder)
        replay(engine, conv, Schedule.parse("manual"))
        for process in engine.processes():
            if engine.process(process).pending():
                engine.propose(process=process)
                engine.apply(None, "gate", engine.open_run())
        for q in questions:
            result = engine.retrieve(q.question)
            rank = {u.source_ids[0]: (i + 1, u) for i, u in reversed(list(enumerate(result.units)))}
            row = {tid: rank[tid][0] if tid in rank else None for tid in q.evidence}
            paths = {tid: f"seed u{rank[tid][1].anchor}" + "".join(hop_text(h) for h in rank[tid][1].path)
                     for tid in q.evidence if tid in rank}
            out["questions"].setdefault(q.id, {"question": q.question, "evidence": q.evidence, "engines": {}})
            out["questions"][q.id]["engines"][name] = {"ranks": row, "of": len(result.units), "paths": paths}
    print(f"demo up to turn {end} ({ids[end - 1]}); ranks among each engine's results, – = not returned")
    for qid, q in out["questions"].items():
        print(f"\n{qid}: {q['question']}\n  {'engine':9} " + " ".join(f"{t:>6}" for t in q["evidence"]))
        for name, r in q["engines"].items():
            cells = " ".join(f"{r['ranks'][t] if r['ranks'][t] else '–':>6}" for t in q["evidence"])
            print(f"  {name:9} {cells}   (of {r['of']})")
            if args.paths:
                for tid, path in r["paths"].items():
                    print(f"      {tid}: {path}")
    write_json(args.out, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())

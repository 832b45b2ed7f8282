"""How many Split proposals the offline diagnoser makes, how many pass the gate and how many are applied.

Replays each conversation into a fresh All-Mem memory with the offline backend and the gate deciding, then
counts the Split proposals of every run: proposed, gate-passing (confidence ≥ θ_split) and applied, beside
the same counts for all operators. By default: the bundled demo on the default schedule (every 3 sessions),
the demo replayed whole and consolidated once at the end (what "Run diagnosis" then "Apply gate verdicts"
does on the Consolidation page), and LoCoMo conv-26 of the dev file on the default schedule (`memwb replay
... --consolidate every-3-sessions`). Also lists each gate-passing Split (turn, confidence, text). Prints the
figures and writes them to out/split_counts.json.

    python scripts/count_splits.py [--data PATH --conversation ID --consolidate every-3-sessions] [--list]
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from results import write_json  # noqa: E402

from engine.core.proposal import GateVerdict, Status  # noqa: E402
from engine.llm.embedder import Embedder  # noqa: E402
from engine.loaders import load_conversation, load_conversations  # noqa: E402
from engine.runtime.replay import Schedule, replay  # noqa: E402
from engine.session import open_session  # noqa: E402

DEMO = ROOT / "datasets" / "demo" / "demo.jsonl"
LOCOMO_DEV = ROOT.parent / "shared" / "data" / "locomo" / "locomo-dev8.json"


def count(engine) -> dict:
    """Split and all-operator counts over every proposal the memory holds, and the gate-passing Splits."""
    props = list(engine.state.proposals.values())
    splits = [p for p in props if p.op == "split"]
    passing = [p for p in splits if p.gate == GateVerdict.PASS]
    units = engine.state.units
    return {
        "runs": len(engine.state.runs),
        "split_proposed": len(splits),
        "split_gate_pass": len(passing),
        "split_applied": sum(p.status == Status.APPLIED for p in splits),
        "all_proposed": len(props),
        "all_gate_pass": sum(p.gate == GateVerdict.PASS and p.op in ("split", "merge", "update") for p in props),
        "all_applied": sum(p.status == Status.APPLIED for p in props),
        "gate_passing_splits": [{"turn": ",".join(units[p.targets[0]].source_ids), "confidence": p.confidence,
                                 "status": p.status, "text": units[p.targets[0]].raw} for p in passing],
    }


def measure(conversation, schedule: str, embedder: Embedder, workdir: Path) -> dict:
    engine = open_session(workdir / f"{conversation.id}-{schedule}.sqlite", engine="allmem", embedder=embedder)
    if schedule == "end":
        replay(engine, conversation, Schedule.parse("manual"))
        engine.consolidate()
    else:
        replay(engine, conversation, Schedule.parse(schedule))
    return count(engine)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", help="a conversation file instead of the default three cases")
    ap.add_argument("--conversation", help="conversation id within --data")
    ap.add_argument("--consolidate", default="every-3-sessions",
                    help="schedule for --data: every-N-sessions, every-N-turns, or 'end' (one run at the end)")
    ap.add_argument("--list", action="store_true", help="print every gate-passing Split")
    ap.add_argument("--out", default=str(ROOT / "out" / "split_counts.json"))
    args = ap.parse_args()
    if args.data:
        convs = load_conversations(args.data)
        conv = next((c for c in convs if c.id == args.conversation), None) if args.conversation else convs[0]
        if conv is None:
            raise SystemExit(f"--conversation {args.conversation}: not in {args.data}")
        cases = [(f"{conv.id} ({args.consolidate})", conv, args.consolidate)]
    else:
        demo = load_conversation(DEMO)
        conv26 = next(c for c in load_conversations(LOCOMO_DEV) if c.id == "conv-26")
        cases = [("demo (every-3-sessions)", demo, "every-3-sessions"), ("demo (one run at the end)", demo, "end"),
                 ("conv-26 (every-3-sessions)", conv26, "every-3-sessions")]
    embedder, workdir = Embedder(), Path(tempfile.mkdtemp(prefix="memwb-splits-"))
    out = {}
    print(f"{'case':<30}{'runs':>5}{'split proposed':>16}{'gate pass':>11}{'applied':>9}"
          f"{'| all ops: gate pass':>21}{'applied':>9}")
    for name, conv, schedule in cases:
        c = out[name] = measure(conv, schedule, embedder, workdir)
        print(f"{name:<30}{c['runs']:>5}{c['split_proposed']:>16}{c['split_gate_pass']:>11}{c['split_applied']:>9}"
              f"{c['all_gate_pass']:>21}{c['all_applied']:>9}", flush=True)
    if args.list:
        for name, c in out.items():
            print(f"\n{name}: gate-passing Splits")
            for s in c["gate_passing_splits"]:
                print(f"  {s['turn']:<8} {s['confidence']:.4f} {s['status']:<8} {s['text'][:110]}")
    write_json(args.out, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())

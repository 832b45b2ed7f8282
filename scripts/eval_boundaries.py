"""Event boundaries against QMSum's human topic segmentation: Pk, WindowDiff and ΔB.

Every meeting of the directory is replayed into each event engine; a turn's
segment is the event holding it (`engine.eval.segmentation.turn_labels`), and a
boundary falls wherever that changes. Fixed 50-turn windows and no boundary
at all are scored beside them (Pk rewards under-segmentation: one segment per
meeting scores about 0.37 here, so read WindowDiff and ΔB beside it). Prints
the means and writes per-meeting figures to out/boundaries.json.

    python scripts/eval_boundaries.py [--dir ../shared/data/qmsum/test] [--engines memloom] [--limit N]
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from results import parse_overrides, write_json  # noqa: E402

from engine.core.segments import boundaries_from_labels, fixed_windows, no_boundaries  # noqa: E402
from engine.eval.segmentation import evaluate, turn_labels  # noqa: E402
from engine.llm.embedder import Embedder  # noqa: E402
from engine.loaders import load_conversation  # noqa: E402
from engine.loaders.qmsum import gold_boundaries  # noqa: E402
from engine.runtime.replay import Schedule, replay  # noqa: E402
from engine.session import open_session  # noqa: E402

DEFAULT_DIR = ROOT.parent / "shared" / "data" / "qmsum" / "test"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", default=str(DEFAULT_DIR))
    ap.add_argument("--engines", default="memloom")
    ap.add_argument("--set", action="append", default=[], metavar="ENGINE.KEY=VALUE")
    ap.add_argument("--schedule", default="every-200-turns")
    ap.add_argument("--limit", type=int)
    ap.add_argument("--out", default=str(ROOT / "out" / "boundaries.json"))
    args = ap.parse_args()
    engines = [e.strip() for e in args.engines.split(",") if e.strip()]
    overrides = parse_overrides(args.set)
    files = sorted(Path(args.dir).glob("*.json"))[: args.limit]
    embedder, work = Embedder(), Path(tempfile.mkdtemp(prefix="memwb-qmsum-"))
    rows, started = [], time.perf_counter()
    for path in files:
        conv = load_conversation(path)
        n = len(conv.turns)
        gold = gold_boundaries(path, n)
        systems = {"fixed-50": fixed_windows(n, 50), "no-boundary": no_boundaries(n)}
        for name in engines:
            eng = open_session(work / f"{conv.id}-{name}.sqlite", engine=name, settings=overrides.get(name),
                               embedder=embedder)
            replay(eng, conv, Schedule.parse(args.schedule))
            systems[name] = boundaries_from_labels(turn_labels(eng.state))
        for system, hyp in systems.items():
            rows.append({"meeting": conv.id, "turns": n, "system": system, "gold_boundaries": len(gold),
                         "boundaries": len(hyp), **evaluate(gold, hyp, n)})
        print(f"{conv.id}: {n} turns, gold {len(gold)} boundaries; "
              + "; ".join(f"{r['system']} {r['boundaries']} b, Pk {r['pk']:.3f}" for r in rows[-len(systems):]),
              flush=True)
    systems = list(dict.fromkeys(r["system"] for r in rows))
    summary = {}
    print(f"\n{len(files)} meetings ({time.perf_counter() - started:.0f}s)")
    print(f"{'system':12} {'Pk':>6} {'WD':>6} {'ΔB':>7} {'ΔB rate':>8} {'boundaries':>10}")
    for system in systems:
        mine = [r for r in rows if r["system"] == system]
        summary[system] = {key: round(statistics.mean(r[key] for r in mine), 4)
                           for key in ("pk", "window_diff", "delta_b", "delta_b_rate", "boundaries")}
        s = summary[system]
        print(f"{system:12} {s['pk']:6.3f} {s['window_diff']:6.3f} {s['delta_b']:7.2f} {s['delta_b_rate']:8.2f} "
              f"{s['boundaries']:10.1f}")
    write_json(args.out, {"meetings": len(files), "summary": summary, "rows": rows})
    return 0


if __name__ == "__main__":
    sys.exit(main())

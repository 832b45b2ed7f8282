"""Turn-level R@K and N@K of registered engines on LoCoMo (categories 1-4), side by side.

Every engine (default: allmem, naive, hybrid) replays the same conversations
with the same embedder and is asked the same questions with the same k, in one
run. Prints the figures and writes them (with per-conversation and
per-category breakdowns) to out/recall.json. `--set` and `--ablation` apply to
the first engine (All-Mem by default).

    python scripts/eval_recall.py [--data PATH] [--k 5] [--engines allmem,naive,hybrid]
                                  [--conversations conv-26 ...] [--ablation NAME] [--set KEY=VALUE]
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from results import write_json  # noqa: E402

from engine.core.schema import SettingError, parse_settings  # noqa: E402
from engine.engines import UnknownEngine, engine_class  # noqa: E402
from engine.eval.metrics import ndcg_at_k, recall_at_k  # noqa: E402
from engine.llm.embedder import Embedder  # noqa: E402
from engine.loaders import load_conversations  # noqa: E402
from engine.runtime.replay import Schedule, replay  # noqa: E402
from engine.session import open_session  # noqa: E402

DEFAULT_DATA = ROOT.parent / "shared" / "data" / "locomo" / "locomo-dev8.json"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=str(DEFAULT_DATA))
    ap.add_argument("--k", type=int, default=5)
    ap.add_argument("--engines", default="allmem,naive,hybrid", help="comma-separated registered engines")
    ap.add_argument("--conversations", nargs="*")
    ap.add_argument("--ablation", action="append", default=[])
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="override a setting of the first engine, e.g. --set lexical_weight=0.3 (read and checked "
                         "as `memwb replay --set` reads it)")
    ap.add_argument("--consolidate", default="every-3-sessions")
    ap.add_argument("--out", default=str(ROOT / "out" / "recall.json"))
    args = ap.parse_args()

    engines = [e.strip() for e in args.engines.split(",") if e.strip()]
    try:
        settings: dict = parse_settings(engine_class(engines[0]).Settings, args.set, engines[0])
    except (SettingError, UnknownEngine) as exc:
        raise SystemExit(f"--set: {exc}") from None
    if args.ablation:
        settings["ablations"] = sorted(args.ablation)
    conversations = load_conversations(args.data)
    if args.conversations:
        conversations = [c for c in conversations if c.id in set(args.conversations)]
    rows = []
    workdir = Path(tempfile.mkdtemp(prefix="memwb-eval-"))
    embedder = Embedder()
    for conv in conversations:
        started = time.perf_counter()
        questions = [q for q in conv.questions if q.category in (1, 2, 3, 4) and q.evidence]
        ranked: dict[str, list[list[str]]] = {}
        for i, name in enumerate(engines):
            engine = open_session(workdir / f"{conv.id}-{name}.sqlite", engine=name,
                                  settings=(settings or None) if i == 0 else None, embedder=embedder)
            replay(engine, conv, Schedule.parse(args.consolidate))
            ranked[name] = [engine.retrieve(q.question, k=args.k).source_ids for q in questions]
        for j, q in enumerate(questions):
            row = {"conversation": conv.id, "category": q.category}
            for name in engines:
                row[f"{name}_r"] = recall_at_k(ranked[name][j], q.evidence, args.k)
                row[f"{name}_n"] = ndcg_at_k(ranked[name][j], q.evidence, args.k)
            rows.append(row)
        mine = [r for r in rows if r["conversation"] == conv.id]
        scores = " ".join(f"{name}={statistics.mean(r[f'{name}_r'] for r in mine):.4f}" for name in engines)
        print(f"{conv.id}: {len(conv.turns)} turns, {len(mine)} questions, R@{args.k} {scores} "
              f"({time.perf_counter() - started:.0f}s)", flush=True)

    def mean(key, subset):
        return round(statistics.mean(r[key] for r in subset), 4) if subset else None

    result = {
        "k": args.k, "questions": len(rows), "engines": engines, "settings": settings,
        "consolidate": args.consolidate,
        **{name: {"recall": mean(f"{name}_r", rows), "ndcg": mean(f"{name}_n", rows)} for name in engines},
        "by_category": {c: {**{name: mean(f"{name}_r", sub) for name in engines}, "n": len(sub)}
                        for c, sub in sorted(_group(rows, "category").items())},
        "by_conversation": {c: {**{name: mean(f"{name}_r", sub) for name in engines}, "n": len(sub)}
                            for c, sub in sorted(_group(rows, "conversation").items())},
    }
    print(f"R@{args.k} over {len(rows)} questions (LoCoMo categories 1-4): "
          + " ".join(f"{name}={result[name]['recall']:.4f}" for name in engines))
    print(f"N@{args.k}: " + " ".join(f"{name}={result[name]['ndcg']:.4f}" for name in engines))
    write_json(args.out, result)
    return 0


def _group(rows, key):
    groups = defaultdict(list)
    for r in rows:
        groups[r[key]].append(r)
    return groups


if __name__ == "__main__":
    sys.exit(main())

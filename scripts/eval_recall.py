"""Turn-level R@K of the All-Mem engine vs naive dense RAG on LoCoMo (categories 1-4).

Both systems use the same embedder and the same k, computed in one run.
Prints both figures and writes them (with per-conversation and per-category
breakdowns) to out/recall.json.

    python scripts/eval_recall.py [--data PATH] [--k 5] [--conversations conv-26 ...] [--ablation NAME]
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from engine.baselines import NaiveRAG  # noqa: E402
from engine.loaders import load_conversations  # noqa: E402
from engine.metrics import ndcg_at_k, recall_at_k  # noqa: E402
from engine.replay import Schedule, replay  # noqa: E402
from engine.session import open_session  # noqa: E402

DEFAULT_DATA = ROOT.parent / "shared" / "data" / "locomo" / "locomo-dev8.json"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=str(DEFAULT_DATA))
    ap.add_argument("--k", type=int, default=5)
    ap.add_argument("--conversations", nargs="*")
    ap.add_argument("--ablation", action="append", default=[])
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="override an All-Mem setting, e.g. --set expansion_bonus=0.3 (value parsed as JSON)")
    ap.add_argument("--consolidate", default="every-3-sessions")
    ap.add_argument("--out", default=str(ROOT / "out" / "recall.json"))
    args = ap.parse_args()

    settings: dict = {k: json.loads(v) for k, v in (item.split("=", 1) for item in args.set)}
    if args.ablation:
        settings["ablations"] = sorted(args.ablation)
    conversations = load_conversations(args.data)
    if args.conversations:
        conversations = [c for c in conversations if c.id in set(args.conversations)]
    rows = []
    workdir = Path(tempfile.mkdtemp(prefix="memwb-eval-"))
    for conv in conversations:
        started = time.perf_counter()
        engine = open_session(workdir / f"{conv.id}.sqlite", settings=settings or None)
        replay(engine, conv, Schedule.parse(args.consolidate))
        naive = NaiveRAG(engine.embedder, conv.turns)
        for q in conv.questions:
            if q.category not in (1, 2, 3, 4) or not q.evidence:
                continue
            mem = engine.retrieve(q.question, k=args.k).source_ids
            base = naive.source_ids(q.question, k=args.k)
            rows.append({"conversation": conv.id, "category": q.category,
                         "allmem_r": recall_at_k(mem, q.evidence, args.k), "naive_r": recall_at_k(base, q.evidence, args.k),
                         "allmem_n": ndcg_at_k(mem, q.evidence, args.k), "naive_n": ndcg_at_k(base, q.evidence, args.k)})
        mine = [r for r in rows if r["conversation"] == conv.id]
        print(f"{conv.id}: {len(conv.turns)} turns, {len(mine)} questions, "
              f"R@{args.k} allmem={statistics.mean(r['allmem_r'] for r in mine):.4f} "
              f"naive={statistics.mean(r['naive_r'] for r in mine):.4f} ({time.perf_counter() - started:.0f}s)",
              flush=True)

    def mean(key, subset):
        return round(statistics.mean(r[key] for r in subset), 4) if subset else None

    result = {
        "k": args.k, "questions": len(rows), "settings": settings, "consolidate": args.consolidate,
        "allmem": {"recall": mean("allmem_r", rows), "ndcg": mean("allmem_n", rows)},
        "naive_rag": {"recall": mean("naive_r", rows), "ndcg": mean("naive_n", rows)},
        "by_category": {c: {"allmem": mean("allmem_r", sub), "naive_rag": mean("naive_r", sub), "n": len(sub)}
                        for c, sub in sorted(_group(rows, "category").items())},
        "by_conversation": {c: {"allmem": mean("allmem_r", sub), "naive_rag": mean("naive_r", sub), "n": len(sub)}
                            for c, sub in sorted(_group(rows, "conversation").items())},
    }
    print(f"R@{args.k} over {len(rows)} questions (LoCoMo categories 1-4): "
          f"allmem={result['allmem']['recall']:.4f} naive_rag={result['naive_rag']['recall']:.4f}")
    print(f"N@{args.k}: allmem={result['allmem']['ndcg']:.4f} naive_rag={result['naive_rag']['ndcg']:.4f}")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1))
    print(f"written to {out}")
    return 0


def _group(rows, key):
    groups = defaultdict(list)
    for r in rows:
        groups[r[key]].append(r)
    return groups


if __name__ == "__main__":
    sys.exit(main())

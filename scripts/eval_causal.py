"""Causal recovery on the team's causal suite: SCR@5, SCR@10 and chain recall@5 of every engine, side by side.

Each scenario of the split is replayed into every engine (same embedder, same
schedule), then each question is asked once; its gold evidence is the chain
(root cause first). Prints a table per engine (overall and per category), then
how each engine's memory holds the chains' links (engine.eval.chain_links: a
causal relation citing both turns, one citing other records, both turns in one
node, a turn not yet consolidated, no relation), and writes every figure,
per-question ranking and link to out/causal-<split>.json.
With --paraphrases each chain question is also asked in the other wordings of
datasets/causal/paraphrases/<split>.json, scored in a second table. With
--intra-cycle each question is asked before the steward curates the turns after
its last scheduled run (the newest turns still in MemLoom's real-time buffer), as
a streaming `memwb bench` asks them. Fit on the train split, tune on validation, report test.

    python scripts/eval_causal.py [--split train|validation|test] [--engines memloom,allmem,naive,hybrid]
                                  [--set memloom.KEY=VALUE ...] [--scenarios ID ...] [--paraphrases [FILE]]
                                  [--file YOUR.jsonl] [--intra-cycle]
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from results import parse_overrides, write_json  # noqa: E402

from engine.bench.datasets import DATASETS  # noqa: E402
from engine.eval.chain_links import follow_links, tally_links  # noqa: E402
from engine.eval.metrics import chain_recall, recall_at_k, strict_chain_recall  # noqa: E402
from engine.llm.embedder import Embedder  # noqa: E402
from engine.loaders import load_conversations  # noqa: E402
from engine.runtime.replay import Schedule, replay, step  # noqa: E402
from engine.session import open_session  # noqa: E402

SUITE = ROOT / "datasets" / "causal"
CATEGORY = {1: "causal chain", 2: "state succession", 4: "single-hop"}
CHAINS = DATASETS["causal"].chains          # the categories whose gold is a causal chain


def mean(rows: list[dict], key: str) -> float | None:
    return round(statistics.mean(r[key] for r in rows), 4) if rows else None


def table(rows: list[dict], engines: list[str], title: str) -> dict:
    """Print SCR@5, SCR@10 and chain recall@5 per engine, overall and per category; return them."""
    print(title)
    print(f"{'engine':10} {'SCR@5':>7} {'SCR@10':>7} {'CR@5':>7}   " +
          "  ".join(f"{CATEGORY.get(c, c)} SCR@5/CR@5" for c in sorted({r['category'] for r in rows})))
    figures = {}
    for name in engines:
        mine = [r for r in rows if r["engine"] == name]
        cats = {c: [r for r in mine if r["category"] == c] for c in sorted({r["category"] for r in mine})}
        e = figures[name] = {"scr5": mean(mine, "scr5"), "scr10": mean(mine, "scr10"), "cr5": mean(mine, "cr5"),
                             "by_category": {str(c): {"n": len(sub), "scr5": mean(sub, "scr5"),
                                                      "scr10": mean(sub, "scr10"), "cr5": mean(sub, "cr5")}
                                             for c, sub in cats.items()}}
        print(f"{name:10} {e['scr5']:7.3f} {e['scr10']:7.3f} {e['cr5']:7.3f}   " +
              "  ".join(f"{mean(sub, 'scr5'):.3f}/{mean(sub, 'cr5'):.3f} (n={len(sub)})" for sub in cats.values()))
    return figures


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--split", default="validation", choices=["train", "validation", "test"])
    ap.add_argument("--engines", default="memloom,allmem,naive,hybrid")
    ap.add_argument("--set", action="append", default=[], metavar="ENGINE.KEY=VALUE",
                    help="override an engine setting, e.g. memloom.hop_cost=0.5 (value as `memwb replay --set` "
                         "takes it)")
    ap.add_argument("--schedule", default="every-3-sessions")
    ap.add_argument("--scenarios", nargs="*")
    ap.add_argument("--intra-cycle", action="store_true",
                    help="ask before the steward curates the turns after its last scheduled run (as a streaming "
                         "`memwb bench` asks): the freshness gap, where the newest turns are in the real-time buffer")
    ap.add_argument("--file", help="a JSONL file of scenarios to evaluate instead of the split (your own suite)")
    ap.add_argument("--paraphrases", nargs="?", const="", metavar="FILE",
                    help="also ask each question in the other wordings of FILE (question id -> list of wordings; "
                         "default datasets/causal/paraphrases/<split>.json): how much of a score is its wording")
    ap.add_argument("--out")
    args = ap.parse_args()
    engines = [e.strip() for e in args.engines.split(",") if e.strip()]
    overrides = parse_overrides(args.set)
    scenarios = load_conversations(Path(args.file) if args.file else SUITE / f"{args.split}.jsonl")
    if args.scenarios:
        scenarios = [c for c in scenarios if c.id in set(args.scenarios)]
    wordings = {}
    if args.paraphrases is not None:
        source = Path(args.paraphrases or SUITE / "paraphrases" / f"{args.split}.json")
        if not source.is_file():
            raise SystemExit(f"--paraphrases: no file {source} (the {args.split} split has no rewordings; "
                             "name a file of question id -> list of wordings)")
        wordings = json.loads(source.read_text())
    embedder, work = Embedder(), Path(tempfile.mkdtemp(prefix="memwb-causal-"))
    rows = []
    started = time.perf_counter()
    for conv in scenarios:
        for name in engines:
            eng = open_session(work / f"{conv.id}-{name}.sqlite", engine=name, settings=overrides.get(name) or None,
                               embedder=embedder)
            if args.intra_cycle:
                schedule = Schedule.parse(args.schedule)
                while step(eng, conv, schedule) is not None:
                    pass
            else:
                replay(eng, conv, Schedule.parse(args.schedule))
            for q in conv.questions:
                links = ([link.to_dict() for link in follow_links(eng.state, eng.schema, q.evidence)]
                         if str(q.category) in CHAINS else None)
                for variant, text in enumerate([q.question, *wordings.get(q.id, [])]):
                    ranked = eng.retrieve(text, k=10).source_ids
                    linked = {"chain_links": links} if links is not None and not variant else {}
                    rows.append({**linked, "engine": name, "scenario": conv.id, "question": q.id,
                                 "category": q.category, "variant": variant, "text": text, "chain": list(q.evidence),
                                 "ranked": ranked[:10],
                                 "scr5": strict_chain_recall(ranked, q.evidence, 5),
                                 "scr10": strict_chain_recall(ranked, q.evidence, 10),
                                 "cr5": chain_recall(ranked, q.evidence, 5),
                                 "r5": recall_at_k(ranked, q.evidence, 5)})
    elapsed = time.perf_counter() - started
    name = Path(args.file).name if args.file else args.split
    asked = [r for r in rows if r["variant"] == 0]
    result = {"split": name, "scenarios": len(scenarios), "questions": len(asked) // max(len(engines), 1),
              "settings": overrides, "schedule": args.schedule, "seconds": round(elapsed, 1),
              "engines": table(asked, engines, f"{name}: {len(scenarios)} scenarios, "
                                                f"{len(asked) // max(len(engines), 1)} questions ({elapsed:.0f}s)")}
    result["chain_links"] = {}
    for name in engines:
        held = tally_links([r for r in asked if r["engine"] == name and "chain_links" in r],
                           lambda r: r["scr5"] == 1.0)
        if held.get("links"):
            result["chain_links"][name] = held
            print(f"{name:10} links of the chains: " + ", ".join(f"{f} {n}" for f, n in held["fates"].items())
                  + f"; chains held whole {held['held_whole']} of {held['questions']}, "
                    f"{held['held_whole_ranked_whole']} of them whole in the top 5")
    other = [r for r in rows if r["variant"] > 0]
    if other:
        result["paraphrased"] = table(other, engines, f"\nthe same questions in {len(other) // len(engines)} "
                                                      "other wordings")
    result["questions_detail"] = rows
    write_json(args.out or ROOT / "out" / f"causal-{name}.json", result)
    return 0


if __name__ == "__main__":
    sys.exit(main())

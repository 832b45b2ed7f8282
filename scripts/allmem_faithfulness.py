"""Why All-Mem's ablations do or do not move recall: operator rates, the surface, and what Stage 2 adds.

Reads a `memwb bench` output folder (result.json and the session databases under sessions/) and, for every
All-Mem system in it, reports per conversation and pooled:

- consolidation: Split / Merge / Update proposals made by the diagnosis, how many passed the gate and how
  many were applied, the drop reasons, and the applied edits per 100 ingested turns;
- the surface: units, archived units and the visible ratio (searchable units per ingested turn);
- retrieval at the final state, every scored question asked again: how often a Stage-2 candidate (reached
  over a link, not a Stage-1 anchor) is among the units that put the top-5 source ids in place, how often
  one is archived, which link types the expansion walked and which ones reached a top-5 contributor, and
  how often the candidate budget ran out.

Prints a table and writes the figures to OUT/allmem_faithfulness.json.

    python scripts/allmem_faithfulness.py BENCH_OUT_DIR [--systems allmem,allmem-no-merge] [--k 5]
"""
from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from results import write_json  # noqa: E402

from engine.bench.datasets import Source, dataset, load_source  # noqa: E402
from engine.core.proposal import GateVerdict, Status  # noqa: E402
from engine.llm.embedder import Embedder  # noqa: E402
from engine.session import open_session  # noqa: E402

OPS = ("split", "merge", "update")


def consolidation(state) -> dict:
    """Proposals per operator: made, gate-passing, applied, and the drop reasons."""
    out = {}
    for op in OPS:
        props = [p for p in state.proposals.values() if p.op == op]
        out[op] = {"proposed": len(props), "gate_pass": sum(p.gate == GateVerdict.PASS for p in props),
                   "applied": sum(p.status == Status.APPLIED for p in props),
                   "dropped": dict(Counter(p.reason_code or p.status for p in props if p.status != Status.APPLIED))}
    out["diagnosis_failed"] = sum(p.op == "diagnosis" for p in state.proposals.values())
    return out


def surface(state) -> dict:
    return {"turns": state.turn, "units": len(state.units), "visible": len(state.visible_ids),
            "archived": len(state.archived_ids), "visible_ratio": round(len(state.visible_ids) / max(state.turn, 1), 4)}


def retrieval(engine, questions, k: int) -> dict:
    """What Stage 2 contributes to the top-k source ids of every question, at the memory's final state."""
    s = engine.settings
    walked: Counter = Counter()
    contributing: Counter = Counter()
    n = with_expanded = with_archived = budget_hit = gold_from_expansion = 0
    for q in questions:
        res = engine.retrieve(q.question, k=k)
        n += 1
        anchors = {a for a, _ in res.anchors}
        walked.update(e["type"] for e in res.expansion)
        if len(res.anchors) + len(res.expansion) >= s.budget:
            budget_hit += 1
        top = set(res.source_ids[:k])
        # the unit that put each top source in place: the first candidate carrying it
        placed: dict[str, object] = {}
        for r in res.candidates:
            for sid in r.source_ids:
                placed.setdefault(sid, r)
        contributors = [placed[sid] for sid in top if sid in placed]
        expanded = [r for r in contributors if r.id not in anchors]
        if expanded:
            with_expanded += 1
            contributing.update(r.path[-1].type for r in expanded if r.path)
        if any(not r.visible for r in expanded):
            with_archived += 1
        if any(sid in q.evidence and placed[sid].id not in anchors for sid in top if sid in placed):
            gold_from_expansion += 1
    return {"questions": n, "stage2_in_top": with_expanded, "archived_in_top": with_archived,
            "gold_from_stage2": gold_from_expansion, "budget_hit": budget_hit,
            "walked": dict(walked), "contributing_links": dict(contributing)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--systems", default="")
    ap.add_argument("--k", type=int, default=5)
    args = ap.parse_args()
    out = Path(args.out)
    result = json.loads((out / "result.json").read_text())
    spec = dataset(result["dataset"])
    wanted = [s for s in args.systems.split(",") if s] or [
        label for label, sysd in result["systems"].items() if sysd["engine"] == "allmem"]
    embedder = Embedder()
    figures: dict[str, dict] = {}
    for label in wanted:
        per_conv = {}
        for task in result["tasks"]:
            if task["system"] != label or task["error"]:
                continue
            conv = load_source(Source(task["conversation"], result["source"]))
            engine = open_session(out / task["db"], create=False, embedder=embedder)
            per_conv[task["conversation"]] = {"surface": surface(engine.state),
                                              "consolidation": consolidation(engine.state),
                                              "retrieval": retrieval(engine, spec.askable(conv), args.k)}
            engine.store.close() if hasattr(engine.store, "close") else None
        figures[label] = {"conversations": per_conv, "pooled": pool(per_conv)}
        print_row(label, figures[label]["pooled"])
    write_json(out / "allmem_faithfulness.json", figures)
    return 0


def pool(per_conv: dict) -> dict:
    turns = sum(c["surface"]["turns"] for c in per_conv.values())
    visible = sum(c["surface"]["visible"] for c in per_conv.values())
    ops = {op: {key: sum(c["consolidation"][op][key] for c in per_conv.values())
                for key in ("proposed", "gate_pass", "applied")} for op in OPS}
    for op in OPS:
        dropped: Counter = Counter()
        for c in per_conv.values():
            dropped.update(c["consolidation"][op]["dropped"])
        ops[op]["dropped"] = dict(dropped)
        ops[op]["applied_per_100_turns"] = round(100 * ops[op]["applied"] / max(turns, 1), 2)
    ret: dict = {key: sum(c["retrieval"][key] for c in per_conv.values())
                 for key in ("questions", "stage2_in_top", "archived_in_top", "gold_from_stage2", "budget_hit")}
    for key in ("walked", "contributing_links"):
        tally: Counter = Counter()
        for c in per_conv.values():
            tally.update(c["retrieval"][key])
        ret[key] = dict(tally)
    return {"turns": turns, "visible": visible,
            "archived": sum(c["surface"]["archived"] for c in per_conv.values()),
            "visible_ratio": round(visible / max(turns, 1), 4), "operators": ops, "retrieval": ret}


def print_row(label: str, p: dict) -> None:
    ops = " ".join(f"{op}={p['operators'][op]['proposed']}/{p['operators'][op]['gate_pass']}/"
                   f"{p['operators'][op]['applied']}" for op in OPS)
    r = p["retrieval"]
    print(f"{label}: turns={p['turns']} archived={p['archived']} visible_ratio={p['visible_ratio']} "
          f"[proposed/gate/applied] {ops}")
    print(f"   questions={r['questions']} stage2_in_top5={r['stage2_in_top']} archived_in_top5={r['archived_in_top']} "
          f"gold_from_stage2={r['gold_from_stage2']} budget_hit={r['budget_hit']} walked={r['walked']} "
          f"contributing={r['contributing_links']}")
    for op in OPS:
        print(f"   {op} dropped: {p['operators'][op]['dropped']}")


if __name__ == "__main__":
    raise SystemExit(main())

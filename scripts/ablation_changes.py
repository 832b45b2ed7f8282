"""What the questions an ablation changes have in common: a flip at the cut, or a gold turn consolidated away.

Reads a `memwb bench` result (result.json, or its folder) and, for each ablation against its engine's full
system (`engine.eval.significance`), counts at the last round the questions whose first headline metric (R@5)
differs, and of those:

- `swap at the cut`: the two systems' top K+1 source ids are the same turns, only the order at the cut differs
  (a gold turn trading places K <-> K+1 with its neighbour: a move of the scores, not of what is retrieved);
- `gold off the surface`: a gold turn was consolidated off the surface and not recovered in either run
  (`misses` fate `off_surface`), the questions where a consolidation decision about the evidence mattered.

    python scripts/ablation_changes.py BENCH_OUT [--out out/ablation_changes.json]
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from results import write_json  # noqa: E402

from engine.eval.significance import ablation_references, compare_systems  # noqa: E402


def changes(result: dict, system: str, reference: str, metric: str, k: int) -> dict:
    last = str(result["rounds"])
    records = {(q["system"], q["conversation"], q["question_id"]): q for q in result["questions"]
               if last in q["by_round"]}
    changed = swaps = off = 0
    for (label, conv, qid), mine in records.items():
        theirs = records.get((reference, conv, qid))
        if label != system or theirs is None:
            continue
        if mine["by_round"][last].get(metric) == theirs["by_round"][last].get(metric):
            continue
        changed += 1
        swaps += set(mine["ranked"][:k + 1]) == set(theirs["ranked"][:k + 1])
        off += any(m.get("fate") == "off_surface" for q in (mine, theirs) for m in q.get("misses") or [])
    paired = compare_systems(result, system, reference, metric)
    return {"system": system, "reference": reference, "metric": metric, "changed": changed, "swap_at_cut": swaps,
            "gold_off_surface": off, "paired": paired.to_dict() if paired else None}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("result", help="result.json or the bench output folder holding it")
    ap.add_argument("--out", default=str(ROOT / "out" / "ablation_changes.json"))
    args = ap.parse_args()
    path = Path(args.result)
    result = json.loads((path / "result.json" if path.is_dir() else path).read_text(encoding="utf-8"))
    k = result["ks"][0]
    metric = f"r@{k}"
    rows = [changes(result, s, ref, metric, k) for s, ref in ablation_references(result).items()]
    print(f"| ablation | questions changed ({metric}) | swap at the cut (same top {k + 1}) | a gold turn off the "
          f"surface | Δ {metric} [95% interval] |\n|---|---|---|---|---|")
    for r in rows:
        p = r["paired"]
        print(f"| {r['system']} | {r['changed']} | {r['swap_at_cut']} | {r['gold_off_surface']} | "
              f"{p['delta']:+.4f} [{p['low']:+.3f}, {p['high']:+.3f}] |")
    write_json(args.out, {"result": str(path), "metric": metric, "ablations": rows})
    return 0


if __name__ == "__main__":
    sys.exit(main())

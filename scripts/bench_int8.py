"""The int8 encoder against float32 (both under ONNX Runtime): speed, vector agreement, and the benchmarks' figures.

`MEMWB_ENCODER=onnx-int8` runs all-MiniLM-L6-v2 quantised by ONNX Runtime (engine/llm/onnx_encoder.py). This
script encodes the same LoCoMo dev-8 turns with both encoders and gives
- speed: one batch of 64 turns (the median of `--repeat` calls; the encoders as the embedder calls them:
  float32 in groups of one token length, int8 one text a call), one query at a time (median over `--single`),
  and all the turns at once (wall and CPU seconds: on a shared machine the CPU seconds move less);
- agreement: the cosine between the two encoders' vectors of each turn (mean, min, 1st percentile);
- beside them, from `memwb bench` result folders run once with each encoder (`--runs NAME=FLOAT_DIR,INT8_DIR`),
  every system's last-round figures (LoCoMo and causal: their metrics; QMSum: Pk, WindowDiff) and the difference.
Prints the figures and writes them to out/bench_int8.json.

    python scripts/bench_int8.py --runs locomo=F,I qmsum=F,I causal=F,I [--texts 1500] [--single 100]
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from results import timings, write_json  # noqa: E402

from engine.eval.significance import paired_difference, per_item  # noqa: E402
from engine.llm.embedder import load_encoder  # noqa: E402
from engine.llm.model_files import default_model_path  # noqa: E402
from engine.loaders import load_conversations  # noqa: E402

LOCOMO = ROOT.parent / "shared" / "data" / "locomo" / "locomo-dev8.json"
ENCODERS = ("onnx", "onnx-int8")
# the default-switch rule (issue 55): int8 becomes the default only if, for every system, LoCoMo R@5 and QMSum
# Pk are within this of float32's
RULE = {"r@5": 0.005, "pk": 0.005}
RULE_DATASET = {"r@5": "locomo", "pk": "qmsum"}


def median_ms(fn, repeat: int) -> float:
    return round(statistics.median(timings(fn, repeat)[0]) * 1e3, 2)


def encoder_figures(texts: list[str], single: int, repeat: int) -> dict:
    path = default_model_path()
    encoders = {name: load_encoder(path, name) for name in ENCODERS}
    vectors = {name: enc.encode(texts) for name, enc in encoders.items()}
    cos = (vectors["onnx"] * vectors["onnx-int8"]).sum(axis=1)
    batch, queries = texts[:64], texts[64:64 + single]
    speed = {}
    for round_ in range(2):                     # alternated, so a change in the machine's load hits both
        for name, enc in encoders.items():
            row = speed.setdefault(name, {"batch64_ms": [], "query_ms": []})
            row["batch64_ms"].append(median_ms(lambda: enc.encode(batch), repeat))
            row["query_ms"].append(round(statistics.median(timings(lambda q=q: enc.encode([q]), 1)[0][0] * 1e3
                                                           for q in queries), 3))
    speed = {name: {k: min(v) for k, v in row.items()} for name, row in speed.items()}
    for name, enc in encoders.items():          # all the turns at once: wall, and this process's CPU seconds
        cpu, wall = time.process_time(), time.perf_counter()
        enc.encode(texts)
        speed[name] |= {"all_texts_s": round(time.perf_counter() - wall, 2),
                        "all_texts_cpu_s": round(time.process_time() - cpu, 2)}
    return {"texts": len(texts), "norms_max_error": float(np.abs(np.linalg.norm(vectors["onnx-int8"], axis=1) - 1).max()),
            "cosine": {"mean": round(float(cos.mean()), 5), "min": round(float(cos.min()), 5),
                       "p01": round(float(np.percentile(cos, 1)), 5)},
            "speed": speed}


def run_figures(float_dir: Path, int8_dir: Path) -> dict:
    """Every system's last-round figures in the two runs, and int8 minus float32."""
    runs = {name: json.loads((Path(d) / "result.json").read_text()) for name, d in
            (("float32", float_dir), ("int8", int8_dir))}
    for name, result in runs.items():
        expected = "onnx" if name == "float32" else "onnx-int8"
        if result.get("encoder") != expected:
            raise SystemExit(f"{Path(float_dir if name == 'float32' else int8_dir)} ran the encoder "
                             f"{result.get('encoder')!r}, not {expected!r}")
    rows = {}
    for system, summary in runs["float32"]["summary"].items():
        other = runs["int8"]["summary"].get(system)
        if other is None:
            continue
        metrics = [m for m in summary["overall"] if summary["overall"][m] is not None]
        rows[system] = {m: {"float32": summary["overall"][m], "int8": other["overall"].get(m),
                            "difference": None if other["overall"].get(m) is None else
                            round(other["overall"][m] - summary["overall"][m], 4)} for m in metrics}
        for metric in set(RULE) & set(metrics):        # the items behind the difference, paired
            paired = paired_difference(per_item(runs["int8"], system, metric),
                                       per_item(runs["float32"], system, metric))
            if paired is not None:
                rows[system][metric]["paired"] = {"n": paired.n, "interval": [round(paired.low, 4),
                                                                              round(paired.high, 4)],
                                                  "gained": paired.gained, "lost": paired.lost,
                                                  "within_noise": paired.within_noise}
    return {"dataset": runs["float32"]["dataset"], "systems": rows,
            "task_seconds": {name: round(sum(t["seconds"] for t in r["tasks"]), 1) for name, r in runs.items()}}


def rule_met(runs: dict) -> dict:
    """Per figure the rule reads, the largest |int8 - float32| over the systems, and whether it is within bound."""
    out = {}
    for metric, bound in RULE.items():
        diffs = [abs(row[metric]["difference"]) for run in runs.values() if run["dataset"] == RULE_DATASET[metric]
                 for row in run["systems"].values() if metric in row and row[metric]["difference"] is not None]
        if diffs:
            out[metric] = {"largest": max(diffs), "bound": bound, "met": max(diffs) <= bound}
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--texts", type=int, default=1500)
    ap.add_argument("--single", type=int, default=100)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--data", default=str(LOCOMO))
    ap.add_argument("--runs", nargs="*", default=[], metavar="NAME=FLOAT_DIR,INT8_DIR")
    ap.add_argument("--out", default=str(ROOT / "out" / "bench_int8.json"))
    args = ap.parse_args()
    texts = [t.text for conv in load_conversations(args.data) for t in conv.turns][:args.texts]
    result = {"encoders": encoder_figures(texts, args.single, args.repeat), "runs": {}}
    for spec in args.runs:
        name, _, dirs = spec.partition("=")
        float_dir, _, int8_dir = dirs.partition(",")
        result["runs"][name] = run_figures(Path(float_dir), Path(int8_dir))
    result["rule"] = rule_met(result["runs"])
    enc = result["encoders"]
    print(f"{enc['texts']} LoCoMo turns: cosine(float32, int8) mean {enc['cosine']['mean']:.5f}, "
          f"1st percentile {enc['cosine']['p01']:.5f}, min {enc['cosine']['min']:.5f}")
    for name, row in enc["speed"].items():
        print(f"{name:10s} batch of 64 {row['batch64_ms']:8.2f} ms   one query {row['query_ms']:6.3f} ms   "
              f"all {enc['texts']} turns {row['all_texts_s']:.2f} s ({row['all_texts_cpu_s']:.2f} CPU s)")
    for name, run in result["runs"].items():
        print(f"\n{name} ({run['dataset']}), task seconds {run['task_seconds']}")
        for system, row in run["systems"].items():
            print(f"  {system:22s} " + "  ".join(f"{m} {v['float32']:.4f}->{v['int8']:.4f} ({v['difference']:+.4f})"
                                                 for m, v in row.items() if v["int8"] is not None))
            for m, v in row.items():
                if "paired" in v:
                    pd = v["paired"]
                    print(f"  {'':22s} {m} over {pd['n']} items: int8 higher on {pd['gained']}, lower on "
                          f"{pd['lost']}; 95% interval [{pd['interval'][0]:+.4f}, {pd['interval'][1]:+.4f}]")
    for metric, r in result["rule"].items():
        print(f"rule: largest |int8 - float32| {metric} {r['largest']:.4f} (bound {r['bound']}): "
              f"{'met' if r['met'] else 'not met'}")
    write_json(args.out, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())

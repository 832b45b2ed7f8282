"""Serial vs Ray wall time of one `memwb bench` sweep (conversations x engines), and whether both give the
same figures.

Each mode runs the real benchmark (`engine.bench.runner.run_benchmark`) from a fresh workspace (no cached
vectors from the other mode) into its own folder. The Ray mode also reports how long Ray took to start and
stop; both report the peak memory of this process and its children (Ray's daemons and workers). Prints the
figures and writes them to out/bench_sweep.json.

    python scripts/bench_sweep.py [--data PATH] [--conversations conv-26 ...] [--engines allmem,naive,hybrid]
                                  [--protocol static|streaming] [--workers 2] [--ray local|ADDRESS]
                                  [--modes serial,ray]
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from results import write_json  # noqa: E402
from engine.bench.config import BenchConfig
from engine.bench.result import figures
from engine.bench.runner import run_benchmark  # noqa: E402
from engine.bench.sweep import ray_session  # noqa: E402

DEFAULT_DATA = ROOT.parent / "shared" / "data" / "locomo" / "locomo-dev8.json"


class PeakMemory:
    """Peak resident memory of this process and all its descendants (Ray's daemons and workers), sampled."""

    def __init__(self, every: float = 0.5):
        import psutil

        self.psutil, self.every, self.peak = psutil, every, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        me = self.psutil.Process()
        while not self._stop.is_set():
            total = 0
            for proc in [me, *me.children(recursive=True)]:
                try:
                    total += proc.memory_info().rss
                except self.psutil.Error:
                    continue
            self.peak = max(self.peak, total)
            self._stop.wait(self.every)

    def __enter__(self) -> "PeakMemory":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


def run_mode(mode: str, args, base: Path) -> tuple[dict, dict]:
    os.environ["MEMWB_WORKSPACE"] = str(base / mode / "workspace")       # a cold embedding cache for each mode
    config = BenchConfig(dataset="locomo", source=args.data, engines=tuple(args.engines), protocol=args.protocol,
                         conversations=tuple(args.conversations) if args.conversations else None,
                         out=str(base / mode / "bench"), ray=None if mode == "serial" else args.ray)
    started = time.perf_counter()

    def progress(p) -> None:
        print(f"  [{mode}] {p.done}/{p.total} {p.label} ({time.perf_counter() - started:.0f}s)", flush=True)

    out: dict = {}
    with PeakMemory() as memory:
        if mode == "serial":
            path = run_benchmark(config, progress)
        else:
            with ray_session(args.ray, args.workers):
                ready = time.perf_counter()
                path = run_benchmark(config, progress)
                finished = time.perf_counter()
            out.update(ray_start_s=round(ready - started, 1), ray_stop_s=round(time.perf_counter() - finished, 1))
        wall = time.perf_counter() - started
    result = json.loads(path.read_text(encoding="utf-8"))
    out.update(wall_s=round(wall, 1), task_s=round(sum(t["seconds"] for t in result["tasks"]), 1),
               tasks=len(result["tasks"]), failed=[t for t in result["tasks"] if t["error"]],
               peak_rss_mb=round(memory.peak / 2**20), result=str(path))
    return out, result


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=str(DEFAULT_DATA))
    ap.add_argument("--conversations", nargs="*")
    ap.add_argument("--engines", default="allmem,naive,hybrid")
    ap.add_argument("--protocol", default="static", choices=["static", "streaming"])
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--ray", default="local", help="'local' or the address of a Ray cluster")
    ap.add_argument("--modes", default="serial,ray")
    ap.add_argument("--out", default=str(ROOT / "out" / "bench_sweep.json"))
    args = ap.parse_args()
    args.engines = [e.strip() for e in args.engines.split(",") if e.strip()]
    modes = [m.strip() for m in args.modes.split(",")]
    base = Path(tempfile.mkdtemp(prefix="memwb-sweep-"))
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    report: dict = {"data": args.data, "engines": args.engines, "protocol": args.protocol, "workers": args.workers,
                    "address": args.ray, "cpus": os.cpu_count()}
    results = {}
    for mode in modes:
        print(f"{mode}:", flush=True)
        report[mode], results[mode] = run_mode(mode, args, base)
        r = report[mode]
        print(f"{mode}: {r['wall_s']}s wall for {r['tasks']} tasks ({r['task_s']}s in tasks), {len(r['failed'])} "
              f"failed, peak RSS {r['peak_rss_mb']} MB", flush=True)
    if "serial" in results and "ray" in results:
        report["identical"] = figures(results["serial"]) == figures(results["ray"])
        report["speedup"] = round(report["serial"]["wall_s"] / report["ray"]["wall_s"], 2)
        print(f"serial {report['serial']['wall_s']}s vs Ray ({args.workers} workers) {report['ray']['wall_s']}s "
              f"(Ray start {report['ray']['ray_start_s']}s): speedup x{report['speedup']}; figures identical: "
              f"{report['identical']}")
    first = results[modes[0]]
    report["overall"] = {label: s["overall"] for label, s in first["summary"].items()}
    write_json(args.out, report)
    return 0


if __name__ == "__main__":
    sys.exit(main())

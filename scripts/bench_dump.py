"""Dump and load round trip of a real session: rows per table, dump size, time and peak memory of each step.

Replays LoCoMo conv-26 (offline backend, consolidation every 3 sessions) unless `--db` names an existing
memory, then dumps it with and without the embedding cache and loads each dump into a new database, every
step in a process of its own (so its peak RSS is its own). The round trip is verified: the loaded database
dumps to the same rows and passes `memwb check`. Then the same with `--padding` random cache rows added, to
show that memory does not grow with the database. Prints the figures and writes them to out/bench_dump.json.

    python scripts/bench_dump.py [--db c26.sqlite] [--conversation conv-26] [--padding 100000]
"""
from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from results import write_json  # noqa: E402

LOCOMO = ROOT.parent / "shared" / "data" / "locomo" / "locomo-dev8.json"


def step(args) -> int:
    """One measured step in this process: prints {"seconds", "peak_rss_mb", ...} as JSON."""
    from engine.store.dump import dump, load

    start = time.perf_counter()
    if args.step == "dump":
        with open(args.file, "wb") as out:
            report = dump(args.db, out, embeddings=args.embeddings)
        extra = {"rows": report.rows}
    else:
        extra = {"line": load(args.file, args.db).line()}
    print(json.dumps({"seconds": round(time.perf_counter() - start, 2), "peak_rss_mb": peak_rss_mb(), **extra}))
    return 0


def peak_rss_mb() -> int:
    """This process's peak RSS since it started (VmHWM; getrusage's ru_maxrss also counts the parent's
    memory at fork, which is inherited across exec on Linux)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return round(int(line.split()[1]) / 1024)
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)


def measured(*argv) -> dict:
    proc = subprocess.run([sys.executable, __file__, *map(str, argv)], capture_output=True, text=True, cwd=ROOT)
    if proc.returncode:
        raise SystemExit(f"step {argv} failed:\n{proc.stderr}")
    return json.loads(proc.stdout.splitlines()[-1])


def padded(db: Path, work: Path, rows: int) -> dict:
    """Memory does not grow with the database: the same round trip with `rows` more cache rows (random vectors)."""
    import os
    import shutil
    import sqlite3

    big = work / "padded.sqlite"
    shutil.copy(db, big)
    with sqlite3.connect(big) as con:
        con.executemany("INSERT INTO embedding_cache (key, dim, vector) VALUES (?, 384, ?)",
                        ((f"padding-{i}", os.urandom(384 * 4)) for i in range(rows)))
    path = work / "padded.jsonl"
    out = measured("--step", "dump", "--db", big, "--file", path, "--embeddings")
    back = measured("--step", "load", "--db", work / "padded-loaded.sqlite", "--file", path)
    figures = {"database_mb": round(big.stat().st_size / 1e6, 1), "rows": sum(out["rows"].values()),
               "dump_mb": round(path.stat().st_size / 1e6, 1), "dump_s": out["seconds"],
               "dump_peak_rss_mb": out["peak_rss_mb"], "load_s": back["seconds"],
               "load_peak_rss_mb": back["peak_rss_mb"]}
    print(f"padded with {rows} cache rows: database {figures['database_mb']} MB, {figures['rows']} rows; dump "
          f"{figures['dump_mb']} MB in {figures['dump_s']} s (peak RSS {figures['dump_peak_rss_mb']} MB), load "
          f"{figures['load_s']} s (peak RSS {figures['load_peak_rss_mb']} MB)")
    return figures


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db", help="an existing memory database (default: replay --conversation of LoCoMo)")
    ap.add_argument("--conversation", default="conv-26")
    ap.add_argument("--out", default=str(ROOT / "out" / "bench_dump.json"))
    ap.add_argument("--padding", type=int, default=100_000,
                    help="also time a copy with this many more embedding-cache rows (0: skip)")
    ap.add_argument("--step", choices=["dump", "load"], help=argparse.SUPPRESS)
    ap.add_argument("--file", help=argparse.SUPPRESS)
    ap.add_argument("--embeddings", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.step:
        return step(args)

    from engine.eval.integrity import check_database
    from engine.store.dump import dump

    work = Path(tempfile.mkdtemp(prefix="memwb-dump-"))
    db = Path(args.db) if args.db else work / f"{args.conversation}.sqlite"
    if not args.db:
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", "engine.cli", "replay", str(LOCOMO), "--conversation",
                        args.conversation, "--db", str(db), "--quiet"], check=True, cwd=ROOT)
        print(f"replayed {args.conversation} in {time.perf_counter() - start:.0f} s")
    result: dict = {"database": str(db), "database_mb": round(db.stat().st_size / 1e6, 1)}
    for label, flags in (("without_embeddings", []), ("with_embeddings", ["--embeddings"])):
        path = work / f"{label}.jsonl"
        out = measured("--step", "dump", "--db", db, "--file", path, *flags)
        target = work / f"{label}.sqlite"
        back = measured("--step", "load", "--db", target, "--file", path)
        again = work / f"{label}-again.jsonl"
        with open(again, "wb") as f:
            dump(target, f, embeddings=bool(flags))
        same = path.read_bytes().split(b"\n")[1:] == again.read_bytes().split(b"\n")[1:]
        check = check_database(target)
        result[label] = {"tables": len(out["rows"]), "rows": sum(out["rows"].values()), "rows_per_table": out["rows"],
                         "dump_mb": round(path.stat().st_size / 1e6, 1), "dump_s": out["seconds"],
                         "dump_peak_rss_mb": out["peak_rss_mb"], "load_s": back["seconds"],
                         "load_peak_rss_mb": back["peak_rss_mb"], "redump_identical": same,
                         "check": [f.line() for f in check.findings] or "ok"}
        r = result[label]
        print(f"{label.replace('_', ' ')}: {r['rows_per_table'].get('op_log')} log records, {r['tables']} tables, "
              f"{r['rows']} rows ({', '.join(f'{k} {v}' for k, v in r['rows_per_table'].items())}); dump "
              f"{r['dump_mb']} MB in {r['dump_s']} s (peak RSS {r['dump_peak_rss_mb']} MB), load {r['load_s']} s "
              f"(peak RSS {r['load_peak_rss_mb']} MB); re-dump identical: {same}; check: "
              f"{'ok' if not check.findings else len(check.findings)}")
    if args.padding:
        result["padded"] = padded(db, work, args.padding)
    write_json(args.out, result)
    return 0 if all(result[k]["redump_identical"] and result[k]["check"] == "ok"
                    for k in ("without_embeddings", "with_embeddings")) else 1


if __name__ == "__main__":
    sys.exit(main())

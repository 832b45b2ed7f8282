"""Regenerate screenshots/ by driving every page of the workbench in headless Chromium.

    python scripts/screenshots.py [--out screenshots] [--width 1280 --height 800]
                                  [--engine all|allmem|memloom|gam|recmem|naive|hybrid|locomo|progress|benchmark|decisions]

`all` (the default) takes the All-Mem tour (1_ … 5_), the MemLoom tour (6_memloom_graph,
7_memloom_retrieval, 8_memloom_replay, 9_memloom_consolidation), the GAM tour (15_gam_replay,
16_gam_consolidation, 17_gam_graph, 18_gam_retrieval; `--engine gam` takes only that one) and the graph at LoCoMo scale
(10_locomo_graph: conv-26 played to its end in All-Mem, a few minutes) into the same folder. With another
engine the app starts on the demo in that engine (MEMWB_ENGINE); naive and hybrid RAG take the
shorter tour of an engine without an offline process (1_ … 4_): give them their own --out.
`all` also takes 13_locomo_memloom_graph: conv-26 played to its end in MemLoom, the steward's relations applied by
the gate, every session drawn with its events folded (`--engine locomo` takes only 10_ and 13_).
RecMem's tour (`all`, or `--engine recmem`) opens the demo in RecMem from the settings form (θ_sim 0.6,
θ_count 3, manual schedule) and takes 19_recmem_replay (the recurrence gate's trace and the threshold sweep),
20_recmem_consolidation (a cluster with its cosines under review), 21_recmem_graph (the Layers tab) and
22_recmem_retrieval (results with their layer and provenance chain); with LoCoMo on the machine also
23_recmem_layers: conv-26 replayed into RecMem at its defaults (a few minutes), opened with `memwb ui --db`, its
Layers tab.
`all` also takes 11_replay_progress: a jump to the end of LoCoMo conv-26 mid-way, its progress bar showing
(`--engine progress` takes only that one), and 12_benchmark: the Benchmark page on a real `memwb bench` run
of the four engines on the bundled demo (answered offline), naive RAG's first miss read beside the other
system (`--engine benchmark` takes only that one), and 24_decisions: the Benchmark page on a decision-set run of
All-Mem and MemLoom over the dev decision set, MemLoom's first missed pair picked (`--engine decisions`).
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from engine.bench.config import BenchConfig  # noqa: E402
from engine.bench.runner import run_benchmark  # noqa: E402
from engine.engines import known_engines  # noqa: E402
from engine.store.workspace import ENV  # noqa: E402
from workbench.driver import (  # noqa: E402
    LOCOMO,
    baseline_walkthrough,
    bench_demo_workspace,
    benchmark_walkthrough,
    browser_page as browser_window,
    decisions_walkthrough,
    first_miss,
    gam_session,
    gam_walkthrough,
    locomo_conversation_file,
    locomo_events_walkthrough,
    locomo_graph_walkthrough,
    locomo_layers_walkthrough,
    memloom_walkthrough,
    progress_walkthrough,
    recmem_walkthrough,
    running_app,
    walkthrough,
)

TOURS = {"allmem": walkthrough, "memloom": memloom_walkthrough}


def recmem_locomo_session(folder: Path) -> Path:
    """LoCoMo conv-26 replayed into RecMem at its defaults and its own schedule (consolidation at the trigger)."""
    from engine.engines import engine_schema
    from engine.loaders import load_conversation
    from engine.runtime.replay import Schedule, replay
    from engine.session import open_session

    db = folder / "conv-26-recmem.sqlite"
    engine = open_session(db, engine="recmem", conversation="conv-26", source=str(LOCOMO),
                          schedule=engine_schema("recmem").schedule)
    replay(engine, load_conversation(LOCOMO, "conv-26"), Schedule.parse(engine_schema("recmem").schedule))
    return db


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(ROOT / "screenshots"))
    ap.add_argument("--engine", default="all",
                    choices=["all", "progress", "benchmark", "decisions", "locomo", *known_engines()])
    ap.add_argument("--width", type=int, default=1280, help="the window's width in pixels (a laptop's: 1280)")
    ap.add_argument("--height", type=int, default=800, help="the window's height; each shot takes the whole page")
    args = ap.parse_args()

    def browser_page():
        return browser_window(args.width, args.height)

    engines = {"all": ["allmem", "memloom", "gam", "recmem"], "progress": [], "benchmark": [], "decisions": [],
               "locomo": []}.get(args.engine, [args.engine])
    for engine in engines:
        if engine == "gam":                 # the tour opens a prepared session: topic edges wait for a person
            work = Path(tempfile.mkdtemp(prefix="memwb-shots-"))
            db = gam_session(work / "sessions")
            with running_app(env={ENV: str(work)}, via_cli=True, cli_args=["--db", str(db)]) as url, \
                    browser_page() as page:
                gam_walkthrough(page, url, db, shots=Path(args.out))
            continue
        if engine == "recmem":
            with tempfile.TemporaryDirectory(prefix="memwb-shots-") as tmp, \
                    running_app(env={ENV: tmp}) as url, browser_page() as page:
                recmem_walkthrough(page, url, Path(tmp), shots=Path(args.out))
            if LOCOMO.exists():
                with tempfile.TemporaryDirectory(prefix="memwb-shots-") as tmp:
                    db = recmem_locomo_session(Path(tmp))
                    with running_app(env={ENV: tmp}, via_cli=True, cli_args=["--db", str(db)]) as url, \
                            browser_page() as page:
                        locomo_layers_walkthrough(page, url, shots=Path(args.out))
            continue
        tour = TOURS.get(engine, baseline_walkthrough)
        with tempfile.TemporaryDirectory(prefix="memwb-shots-") as tmp, \
                running_app(env={"MEMWB_ENGINE": engine, ENV: tmp}) as url, browser_page() as page:
            tour(page, url, shots=Path(args.out))      # a new workspace: the tour starts from the demo's first turn
    if args.engine in ("all", "locomo") and LOCOMO.exists():
        for engine, tour in (("allmem", locomo_graph_walkthrough), ("memloom", locomo_events_walkthrough)):
            with tempfile.TemporaryDirectory(prefix="memwb-shots-") as tmp:
                env = {"MEMWB_ENGINE": engine, "MEMWB_DEMO": str(locomo_conversation_file(Path(tmp))),
                       "MEMWB_WORKSPACE": tmp}
                with running_app(env=env) as url, browser_page() as page:
                    tour(page, url, shots=Path(args.out))
    if args.engine in ("all", "progress"):
        work = Path(tempfile.mkdtemp(prefix="memwb-shots-"))
        source = locomo_conversation_file(work)
        env = {"MEMWB_DEMO": str(source), "TMPDIR": str(work), "MEMWB_WORKSPACE": str(work / "workspace")}
        with running_app(env=env) as url, browser_page() as page:
            progress_walkthrough(page, url, shots=Path(args.out))
    if args.engine in ("all", "benchmark"):
        work = Path(tempfile.mkdtemp(prefix="memwb-shots-"))
        os.environ["MEMWB_WORKSPACE"] = str(work)           # the run's embeddings go to its own workspace
        result = bench_demo_workspace(work, engines=("allmem", "naive", "hybrid", "memloom"), answer="offline")
        miss = first_miss(result, "naive")
        with running_app(env={"MEMWB_WORKSPACE": str(work), "TMPDIR": str(work)}) as url, browser_page() as page:
            benchmark_walkthrough(page, url, result, shots=Path(args.out), miss=miss["question_id"], system="naive")
    if args.engine in ("all", "decisions"):
        work = Path(tempfile.mkdtemp(prefix="memwb-shots-"))
        os.environ["MEMWB_WORKSPACE"] = str(work)
        run_benchmark(BenchConfig(dataset="decisions", source=str(ROOT / "datasets" / "decisions" / "dev"),
                                  engines=("allmem", "memloom"), out=str(work / "benchmarks" / "decisions-dev")))
        with running_app(env={"MEMWB_WORKSPACE": str(work), "TMPDIR": str(work)}) as url, browser_page() as page:
            decisions_walkthrough(page, url, shots=Path(args.out))
    for png in sorted(Path(args.out).glob("*.png")):
        print(png)
    return 0


if __name__ == "__main__":
    sys.exit(main())

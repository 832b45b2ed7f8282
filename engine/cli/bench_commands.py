"""`memwb bench` and `memwb reproduce`, with the progress line both print."""
from __future__ import annotations

import json
import shlex
import sys

from engine.core.text import seconds_text


def cmd_reproduce(args) -> int:
    from engine.bench.reproduce import reproduce

    bar = ProgressBar(sys.stderr)
    path = reproduce(args.engine, out=args.out, conversations=tuple(args.conversations or ()) or None,
                     progress=bar, command=shlex.join(["memwb", *args.argv]))
    bar.close()
    print(path.read_text(encoding="utf-8"))
    print(f"wrote {path}")
    return 0


def cmd_bench(args) -> int:
    from engine.bench.config import BenchConfig, parse_engine_settings
    from engine.bench.datasets import BenchInputError
    from engine.bench.runner import run_benchmark
    from engine.bench.summary import tables

    def names(text: str | None) -> tuple[str, ...]:
        return tuple(x.strip() for x in (text or "").split(",") if x.strip())

    try:
        ks = tuple(int(k) for k in names(args.k))
    except ValueError:
        raise BenchInputError(f"--k takes comma-separated integers such as 5,10, not {args.k!r}") from None
    config = BenchConfig(dataset=args.dataset, source=args.input, engines=names(args.engines) or None,
                         ablations=names(args.ablations), protocol=args.protocol, rounds=args.rounds, ks=ks,
                         schedule=args.schedule, conversations=tuple(args.conversations or ()) or None,
                         out=args.out, ray=args.ray, answer=args.answer, llm=args.llm,
                         answer_budget=args.answer_budget, settings=parse_engine_settings(args.settings),
                         decisions=args.decisions, gold_overlay=args.gold_overlay,
                         command=shlex.join(["memwb", *args.argv]))
    bar = ProgressBar(sys.stderr)
    path = run_benchmark(config, progress=bar)
    bar.close()
    result = json.loads(path.read_text(encoding="utf-8"))
    print(tables(result))
    print(f"wrote {path} and {path.with_name('summary.md')}")
    return 1 if any(t["error"] for t in result["tasks"]) else 0


class ProgressBar:
    """Tasks done, with an ETA from the mean task time so far: a redrawn bar on a terminal, plain lines else."""

    WIDTH = 30

    def __init__(self, stream):
        import time

        self.stream, self.clock, self.started = stream, time.monotonic, time.monotonic()
        self.tty = stream.isatty()
        self.drawn = False

    def __call__(self, p) -> None:
        elapsed = self.clock() - self.started
        eta = f"ETA {seconds_text(elapsed / p.done * (p.total - p.done))}" if p.done else "ETA –"
        if self.tty:
            filled = int(self.WIDTH * p.done / max(p.total, 1))
            line = f"\r[{'#' * filled}{'.' * (self.WIDTH - filled)}] {p.done}/{p.total} {eta}  {p.label[:40]:40}"
            print(line, end="", file=self.stream, flush=True)
            self.drawn = True
        else:
            print(f"bench: {p.done}/{p.total} tasks done ({p.label}), {seconds_text(elapsed)} elapsed, {eta}",
                  file=self.stream, flush=True)

    def close(self) -> None:
        if self.drawn:
            print(file=self.stream)

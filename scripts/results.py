"""What the evaluation and benchmark scripts share: settings overrides from the command line, writing results."""
from __future__ import annotations

import json
import time
from pathlib import Path


def parse_overrides(items: list[str]) -> dict[str, dict]:
    """`ENGINE.KEY=VALUE` items (`engine.bench.config.parse_engine_settings`, what `memwb bench --set` reads), a bad one
    ending the script with its message."""
    from engine.bench.config import parse_engine_settings
    from engine.bench.datasets import BenchInputError

    try:
        return parse_engine_settings(items)
    except BenchInputError as exc:
        raise SystemExit(str(exc)) from None


def write_json(path: str | Path, data: dict, say: bool = True) -> None:
    """Write `data`; `say=False` for a partial result written again later (so the path is printed once)."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(data, indent=1))
    if say:
        print(f"written to {out}")


def timings(fn, repeat: int) -> tuple[list[float], object]:
    """Seconds of each of `repeat` calls of `fn` (each script takes the statistic it reports), and the last result."""
    seconds, result = [], None
    for _ in range(repeat):
        started = time.perf_counter()
        result = fn()
        seconds.append(time.perf_counter() - started)
    return seconds, result


def noting_encoder(model, texts: list[str], seconds: list[float] | None = None):
    """`model.encode` (the process's one encoder) noting every text it is given into `texts` (and each call's
    time into `seconds`); returns the undo."""
    encode = model.encode

    def noting(batch):
        started = time.perf_counter()
        out = encode(batch)
        if seconds is not None:
            seconds.append(time.perf_counter() - started)
        texts.extend(batch)
        return out
    model.encode = noting
    return lambda: vars(model).pop("encode")

"""Write tests/durations.json, the seconds per work unit that steer which one a free worker takes next
(tests/scheduling.py), from the `--durations=0` lines of a run's log:

    CI=true bash scripts/test.sh --durations=0 > LOG 2>&1
    python scripts/test_durations.py LOG

Setup, call and teardown all count: a module's shared replay is paid in its first test's setup."""
from __future__ import annotations

import argparse
import json
import re
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.scheduling import DURATIONS, unit_of  # noqa: E402

LINE = re.compile(r"^\s*(\d+(?:\.\d+)?)s (?:setup|call|teardown)\s+(tests/\S.*?)\s*$")


def unit_seconds(log: str) -> dict[str, float]:
    seconds: dict[str, float] = defaultdict(float)
    for line in log.splitlines():
        if m := LINE.match(line):
            seconds[unit_of(m.group(2))] += float(m.group(1))
    return dict(seconds)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("log", type=Path, help="a pytest log with --durations=0")
    args = ap.parse_args()
    seconds = unit_seconds(args.log.read_text(errors="replace"))
    if not seconds:
        sys.exit(f"{args.log}: no duration lines (run pytest with --durations=0)")
    ordered = dict(sorted(((u, round(s, 1)) for u, s in seconds.items()), key=lambda kv: (-kv[1], kv[0])))
    DURATIONS.write_text(json.dumps(ordered, indent=0) + "\n")
    print(f"{DURATIONS.relative_to(ROOT)}: {len(ordered)} units, {sum(ordered.values()):.0f} s in all")


if __name__ == "__main__":
    main()

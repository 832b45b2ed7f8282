"""Regenerate screenshots/ by driving every page of the workbench in headless Chromium.

    python scripts/screenshots.py [--out screenshots]
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from workbench.driver import browser_page, running_app, walkthrough  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(ROOT / "screenshots"))
    args = ap.parse_args()
    with running_app() as url, browser_page() as page:
        walkthrough(page, url, shots=Path(args.out))
    for png in sorted(Path(args.out).glob("*.png")):
        print(png)
    return 0


if __name__ == "__main__":
    sys.exit(main())

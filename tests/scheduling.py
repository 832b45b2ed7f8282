"""How the suite is shared between workers under `pytest -n N` (`scripts/test.sh` runs it on one
worker more than the cores, at most four).

A module goes to one worker whole, so that what its tests share (a replay, a model server, a database made once
per module) is made once, as in a serial run; the tests of a module in `ONE_BY_ONE`, each of which starts its own
server and browser and shares nothing, are dealt out one at a time. A free worker takes the longest unit left,
by the seconds `tests/durations.json` records (longest first: a long module handed out last would leave the
other workers idle). A unit it does not name counts as the median: the figures only steer the order, never what
runs. `python scripts/test_durations.py LOG` writes them from a run's `--durations=0` lines.
"""
from __future__ import annotations

import json
import statistics
from pathlib import Path

from xdist.scheduler import LoadScopeScheduling

DURATIONS = Path(__file__).with_name("durations.json")

# Modules whose tests share no fixture wider than one test: spreading them costs nothing.
ONE_BY_ONE = frozenset({
    "tests/test_browser.py",
    "tests/test_browser_words.py",
    "tests/test_access_server.py",
    "tests/test_crash.py",
})


def unit_of(nodeid: str) -> str:
    """The work unit a test belongs to: its module, or the test itself in a module of `ONE_BY_ONE`."""
    module = nodeid.split("::", 1)[0]
    return nodeid if module in ONE_BY_ONE else module


def recorded_seconds() -> dict[str, float]:
    try:
        return {str(k): float(v) for k, v in json.loads(DURATIONS.read_text()).items()}
    except (OSError, ValueError, AttributeError):
        return {}


class LongestFirst(LoadScopeScheduling):
    """xdist's scope scheduling with `unit_of` as the scope, handing out the longest unit left first."""

    def __init__(self, config, log=None):
        super().__init__(config, log)
        self.seconds = recorded_seconds()
        self.typical = statistics.median(self.seconds.values()) if self.seconds else 1.0

    def _split_scope(self, nodeid: str) -> str:
        return unit_of(nodeid)

    def _assign_work_unit(self, node) -> None:
        longest = max(self.workqueue, key=lambda unit: self.seconds.get(unit, self.typical))
        self.workqueue.move_to_end(longest, last=False)
        super()._assign_work_unit(node)

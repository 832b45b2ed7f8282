"""`memwb replay` with phase markers, for the kill -9 test: a real process that says where it is.

Each marked phase prints `PHASE <name>` on stdout at the point where a crash hurts most and then pauses
there, so the test's kill lands inside it: MEMWB_CRASH_AT=<name>:<n> holds the process at the n-th marker of
that phase only (the others pass at full speed), else every marker pauses MEMWB_CRASH_PAUSE seconds:
- ingest: a turn's records are written into the open transaction, not yet committed;
- diagnosis: a consolidation run is diagnosing the buffer (its run is being made);
- apply: a run's edits are executed, its commit not yet made.
Everything else is the real command line (`engine.cli.main`).
"""
from __future__ import annotations

import os
import sys
import time
from collections import Counter

from engine.cli import main
from engine.core.oplog import OpKind
from engine.engines import process_classes
from engine.store.log_store import Store

PAUSE = float(os.environ.get("MEMWB_CRASH_PAUSE", "0.3"))
AT = os.environ.get("MEMWB_CRASH_AT", "")
HOLD = 120.0            # seconds held at MEMWB_CRASH_AT: far longer than the test takes to send its kill
_seen: Counter = Counter()


def mark(name: str) -> None:
    print(f"PHASE {name}", flush=True)
    _seen[name] += 1
    if not AT:
        time.sleep(PAUSE)
    elif AT == f"{name}:{_seen[name]}":
        time.sleep(HOLD)


def patch() -> None:
    commit = Store.commit

    def marked_commit(self, ops, state):
        out = commit(self, ops, state)
        if any(op.kind == OpKind.TURN_INGESTED for op in ops):
            mark("ingest")
        return out

    Store.commit = marked_commit
    for cls in process_classes():
        if "diagnose" in vars(cls):
            cls.diagnose = _before(cls.diagnose, "diagnosis")
        if "execute" in vars(cls):
            cls.execute = _after(cls.execute, "apply")


def _before(method, name):
    def marked(self, *args, **kwargs):
        mark(name)
        return method(self, *args, **kwargs)
    return marked


def _after(method, name):
    def marked(self, *args, **kwargs):
        out = method(self, *args, **kwargs)
        mark(name)
        return out
    return marked


if __name__ == "__main__":
    patch()
    sys.exit(main(sys.argv[1:]))

"""`memwb replay` with phase markers, for the kill -9 test: a real process that says where it is.

Each marked phase prints `PHASE <name>` on stdout and then pauses (MEMWB_CRASH_PAUSE seconds) at the
point where a crash hurts most, so the test's kill lands inside it:
- ingest: a turn's records are written into the open transaction, not yet committed;
- diagnosis: a consolidation run is diagnosing the buffer (its run is being made);
- apply: a run's edits are executed, its commit not yet made.
Everything else is the real command line (`engine.cli.main`).
"""
from __future__ import annotations

import os
import sys
import time

from engine.cli import main
from engine.core.oplog import OpKind
from engine.engines import process_classes
from engine.store.log_store import Store

PAUSE = float(os.environ.get("MEMWB_CRASH_PAUSE", "0.3"))


def mark(name: str) -> None:
    print(f"PHASE {name}", flush=True)
    time.sleep(PAUSE)


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

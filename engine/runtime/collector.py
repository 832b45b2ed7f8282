"""The pace of Python's cyclic garbage collector during batch work: a replay, a benchmark task.

Each ingested turn allocates many small containers (records, op payloads, score dicts) that live for a turn or
two. At Python's default thresholds (700, 10, 10) a new container is examined after 700 allocations, so many of
them are still alive then and are promoted, and once enough promoted ones pile up the oldest generation is
collected again, which walks every object an engine holds. A warm dev-8 `memwb bench` of allmem and memloom,
serial, spent 17.3 s of 105 s in the collector, 14.7 s of it in 65 full collections; with the youngest
generation examined every 10,000 allocations, 5.3 s (4 full collections). Reference counting frees acyclic
objects either way: a larger young generation only lets cyclic garbage wait a little longer.

The batch ends with one full collection. Without it, what the batch left in the young generations reached the
oldest one over the next queries: the first 300 queries after building MemLoom's 111,860 units ran 10 full
collections and took 5.6-6.3 ms p50, the next rounds none and 3.0-4.0 ms (scripts/bench_retrieval.py
--rounds, 7 Dec)."""
from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

YOUNG_THRESHOLD = 10_000      # allocations between collections of the youngest generation (Python's default: 700)

_lock = threading.Lock()
_holders = 0
_saved: tuple[int, ...] = ()


@contextmanager
def batch_pace() -> Iterator[None]:
    """Collect the youngest generation every `YOUNG_THRESHOLD` allocations while inside (never more often than
    the thresholds in force), and put back the thresholds found once the last of nested or concurrent holders
    leaves: a replay inside a benchmark task, or two sessions replaying in one server."""
    global _holders, _saved
    with _lock:
        if _holders == 0:
            _saved = gc.get_threshold()
            gc.set_threshold(max(YOUNG_THRESHOLD, _saved[0]), *_saved[1:])
        _holders += 1
    try:
        yield
    finally:
        with _lock:
            _holders -= 1
            if _holders == 0:
                gc.set_threshold(*_saved)
                gc.collect()

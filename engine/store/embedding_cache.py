"""The workspace's embedding cache: vectors by model and content hash, shared by every session and process.

A second replay of any data, into any session, reads its vectors here instead
of running the model. Several processes may read and write the file at once
(SQLite in WAL mode, `INSERT OR IGNORE`, a short busy timeout). The cache is
only an optimisation: a read that fails is a miss and a write that fails is
dropped, so it can never fail an ingest.
"""
from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np

from engine.store.workspace import embedding_cache_path

BUSY_TIMEOUT_S = 0.5     # wait this long for another writer, then give up on this write (a later miss re-encodes)
_CHUNK = 500             # keys per SELECT (SQLite's bound-parameter limit is 999 on old builds)


class SharedEmbeddingCache:
    """`EmbeddingCache` over one SQLite file; a connection per call, so any thread of any process may use it."""

    def __init__(self, path: str | Path | None = None):
        self.path = Path(path) if path is not None else embedding_cache_path()
        self.failed_writes = 0
        self._ready = False

    def _connect(self) -> sqlite3.Connection:
        if not self._ready:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_S, isolation_level=None)
        if not self._ready:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("CREATE TABLE IF NOT EXISTS embeddings (key TEXT PRIMARY KEY, dim INTEGER NOT NULL, "
                         "vector BLOB NOT NULL)")
            self._ready = True
        return conn

    def get_embeddings(self, keys: list[str]) -> dict[str, np.ndarray]:
        found: dict[str, np.ndarray] = {}
        try:
            conn = self._connect()
            try:
                for start in range(0, len(keys), _CHUNK):
                    chunk = keys[start:start + _CHUNK]
                    rows = conn.execute(f"SELECT key, vector FROM embeddings WHERE key IN "
                                        f"({','.join('?' * len(chunk))})", chunk)
                    found.update((k, np.frombuffer(v, dtype=np.float32).copy()) for k, v in rows)
            finally:
                conn.close()
        except sqlite3.Error:
            return found            # unreadable or busy: what was read so far, the rest are misses
        return found

    def put_embeddings(self, vectors: dict[str, np.ndarray]) -> None:
        if not vectors:
            return
        rows = [(k, int(v.shape[0]), np.asarray(v, dtype=np.float32).tobytes()) for k, v in vectors.items()]
        try:
            conn = self._connect()
            try:
                with conn:
                    conn.execute("BEGIN IMMEDIATE")
                    conn.executemany("INSERT OR IGNORE INTO embeddings (key, dim, vector) VALUES (?, ?, ?)", rows)
            finally:
                conn.close()
        except sqlite3.Error:
            self.failed_writes += 1

    def __len__(self) -> int:
        try:
            conn = self._connect()
            try:
                return conn.execute("SELECT COUNT(*) FROM embeddings").fetchone()[0]
            finally:
                conn.close()
        except sqlite3.Error:
            return 0

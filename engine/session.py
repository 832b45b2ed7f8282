"""Open a memory session: a database file plus the engine, embedder and LLM it was made with.

The CLI and the workbench both start here, so a database written by one opens
identically in the other: engine name, settings and LLM backend live in the
store's meta table.
"""
from __future__ import annotations

from pathlib import Path

from engine.allmem import AllMemEngine, AllMemSettings
from engine.embedder import Embedder
from engine.llm import LLM, make_backend
from engine.oplog import OpKind
from engine.store import Store

ENGINES = {"allmem": (AllMemEngine, AllMemSettings)}
LLM_BACKENDS = ("offline", "openai", "recorded")


class SessionError(Exception):
    pass


def llm_for(name: str, embedder: Embedder, store: Store | None = None, records: str | None = None) -> LLM:
    """Build the LLM client; `recorded` replays the calls stored in `records` (a database or JSONL)."""
    if name == "offline":
        return LLM(make_backend("offline", embedder=embedder))
    if name == "openai":
        return LLM(make_backend("openai"))
    if name == "recorded":
        source = records or (store.url if store else None)
        if source is None:
            raise SessionError("the recorded backend needs a source of recorded calls (--records)")
        if str(source).endswith(".jsonl"):
            return LLM(make_backend("recorded", path=source))
        calls = [op.payload for op in Store(source).ops(kinds=[OpKind.LLM_CALL])]
        return LLM(make_backend("recorded", calls=calls))
    raise SessionError(f"unknown LLM backend {name!r}; choose one of {', '.join(LLM_BACKENDS)}")


def open_session(db: str | Path, engine: str = "allmem", llm: str | None = None, settings: dict | None = None,
                 create: bool = True, records: str | None = None, embedder: Embedder | None = None,
                 **meta) -> AllMemEngine:
    """Open (or create) the database and return its engine, ready to ingest or retrieve."""
    path = Path(db)
    if not create and "://" not in str(db) and not path.exists():
        raise SessionError(f"no memory database at {db}; run `memwb replay ... --db {db}` first")
    store = Store(db)
    stored = store.meta()
    name = stored.get("engine", engine)
    if name not in ENGINES:
        raise SessionError(f"unknown engine {name!r}; known engines: {sorted(ENGINES)}")
    engine_cls, settings_cls = ENGINES[name]
    if stored and settings and stored.get("settings") not in (None, settings_cls.from_dict(settings).to_dict()):
        raise SessionError(f"{db} was made with other settings; use a new --db for a different configuration")
    conf = settings_cls.from_dict(stored.get("settings") or settings or {})
    backend = llm or stored.get("llm") or "offline"
    if not stored:
        store.set_meta(engine=name, settings=conf.to_dict(), llm=backend, **meta)
    embedder = embedder or Embedder()
    embedder.cache = store          # vectors persist in the session's own database (and follow a branch)
    client = llm_for(backend, embedder, store, records)
    return engine_cls(store, client, embedder, conf)

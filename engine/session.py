"""Open a memory session: a database file plus the engine, embedder and LLM it was made with.

The CLI and the workbench both start here, so a database written by one opens
identically in the other: engine name, settings, LLM backend and sentence encoder
live in the store's meta table. A session reopened later embeds with the encoder
that made it, whatever MEMWB_ENCODER says then, so its vectors stay one family.
"""
from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path

from engine.core.conversation import Conversation
from engine.core.errors import WorkbenchError
from engine.core.oplog import OpKind
from engine.engines import UnknownEngine, engine_class
from engine.llm import LLM, DeferredBackend, make_backend
from engine.llm.embedder import ENCODERS, VECTOR_FAMILY, Embedder
from engine.runtime.engine import BaseEngine
from engine.runtime.replay import Schedule, prefetch_turns, replay
from engine.store.log_store import Store

DEFAULT_ENGINE = "allmem"
LLM_BACKENDS = ("offline", "openai", "recorded")


class SessionError(WorkbenchError):
    pass


def llm_for(name: str, embedder: Embedder, store: Store | None = None, records: str | None = None) -> LLM:
    """Build the LLM client; `recorded` replays the calls stored in `records` (a database or JSONL)."""
    if name == "offline":
        return LLM(make_backend("offline", embedder=embedder))
    if name == "openai":
        return LLM(DeferredBackend("openai", lambda: make_backend("openai")))     # the key only when a call is made
    if name == "recorded":
        source = records or (store.url if store else None)
        if source is None:
            raise SessionError("the recorded backend needs a source of recorded calls (--records)")
        if str(source).endswith(".jsonl"):
            return LLM(make_backend("recorded", path=source))
        calls = [op.payload for op in Store(source).ops(kinds=[OpKind.LLM_CALL])]
        return LLM(make_backend("recorded", calls=calls))
    raise SessionError(f"unknown LLM backend {name!r}; choose one of {', '.join(LLM_BACKENDS)}")


def open_session(db: str | Path, engine: str | None = None, llm: str | None = None, settings: dict | None = None,
                 create: bool = True, records: str | None = None, embedder: Embedder | None = None,
                 **meta) -> BaseEngine:
    """Open (or create) the database and return its engine, ready to ingest or retrieve."""
    path = Path(db)
    if not create and "://" not in str(db) and not path.exists():
        raise SessionError(f"no memory database at {db}; run `memwb replay ... --db {db}` first")
    store = Store(db)
    stored = store.meta()
    if not create and not stored:
        raise SessionError(f"no memory in {store.location}; run `memwb replay ... --db DB` into it first")
    name = stored.get("engine") or engine or DEFAULT_ENGINE
    if engine and engine != name:
        raise SessionError(f"{store.location} holds a {name!r} memory, not {engine!r}; use a new --db for "
                           "another engine")
    try:
        engine_cls = engine_class(name)
    except UnknownEngine as exc:
        raise SessionError(str(exc)) from None
    settings_cls = engine_cls.Settings
    if stored and settings and stored.get("settings") not in (None, settings_cls.from_dict(settings).to_dict()):
        raise SessionError(f"{store.location} was made with other settings; use a new --db for a different "
                           "configuration")
    conf = settings_cls.from_dict(stored.get("settings") or settings or {})
    backend = llm or stored.get("llm") or "offline"
    embedder = embedder or Embedder()
    made_by = stored.get("encoder") or embedder.encoder         # sessions older than the record: the one asked for
    if made_by not in ENCODERS:
        raise SessionError(f"{store.location} was embedded by the encoder {made_by!r}, which this version does "
                           f"not have (it has {', '.join(ENCODERS)})")
    if not stored:
        store.set_meta(engine=name, settings=conf.to_dict(), llm=backend, encoder=made_by, **meta)
    embedder = embedder.sibling(made_by if VECTOR_FAMILY[made_by] != VECTOR_FAMILY[embedder.encoder] else None)
    embedder.cache = store          # vectors persist in the session's own database (and follow a branch)
    client = llm_for(backend, embedder, store, records)
    return engine_cls(store, client, embedder, conf)


def scratch_engine(name: str, conversation: Conversation, embedder: Embedder, settings: dict | None = None,
                   schedule: str = "every-3-sessions",
                   progress: Callable[[str, int, int], None] | None = None) -> BaseEngine:
    """An engine of `name` holding `conversation` in a throwaway database: the peer of a side-by-side view.

    `workbench.replay.progress(phase, done, total)` hears of each batch of texts embedded ("embedding") and each turn
    ingested ("ingesting"), since building a peer of a long conversation takes seconds."""
    path = Path(tempfile.mkdtemp(prefix="memwb-scratch-")) / f"{name}.sqlite"
    engine = open_session(path, engine=name, settings=settings, embedder=embedder)
    prefetch_turns(engine, conversation.turns,
                   (lambda done, total: progress("embedding", done, total)) if progress else None)
    replay(engine, conversation, Schedule.parse(schedule),
           progress=(lambda done, total: progress("ingesting", done, total)) if progress else None)
    return engine

"""mem0 itself, built offline for one engine: its FAISS store, the workbench's MiniLM as its embedder, its
SQLite history db, telemetry off, nothing written outside a private temporary directory.

What had to be configured (mem0ai 2.2.1):
- telemetry: `MEM0_TELEMETRY=False` before mem0 is imported (it is read at import; posthog otherwise sends
  events and mem0 fetches a notice config from GitHub); `MEM0_DIR` points mem0's own config dir at a temporary
  directory instead of ~/.mem0.
- embedder and LLM: mem0's configs accept only its listed providers, so the workbench's are registered with
  mem0's factories (`LlmFactory.register_provider`, `EmbedderFactory.provider_to_class`) under "memwb" and the
  two configs are built with pydantic's `model_construct`, which skips the closed provider check.
- spaCy: where spaCy is installed without its English model, mem0's first add() or search() tries to download
  en_core_web_sm from GitHub (mem0/utils/spacy_models.py). The adapter switches mem0's spaCy use off (its loader's
  "load failed" flags), as mem0 runs without its [nlp] extra: no entity boosts, no lemmatised BM25 (the FAISS
  store has no keyword search anyway), and the same results whether or not spaCy is installed.
- ids: mem0 names a new memory `uuid.uuid4()`; the adapter hands it the id it plans (a uuid5 of the node id),
  so the same replay gives the same ids and the store can be rebuilt from the log with the same names.

The workbench log is the truth and mem0's store follows it: `Mem0Library.follow(state)` rebuilds mem0's store
and history from the state whenever they differ (a reopened session, an undo, a time-travel view), by
replaying each memory's versions through mem0's own add / update / delete.
"""
from __future__ import annotations

import logging
import os
import tempfile
import uuid
from contextlib import contextmanager
from typing import Iterator

os.environ["MEM0_TELEMETRY"] = "False"
os.environ.setdefault("MEM0_DIR", tempfile.mkdtemp(prefix="memwb-mem0-home-"))

import mem0.memory.main as mem0_main  # noqa: E402  (after the environment it reads at import)
import mem0.memory.telemetry as mem0_telemetry  # noqa: E402
import mem0.utils.spacy_models as mem0_spacy  # noqa: E402
from mem0 import Memory  # noqa: E402
from mem0.configs.base import MemoryConfig  # noqa: E402
from mem0.configs.llms.base import BaseLlmConfig  # noqa: E402
from mem0.embeddings.base import EmbeddingBase  # noqa: E402
from mem0.embeddings.configs import EmbedderConfig  # noqa: E402
from mem0.llms.base import LLMBase  # noqa: E402
from mem0.llms.configs import LlmConfig  # noqa: E402
from mem0.utils.factory import EmbedderFactory, LlmFactory  # noqa: E402

from engine.core.errors import WorkbenchError  # noqa: E402
from engine.core.state import MemoryState  # noqa: E402
from memwb_mem0.schema import Kind, Life  # noqa: E402

mem0_telemetry.MEM0_TELEMETRY = mem0_main.MEM0_TELEMETRY = False     # also when mem0 was imported before us
mem0_spacy._load_failed_full = mem0_spacy._load_failed_lemma = True    # no spaCy download, no spaCy at all


def _not_the_faiss_notice(record: logging.LogRecord) -> bool:
    """mem0 warns at every Memory() that FAISS has no keyword search: known and chosen here, so not repeated."""
    return "does not support keyword search" not in record.getMessage()


logging.getLogger(mem0_main.__name__).addFilter(_not_the_faiss_notice)
USER = "memwb"                      # the one mem0 user every memory belongs to
NAMESPACE = uuid.UUID("6d656d77-622d-6d65-6d30-000000000000")


def mem0_id(first_node: int) -> str:
    """The mem0 id of the memory whose first version is node `first_node`."""
    return str(uuid.uuid5(NAMESPACE, f"u{first_node}"))


class WorkbenchEmbedding(EmbeddingBase):
    """mem0's embedder slot holding the workbench's all-MiniLM-L6-v2 (`engine.llm.embedder.Embedder`, whose
    vectors are cached in the session's database); the Embedder object comes in mem0's config as `model`."""

    def embed(self, text, memory_action=None):
        return self.config.model.embed_one(text).tolist()

    def embed_batch(self, texts, memory_action="add"):
        return [v.tolist() for v in self.config.model.embed(list(texts))] if texts else []


class WorkbenchOnlyLLM(LLMBase):
    """mem0's LLM slot. The adapter asks mem0's prompts through the workbench (`memwb_mem0.roles`), never through
    mem0's own `add(infer=True)`, so a call that reaches here is a mistake: it says so instead of going online."""

    def generate_response(self, messages, response_format=None, tools=None, tool_choice="auto", **kwargs):
        raise WorkbenchError("the mem0 adapter asks mem0's prompts through the workbench's LLM path; mem0's own "
                             "LLM slot is not connected (use add(..., infer=False))")


LlmFactory.register_provider("memwb", f"{__name__}.WorkbenchOnlyLLM", BaseLlmConfig)
EmbedderFactory.provider_to_class["memwb"] = f"{__name__}.WorkbenchEmbedding"


class _PlannedIds:
    """Stands in for the `uuid` module inside mem0's main module: `uuid4()` gives the id queued in `planned`, and
    a fresh random one for anything else mem0 names (its entity store, which spaCy would fill)."""

    def __init__(self):
        self.planned: list[str] = []

    def uuid4(self):
        return uuid.UUID(self.planned.pop(0)) if self.planned else uuid.uuid4()

    def __getattr__(self, name):
        return getattr(uuid, name)


_IDS = _PlannedIds()
mem0_main.uuid = _IDS


@contextmanager
def planned_id(memory_id: str) -> Iterator[None]:
    _IDS.planned[:] = [memory_id]
    try:
        yield
    finally:
        _IDS.planned.clear()


def fingerprint(state: MemoryState) -> tuple:
    """What mem0's store must hold for `state`: every memory version with its id, text and status."""
    return tuple((n.id, n.attrs.get("mem0_id"), n.summary, n.status) for n in sorted(
        (n for n in state.nodes.values() if n.kind == Kind.MEMORY), key=lambda n: n.id))


def _kept_in_memory() -> None:
    """mem0's FAISS store writes its whole index and docstore to disk after every insert, update and delete; here
    the store is rebuilt from the workbench log, never reloaded, so it stays in memory."""


class Mem0Library:
    """One mem0 `Memory` kept in step with a workbench state: its FAISS store (in a private temporary directory,
    kept in memory) and its history db (SQLite in memory, mem0's own default for its history manager)."""

    def __init__(self, embedder):
        self.embedder = embedder
        self.memory: Memory | None = None
        self.follows: tuple | None = None
        self._dir: tempfile.TemporaryDirectory | None = None

    def _fresh(self) -> Memory:
        self._dir = tempfile.TemporaryDirectory(prefix="memwb-mem0-")
        dims = int(self.embedder.embed_one("dimension probe").shape[0])
        config = MemoryConfig(
            vector_store={"provider": "faiss", "config": {"path": os.path.join(self._dir.name, "faiss"),
                                                          "collection_name": "memwb", "distance_strategy": "cosine",
                                                          "embedding_model_dims": dims}},
            embedder=EmbedderConfig.model_construct(provider="memwb", config={"model": self.embedder,
                                                                              "embedding_dims": dims}),
            llm=LlmConfig.model_construct(provider="memwb", config={"model": "workbench"}),
            history_db_path=":memory:")
        memory = Memory(config)
        memory.vector_store._save = _kept_in_memory
        return memory

    def follow(self, state: MemoryState) -> Memory:
        """mem0 holding exactly `state`'s memories and their history (rebuilt only when it does not)."""
        wanted = fingerprint(state)
        if self.memory is None or self.follows != wanted:
            self.memory = self._fresh()
            memories = sorted((n for n in state.nodes.values() if n.kind == Kind.MEMORY), key=lambda n: n.id)
            for node in memories:
                if node.attrs.get("version", 1) == 1:
                    self.add(node.attrs["mem0_id"], node.summary)
                else:
                    self.update(node.attrs["mem0_id"], node.summary)
            for node in memories:
                if node.status == Life.DELETED:
                    self.delete(node.attrs["mem0_id"])
            self.follows = wanted
        return self.memory

    def moved_to(self, state: MemoryState) -> None:
        """The state that mem0's store now holds, after the adapter changed both (a run's records)."""
        self.follows = fingerprint(state)

    # -- mem0's own writes ---------------------------------------------------------------------------------
    def add(self, memory_id: str, text: str) -> dict:
        with planned_id(memory_id):
            made = self.memory.add(text, user_id=USER, infer=False)["results"]
        if [m["id"] for m in made] != [memory_id]:
            raise WorkbenchError(f"mem0 stored {made!r} for a memory planned as {memory_id}")
        return self.last(memory_id)

    def update(self, memory_id: str, text: str) -> dict:
        self.memory.update(memory_id, text)
        return self.last(memory_id)

    def delete(self, memory_id: str) -> dict:
        self.memory.delete(memory_id)
        return self.last(memory_id)

    def last(self, memory_id: str) -> dict:
        """mem0's newest history row of the memory: its event, old and new text."""
        rows = self.memory.history(memory_id)
        row = rows[-1] if rows else {}
        return {"event": row.get("event"), "old_memory": row.get("old_memory"), "new_memory": row.get("new_memory"),
                "is_deleted": bool(row.get("is_deleted"))}

    def history(self, memory_id: str) -> list[dict]:
        return [{"event": r.get("event"), "old_memory": r.get("old_memory"), "new_memory": r.get("new_memory")}
                for r in self.memory.history(memory_id)]

    def search(self, query: str, limit: int, threshold: float) -> list[dict]:
        return self.memory.search(query, filters={"user_id": USER}, top_k=limit, threshold=threshold)["results"]

    def similar(self, text: str, limit: int) -> list[tuple[str, str]]:
        """mem0's vector-store search for `text` (what mem0 1.x's add() showed the model per fact): (id, text)."""
        vector = self.memory.embedding_model.embed(text, "search")
        found = self.memory.vector_store.search(query=text, vectors=vector, top_k=limit, filters={"user_id": USER})
        return [(m.id, m.payload.get("data", "")) for m in found]

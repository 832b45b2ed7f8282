"""mem0 as a workbench engine: each session is given to mem0's add(), its decisions are reviewed, and retrieval
is mem0's own search.

Ingest stores the turn as heard and queues it for the `mem0` process (`memwb_mem0.process`); the session's turns
are given to mem0 together when the next session opens (or the conversation ends), the gate deciding, or
earlier by a person who runs the process on the Consolidation page and decides each proposal. Retrieval asks mem0's `search` (its FAISS store over the current memories) and gives each result the
chain of versions mem0's history holds and the turns each version came from. The workbench log is the truth:
mem0's store is rebuilt from it whenever they differ (`memwb_mem0.library`), so undo and time travel need no
code here.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Iterable

import numpy as np
from engine.core.conversation import Turn
from engine.core.node import Node
from engine.core.schema import EngineSettings, setting
from engine.core.tx import Tx
from engine.retrieval.explain import Drop, Placement, Signals, place_each
from engine.retrieval.relevance import ZReference
from engine.retrieval.result import Hop, RetrievalResult, RetrievedUnit
from engine.runtime.engine import BaseEngine, writes
from engine.runtime.reports import IngestReport
from memwb_mem0 import roles
from memwb_mem0.library import Mem0Library
from memwb_mem0.process import Mem0Process
from memwb_mem0.schema import PROCESS, SCHEMA, Kind, Life, Rel

roles.register()
SEARCH = SCHEMA.stages[0].key


@dataclass
class Mem0Settings(EngineSettings):
    final_k: int = setting(10, "memories returned (mem0's search top_k)", minimum=1, maximum=200, group="retrieval")
    candidates: int = setting(100, "memories mem0's search is asked for, the ranking shown (the sources of all "
                                   "of them are ranked)", minimum=1, maximum=1000, group="retrieval")
    threshold: float = setting(0.1, "mem0's search threshold: the least score a memory is returned with (mem0's "
                                    "default 0.1)", minimum=0.0, maximum=1.0, step=0.05, group="retrieval")
    search_k: int = setting(5, "memories mem0's vector store finds per extracted fact and shows the update "
                               "decision (mem0 1.x: 5)", minimum=1, maximum=20, group="decision")
    ablations: list = setting(help="no ablations: mem0 is run as it is", factory=list, choices={}, group="ablations")


class Mem0Engine(BaseEngine):
    name = "mem0"
    schema = SCHEMA
    Settings = Mem0Settings

    def make_processes(self) -> dict[str, Mem0Process]:
        return {PROCESS: Mem0Process(self, SCHEMA.processes[0])}

    def embed_text(self, node: Node) -> str:
        return node.summary

    def lexical_text(self, node: Node) -> str | None:
        return node.summary

    def library(self) -> Mem0Library:
        """mem0 holding this state's memories (built on first use, rebuilt when the state moved elsewhere)."""
        if getattr(self, "_library", None) is None:
            self._library = Mem0Library(self.embedder)
        self._library.follow(self.state)
        return self._library

    def current_memories(self) -> dict[str, int]:
        """mem0 id -> the node of its current version."""
        return {n.attrs["mem0_id"]: n.id for n in self.state.nodes.values()
                if n.kind == Kind.MEMORY and n.status == Life.CURRENT}

    @writes
    def ingest(self, turn: Turn) -> IngestReport:
        """Hear the turn: it waits for mem0 with the rest of its session. When it opens a new session, the session
        that ended is given to mem0 first, as one add() the gate decides (unless a person's review is open: then
        it waits for the next add)."""
        self.check_new_turn(turn)
        waiting = [self.state.nodes[u] for u in sorted(self.state.buffer(PROCESS))]
        added = self._add_waiting() if waiting and waiting[-1].session != turn.session else None
        turn_no = self.state.turn + 1
        node = self.turn_node(turn, Kind.TURN, Life.HEARD)
        tx = Tx(self.state, turn=turn_no, actor="online", isolated=False)
        tx.emit(self.ingested(turn, mem0_add=added))
        tx.create_node(node)
        tx.push_buffer(PROCESS, [(node.id, [])])
        ops = self.commit(tx.ops)
        return IngestReport(turn_id=turn.id, unit_id=node.id, anchors=[], edges=[],
                            buffer_size=len(self.state.buffer(PROCESS)), ops=ops, created=[node.id],
                            details={"mem0_add": added})

    def _add_waiting(self) -> str | None:
        """One mem0 add() of the turns waiting, the gate deciding; its run id, or None while a review is open."""
        if self.open_run():
            return None
        return self.process(PROCESS).run().run_id

    @writes
    def end_of_stream(self) -> list:
        """The conversation ended, so did its last session: mem0 is given it, then the scheduled processes run."""
        if self.state.buffer(PROCESS):
            self._add_waiting()
        return self.run_scheduled()

    # -- retrieval: mem0's search, with the versions and turns behind each result ---------------------------
    def retrieve(self, query: str, k: int | None = None) -> RetrievalResult:
        """mem0's search scores the memories (threshold 0: the whole ranking, whose sources are ranked); the
        returned top is its top `final_k` at or above mem0's `threshold`, as mem0's own search returns it."""
        t0 = time.perf_counter()
        found = self._search(query, self.settings.candidates, 0.0)
        candidates = []
        expansion: list[dict] = []
        reached = {uid for uid, _ in found}
        for uid, score in found:
            chain = provenance(self.state, uid)
            depth = {uid: 0}
            for h in chain:
                depth[h.dst] = depth[h.src] + 1
                if h.dst not in reached:
                    reached.add(h.dst)
                    expansion.append({"id": h.dst, "parent": h.src, "type": h.type, "hop": depth[h.dst]})
            u = self.state.nodes[uid]
            candidates.append(RetrievedUnit(id=uid, visible=u.visible, score=score, dense=score, lexical=0.0,
                                            anchor=uid, hop=0, path=[], source_ids=list(u.source_ids), time=u.time,
                                            raw=u.summary, kind=u.kind, status=u.status, provenance=chain))
        returned = [uid for uid, score in found[: self.settings.final_k] if score >= self.settings.threshold]
        elapsed = (time.perf_counter() - t0) * 1e3
        return RetrievalResult.ranked(query, found[: len(returned)], expansion, candidates, len(returned), k,
                                      {f"{SEARCH}_ms": elapsed, "total_ms": elapsed})

    def _search(self, query: str, limit: int, threshold: float) -> list[tuple[int, float]]:
        """mem0's ranking as (node id of the current version, mem0's score), ties by node id."""
        current = self.current_memories()
        if not current:
            return []
        found = [(current[r["id"]], round(float(r["score"]), 6))
                 for r in self.library().search(query, limit, threshold) if r["id"] in current]
        return sorted(found, key=lambda f: (-f[1], f[0]))

    def explain(self, res: RetrievalResult, uids: Iterable[int]) -> dict[int, Placement]:
        state = self.state
        scored = {uid: (rank, score) for rank, (uid, score)
                  in enumerate(self._search(res.query, max(len(state.nodes), 1), 0.0), 1)}
        reference = _reference([score for _, score in scored.values()])

        def dropped(node: Node) -> Placement:
            if node.kind == Kind.TURN:
                made = sorted(state.inc(node.id, Rel.DERIVED_FROM))
                return Placement(node.id, None, False, None, Drop.FILTERED, SEARCH,
                                 "mem0 searches its memories, not turns; "
                                 + (f"this turn reaches an answer through {', '.join(f'u{m}' for m in made)}"
                                    if made else "mem0 took no memory from this turn"))
            if node.status == Life.SUPERSEDED:
                newer = sorted(state.inc(node.id, Rel.VERSION))
                return Placement(node.id, None, False, None, Drop.OFF_SURFACE, SEARCH,
                                 f"mem0 updated this memory (now {', '.join(f'u{m}' for m in newer)}); its history "
                                 "keeps this text, its store does not")
            if node.status == Life.DELETED:
                return Placement(node.id, None, False, None, Drop.OFF_SURFACE, SEARCH,
                                 "mem0 deleted this memory; its history keeps it, its store does not")
            if node.id not in scored:
                return Placement(node.id, None, False, None, Drop.BELOW_SEED_CUT, SEARCH,
                                 "mem0's score (its cosine) is not above 0: its search leaves it out")
            rank, score = scored[node.id]
            return Placement(node.id, None, False, _signals(score, reference), Drop.CANDIDATE_CAP, SEARCH,
                             f"mem0 rank {rank} > the {self.settings.candidates} memories asked for")

        return place_each(state, res, uids, first_stage=SEARCH, ranking_stage=SEARCH, dropped=dropped,
                          ranked=lambda r: _signals(r.score, reference))


def _reference(scores: list[float]) -> ZReference:
    """The memories mem0 scored for the query (every current one, all on its surface) and their scores' spread."""
    values = np.asarray(scores or [0.0])
    return ZReference(nodes=len(scores), off_surface=0, dense_mean=float(values.mean()),
                      dense_sd=float(values.std()) or 1.0, lexical_mean=0.0, lexical_sd=1.0)


def _signals(score: float, ref: ZReference) -> Signals:
    """mem0's score is its vector store's cosine, which ranks alone: no lexical part, nothing fused."""
    return Signals(dense=score, lexical=0.0, z_dense=(score - ref.dense_mean) / ref.dense_sd, z_lexical=0.0,
                   weight=0.0, penalty=0.0, relevance=score, score=score, admitted=SEARCH, reference=ref)


def provenance(state, uid: int) -> list[Hop]:
    """A memory's versions and their turns: each version -> its turns, then -> the version it replaced."""
    hops: list[Hop] = []
    node = uid
    while node is not None:
        hops += [Hop(node, t, Rel.DERIVED_FROM) for t in sorted(state.out(node, Rel.DERIVED_FROM))]
        older = sorted(state.out(node, Rel.VERSION))
        if older:
            hops.append(Hop(node, older[0], Rel.VERSION))
        node = older[0] if older else None
    return hops

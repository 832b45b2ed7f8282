"""The All-Mem engine: online write, offline ATC, three-stage retrieval, over one store."""
from __future__ import annotations

from typing import Iterable

from engine.core.conversation import Turn
from engine.core.edge import Edge
from engine.core.node import Node
from engine.core.payloads import EdgeAdded
from engine.core.proposal import Proposal
from engine.core.text import strip_speaker
from engine.core.tx import Tx
from engine.engines.allmem import atc
from engine.engines.allmem.executor import Executor, make_plan
from engine.engines.allmem.explain import explain
from engine.engines.allmem.ranking import temporal_key, top_cap
from engine.engines.allmem.retrieval import retrieve
from engine.engines.allmem.schema import SCHEMA, EdgeType, Kind, Op
from engine.engines.allmem.settings import AllMemSettings
from engine.retrieval.explain import Placement
from engine.retrieval.result import RetrievalResult
from engine.runtime.engine import BaseEngine, writes
from engine.runtime.process import BaseProcess
from engine.runtime.reports import IngestReport

ATC_BUFFER = "atc"


class ATC(BaseProcess):
    """Agentic Topology Consolidation over the `atc` buffer (App. C)."""

    def diagnose(self, run_id: str, manual: bool) -> list[Proposal]:
        return atc.diagnose(self.engine, run_id, manual)

    def plan(self, p: Proposal):
        return make_plan(self.engine, p)

    def order_key(self, p: Proposal) -> tuple:
        return (Op.ORDER.index(p.op), p.targets, p.id)

    def execute(self, tx: Tx, accepted: list[Proposal]) -> dict:
        ex = Executor(self.engine, tx)
        for p in accepted:
            ex.run(tx.state.proposals[p.id], tx.state.proposals[p.id].decided_by or "gate")
        return {"created": ex.created, "archived": ex.archived, "rewired": ex.rewired}


class AllMemEngine(BaseEngine):
    name = "allmem"
    schema = SCHEMA
    Settings = AllMemSettings

    def make_processes(self) -> dict[str, BaseProcess]:
        return {"atc": ATC(self, SCHEMA.processes[0])}

    def embed_unit(self, unit: Node):
        return self.embed_node(unit)

    # -- online write ---------------------------------------------------------------
    def prefetch(self, turns: list[Turn]) -> None:
        """Embed what ingesting and diagnosing `turns` will need in large batches.

        Only an optimisation: every vector lands in the content-hash cache, so
        the per-turn calls that follow find it there instead of running the
        model one sentence at a time.
        """
        texts = [strip_speaker(t.raw)[1] for t in turns]
        for t in turns:
            foreseen = self.llm.foresee("descriptor", self.descriptor_payload(t))
            if foreseen is not None:
                texts.append(Node(0, t.raw, foreseen["summary"], foreseen["keywords"], t.time, Kind.TURN,
                                  []).embed_text)
        self.embedder.embed_ahead(texts)

    @staticmethod
    def descriptor_payload(turn: Turn) -> dict:
        """What the descriptor role is asked about a turn, at ingest and ahead of it."""
        return {"text": turn.raw, "speaker": turn.speaker, "time": turn.time}

    @writes
    def ingest(self, turn: Turn) -> IngestReport:
        s, state = self.settings, self.state
        self.check_new_turn(turn)
        turn_no = state.turn + 1
        call = self.llm.call("descriptor", self.descriptor_payload(turn))
        if call.ok:
            summary, keywords = call.data["summary"], list(dict.fromkeys(call.data["keywords"]))
        else:
            summary, keywords = turn.raw, []
        unit = Node(id=state.next_node_id, raw=turn.raw, summary=summary, keywords=keywords, time=turn.time,
                    kind=Kind.TURN, source_ids=[turn.id], speakers=[turn.speaker], session=turn.session,
                    status=SCHEMA.initial_status, created_turn=turn_no, made_by="online")
        z = self.embed_node(unit)
        anchors = self.index.search(z, s.write_anchors)
        tx = Tx(state, turn=turn_no, actor="online", isolated=False)
        tx.emit(self.ingested(turn, descriptor_ok=call.ok, descriptor_error=call.error_code))
        tx.create_node(unit)
        edges: list[Edge] = []
        prev = self._session_predecessor(turn.session, turn.time)
        if prev is not None:
            edges.append(Edge(unit.id, prev, EdgeType.TEMPORAL, "online", None, turn_no))
        semantic = [(a, c) for a, c in anchors if c >= s.semantic_min_cosine][: min(s.online_semantic_links,
                                                                                   s.cap_semantic)]
        for a, c in semantic:
            edges.append(Edge(unit.id, a, EdgeType.SEMANTIC, "online", round(c, 4), turn_no))
        for e in edges:
            tx.emit(EdgeAdded(edge=e.to_dict()))
        tx.push_buffer(ATC_BUFFER, [(unit.id, [a for a, _ in anchors])])
        ops = self.commit(tx.ops)
        return IngestReport(turn_id=turn.id, unit_id=unit.id, anchors=anchors, edges=edges,
                            buffer_size=len(state.buffer(ATC_BUFFER)), ops=ops, created=[unit.id])

    def _session_predecessor(self, session: str, t: str) -> int | None:
        """The latest earlier turn unit of the same session (Key_tau, cap 1)."""
        cands = [u.id for u in self.turns_of_session(session) if u.time <= t]
        best = top_cap(cands, self.settings.cap_temporal, lambda i: temporal_key(self.state.nodes[i]))
        return best[0] if best else None

    # -- retrieval --------------------------------------------------------------------------
    def retrieve(self, query: str, k: int | None = None) -> RetrievalResult:
        return retrieve(self, query, k_sources=k)

    def explain(self, res: RetrievalResult, uids: Iterable[int]) -> dict[int, Placement]:
        return explain(self, res, uids)

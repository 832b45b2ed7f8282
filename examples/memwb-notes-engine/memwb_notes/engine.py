"""The notes engine: ingest writes a note per turn and queues it for `tidy`; retrieval ranks the current ones."""
from __future__ import annotations

import time
from typing import Iterable

from engine.core.conversation import Turn
from engine.core.node import Node
from engine.core.tx import Tx
from engine.retrieval.explain import Drop, Placement, Signals, place_each
from engine.retrieval.relevance import Relevance
from engine.retrieval.result import RetrievalResult, RetrievedUnit
from engine.runtime.engine import BaseEngine, writes
from engine.runtime.reports import IngestReport

from memwb_notes.schema import CURRENT, NOTE, RANK, SCHEMA, TIDY, NotesSettings
from memwb_notes.tidy import Tidy


class NotesEngine(BaseEngine):
    name = "notes"
    schema = SCHEMA
    Settings = NotesSettings

    def make_processes(self):
        return {TIDY: Tidy(self, self.schema.process(TIDY))}

    def embed_text(self, node: Node) -> str:
        return node.raw

    @writes
    def ingest(self, turn: Turn) -> IngestReport:
        self.check_new_turn(turn)
        turn_no = self.state.turn + 1
        node = self.turn_node(turn, NOTE, CURRENT)
        tx = Tx(self.state, turn=turn_no, actor="online", isolated=False)
        tx.emit(self.ingested(turn))
        tx.create_node(node)
        tx.push_buffer(TIDY, [(node.id, [])])
        ops = self.commit(tx.ops)
        return IngestReport(turn_id=turn.id, unit_id=node.id, anchors=[], edges=[],
                            buffer_size=len(self.state.buffer(TIDY)), ops=ops, created=[node.id])

    def retrieve(self, query: str, k: int | None = None) -> RetrievalResult:
        t0 = time.perf_counter()
        rel = Relevance(self, query, 0.0)
        candidates = [self._result(uid, score, rel)
                      for uid, score in rel.ranked_surface(self.settings.candidates, decimals=6)]
        elapsed = (time.perf_counter() - t0) * 1e3
        return RetrievalResult.ranked(query, [(r.id, r.score) for r in candidates[: self.settings.final_k]], [],
                                      candidates, self.settings.final_k, k, {"rank_ms": elapsed, "total_ms": elapsed})

    def explain(self, res: RetrievalResult, uids: Iterable[int]) -> dict[int, Placement]:
        """A current note that is not a candidate fell below the cap; a superseded one is off the surface."""
        rel = Relevance(self, res.query, 0.0)
        full = {uid: rank for rank, (uid, _) in enumerate(rel.ranked_surface(None, decimals=6), 1)}

        def dropped(node: Node) -> Placement:
            t = rel.terms(node.id)
            if node.id not in full:
                return Placement(node.id, None, False, Signals(**t, score=t["relevance"]), Drop.OFF_SURFACE, RANK,
                                 f"{node.status}: retrieval searches the current surface only")
            return Placement(node.id, None, False, Signals(**t, score=t["relevance"]), Drop.CANDIDATE_CAP, RANK,
                             f"rank {full[node.id]} > the {self.settings.candidates} candidates kept")

        return place_each(self.state, res, uids, first_stage=RANK, ranking_stage=RANK, dropped=dropped,
                          ranked=lambda r: Signals(**rel.terms(r.id), score=r.score, admitted=RANK))

    def _result(self, uid: int, score: float, rel: Relevance) -> RetrievedUnit:
        u = self.state.nodes[uid]
        return RetrievedUnit(id=uid, visible=u.visible, score=round(score, 6), dense=round(rel.dense(uid), 6),
                             lexical=round(rel.lexical.get(uid, 0.0), 6), anchor=uid, hop=0, path=[],
                             source_ids=list(u.source_ids), time=u.time, raw=u.raw, kind=u.kind, status=u.status)

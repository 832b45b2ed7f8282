"""Naive and hybrid RAG: every raw turn stored as it came, ranked at query time, no structure at all.

Both embed the raw `speaker: text` turn with the same embedder the other
engines use. Naive ranks by dense cosine (ties by turn order); hybrid fuses
z(dense) with z(BM25) exactly as All-Mem's relevance does. They have no
offline process, so every page and command treats them as engines that
simply never consolidate.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Iterable

from engine.core.conversation import Turn
from engine.core.node import TURN_KIND, Node
from engine.core.schema import EngineSchema, EngineSettings, KindSpec, StageSpec, StatusSpec, setting
from engine.core.tx import Tx
from engine.retrieval.explain import Drop, Placement, Signals, place_each
from engine.retrieval.relevance import Relevance
from engine.retrieval.result import RetrievalResult, RetrievedUnit
from engine.runtime.engine import BaseEngine, writes
from engine.runtime.reports import IngestReport

STORED = "stored"
RANK = "rank"              # the one retrieval stage


def _schema(name: str, label: str, description: str, stage_help: str) -> EngineSchema:
    return EngineSchema(
        name=name, label=label, description=description,
        node_kinds=(KindSpec(TURN_KIND, "turn", "#4e79a7", "one dataset turn, raw"),),
        statuses=(StatusSpec(STORED, "stored", True, "every turn is searched"),),
        initial_status=STORED, transitions=(),
        stages=(StageSpec(RANK, "Ranking", "ranking", stage_help),),
    )


@dataclass
class NaiveSettings(EngineSettings):
    final_k: int = setting(16, "turns returned (the ranked source ids cover every candidate)", minimum=1,
                           maximum=200, group="retrieval")
    candidates: int = setting(40, "turns kept in the ranking shown", minimum=1, maximum=1000, group="retrieval")
    ablations: list = setting(help="no ablations for this baseline", factory=list, choices={}, group="ablations")


@dataclass
class HybridSettings(NaiveSettings):
    lexical_weight: float = setting(0.5, "weight of z(BM25) fused with z(dense cosine)", minimum=0.0,
                                    maximum=5.0, step=0.1, group="retrieval")


class NaiveEngine(BaseEngine):
    name = "naive"
    schema = _schema("naive", "Naive RAG", "Dense cosine top-k over raw turns, no memory structure.",
                     "Dense cosine between the query and every raw turn, ties by turn order; the top {final_k} "
                     "are returned.")
    Settings = NaiveSettings

    def embed_text(self, node: Node) -> str:
        return node.raw

    def lexical_text(self, node: Node) -> str:
        return node.raw

    @writes
    def ingest(self, turn: Turn) -> IngestReport:
        self.check_new_turn(turn)
        turn_no = self.state.turn + 1
        node = self.turn_node(turn, TURN_KIND, STORED)
        tx = Tx(self.state, turn=turn_no, actor="online", isolated=False)
        tx.emit(self.ingested(turn))
        tx.create_node(node)
        ops = self.commit(tx.ops)
        return IngestReport(turn_id=turn.id, unit_id=node.id, anchors=[], edges=[], buffer_size=0, ops=ops,
                            created=[node.id])

    def lexical_weight(self) -> float:
        return 0.0

    def retrieve(self, query: str, k: int | None = None) -> RetrievalResult:
        t0 = time.perf_counter()
        rel = Relevance(self, query, self.lexical_weight())
        ranked = self._ranked(rel, self.settings.candidates)
        candidates = [self._result(uid, score, rel) for uid, score in ranked]
        elapsed = (time.perf_counter() - t0) * 1e3
        return RetrievalResult.ranked(query, [(r.id, r.score) for r in candidates[: self.settings.final_k]], [],
                                      candidates, self.settings.final_k, k,
                                      {"rank_ms": elapsed, "total_ms": elapsed})

    def explain(self, res: RetrievalResult, uids: Iterable[int]) -> dict[int, Placement]:
        """Every stored turn is ranked; a turn that is not a candidate fell below the ranking's cap."""
        rel = Relevance(self, res.query, self.lexical_weight())
        cache: dict[str, dict[int, int]] = {}

        def dropped(node: Node) -> Placement:
            t = rel.terms(node.id)
            if "full" not in cache:
                cache["full"] = {u: i for i, (u, _) in enumerate(self._ranked(rel), 1)}
            return Placement(node.id, None, False, Signals(**t, score=t["relevance"]), Drop.CANDIDATE_CAP, RANK,
                             f"rank {cache['full'][node.id]} > the {self.settings.candidates} candidates kept")

        return place_each(self.state, res, uids, first_stage=RANK, ranking_stage=RANK, dropped=dropped,
                          ranked=lambda r: Signals(**rel.terms(r.id), score=r.score, admitted=RANK))

    def _ranked(self, rel: Relevance, limit: int | None = None) -> list[tuple[int, float]]:
        """The best `limit` stored turns (all by default) by score: the fused one, or the plain cosine ranked at
        6 decimals as naive RAG always ranked it."""
        return rel.ranked_surface(limit, decimals=9 if rel.weight else 6)

    def _result(self, uid: int, score: float, rel: Relevance) -> RetrievedUnit:
        u = self.state.nodes[uid]
        return RetrievedUnit(id=uid, visible=u.visible, score=round(score, 6), dense=round(rel.dense(uid), 6),
                             lexical=round(rel.lexical.get(uid, 0.0), 6), anchor=uid, hop=0, path=[],
                             source_ids=list(u.source_ids), time=u.time, raw=u.raw, kind=u.kind, status=u.status)


class HybridEngine(NaiveEngine):
    name = "hybrid"
    schema = _schema("hybrid", "Hybrid RAG", "z(dense cosine) + w · z(BM25) over raw turns, no memory structure.",
                     "z(dense cosine) + {lexical_weight} · z(BM25) over every raw turn, ties by turn order; the top "
                     "{final_k} are returned.")
    Settings = HybridSettings

    def lexical_weight(self) -> float:
        return self.settings.lexical_weight

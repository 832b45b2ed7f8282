"""Three-stage topology-aware retrieval (All-Mem §3.4, App. D).

Stage 1 anchors on the visible surface, Stage 2 walks outgoing typed links
under a hop limit and a candidate budget, Stage 3 re-ranks and materializes.
Relevance is dense cosine fused with BM25 by z-scores (DESIGN §5: lexical
signals are cheap and strong); the `no-lexical` ablation gives the paper's
pure cosine. Every returned unit carries its path from the anchor it was
reached from.
"""
from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from engine.edge import EdgeType

if TYPE_CHECKING:
    from engine.allmem.engine import AllMemEngine


@dataclass
class Hop:
    src: int
    dst: int
    type: str

    def to_dict(self) -> dict:
        return {"from": self.src, "to": self.dst, "type": self.type}


@dataclass
class RetrievedUnit:
    id: int
    visible: bool
    score: float
    dense: float
    lexical: float
    anchor: int
    hop: int
    path: list[Hop]
    source_ids: list[str]
    time: str
    raw: str
    kind: str

    def to_dict(self) -> dict:
        d = asdict(self)
        d["path"] = [h.to_dict() for h in self.path]
        return d


@dataclass
class RetrievalResult:
    query: str
    anchors: list[tuple[int, float]]
    expansion: list[dict]                  # Stage-2 admissions in order: id, parent, type, hop
    candidates: list[RetrievedUnit]        # Stage-3 ranking of the whole candidate set
    units: list[RetrievedUnit]             # the top final_k, ranked
    source_ids: list[str]
    context: str
    stages: dict[str, float] = field(default_factory=dict)

    def to_dict(self, k: int | None = None) -> dict:
        return {"query": self.query, "source_ids": self.source_ids[:k] if k else self.source_ids,
                "units": [u.to_dict() for u in self.units], "context": self.context,
                "anchors": [{"id": i, "score": round(s, 6)} for i, s in self.anchors],
                "expansion": self.expansion, "stages": {k2: round(v, 3) for k2, v in self.stages.items()}}


class Relevance:
    """Query relevance of any unit: z(dense) + w * z(bm25), z-stats from the visible surface."""

    def __init__(self, engine: "AllMemEngine", query: str):
        s = engine.settings
        self.engine = engine
        self.zq = engine.embedder.embed_one(query)
        self.weight = 0.0 if s.has("no-lexical") else s.lexical_weight
        self.visible_dense = engine.index.all_scores(self.zq)
        self.lexical = engine.bm25.scores(query) if self.weight else {}
        dense = np.fromiter(self.visible_dense.values(), dtype=np.float64) if self.visible_dense else np.zeros(1)
        self.dense_mu, self.dense_sd = float(dense.mean()), float(dense.std()) or 1.0
        lex = np.array([self.lexical.get(u, 0.0) for u in self.visible_dense] or [0.0])
        self.lex_mu, self.lex_sd = float(lex.mean()), float(lex.std()) or 1.0

    def dense(self, uid: int) -> float:
        if uid in self.visible_dense:
            return self.visible_dense[uid]
        return float(self.engine.vector(uid) @ self.zq)

    def score(self, uid: int) -> float:
        d = self.dense(uid)
        penalty = 0.0 if self.engine.state.units[uid].visible else self.engine.settings.archived_penalty
        if not self.weight:
            return d - penalty * self.dense_sd
        return ((d - self.dense_mu) / self.dense_sd - penalty
                + self.weight * (self.lexical.get(uid, 0.0) - self.lex_mu) / self.lex_sd)


def retrieve(engine: "AllMemEngine", query: str, k_sources: int | None = None) -> RetrievalResult:
    s = engine.settings
    state = engine.state
    t0 = time.perf_counter()
    rel = Relevance(engine, query)
    visible = list(rel.visible_dense)
    scored = sorted(((u, rel.score(u)) for u in visible), key=lambda p: (-round(p[1], 9), p[0]))
    anchors = scored[: s.k]
    t1 = time.perf_counter()

    parent: dict[int, Hop | None] = {a: None for a, _ in anchors}
    origin: dict[int, int] = {a: a for a, _ in anchors}
    hop: dict[int, int] = {a: 0 for a, _ in anchors}
    expansion: list[dict] = []
    if not s.has("anchors-only"):
        allowed = [t for t in EdgeType.PRIORITY if not (s.has("no-recovery-links") and t in EdgeType.RECOVERY)]
        frontier = [a for a, _ in anchors]
        seen = set(frontier)
        for h in range(1, s.hops + 1):
            if len(parent) >= s.budget or not frontier:
                break
            nxt: list[int] = []
            for u in frontier:
                if len(parent) >= s.budget:
                    break
                neigh = [(v, t) for t in allowed for v in state.out(u, t)]
                if s.has("no-type-priority"):
                    neigh.sort(key=lambda p: (p[0], p[1]))
                else:
                    neigh.sort(key=lambda p: (EdgeType.PRIORITY[p[1]], p[0]))
                for v, t in neigh:
                    if len(parent) >= s.budget:
                        break
                    if v in seen:
                        continue
                    seen.add(v)
                    parent[v], origin[v], hop[v] = Hop(u, v, t), origin[u], h
                    nxt.append(v)
                    expansion.append({"id": v, "parent": u, "type": t, "hop": h})
            frontier = nxt
    t2 = time.perf_counter()

    ranked = sorted(parent, key=lambda u: (-round(rel.score(u), 9), u))
    candidates = [_retrieved(engine, u, rel, parent, origin, hop) for u in ranked]
    top = candidates[: s.final_k]
    sources = _rank_sources(candidates)
    blocks = sorted(top, key=lambda r: (r.time == "", r.time, r.id))
    context = "\n\n".join(f"[{r.time}] {r.raw}" if r.time else r.raw for r in blocks)
    t3 = time.perf_counter()
    stages = {"stage1_ms": (t1 - t0) * 1e3, "stage2_ms": (t2 - t1) * 1e3, "stage3_ms": (t3 - t2) * 1e3,
              "total_ms": (t3 - t0) * 1e3}
    return RetrievalResult(query=query, anchors=anchors, expansion=expansion, candidates=candidates, units=top,
                           source_ids=sources[:k_sources] if k_sources else sources, context=context, stages=stages)


def _retrieved(engine, uid, rel, parent, origin, hop) -> RetrievedUnit:
    path: list[Hop] = []
    node = uid
    while parent[node] is not None:
        path.append(parent[node])
        node = parent[node].src
    u = engine.state.units[uid]
    return RetrievedUnit(id=uid, visible=u.visible, score=round(rel.score(uid), 6), dense=round(rel.dense(uid), 6),
                         lexical=round(rel.lexical.get(uid, 0.0), 6), anchor=origin[uid], hop=hop[uid],
                         path=path[::-1], source_ids=list(u.source_ids), time=u.time, raw=u.raw, kind=u.kind)


def _rank_sources(candidates: list[RetrievedUnit]) -> list[str]:
    """Key_src(s) = (-best(s), first(s), s) over the whole candidate ranking (Eq. 37-39)."""
    best: dict[str, float] = {}
    first: dict[str, int] = {}
    for rank, r in enumerate(candidates):
        for sid in r.source_ids:
            best[sid] = max(best.get(sid, -1e18), r.score)
            first.setdefault(sid, rank)
    return sorted(best, key=lambda sid: (-best[sid], first[sid], sid))

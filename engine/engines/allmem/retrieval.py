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

import numpy as np

from engine.core.walks import supersedes
from engine.engines.allmem.context import AllMemContext
from engine.engines.allmem.schema import SCHEMA, EdgeType
from engine.retrieval.relevance import Relevance
from engine.retrieval.result import Hop, RetrievalResult, RetrievedUnit, path_to

def superseded(state, uid: int) -> bool:
    """An archived unit an Update replaced: a version link reaches it from a unit whose provenance does not
    hold its own turns (a newer statement). A Merge's representative and a Split's parts carry the turns of
    what they archive, so what they archived is regrouped evidence, not stale evidence."""
    node = state.nodes[uid]
    if node.visible:
        return False
    mine = set(node.source_ids)
    return any(not mine <= set(state.nodes[w].source_ids) for w in state.inc(uid, EdgeType.VERSION))


def relevance(engine: AllMemContext, query: str) -> Relevance:
    """Stage-1/Stage-3 relevance under the settings: the lexical weight (0 for no-lexical) and the penalty of
    superseded units (All-Mem §4.7: up-to-date evidence first). The z-statistics are taken over every unit,
    visible or archived, so that a consolidation edit re-scores only the units it touches, and the
    no-visibility ablation differs from the full system only in which units Stage 1 may anchor on."""
    s = engine.settings
    return Relevance(engine, query, 0.0 if s.has("no-lexical") else s.lexical_weight, s.archived_penalty,
                     penalised=lambda uid: superseded(engine.state, uid),
                     held=engine.derived("held_parts", lambda: held_parts(engine.state)),
                     archived=engine.derived("archived_ids",
                                             lambda: np.asarray(engine.state.archived_ids, dtype=np.int64)))


def held_parts(state) -> tuple[np.ndarray, np.ndarray]:
    """(holders, parts): each visible unit beside every older version behind it whose whole raw text it holds
    (a Merge's representative and what it merged, also through a later regrouping). A Split's part holds only a
    piece of what it came from and an Update's unit none of what it replaced, so neither is a holder."""
    pairs = [(u, v) for u in state.visible_ids if state.out(u, EdgeType.VERSION)
             for _, v in supersedes(state, u) if state.nodes[v].raw and state.nodes[v].raw in state.nodes[u].raw]
    return (np.asarray([u for u, _ in pairs], dtype=np.int64), np.asarray([v for _, v in pairs], dtype=np.int64))


def allowed_links(settings) -> list[str]:
    """The link types Stage 2 walks, in priority order (sibling, version, temporal, semantic); no recovery
    links under no-recovery-links."""
    return [t for t in SCHEMA.expansion_order
            if not (settings.has("no-recovery-links") and t in SCHEMA.recovery_types)]


def retrieve(engine: AllMemContext, query: str, k_sources: int | None = None) -> RetrievalResult:
    s = engine.settings
    t0 = time.perf_counter()
    rel = relevance(engine, query)
    anchors = rel.ranked_surface(s.k)
    t1 = time.perf_counter()

    parent: dict[int, Hop | None] = {a: None for a, _ in anchors}
    origin: dict[int, int] = {a: a for a, _ in anchors}
    hop: dict[int, int] = {a: 0 for a, _ in anchors}
    expansion: list[dict] = []
    if not s.has("anchors-only"):
        allowed = allowed_links(s)
        uniform = s.has("no-type-priority")
        recovery = [] if uniform else [t for t in allowed if t in SCHEMA.recovery_types]
        for types in ([recovery] if recovery else []) + [allowed]:
            for h in range(1, s.hops + 1):
                frontier = [u for u in parent if hop[u] == h - 1]
                if len(parent) >= s.budget or not frontier:
                    break
                for u, v, t in expansion_order(engine.state, frontier, types, uniform):
                    if len(parent) >= s.budget:
                        break
                    if v in parent:
                        continue
                    parent[v], origin[v], hop[v] = Hop(u, v, t), origin[u], h
                    expansion.append({"id": v, "parent": u, "type": t, "hop": h})
    t2 = time.perf_counter()

    ranked = sorted(parent, key=lambda u: (-round(rel.score(u), 9), u))
    candidates = [_retrieved(engine, u, rel, parent, origin, hop) for u in ranked]
    t3 = time.perf_counter()
    stages = {"stage1_ms": (t1 - t0) * 1e3, "stage2_ms": (t2 - t1) * 1e3, "stage3_ms": (t3 - t2) * 1e3,
              "total_ms": (t3 - t0) * 1e3}
    return RetrievalResult.ranked(query, anchors, expansion, candidates, s.final_k, k_sources, stages)


def expansion_order(state, frontier: list[int], allowed: list[str], uniform: bool) -> list[tuple[int, int, str]]:
    """One hop's links (from, to, type) in the order Stage 2 admits them while the budget lasts.

    With type priority the whole hop goes by link type first: every sibling and version link of the frontier,
    then every temporal link, then every semantic one, each type in frontier order (the anchors' rank at hop
    1), then by id; and `retrieve` walks the recovery links alone to the hop limit before this pass, so a
    version chain two deep (a unit regrouped, then superseded) is recovered before any association takes the
    budget. Without it (no-type-priority) the frontier is expanded unit by unit, each unit's links by target
    id whatever their type (the paper's uniform order)."""
    if uniform:
        return [(u, v, t) for u in frontier for v, t in sorted((v, t) for t in allowed for v in state.out(u, t))]
    return [(u, v, t) for t in allowed for u in frontier for v in sorted(state.out(u, t))]


def source_worth(state, uid: int, rel: Relevance) -> dict[str, float]:
    """For a unit carrying several turns (a Merge's representative), each turn's own evidence: the best score of
    the archived versions behind it that hold the turn. The representative is retrieved for what its turns say
    together; a turn whose own words do not match the query should not take a source slot at its score."""
    node = state.nodes[uid]
    if len(node.source_ids) < 2:
        return {}
    mine = set(node.source_ids)
    worth: dict[str, float] = {}
    for _, v in supersedes(state, uid):
        score = round(rel.score(v), 6)
        for sid in mine.intersection(state.nodes[v].source_ids):
            worth[sid] = max(worth.get(sid, score), score)
    return worth


def _retrieved(engine, uid, rel, parent, origin, hop) -> RetrievedUnit:
    u = engine.state.nodes[uid]
    return RetrievedUnit(id=uid, visible=u.visible, score=round(rel.score(uid), 6), dense=round(rel.dense(uid), 6),
                         lexical=round(rel.lexical.get(uid, 0.0), 6), anchor=origin[uid], hop=hop[uid],
                         path=path_to(uid, parent), source_ids=list(u.source_ids), time=u.time, raw=u.raw,
                         kind=u.kind, status=u.status, source_worth=source_worth(engine.state, uid, rel))

"""Three-layer retrieval (§3.5): the top k_sub subconscious units, k_epi episodes and k_sem facts.

Every node on the retrieval surface is scored once by the shared relevance (z(dense) + w · z(BM25), z over the
surface; `no-lexical` keeps the plain cosine, as the paper retrieves); each layer keeps its best, and the
picks form one ranking by that score (the paper hands the three sets to the answering model side by side; a
ranking is what R@K and the pages need). Every result carries its layer and its provenance chain down the
`derived_from` links: a fact → its episode → the units the fact cites → their messages; an episode → its units
→ their messages; a unit → its messages. Each hop is a stored edge; the chains are also the result's
`expansion` (what the Provenance stage shows), but nothing they reach is added to the ranking.
"""
from __future__ import annotations

import time

import numpy as np

from engine.engines.recmem.context import RecMemContext
from engine.engines.recmem.schema import Kind, Layer, Life, Rel
from engine.retrieval.relevance import DECIMALS, Relevance
from engine.retrieval.result import Hop, RetrievalResult, RetrievedUnit

LAYERS = (Layer.SUB, Layer.EPI, Layer.SEM)
ABLATION = {Layer.SUB: "no-subconscious", Layer.EPI: "no-episodic", Layer.SEM: "no-semantic"}


def layer_of(node) -> str | None:
    """The store a node is searched in, or None when it is off the retrieval surface."""
    if node.status in (Life.SUBCONSCIOUS, Life.WAITING):
        return Layer.SUB
    if node.status == Life.EPISODIC:
        return Layer.EPI
    if node.status == Life.SEMANTIC:
        return Layer.SEM
    return None


def budgets(engine: RecMemContext) -> dict[str, int]:
    s = engine.settings
    k = {Layer.SUB: s.k_sub, Layer.EPI: s.k_epi, Layer.SEM: s.k_sem}
    return {layer: 0 if s.has(ABLATION[layer]) else k[layer] for layer in LAYERS}


def relevance(engine: RecMemContext, query: str) -> Relevance:
    s = engine.settings
    return Relevance(engine, query, 0.0 if s.has("no-lexical") else s.lexical_weight)


def layer_ranks(engine: RecMemContext, rel: Relevance, quota: dict[str, int] | None = None
                ) -> dict[int, tuple[str, int, float]]:
    """Each layer's surface nodes by score (ties by id) with their rank within the layer (1-based) and score:
    every one, or each layer's first `quota[layer]`."""
    out = {}
    for layer, ids in surface_layers(engine).items():
        if not len(ids):
            continue
        chosen = rel.ranked_among(ids, None if quota is None else quota[layer], DECIMALS)
        for rank, (uid, score) in enumerate(chosen, 1):
            out[uid] = (layer, rank, score)
    return out


def surface_layers(engine: RecMemContext) -> dict[str, np.ndarray]:
    """The retrieval surface's ids of each layer, in id order (kept until the state changes)."""
    def build() -> dict[str, np.ndarray]:
        found: dict[str, list[int]] = {layer: [] for layer in LAYERS}
        nodes = engine.state.nodes
        for uid in engine.index.surface().ids.tolist():
            layer = layer_of(nodes[uid])
            if layer is not None:
                found[layer].append(uid)
        return {layer: np.asarray(ids, dtype=np.int64) for layer, ids in found.items()}
    return engine.derived("surface layers", build)


def provenance(state, uid: int) -> list[Hop]:
    """The node's chain down `derived_from`, depth first in id order: fact → episode → cited units → messages."""
    hops: list[Hop] = []

    def down(node: int, only: set[int] | None) -> None:
        for child in sorted(state.out(node, Rel.DERIVED_FROM)):
            if only is not None and child not in only:
                continue
            hops.append(Hop(node, child, Rel.DERIVED_FROM))
            edge = state.edges[(node, child, Rel.DERIVED_FROM)]
            down(child, set(edge.evidence) if edge.evidence else None)

    down(uid, None)
    return hops


def retrieve(engine: RecMemContext, query: str, k: int | None = None) -> RetrievalResult:
    t0 = time.perf_counter()
    rel = relevance(engine, query)
    quota = budgets(engine)
    picks: list[tuple[int, float, str]] = []
    for uid, (layer, _, score) in layer_ranks(engine, rel, quota).items():
        picks.append((uid, score, layer))
    picks.sort(key=lambda p: (-round(p[1], 9), p[0]))
    t1 = time.perf_counter()
    state = engine.state
    chains = {uid: provenance(state, uid) for uid, _, _ in picks}
    expansion: list[dict] = []
    reached = {uid for uid, _, _ in picks}
    for uid, _, _ in picks:
        depth = {uid: 0}
        for h in chains[uid]:
            depth[h.dst] = depth[h.src] + 1
            if h.dst not in reached:
                reached.add(h.dst)
                expansion.append({"id": h.dst, "parent": h.src, "type": h.type, "hop": depth[h.dst]})
    t2 = time.perf_counter()
    candidates = [_result(engine, uid, score, layer, chains[uid], rel) for uid, score, layer in picks]
    t3 = time.perf_counter()
    return RetrievalResult.ranked(query, [(uid, score) for uid, score, _ in picks], expansion, candidates, None, k,
                                  {"layers_ms": (t1 - t0) * 1e3, "provenance_ms": (t2 - t1) * 1e3,
                                   "rank_ms": (t3 - t2) * 1e3, "total_ms": (t3 - t0) * 1e3})


def _result(engine: RecMemContext, uid: int, score: float, layer: str, chain: list[Hop], rel: Relevance
            ) -> RetrievedUnit:
    u = engine.state.nodes[uid]
    return RetrievedUnit(id=uid, visible=u.visible, score=round(score, 6), dense=round(rel.dense(uid), 6),
                         lexical=round(rel.lexical.get(uid, 0.0), 6), anchor=uid, hop=0, path=[],
                         source_ids=list(u.source_ids), time=u.time, raw=u.raw or u.summary, kind=u.kind,
                         status=u.status, layer=layer, provenance=chain,
                         source_worth=source_worth(engine, u, chain, rel))


def source_worth(engine: RecMemContext, node, chain: list[Hop], rel: Relevance) -> dict[str, float]:
    """For an episode or a fact (many turns), each turn's own evidence: the relevance of the unit on its
    provenance chain holding it, so a turn takes a source slot by how well its own exchange matches the query
    (`rank_sources`)."""
    if len(node.source_ids) < 2:
        return {}
    state = engine.state
    out: dict[str, float] = {}
    for h in chain:
        unit = state.nodes[h.dst]
        if unit.kind == Kind.UNIT:
            score = round(rel.score(unit.id), 6)
            for sid in unit.source_ids:
                out[sid] = max(out.get(sid, score), score)
    return out

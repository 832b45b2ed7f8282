"""Why an All-Mem unit ranked where it did, or which of the three stages dropped it.

A candidate's signals are the Stage-3 relevance terms; a unit that is not a
candidate is placed by re-asking each stage: is it on the surface and where
did Stage 1 rank it, could Stage 2 have reached it within the hop limit over
the link types the settings allow (then the candidate budget ran out first)?
"""
from __future__ import annotations

from typing import Iterable

from engine.core.node import Node
from engine.engines.allmem.context import AllMemContext
from engine.engines.allmem.retrieval import allowed_links, relevance
from engine.engines.allmem.schema import SCHEMA
from engine.retrieval.explain import Drop, Placement, Signals, place_each, reachable
from engine.retrieval.result import RetrievalResult, RetrievedUnit

ANCHORS, EXPANSION, RANKING = (s.key for s in SCHEMA.stages)


def explain(engine: AllMemContext, res: RetrievalResult, uids: Iterable[int]) -> dict[int, Placement]:
    s = engine.settings
    rel = relevance(engine, res.query)
    cache: dict[str, dict[int, int]] = {}

    def ranked(r: RetrievedUnit) -> Signals:
        last = r.path[-1] if r.path else None
        return Signals(**rel.terms(r.id), score=r.score, hop=r.hop, edge=last.type if last else "",
                       reverse=bool(last and last.reverse), admitted=ANCHORS if r.hop == 0 else EXPANSION)

    def dropped(node: Node) -> Placement:
        uid, t = node.id, rel.terms(node.id)
        sig = Signals(**t, score=t["relevance"])
        if "surface" not in cache:
            cache["surface"] = {u: i for i, (u, _) in enumerate(rel.ranked_surface(), 1)}
        if "reach" not in cache:
            cache["reach"] = _reachable(engine, res)
        surface, reach = cache["surface"], cache["reach"]
        where = (f"anchor rank {surface[uid]} > top-k {s.k}" if uid in surface
                 else f"status {node.status}: off the surface")
        if s.has("anchors-only"):
            return Placement(uid, None, False, sig, Drop.EXPANSION_OFF, EXPANSION,
                             f"{where}, and the anchors-only ablation skips Stage 2")
        if uid in reach:
            return Placement(uid, None, False, sig, Drop.BUDGET, EXPANSION,
                             f"{where}; a link reaches it at hop {reach[uid]}, but the budget of {s.budget} "
                             f"candidates was spent first")
        code = Drop.BELOW_SEED_CUT if uid in surface else Drop.OFF_SURFACE
        return Placement(uid, None, False, sig, code, ANCHORS if uid in surface else EXPANSION,
                         f"{where}, and no allowed link within {s.hops} hops of an anchor reaches it")

    return place_each(engine.state, res, uids, first_stage=ANCHORS, ranking_stage=RANKING, ranked=ranked,
                      dropped=dropped)


def _reachable(engine: AllMemContext, res: RetrievalResult) -> dict[int, int]:
    """What Stage 2 could reach from the anchors over the allowed link types, budget aside."""
    s = engine.settings
    allowed = allowed_links(s)
    return reachable((a for a, _ in res.anchors), lambda u: [v for t in allowed for v in engine.state.out(u, t)],
                     s.hops)

"""Why an All-Mem unit ranked where it did, or which of the three stages dropped it.

A candidate's signals are the Stage-3 relevance terms; a unit that is not a
candidate is placed by re-asking each stage: is it on the surface and where
did Stage 1 rank it, could Stage 2 have reached it within the hop limit over
the link types the settings allow (then the candidate budget ran out first)?
"""
from __future__ import annotations

from typing import Iterable

from engine.engines.allmem.context import AllMemContext
from engine.engines.allmem.retrieval import allowed_links, relevance
from engine.engines.allmem.schema import SCHEMA
from engine.retrieval.explain import Drop, Placement, Signals, candidate_ranks, ranked_placement, reachable
from engine.retrieval.result import RetrievalResult

ANCHORS, EXPANSION, RANKING = (s.key for s in SCHEMA.stages)


def explain(engine: AllMemContext, res: RetrievalResult, uids: Iterable[int]) -> dict[int, Placement]:
    s = engine.settings
    state = engine.state
    rel = relevance(engine, res.query)
    ranks = candidate_ranks(res)
    by_id = {r.id: r for r in res.candidates}
    surface: dict[int, int] | None = None
    reach: dict[int, int] | None = None
    out: dict[int, Placement] = {}
    for uid in uids:
        if uid not in state.nodes:
            out[uid] = Placement(uid, None, False, None, Drop.GONE, ANCHORS, f"u{uid} is not in this state")
            continue
        t = rel.terms(uid)
        r = by_id.get(uid)
        if r is not None:
            last = r.path[-1] if r.path else None
            sig = Signals(**t, score=r.score, hop=r.hop, edge=last.type if last else "",
                          reverse=bool(last and last.reverse), admitted=ANCHORS if r.hop == 0 else EXPANSION)
            out[uid] = ranked_placement(res, uid, sig, ranks, RANKING)
            continue
        sig = Signals(**t, score=t["relevance"])
        if surface is None:
            surface = {u: i for i, (u, _) in enumerate(rel.ranked_surface(), 1)}
        if reach is None:
            reach = _reachable(engine, res)
        node = state.nodes[uid]
        where = (f"anchor rank {surface[uid]} > top-k {s.k}" if uid in surface
                 else f"status {node.status}: off the surface")
        if s.has("anchors-only"):
            out[uid] = Placement(uid, None, False, sig, Drop.EXPANSION_OFF, EXPANSION,
                                 f"{where}, and the anchors-only ablation skips Stage 2")
        elif uid in reach:
            out[uid] = Placement(uid, None, False, sig, Drop.BUDGET, EXPANSION,
                                 f"{where}; a link reaches it at hop {reach[uid]}, but the budget of {s.budget} "
                                 f"candidates was spent first")
        else:
            code = Drop.BELOW_SEED_CUT if uid in surface else Drop.OFF_SURFACE
            out[uid] = Placement(uid, None, False, sig, code, ANCHORS if uid in surface else EXPANSION,
                                 f"{where}, and no allowed link within {s.hops} hops of an anchor reaches it")
    return out


def _reachable(engine: AllMemContext, res: RetrievalResult) -> dict[int, int]:
    """What Stage 2 could reach from the anchors over the allowed link types, budget aside."""
    s = engine.settings
    allowed = allowed_links(s)
    return reachable((a for a, _ in res.anchors), lambda u: [v for t in allowed for v in engine.state.out(u, t)],
                     s.hops)

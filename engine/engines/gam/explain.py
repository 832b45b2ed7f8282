"""Why a GAM event ranked where it did, or which stage of the graph-guided retrieval dropped it.

A candidate's signals are its own fused relevance, P_sem and each β_k^I_k of the re-rank (`Signals.factors`),
the hop and edge type that reached it. Any other event is placed by re-asking the stages: a buffered event was
below the buffer's cut (or the ablation skips the buffer); an archived event's topic was no anchor (its anchor
rank against k) and no topic edge joins it to one (or the expansion is switched off). Topic nodes are anchors,
never results.
"""
from __future__ import annotations

from typing import Iterable

from engine.core.node import Node
from engine.engines.gam.context import GamContext
from engine.engines.gam.retrieval import TOPIC_EDGES, Scoring, anchor_ranking, buffer_ranking, scoring
from engine.engines.gam.schema import SCHEMA, Kind, Life, Rel
from engine.retrieval.explain import Drop, Placement, Signals, place_each
from engine.retrieval.result import RetrievalResult, RetrievedUnit

ANCHOR, DRILL, RERANK = (s.key for s in SCHEMA.stages)


def explain(engine: GamContext, res: RetrievalResult, uids: Iterable[int]) -> dict[int, Placement]:
    s = engine.settings
    sc = scoring(engine, res.query)
    cache: dict[str, dict] = {}

    def unranked(node: Node) -> Placement | None:
        if node.kind != Kind.EVENT:
            return Placement(node.id, None, False, None, Drop.FILTERED, RERANK,
                             f"kind {node.kind}: topics are anchors; retrieval returns events")
        return None

    def dropped(node: Node) -> Placement:
        uid = node.id
        if node.status != Life.BUFFERED:
            return _unreached(engine, sc, res, uid, cache)
        sig = signals(engine, sc, uid, None)
        if s.has("no-buffer"):
            return Placement(uid, None, False, sig, Drop.EXPANSION_OFF, DRILL,
                             "in the active buffer, and the no-buffer ablation skips it")
        if "buffer" not in cache:
            cache["buffer"] = {e: i for i, e in enumerate(buffer_ranking(engine, sc), 1)}
        return Placement(uid, None, False, sig, Drop.BUFFER_CUT, DRILL,
                         f"buffer rank {cache['buffer'][uid]} > buffer_k {s.buffer_k}")

    return place_each(engine.state, res, uids, first_stage=ANCHOR, ranking_stage=RERANK,
                      ranked=lambda r: signals(engine, sc, r.id, r), dropped=dropped, unranked=unranked)


def _unreached(engine: GamContext, sc: Scoring, res: RetrievalResult, uid: int, cache: dict) -> Placement:
    """An archived event whose topic no anchor was and no topic edge reached."""
    s, state = engine.settings, engine.state
    sig = signals(engine, sc, uid, None)
    topic = next(iter(sorted(state.inc(uid, Rel.CROSS))), None)
    if topic is None:
        return Placement(uid, None, False, sig, Drop.OFF_SURFACE, DRILL, "no topic's cross edge leads to it")
    if "anchors" not in cache:
        cache["anchors"] = {t: i for i, (t, _) in enumerate(anchor_ranking(sc), 1)}
    where = f"its topic u{topic} has anchor rank {cache['anchors'].get(topic)} > k {s.k}"
    anchors = {a for a, _ in res.anchors}
    linked = sorted(a for etype in TOPIC_EDGES for a in (*state.out(topic, etype), *state.inc(topic, etype))
                    if a in anchors)
    if linked and s.has("no-expansion"):
        return Placement(uid, None, False, sig, Drop.EXPANSION_OFF, ANCHOR,
                         f"{where}; a topic edge joins it to anchor u{linked[0]}, but the no-expansion ablation "
                         "takes anchors only")
    return Placement(uid, None, False, sig, Drop.BELOW_SEED_CUT, ANCHOR,
                     f"{where}, and no topic edge joins it to an anchor")


def signals(engine: GamContext, sc: Scoring, uid: int, r: RetrievedUnit | None) -> Signals:
    ev = sc.events
    z_dense, z_lexical = ev.z(uid)
    factors = sc.factors(engine, uid)
    score = r.score if r is not None else 1.0
    if r is None:
        for value in factors.values():
            score *= value
    topic_hops = [h for h in (r.path if r is not None else []) if h.type != Rel.CROSS]
    last = r.path[-1] if r is not None and r.path else None
    return Signals(dense=ev.dense[uid], lexical=ev.lexical[uid], z_dense=z_dense, z_lexical=z_lexical,
                   weight=ev.weight, penalty=0.0, relevance=ev.fused[uid], score=score,
                   hop=r.hop if r is not None else 0, edge=topic_hops[-1].type if topic_hops else
                   (last.type if last else ""), reverse=bool(topic_hops and topic_hops[-1].reverse),
                   admitted=(DRILL if r is not None else ""), factors=tuple(factors.items()), reference=ev.reference)

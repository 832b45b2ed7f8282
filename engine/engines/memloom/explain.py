"""Why a MemLoom sentence record ranked where it did, or which stage of the dual-stream retrieval dropped it.

A candidate's signals are its own fused relevance and, on an asked chain, the
score its event passed down. A record that is not a candidate is placed by
re-asking the stages: was it offered at all (by a reached event's pointer or
from the real-time buffer, then the `max_evidence` cap cut it), is it still
buffered below the buffer's cut, does any event on the published snapshot
point to it, and where did that event rank as a seed, could the relation
closure have reached it within the hop limit (then the branching cap was spent).
"""
from __future__ import annotations

from typing import Iterable

from engine.core.node import Node
from engine.engines.memloom.context import MemLoomContext
from engine.engines.memloom.retrieval import TRAVERSED
from engine.engines.memloom.seeds import buffer_ranking, relevance, seed_ranking
from engine.engines.memloom.schema import SCHEMA, Kind, Life, Rel
from engine.retrieval.kind_relevance import KindRelevance
from engine.retrieval.explain import Drop, Placement, Signals, place_each, reachable
from engine.retrieval.result import RetrievalResult, RetrievedUnit

SEED, TRAVERSE, GROUND = (s.key for s in SCHEMA.stages)


def explain(engine: MemLoomContext, res: RetrievalResult, uids: Iterable[int]) -> dict[int, Placement]:
    s = engine.settings
    rel = relevance(engine, res.query)
    snap = engine.published_view()
    sstate = snap.state if snap is not None else None
    reached = {e for e, _ in res.anchors} | {e["id"] for e in res.expansion}
    cache: dict[str, object] = {}

    def unranked(node: Node) -> Placement | None:
        if node.kind != Kind.SENTENCE or node.id not in rel.fused:
            return Placement(node.id, None, False, None, Drop.FILTERED, SEED,
                             f"kind {node.kind} [{node.status}]: retrieval ranks sentence records only")
        return None

    def dropped(node: Node) -> Placement:
        uid = node.id
        sig = _signals(rel, uid, None)
        if "buffer" not in cache:
            cache["buffer"] = {u: i for i, u in enumerate(buffer_ranking(engine, rel), 1)}
        buffer_rank = cache["buffer"].get(uid)
        pointing = sorted(e for e in (sstate.inc(uid, Rel.EVIDENCE) if sstate is not None and uid in sstate.nodes
                                      else ()) if sstate.nodes[e].kind == Kind.EVENT)
        by = [e for e in pointing if e in reached]
        from_buffer = buffer_rank is not None and buffer_rank <= s.realtime_k and not s.has("no-realtime")
        if by or from_buffer:
            source = f"offered by event u{by[0]}" if by else f"offered from the buffer at rank {buffer_rank}"
            return Placement(uid, None, False, sig, Drop.CANDIDATE_CAP, GROUND,
                             f"{source}, but below the {s.max_evidence} records kept")
        if node.status == Life.BUFFERED and not pointing:
            return (Placement(uid, None, False, sig, Drop.EXPANSION_OFF, SEED,
                              "buffered (not curated yet), and the no-realtime ablation skips the buffer")
                    if s.has("no-realtime") else
                    Placement(uid, None, False, sig, Drop.BUFFER_CUT, SEED,
                              f"buffer rank {buffer_rank} > realtime_k {s.realtime_k}"))
        if not pointing:
            return Placement(uid, None, False, sig, Drop.UNPUBLISHED, SEED,
                             "no steward run has published a snapshot yet" if sstate is None else
                             f"status {node.status}; no event on the snapshot points to it")
        if "seeds" not in cache:
            cache["seeds"] = {e: i for i, (e, _) in enumerate(seed_ranking(snap, rel), 1)}
        return _unreached(engine, sstate, res, uid, sig, pointing, cache)

    return place_each(engine.state, res, uids, first_stage=SEED, ranking_stage=GROUND,
                      ranked=lambda r: _signals(rel, r.id, r), dropped=dropped, unranked=unranked)


def _unreached(engine, sstate, res: RetrievalResult, uid: int, sig: Signals, pointing: list[int],
               cache: dict) -> Placement:
    """A curated record whose events no seed or relation reached: the best of them as a seed, and whether the
    closure could have reached one within the hop limit."""
    s = engine.settings
    seed_rank = cache["seeds"]
    ranked = sorted((e for e in pointing if e in seed_rank), key=seed_rank.get)
    if ranked:
        where = f"its event u{ranked[0]} has seed rank {seed_rank[ranked[0]]} > seeds {s.seeds}"
    else:
        e = sstate.nodes[pointing[0]]
        where = f"its event u{e.id} [{e.status}] is off the snapshot's seed surface"
    if s.has("no-traversal"):
        return Placement(uid, None, False, sig, Drop.EXPANSION_OFF, TRAVERSE,
                         f"{where}, and the no-traversal ablation skips the relation closure")
    if "reach" not in cache:
        cache["reach"] = reachable((e for e, _ in res.anchors), lambda u: _neighbours(sstate, u), s.hops)
    hit = [e for e in pointing if e in cache["reach"]]
    if hit:
        return Placement(uid, None, False, sig, Drop.BUDGET, TRAVERSE,
                         f"{where}; a relation reaches event u{hit[0]} at hop {cache['reach'][hit[0]]}, but the "
                         f"branching cap of {s.branching} per event took others first")
    return Placement(uid, None, False, sig, Drop.BELOW_SEED_CUT if ranked else Drop.OFF_SURFACE, SEED,
                     f"{where}, and no relation within {s.hops} hops of a seed reaches it")


def _neighbours(sstate, u: int) -> list[int]:
    """The events the closure may step to from `u`, either way along every traversed relation."""
    return [v for t in TRAVERSED for v in (*sstate.out(u, t), *sstate.inc(u, t)) if sstate.nodes[v].kind == Kind.EVENT]


def _signals(rel: KindRelevance, uid: int, r: RetrievedUnit | None) -> Signals:
    d, lex = rel.dense[uid], rel.lexical[uid]
    own = rel.fused[uid]
    score = own if r is None else r.score
    hop, edge, reverse, admitted = 0, "", False, ""
    if r is not None:
        relations = [h for h in r.path if h.type != Rel.EVIDENCE]
        last = relations[-1] if relations else None
        hop, edge, reverse = r.hop, last.type if last else "", bool(last and last.reverse)
        admitted = TRAVERSE if relations else SEED
    z_dense, z_lexical = rel.z(uid)
    return Signals(dense=d, lexical=lex, z_dense=z_dense, z_lexical=z_lexical, weight=rel.weight, penalty=0.0,
                   relevance=own, score=score, inherited=score if round(score, 6) > round(own, 6) else None,
                   hop=hop, edge=edge, reverse=reverse, admitted=admitted, reference=rel.reference)

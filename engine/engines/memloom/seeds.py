"""Where MemLoom's two streams start (§3.7): the relevance of every sentence record, the published events ranked
by their best record (stream one's seeds) and the real-time buffer ranked on its own (stream two).

Over a large memory (`SKETCH_FROM` records) the records' relevance reads their sketch, and the seeds come from
the best records alone (`sketched_seeds`), with the same result as scoring every record.
"""
from __future__ import annotations

import numpy as np

from engine.engines.memloom.context import MemLoomContext
from engine.engines.memloom.schema import Kind, Life
from engine.retrieval.index import top_k
from engine.retrieval.kind_relevance import KindRelevance, Positions, SketchedKindRelevance
from engine.retrieval.relevance import DECIMALS, SCAN_FIRST
from engine.retrieval.sketch import SKETCH_FROM


def relevance(engine: MemLoomContext, query: str) -> KindRelevance:
    """z(dense) + w·z(BM25) of every sentence record of the live state, with both signals kept."""
    s = engine.settings
    at_ = engine.derived("sentences", lambda: Positions.of(sorted(
        n.id for n in engine.state.nodes.values() if n.kind == Kind.SENTENCE)))
    weight = 0.0 if s.has("no-lexical") else s.lexical_weight
    if not at_.ids:
        return KindRelevance(at_, np.zeros(0), np.zeros(0), weight)
    zq = engine.embedder.embed_one(query)
    lexical = engine.bm25.score_vector(query) if weight else np.zeros(0)
    if len(at_.ids) >= SKETCH_FROM:
        return SketchedKindRelevance(at_, engine.sketched_rows("sentences", at_.array), zq, lexical, weight)
    return KindRelevance(at_, engine.stacked_vectors(at_.ids) @ zq, lexical, weight)


def seed_ranking(snap: MemLoomContext | None, rel: KindRelevance, top: int | None = None) -> list[tuple[int, float]]:
    """Every published event on the snapshot's surface by its best record's relevance, ties by id (the
    first `top` of them when given)."""
    if snap is None:
        return []
    events, members, starts = published_events(snap)
    if not len(events):
        return []
    if isinstance(rel, SketchedKindRelevance) and top is not None:
        found = sketched_seeds(snap, rel, top)
        if found is not None:
            return found
    pos = rel.positions.find(members)
    values = np.full(len(members), -np.inf)
    values[pos >= 0] = rel.scores[pos[pos >= 0]]
    best = np.maximum.reduceat(values, starts)           # each event's best record; -inf when none is live
    found = np.isfinite(best)
    chosen = top_k(events[found], best[found], int(found.sum()) if top is None else min(top, int(found.sum())),
                   DECIMALS)
    return [(e, float(best[i])) for e, i in zip(chosen, np.searchsorted(events, chosen))]


def sketched_seeds(snap: MemLoomContext, rel: SketchedKindRelevance, top: int) -> list[tuple[int, float]] | None:
    """`seed_ranking` of a large memory from its best records alone: an event's score is its best record's,
    so the events of the best m records, each at the first of its records among them, are the seeds, once
    the last seed is clearly above the m-th record (no event left out can reach it). m widens x4; None once it
    would be every record."""
    events_of = snap.derived("events_of_record", lambda: _events_of_record(snap))
    m = max(8 * top, SCAN_FIRST)
    while m < len(rel.positions.ids):
        best: dict[int, float] = {}
        ranked = rel.ranked(None, m)
        for uid, score in ranked:
            for e in events_of.get(uid, ()):
                best.setdefault(e, score)
        seeds = sorted(best.items(), key=lambda x: (-round(x[1], DECIMALS), x[0]))[:top]
        if len(seeds) == top and round(seeds[-1][1], DECIMALS) > round(ranked[-1][1], DECIMALS):
            return seeds
        m *= 4
    return None


def _events_of_record(snap: MemLoomContext) -> dict[int, tuple[int, ...]]:
    """The published events each record is a member of."""
    events, members, starts = published_events(snap)
    out: dict[int, tuple[int, ...]] = {}
    for e, chunk in zip(events.tolist(), np.split(members, starts[1:]) if len(events) else []):
        for uid in chunk.tolist():
            out[uid] = (*out.get(uid, ()), e)
    return out


def published_events(snap: MemLoomContext) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The snapshot's seed surface: each published visible event (in id order), all their member records one
    event after another, and where each event's members start (kept until the snapshot changes)."""
    def build():
        found = sorted((e.id, tuple(e.members)) for e in snap.state.nodes.values()
                       if e.kind == Kind.EVENT and e.visible and e.attrs.get("published") and e.members)
        members = [m for _, ms in found for m in ms]
        starts = np.cumsum([0] + [len(ms) for _, ms in found[:-1]]) if found else np.zeros(0)
        return (np.asarray([e for e, _ in found], dtype=np.int64), np.asarray(members, dtype=np.int64),
                np.asarray(starts, dtype=np.int64))
    return snap.derived("published_events", build)


def buffer_ranking(engine: MemLoomContext, rel: KindRelevance, top: int | None = None) -> list[int]:
    """Stream two: the sentence records no steward run has curated yet, by relevance (`order`), ties by id (the
    first `top` of them when given)."""
    return [sid for sid, _ in rel.ranked(buffered_records(engine), top)]


def buffered_records(engine: MemLoomContext) -> np.ndarray:
    """The sentence records in the real-time buffer, in id order (kept until the state changes)."""
    return engine.derived("buffered", lambda: np.asarray(sorted(
        n.id for n in engine.state.nodes.values() if n.kind == Kind.SENTENCE and n.status == Life.BUFFERED),
        dtype=np.int64))

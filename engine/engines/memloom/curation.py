"""MemLoom's curation and retention: what a steward run publishes, links by topic and archives by age.

Its own module because publication is the step every run ends with, whatever it repaired or synthesised:
active and closed events not yet published leave the real-time buffer and gain their topic-track links
(`topic_neighbours`, bounded for a long conversation), and closed events past `retention_sessions` retire.
"""
from __future__ import annotations

import numpy as np

from engine.core.edge import Edge
from engine.core.node import Node
from engine.core.tx import Tx
from engine.engines.memloom import online
from engine.engines.memloom.context import MemLoomContext
from engine.engines.memloom.schema import Kind, Life, Rel
from engine.engines.memloom.settings import MemLoomSettings
from engine.engines.memloom.timeline import chronological

# Topic-track neighbours: fresh events per matrix product, and how far a float32 product's cosine may be
# from the exact one-by-one dot product (unit vectors of 384 dimensions err by ~1e-6; this is far wider).
TOPIC_ROWS = 256
COSINE_MARGIN = 1e-4


def curate(engine: MemLoomContext, tx: Tx) -> None:
    """Publish every active or closed event not yet published: its records leave the real-time buffer."""
    s = engine.settings
    nodes = tx.state.nodes
    fresh = [e for e in chronological([n for n in nodes.values() if n.kind == Kind.EVENT])
             if e.status in Life.CURATED and not e.attrs.get("published")]
    published = [e for e in nodes.values() if e.kind == Kind.EVENT and e.status in Life.CURATED
                 and e.attrs.get("published")]
    for e in fresh:
        tx.update_node(e.id, attrs={**e.attrs, "published": tx.run_id})
        for m in e.members:
            if nodes[m].status == Life.BUFFERED:
                tx.set_status(m, Life.GROUNDED, {"rule": "curated", "event": e.id, "run": tx.run_id})
        tx.flush_buffer("realtime", list(e.members))
    pool = published + fresh
    if s.k_sem and len(pool) > 1:
        vec = {e.id: _vector(engine, e) for e in pool}
        near = topic_neighbours(vec, [e.id for e in fresh], [e.id for e in pool], s.theta_s, s.k_sem)
        for e in fresh:
            for cos, other in near[e.id]:
                if (other, e.id, Rel.TOPIC) not in tx.state.edges:
                    tx.add_edge(Edge(e.id, other, Rel.TOPIC, tx.run_id or "", round(cos, 4), tx.turn))

def _vector(engine: MemLoomContext, e: Node) -> np.ndarray:
    vecs = [engine.vectors[m] for m in e.members if m in engine.vectors]
    return online.centroid(vecs) if vecs else np.zeros(engine.embedder.dim, np.float32)

def retain(settings: MemLoomSettings, tx: Tx) -> list[int]:
    """Retention: closed events more than `retention_sessions` sessions old are archived."""
    keep = settings.retention_sessions
    if not keep:
        return []
    order = list(dict.fromkeys(tx.state.nodes[tx.state.turn_units[t]].session for t in tx.state.turn_ids
                               if t in tx.state.turn_units))
    rank = {sess: i for i, sess in enumerate(order)}
    gone = []
    for e in list(tx.state.nodes.values()):
        if e.kind == Kind.EVENT and e.status == Life.CLOSED and len(order) - 1 - rank.get(e.session, 0) >= keep:
            tx.set_status(e.id, Life.ARCHIVED, {"rule": "retention", "sessions": keep})
            gone.append(e.id)
    return gone


def topic_neighbours(vectors: dict[int, np.ndarray], fresh: list[int], pool: list[int], theta: float,
                     k: int) -> dict[int, list[tuple[float, int]]]:
    """Each fresh event's topic-track neighbours: the `k` other pool events of highest cosine ≥ `theta`, as
    (cosine, id), highest first, equal cosines by larger id.

    Cosines are first taken `TOPIC_ROWS` fresh events at a time as one matrix product (memory
    O(TOPIC_ROWS x pool)); only the pairs that product leaves within `COSINE_MARGIN` of the threshold and of
    the k-th best are recomputed one by one and sorted, so the Python work per event is O(k), not O(pool),
    and the result is that of sorting every exact pair.
    """
    ids = np.array(pool)
    matrix = np.stack([vectors[i] for i in pool])
    out: dict[int, list[tuple[float, int]]] = {}
    for start in range(0, len(fresh), TOPIC_ROWS):
        chunk = fresh[start:start + TOPIC_ROWS]
        approx = np.stack([vectors[e] for e in chunk]) @ matrix.T
        for e, row in zip(chunk, approx):
            cand = np.flatnonzero((row >= theta - COSINE_MARGIN) & (ids != e))
            sure = row[cand][row[cand] >= theta + COSINE_MARGIN]
            if len(sure) >= k:
                kth = np.partition(sure, len(sure) - k)[len(sure) - k]
                cand = cand[row[cand] >= kth - COSINE_MARGIN]
            sims = sorted(((float(vectors[e] @ vectors[int(ids[j])]), int(ids[j])) for j in cand), reverse=True)
            out[e] = [x for x in sims if x[0] >= theta][:k]
    return out

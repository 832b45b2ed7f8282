"""What every engine's retrieval returns: ranked nodes, each with the path that reached it.

Stage names come from the engine's schema; `stages` holds milliseconds per
stage (`<key>_ms`, plus `total_ms`). A path is a list of hops over edges that
exist in the state the retrieval ran on, starting at the result's seed.
`to_dict(labels=True)` writes node ids as the pages do ("u4"), for JSON a person reads.
"""
from __future__ import annotations

import heapq
from dataclasses import asdict, dataclass, field

from engine.core.node import node_label


@dataclass
class Hop:
    """One step of a path, from `src` to `dst` over an edge of `type`. A `reverse` hop walks a stored
    edge against its direction (MemLoom follows CAUSAL_FOLLOW from an effect back to its cause)."""

    src: int
    dst: int
    type: str
    reverse: bool = False

    @property
    def edge_key(self) -> tuple[int, int, str]:
        """The stored edge this hop walks."""
        return (self.dst, self.src, self.type) if self.reverse else (self.src, self.dst, self.type)

    def text(self) -> str:
        """`—version→ u4`, for a person reading a path."""
        return f"{hop_arrow(self.type, self.reverse)} {node_label(self.dst)}"

    def to_dict(self, labels: bool = False) -> dict:
        name = node_label if labels else int
        d = {"from": name(self.src), "to": name(self.dst), "type": self.type}
        if self.reverse:
            d["reverse"] = True
        return d


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
    status: str = ""
    layer: str = ""                        # the store it was searched in, for an engine with several (RecMem)
    provenance: list[Hop] = field(default_factory=list)   # hops from it down to what it derives from
    source_worth: dict[str, float] = field(default_factory=dict)    # each of several sources' own evidence
    factors: dict[str, float] = field(default_factory=dict)   # a multiplicative re-rank's parts (GAM: P_sem, β)

    def to_dict(self, labels: bool = False) -> dict:
        d = asdict(self)
        d["path"] = [h.to_dict(labels) for h in self.path]
        if labels:
            d["id"], d["anchor"] = node_label(self.id), node_label(self.anchor)
        for key in ("layer", "provenance", "source_worth", "factors"):     # only engines that have them
            if not d[key]:
                del d[key]
        if self.provenance:
            d["provenance"] = [h.to_dict(labels) for h in self.provenance]
        return d


@dataclass
class RetrievalResult:
    query: str
    anchors: list[tuple[int, float]]       # the seeds, ranked
    expansion: list[dict]                  # admissions beyond the seeds, in order: id, parent, type, hop
    candidates: list[RetrievedUnit]        # the final ranking of every candidate
    units: list[RetrievedUnit]             # the returned top of that ranking
    source_ids: list[str]
    context: str
    stages: dict[str, float] = field(default_factory=dict)
    reading: str = ""                      # how the engine read the query, when it routes by it (else empty)

    @classmethod
    def ranked(cls, query: str, anchors: list[tuple[int, float]], expansion: list[dict],
               candidates: list[RetrievedUnit], final_k: int | None, k: int | None,
               stages: dict[str, float], reading: str = "") -> RetrievalResult:
        """What every engine returns from its final ranking: the top `final_k` candidates (all with None), their
        text as the context, and the sources ranked over every candidate, cut to `k` when given."""
        top = candidates[:final_k] if final_k is not None else list(candidates)
        sources = rank_sources(candidates)
        return cls(query=query, anchors=anchors, expansion=expansion, candidates=candidates, units=top,
                   source_ids=sources[:k] if k else sources, context=materialize(top), stages=stages,
                   reading=reading)

    def source_carriers(self, k: int | None = None) -> list[tuple[str, RetrievedUnit | None]]:
        """The ranked source ids (cut to `k`), each with the best-ranked candidate carrying it: what R@k scores,
        with the text a person checks it by (the Retrieval page's sources, `memwb retrieve`'s text)."""
        best: dict[str, RetrievedUnit] = {}
        for r in self.candidates:
            for sid in r.source_ids:
                best.setdefault(sid, r)
        return [(sid, best.get(sid)) for sid in (self.source_ids[:k] if k else self.source_ids)]

    def to_dict(self, k: int | None = None, labels: bool = False) -> dict:
        name = node_label if labels else int
        expansion = [{**e, "id": name(e["id"]), "parent": name(e["parent"])} for e in self.expansion]
        return {"query": self.query, "source_ids": self.source_ids[:k] if k else self.source_ids,
                "units": [u.to_dict(labels) for u in self.units], "context": self.context,
                "anchors": [{"id": name(i), "score": round(s, 6)} for i, s in self.anchors],
                "expansion": expansion, "stages": {k2: round(v, 3) for k2, v in self.stages.items()},
                **({"reading": self.reading} if self.reading else {})}


def hop_arrow(etype: str, reverse: bool = False) -> str:
    """`—CAUSAL_FOLLOW (reverse)→`: a reverse hop walks the stored edge against its direction."""
    return f"—{etype}{' (reverse)' if reverse else ''}→"


def rank_sources(candidates: list[RetrievedUnit]) -> list[str]:
    """Key_src(s) = (-best(s), first(s), s) over the whole candidate ranking (All-Mem Eq. 37-39), where a result
    carrying several turns may say what it is worth to each (`source_worth`: the turn's own evidence, the score
    of the unit that holds it alone): the turn takes no more than that from it, and the result's turns tie-break
    by it before their ids. A result is retrieved for what its turns say together (an All-Mem representative, a
    RecMem episode or fact); a turn whose own words miss the question should not take a source slot at its
    score."""
    return order_sources(source_standing(candidates))


def order_sources(standing: dict[str, tuple[float, int, float]]) -> list[str]:
    """The source ids of a `source_standing` in `rank_sources` order."""
    return sorted(standing, key=lambda sid: (-standing[sid][0], standing[sid][1], -standing[sid][2], sid))


def source_standing(candidates: list[RetrievedUnit]) -> dict[str, tuple[float, int, float]]:
    """Each source id's (best, first, within) of `rank_sources`: the most any candidate gives it, the rank of
    the first candidate carrying it, and that candidate's worth for it (0 when it says none)."""
    out: dict[str, tuple[float, int, float]] = {}
    for rank, r in enumerate(candidates):
        for sid in r.source_ids:
            score = given(r, sid)
            held = out.get(sid)
            if held is None:
                out[sid] = (score, rank, r.source_worth.get(sid, 0.0))
            elif score > held[0]:
                out[sid] = (score, held[1], held[2])
    return out


def given(r: RetrievedUnit, sid: str) -> float:
    """What result `r` gives source `sid`: its score, or the turn's own evidence when that is less."""
    own = r.source_worth.get(sid)
    return r.score if own is None else min(r.score, own)


def first_by(items: list, key, top: int | None = None) -> list:
    """`sorted(items, key=key)[:top]` (all of them when `top` is None), without sorting what falls below `top`."""
    return sorted(items, key=key) if top is None else heapq.nsmallest(top, items, key=key)


def materialize(units: list[RetrievedUnit]) -> str:
    """`[time] raw evidence` blocks in time order: what an answering model reads."""
    blocks = sorted(units, key=lambda r: (r.time == "", r.time, r.id))
    return "\n\n".join(f"[{r.time}] {r.raw}" if r.time else r.raw for r in blocks)


def path_to(uid: int, parent: dict[int, Hop | None]) -> list[Hop]:
    """The hops from the seed to `uid` through a BFS parent map."""
    path: list[Hop] = []
    node = uid
    while parent[node] is not None:
        path.append(parent[node])
        node = parent[node].src
    return path[::-1]

"""Why a unit ranked where it did, or which retrieval stage dropped it.

Every engine explains its own results (`BaseEngine.explain`) from the stages it
really ran: a candidate gets the signals it was ranked by (dense cosine, BM25,
their z-values and weight, the off-surface penalty, a score passed down a
relation chain, its hop and the type of the edge that reached it); any other
unit gets a `Drop` code, the key of the schema stage that dropped it and a
detail line with that stage's numbers ("anchor rank 57 > top-k 10"). The codes
and their labels live here once, so pages name a drop the same way for every
engine without importing one.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Iterable, Protocol

from engine.core.node import Node
from engine.core.state import MemoryState
from engine.retrieval.result import rank_sources

if TYPE_CHECKING:
    from engine.retrieval.relevance import ZReference
    from engine.retrieval.result import RetrievalResult, RetrievedUnit


class Drop(StrEnum):
    BELOW_K = "below_k"                    # a candidate ranked below the returned top
    CANDIDATE_CAP = "candidate_cap"        # scored, but below the most candidates the ranking keeps
    BELOW_SEED_CUT = "below_seed_cut"      # on the surface, ranked below the seed cut, and no path reached it
    OFF_SURFACE = "off_surface"            # off the retrieval surface and no path reached it
    BUDGET = "budget"                      # reachable within the hop limit, but the expansion's caps were spent
    EXPANSION_OFF = "expansion_off"        # an ablation switched the stage that could have reached it off
    FILTERED = "filtered"                  # a kind or status the stage does not search
    UNPUBLISHED = "unpublished"            # no event on the published snapshot points to it (MemLoom)
    BUFFER_CUT = "buffer_cut"              # a buffered record below the real-time stream's cut (MemLoom)
    GONE = "gone"                          # no such unit in the state retrieval ran on


DROP_LABELS: dict[Drop, str] = {
    Drop.BELOW_K: "a candidate, ranked below the returned top",
    Drop.CANDIDATE_CAP: "scored, but below the candidates the ranking keeps",
    Drop.BELOW_SEED_CUT: "ranked below the seed cut and no path reached it",
    Drop.OFF_SURFACE: "not on the retrieval surface and no path reached it",
    Drop.BUDGET: "reachable, but the expansion's budget was spent before it",
    Drop.EXPANSION_OFF: "the stage that could reach it is switched off",
    Drop.FILTERED: "filtered by kind or status",
    Drop.UNPUBLISHED: "no event on the published snapshot points to it",
    Drop.BUFFER_CUT: "buffered record below the real-time stream's cut",
    Drop.GONE: "no such unit at this point",
}


@dataclass(frozen=True)
class Signals:
    """What a unit was ranked by. `relevance` is its own fused relevance,
    z(dense)·1 + weight·z(lexical) − penalty (with weight 0 the plain cosine − penalty in cosine units);
    `score` is what the ranking used: the relevance, or more when a relation chain passed a score down
    (`inherited`)."""

    dense: float
    lexical: float
    z_dense: float
    z_lexical: float
    weight: float
    penalty: float
    relevance: float
    score: float
    inherited: float | None = None
    hop: int = 0
    edge: str = ""                 # the type of the relation hop that reached it ("" for a seed)
    reverse: bool = False          # that hop walked its stored edge backwards
    admitted: str = ""             # the key of the schema stage that made it a candidate
    factors: tuple[tuple[str, float], ...] = ()   # a multiplicative re-rank's parts, in order (GAM: P_sem, β_k)
    lexical_of: int | None = None  # the part whose BM25 a representative took (it holds that part's whole text)
    reference: ZReference | None = None   # what the z-values are relative to (None where an engine does not say)


@dataclass(frozen=True)
class Placement:
    """Where one unit fell in one retrieval: its candidate rank (1-based) and signals, and unless it was
    returned, the drop code, the stage key that dropped it and that stage's numbers."""

    uid: int
    rank: int | None
    returned: bool
    signals: Signals | None
    drop: Drop | None = None
    stage: str = ""
    detail: str = ""

    @property
    def candidate(self) -> bool:
        return self.rank is not None

    @property
    def reason(self) -> str:
        """The drop's label and its numbers: "ranked below the seed cut…: anchor rank 57 > top-k 10"."""
        if self.drop is None:
            return ""
        return DROP_LABELS[self.drop] + (f": {self.detail}" if self.detail else "")


@dataclass(frozen=True)
class SourcePlacement:
    """Where a dataset turn (a source id) fell: its rank among the ranked source ids, and the placement of
    the best unit carrying it (the best-ranked candidate, else the most relevant unit). `units` counts the
    units that carry it; 0 means nothing ingested so far holds it."""

    source_id: str
    source_rank: int | None
    units: int
    best: Placement | None


class ExplainingMemory(Protocol):
    """A memory that can say where each unit fell in one of its own retrievals (every engine can)."""

    state: MemoryState

    def explain(self, res: RetrievalResult, uids: Iterable[int]) -> dict[int, Placement]: ...


def candidate_ranks(res: "RetrievalResult") -> dict[int, int]:
    return {r.id: i for i, r in enumerate(res.candidates, 1)}


def ranked_placement(res: "RetrievalResult", uid: int, signals: Signals, ranks: dict[int, int],
                     ranking_stage: str) -> Placement:
    """A candidate's placement: returned, or dropped below the returned top at the ranking stage."""
    rank = ranks[uid]
    if rank <= len(res.units):
        return Placement(uid, rank, True, signals)
    return Placement(uid, rank, False, signals, Drop.BELOW_K, ranking_stage,
                     f"rank {rank} > the {len(res.units)} returned")


def place_each(state: MemoryState, res: "RetrievalResult", uids: Iterable[int], *, first_stage: str,
               ranking_stage: str, ranked: Callable[["RetrievedUnit"], Signals], dropped: Callable[[Node], Placement],
               unranked: Callable[[Node], Placement | None] = lambda node: None) -> dict[int, Placement]:
    """The walk every engine's `explain` shares, over `uids`: an id `state` does not hold is GONE (at
    `first_stage`); a node `unranked` places (a kind retrieval does not rank) is placed so; a candidate of `res`
    gets the signals `ranked` gives it and its rank (`ranked_placement`); any other node is what `dropped`,
    the engine re-asking its own stages, says."""
    ranks = candidate_ranks(res)
    by_id = {r.id: r for r in res.candidates}
    out: dict[int, Placement] = {}
    for uid in uids:
        node = state.nodes.get(uid)
        if node is None:
            out[uid] = Placement(uid, None, False, None, Drop.GONE, first_stage, f"u{uid} is not in this state")
        elif (placed := unranked(node)) is not None:
            out[uid] = placed
        elif uid in by_id:
            out[uid] = ranked_placement(res, uid, ranked(by_id[uid]), ranks, ranking_stage)
        else:
            out[uid] = dropped(node)
    return out


def reachable(starts: Iterable[int], steps, hops: int) -> dict[int, int]:
    """Every node within `hops` steps of `starts` (`steps(u)` lists u's neighbours), with its distance,
    with no budget or branching cap: what an expansion could reach if nothing ran out."""
    dist = {u: 0 for u in starts}
    frontier = list(dist)
    for h in range(1, hops + 1):
        nxt = []
        for u in frontier:
            for v in steps(u):
                if v not in dist:
                    dist[v] = h
                    nxt.append(v)
        frontier = nxt
    return dist


def explain_sources(engine: ExplainingMemory, res: "RetrievalResult", source_ids: Iterable[str]
                    ) -> list[SourcePlacement]:
    """Each source id's rank among every candidate's source ids (what R@k cuts) and its best unit's placement in
    `res`, retrieved from `engine`'s state under its settings."""
    source_ids = list(source_ids)
    carriers: dict[str, list[int]] = {s: [] for s in source_ids}
    for u in engine.state.nodes.values():
        for sid in u.source_ids:
            if sid in carriers:
                carriers[sid].append(u.id)
    placements = engine.explain(res, sorted({u for us in carriers.values() for u in us}))
    ranked = {sid: i for i, sid in enumerate(rank_sources(res.candidates), 1)}     # uncut by the result's k
    out = []
    for sid in source_ids:
        found = [placements[u] for u in carriers[sid] if u in placements]
        best = min(found, default=None, key=lambda p: (
            p.rank if p.rank is not None else float("inf"), p.drop == Drop.FILTERED,
            -(p.signals.relevance if p.signals is not None else float("-inf")), p.uid))
        out.append(SourcePlacement(sid, ranked.get(sid), len(carriers[sid]), best))
    return out

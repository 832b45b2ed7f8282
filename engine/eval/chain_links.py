"""How a memory holds each link of a causal chain: the step from a gold chain's turn to the next one.

A why-question's gold evidence is a chain, root cause first; strict chain recall needs every turn of it. When
a chain is missed, the turn-level fates (`engine.eval.misses`) say where its turns fell, and this says whether
the memory could have walked from the effect back to its cause at all. Each consecutive pair (cause turn,
effect turn) has one fate, read from the engine's state and the edge types its schema marks as causal
(`EdgeTypeSpec.cause_end`):

- **cited**: a causal relation runs from a node carrying the cause to one carrying the effect, and the records
  it cites (its `evidence`, when it cites any) carry both turns;
- **other records**: such a relation joins the right nodes (two events) but cites other records of them;
- **same node**: no such relation, but one node carries both turns (an event holding both steps), so a walk
  has no hop to take between them;
- **pending**: no such relation, and one of the turns is carried by a node still in the engine's first
  status (a MemLoom record in the real-time buffer, an event in GAM's buffer): no consolidation has curated
  it, so no relation can reach it yet. A streaming benchmark asks before the newest turns are
  consolidated; this is that gap;
- **unlinked**: both turns are stored and nothing above holds; with no causal edge type (naive RAG, All-Mem)
  every stored link is this;
- **not stored**: no node carries one of the two turns.

A relation the wrong way round (the cause's node as the effect) does not count.
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass
from enum import StrEnum
from typing import Iterable

from engine.core.schema import EngineSchema
from engine.core.state import MemoryState


class LinkFate(StrEnum):
    CITED = "cited"
    OTHER_RECORDS = "other_records"
    SAME_NODE = "same_node"
    PENDING = "pending"
    UNLINKED = "unlinked"
    NOT_STORED = "not_stored"


LINK_FATE_LABELS: dict[LinkFate, str] = {
    LinkFate.CITED: "relation citing both",
    LinkFate.OTHER_RECORDS: "relation citing others",
    LinkFate.SAME_NODE: "both in one node",
    LinkFate.PENDING: "not yet consolidated",
    LinkFate.UNLINKED: "no relation",
    LinkFate.NOT_STORED: "a turn not stored",
}


@dataclass(frozen=True)
class ChainLink:
    """One step of a gold chain and how the memory holds it; `edge` is (src, dst, type) of the relation found
    (the most confident, ties by key), with its `confidence`."""

    cause: str
    effect: str
    fate: LinkFate
    edge: tuple[int, int, str] | None = None
    confidence: float | None = None

    def to_dict(self) -> dict:
        out = asdict(self)
        out["fate"] = str(self.fate)
        out["edge"] = list(self.edge) if self.edge else None
        return out


def follow_links(state: MemoryState, schema: EngineSchema, chain: Iterable[str]) -> list[ChainLink]:
    """The fate of each consecutive (cause, effect) pair of `chain` (root cause first) in `state`."""
    chain = list(dict.fromkeys(chain))
    ends = {e.name: e.cause_end for e in schema.edge_types if e.cause_end and not e.query_time}
    held = {t: set(state.carriers(t)) for t in chain}
    relations = []
    for edge in state.edges.values():
        end = ends.get(edge.type)
        if end:
            cause, effect = (edge.src, edge.dst) if end == "src" else (edge.dst, edge.src)
            relations.append((cause, effect, edge))
    out = []
    for a, b in zip(chain, chain[1:]):
        if not held[a] or not held[b]:
            out.append(ChainLink(a, b, LinkFate.NOT_STORED))
            continue
        joining = [e for c, f, e in relations if c in held[a] and f in held[b]]
        if joining:
            cited = [e for e in joining if _cites(state, e.evidence, a, b)]
            best = min(cited or joining, key=lambda e: (-(e.confidence or 0.0), e.key))
            out.append(ChainLink(a, b, LinkFate.CITED if cited else LinkFate.OTHER_RECORDS, best.key,
                                 best.confidence))
        elif held[a] & held[b]:
            out.append(ChainLink(a, b, LinkFate.SAME_NODE))
        elif ends and any(state.nodes[u].status == schema.initial_status for t in (a, b) for u in held[t]):
            out.append(ChainLink(a, b, LinkFate.PENDING))
        else:
            out.append(ChainLink(a, b, LinkFate.UNLINKED))
    return out


def _cites(state: MemoryState, evidence: list[int], cause: str, effect: str) -> bool:
    """Whether a relation's cited records carry both turns (a relation that cites nothing joins the nodes
    themselves, which carry them)."""
    if not evidence:
        return True
    said = {s for uid in evidence if uid in state.nodes for s in state.nodes[uid].source_ids}
    return cause in said and effect in said


def tally_links(records: list[dict], ranked_whole: Callable[[dict], bool] | None = None) -> dict:
    """Over question records holding `chain_links`: links per fate, per category, and the questions whose every
    link is cited (a chain the memory holds whole). With `ranked_whole` (whether a record's chain was whole in
    its top k), also how many of those held whole the ranking kept whole: the rest were lost by ranking, not by
    the memory."""
    fates: Counter = Counter()
    by_category: dict[str, Counter] = {}
    whole = kept = 0
    for q in records:
        links = q.get("chain_links") or []
        for link in links:
            fates[link["fate"]] += 1
            by_category.setdefault(str(q.get("category")), Counter())[link["fate"]] += 1
        held = bool(links) and all(link["fate"] == LinkFate.CITED for link in links)
        whole += held
        kept += held and ranked_whole is not None and ranked_whole(q)
    order = list(LinkFate)
    out = {"links": sum(fates.values()), "questions": sum(1 for q in records if q.get("chain_links")),
           "held_whole": whole, "fates": {str(f): fates[f] for f in order},
           "by_category": {c: {str(f): n[f] for f in order} for c, n in sorted(by_category.items())}}
    if ranked_whole is not None:
        out["held_whole_ranked_whole"] = kept
    return out

"""Graph-guided multi-factor retrieval (GAM §3.4): anchor, expand, drill down, re-rank.

1. Semantic anchoring: the top-k topic nodes by z(cosine of c_sum) + w·z(BM25 of the topic's text), then their
   first-order neighbours over topic relation edges, either way (Eq. 9).
2. Structural drill-down: every event of the archived event graphs the anchors' `cross` edges lead to (Eq. 10),
   plus the most relevant events of the active buffer (the agent's working context; not in the paper's
   retrieval, which reads only consolidated memory: the `no-buffer` ablation drops them).
3. Multi-factor re-ranking (Eq. 11): Score = P_sem · Π β_k^I_k. The paper's P_sem comes from the cross-encoder
   ms-marco-MiniLM-L-6-v2, which cannot be downloaded here; the substitute is σ(slope·(r − center)) of the
   relevance r = z(cosine) + w·z(BM25), the embedder's cosine, z-statistics over every event (`rerank_model` names
   it). Like a cross-encoder's, it is near 0 for an ordinary event (r = 0: 0.018 at the defaults) and 0.5 two
   standard deviations up, so the β boosts reorder relevant events rather than lift irrelevant ones. Indicators:
   I_time (a time-sensitive query and a memory with a temporal expression), I_role (the memory's speaker is named in the
   query), I_conf (the event passed the self-consistency check when its topic was consolidated).

Every result's path is anchor topic → (topic edge) → cross edge → event, each hop an edge of the state, and its
factors are on the result (`RetrievedUnit.factors`).
"""
from __future__ import annotations

import functools
import re
import time
from dataclasses import dataclass

import numpy as np

from engine.core.text import words
from engine.engines.gam.context import GamContext
from engine.engines.gam.schema import Kind, Life, Rel
from engine.retrieval.index import rounded
from engine.retrieval.kind_relevance import KindRelevance, Positions, SketchedKindRelevance
from engine.retrieval.result import Hop, RetrievalResult, RetrievedUnit
from engine.retrieval.sketch import SKETCH_FROM

TOPIC_EDGES = tuple(t for t in Rel.TOPIC)        # expansion order: the schema's priority order
_TIME_QUERY = re.compile(r"\b(when|what (date|day|time|year|month)|how long|how many (days|weeks|months|years)|"
                         r"before|after|during|since|until|first|last|recent(ly)?|ago|year|month|week)\b", re.I)
_MONTHS = ("january|february|march|april|may|june|july|august|september|october|november|december|"
           "jan|feb|mar|apr|jun|jul|aug|sep|sept|oct|nov|dec")
_TEMPORAL = re.compile(
    r"\b((19|20)\d\d|(" + _MONTHS + r")\b|monday|tuesday|wednesday|thursday|friday|saturday|sunday|today|tonight|"
    r"yesterday|tomorrow|weekend|morning|evening|afternoon|ago|(last|next|this|past) (week|month|year|night|"
    r"summer|winter|spring|fall|time)|\d+ (days?|weeks?|months?|years?)|recently|lately|soon|since|anniversary|"
    r"birthday)", re.I)


def time_sensitive(query: str) -> bool:
    return bool(_TIME_QUERY.search(query))


@functools.lru_cache(maxsize=65536)
def has_temporal(text: str) -> bool:
    """Cached: the re-rank asks it of every reached event, query after query."""
    return bool(_TEMPORAL.search(text))


def named_speakers(query: str, first_names: dict[str, str]) -> set[str]:
    """The speakers whose first name the query mentions (`first_names`: speaker -> first name, `first_name_of`)."""
    said = set(words(query))
    return {s for s, first in first_names.items() if first in said}


def first_name_of(speakers) -> dict[str, str]:
    """Each named speaker's first name as `words` reads it."""
    return {s: words(s)[0] for s in speakers if s and words(s)}


def relevance(engine: GamContext, zq: np.ndarray, bm25: np.ndarray, kind: str, weight: float) -> KindRelevance:
    """z(cosine) + w·z(BM25) of every node of one kind, z over that kind (from the kind's sketch once it holds
    `SKETCH_FROM` nodes: at 100,000 turns GAM holds 100,000 events)."""
    at_ = engine.derived(f"ids of {kind}", lambda: Positions.of(sorted(
        n.id for n in engine.state.nodes.values() if n.kind == kind)))
    if len(at_.ids) >= SKETCH_FROM:
        return SketchedKindRelevance(at_, engine.sketched_rows(f"vectors of {kind}", at_.array), zq, bm25, weight)
    matrix = engine.derived(f"vectors of {kind}", lambda: np.stack([engine.vectors[i] for i in at_.ids])
                            if at_.ids else np.zeros((0, 0), np.float32))
    return KindRelevance(at_, matrix @ zq if at_.ids else np.zeros(0), bm25, weight)


@dataclass
class Scoring:
    """What the stages share for one query: both relevances, the factor indicators and the re-rank's constants."""

    topics: KindRelevance
    events: KindRelevance
    time_query: bool
    named: set[str]
    betas: tuple[float, float, float]           # β_time, β_role, β_conf (all 1 under no-mfr)
    consistent: frozenset[int]                   # events that passed their topic's self-consistency check
    sigmoid: tuple[float, float]                 # P_sem's slope and center

    def factors(self, engine: GamContext, uid: int) -> dict[str, float]:
        """P_sem and each β_k^I_k of an event, in Eq. 11's order (β = 1 where the indicator is 0)."""
        return factor_dicts(self.factor_columns([engine.state.nodes[uid]], np.asarray([self.events.fused[uid]])))[0]

    def factor_columns(self, nodes: list, relevance: np.ndarray) -> tuple[np.ndarray, ...]:
        """`factors` of each event node, whose fused relevance is given, as one array per factor: the re-rank
        reads every reached event at once (~300 per query on a LoCoMo conversation)."""
        (b_time, b_role, b_conf), (slope, center) = self.betas, self.sigmoid
        with np.errstate(over="ignore"):
            p_sem = rounded(1.0 / (1.0 + np.exp(-np.clip(slope * (relevance - center), -60.0, 60.0))), 6)
        named, consistent = self.named, self.consistent
        return (p_sem,
                indicator(b_time, self.time_query and (has_temporal(u.raw) for u in nodes), len(nodes)),
                indicator(b_role, bool(named) and (not named.isdisjoint(u.speakers) for u in nodes), len(nodes)),
                indicator(b_conf, (u.id in consistent for u in nodes), len(nodes)))


def indicator(beta: float, on, n: int) -> np.ndarray:
    """β where the indicator holds, else 1 (`on`: each node's indicator, or False when it holds for none)."""
    return np.where(np.fromiter(on, dtype=bool, count=n), beta, 1.0) if on else np.ones(n)


def factor_dicts(columns: tuple[np.ndarray, ...]) -> list[dict[str, float]]:
    """Each event's factors from `Scoring.factor_columns`, in Eq. 11's order."""
    return [{"P_sem": p, "β_time": t, "β_role": r, "β_conf": c} for p, t, r, c in zip(*(c.tolist() for c in columns))]


def scoring(engine: GamContext, query: str) -> Scoring:
    s = engine.settings
    zq = engine.embedder.embed_one(query)
    bm25 = engine.bm25.score_vector(query)
    lexical = not s.has("no-lexical")
    speakers = engine.derived("speakers", lambda: first_name_of({sp for n in engine.state.nodes.values()
                                                                 if n.kind == Kind.EVENT for sp in n.speakers}))
    mfr = not s.has("no-mfr")
    return Scoring(relevance(engine, zq, bm25, Kind.TOPIC, s.anchor_lexical_weight if lexical else 0.0),
                   relevance(engine, zq, bm25, Kind.EVENT, s.rerank_lexical_weight if lexical else 0.0),
                   time_sensitive(query), named_speakers(query, speakers),
                   (s.beta_time, s.beta_role, s.beta_conf) if mfr else (1.0, 1.0, 1.0),
                   consistent_events(engine), (s.psem_slope, s.psem_center))


def consistent(engine: GamContext, uid: int) -> set[int]:
    """The events of `uid`'s topic that passed the self-consistency check (none for a buffered event)."""
    state = engine.state
    topic = next(iter(sorted(state.inc(uid, Rel.CROSS))), None)
    return set(state.nodes[topic].attrs.get("consistent", ())) if topic is not None else set()


def consistent_events(engine: GamContext) -> frozenset[int]:
    """Every event that passed its topic's self-consistency check (`consistent`), kept until the state changes."""
    return engine.derived("consistent events", lambda: frozenset(
        n.id for n in engine.state.nodes.values() if n.kind == Kind.EVENT and n.id in consistent(engine, n.id)))


def anchor_ranking(sc: Scoring, top: int | None = None) -> list[tuple[int, float]]:
    """Every topic by fused relevance, ties by id (the first `top` when given)."""
    return sc.topics.ranked(top=top)


def buffer_ranking(engine: GamContext, sc: Scoring, top: int | None = None) -> list[int]:
    """The active buffer's events by fused relevance, ties by id (the first `top` when given)."""
    buffered = engine.derived("buffered events", lambda: np.asarray(sorted(
        n.id for n in engine.state.nodes.values() if n.kind == Kind.EVENT and n.status == Life.BUFFERED),
        dtype=np.int64))
    return [e for e, _ in sc.events.ranked(buffered, top)]


def expand(state, anchors: list[int]) -> tuple[dict[int, Hop | None], list[dict]]:
    """Eq. 9: the anchors and their first-order neighbours over topic edges (either way); the first anchor in
    rank order to reach a neighbour, over the first edge type in priority order, is its parent."""
    parent: dict[int, Hop | None] = {a: None for a in anchors}
    admitted: list[dict] = []
    for a in anchors:
        for etype in TOPIC_EDGES:
            steps = [(v, False) for v in sorted(state.out(a, etype))] + [(v, True) for v in sorted(state.inc(a, etype))]
            for v, rev in steps:
                if v not in parent and state.nodes[v].kind == Kind.TOPIC:
                    parent[v] = Hop(a, v, etype, rev)
                    admitted.append({"id": v, "parent": a, "type": etype, "hop": 1, "reverse": rev})
    return parent, admitted


def retrieve(engine: GamContext, query: str, k: int | None = None) -> RetrievalResult:
    s, state = engine.settings, engine.state
    t0 = time.perf_counter()
    sc = scoring(engine, query)
    anchors = anchor_ranking(sc, s.k)
    parent, expansion = expand(state, [a for a, _ in anchors]) if not s.has("no-expansion") else \
        ({a: None for a, _ in anchors}, [])
    t1 = time.perf_counter()
    reached: dict[int, tuple[int, list[Hop]]] = {}                 # event -> (anchor, path)
    for topic, hop in parent.items():               # anchors in rank order, then their neighbours as admitted
        path = [hop] if hop is not None else []
        anchor = hop.src if hop is not None else topic
        for e in sorted(state.out(topic, Rel.CROSS)):
            if e not in reached:
                reached[e] = (anchor, path + [Hop(topic, e, Rel.CROSS)])
                expansion.append({"id": e, "parent": topic, "type": Rel.CROSS, "hop": len(path) + 1,
                                  "reverse": False})
    if not s.has("no-buffer"):
        for e in buffer_ranking(engine, sc, s.buffer_k):
            reached.setdefault(e, (e, []))
    t2 = time.perf_counter()
    ids = list(reached)
    events = [state.nodes[e] for e in ids]
    fused, dense, lexical = sc.events.columns(ids)
    columns = sc.factor_columns(events, np.asarray(fused))
    p_sem, b_time, b_role, b_conf = columns
    score = p_sem * b_time * b_role * b_conf
    # by score (P_sem is already rounded to 6 places, which rounding to 9 keeps), then P_sem, then id
    order = np.lexsort((np.asarray(ids), -p_sem, -rounded(score, 9))).tolist()
    factors = factor_dicts(columns)
    score6, dense6, lexical6 = (rounded(np.asarray(c), 6).tolist() for c in (score, dense, lexical))
    candidates = [_result(events[i], score6[i], factors[i], *reached[ids[i]], dense6[i], lexical6[i]) for i in order]
    t3 = time.perf_counter()
    stages = {"anchor_ms": (t1 - t0) * 1e3, "drill_ms": (t2 - t1) * 1e3, "rerank_ms": (t3 - t2) * 1e3,
              "total_ms": (t3 - t0) * 1e3}
    return RetrievalResult.ranked(query, anchors, expansion, candidates, s.final_k, k, stages)


def _result(u, score: float, factors: dict[str, float], anchor: int, path: list[Hop], dense: float,
            lexical: float) -> RetrievedUnit:
    """One re-ranked event, its figures already rounded (fields in `RetrievedUnit`'s order: called for every
    event the anchors reach, where keyword arguments cost a fifth of the query)."""
    return RetrievedUnit(u.id, u.visible, score, dense, lexical, anchor, len(path), path, list(u.source_ids), u.time,
                         u.raw, u.kind, u.status, "", [], {}, factors)

"""Bounded dual-stream retrieval (MemLoom §3.7).

Stream one reads the last published snapshot: seed events by the relevance of
their sentence records, walk the relation closure (CAUSAL_FOLLOW,
STATE_SUCCESSOR, SAME_EVENT and TEMPORAL_NEXT in both directions, lineage to
retired events) under caps on seeds, hops and branching, and ground every
reached event to sentence records through its evidence pointers. Stream two
is the real-time buffer: sentence records no steward run has curated yet,
ranked directly.

The walk is best first: the event with the most to pass on expands first. A
why-question walks CAUSAL_FOLLOW back to causes (and STATE_SUCCESSOR back to
the earlier states of a changed fact), a history question STATE_SUCCESSOR
back to earlier states; along that chain an event inherits its
parent's score less `chain_hop_cost` (plus `hop_cost` per weaker alternative),
and its records the relation cites take that score, so a root cause that
shares no words with the query ranks beside the effect it explains. One more
record of the event follows: on the chain, the latest change the cited cause's
speaker reported before it (the chain's previous step inside a long event) one
`chain_hop_cost` further back; otherwise a reported change first, at
`uncited_cost` less.
Every other record ranks on its own relevance. Every result carries its path:
seed event, relation hops, then the pointer to the record and its dataset turn.
"""
from __future__ import annotations

import heapq
import time
from types import SimpleNamespace

from engine.engines.memloom.context import MemLoomContext
from engine.engines.memloom.reading import read_query
from engine.engines.memloom.relations import link_scorer
from engine.engines.memloom.schema import Kind, Rel
from engine.engines.memloom.seeds import buffer_ranking, buffered_records, published_events, relevance, seed_ranking
from engine.retrieval.kind_relevance import KindRelevance
from engine.retrieval.links import has_change, probability, strongest_links_of_each
from engine.retrieval.relevance import DECIMALS
from engine.retrieval.result import Hop, RetrievalResult, RetrievedUnit, first_by, path_to

TRAVERSED = (Rel.CAUSAL_FOLLOW, Rel.STATE_SUCCESSOR, Rel.SAME_EVENT, Rel.TEMPORAL_NEXT, Rel.LINEAGE)
PRIORITY = {t: i for i, t in enumerate(TRAVERSED)}
# a why-question walks back through causes and through the earlier states of a changed fact ("we moved to
# Riverside" after "we're looking at places in Riverside": a plan and its outcome is one fact's succession, and
# the story's cause lies behind the plan); a history question walks the states alone
CHAIN = {"cause": (Rel.CAUSAL_FOLLOW, Rel.STATE_SUCCESSOR), "history": (Rel.STATE_SUCCESSOR,)}


def retrieve(engine: MemLoomContext, query: str, k: int | None = None) -> RetrievalResult:
    s = engine.settings
    t0 = time.perf_counter()
    reading = read_query(query)
    chain = CHAIN.get(reading.intent, ())
    scores = relevance(engine, query)
    snap = engine.published_view()
    sstate = snap.state if snap is not None else None
    seeds = seed_ranking(snap, scores, s.seeds)
    buffered = buffer_ranking(engine, scores, s.realtime_k) if not s.has("no-realtime") else []
    fresh = (fresh_seeds(scores, seeds, buffered, s.seeds) if chain == CHAIN["cause"] and not s.has("no-relations")
             else [])
    t1 = time.perf_counter()

    parent: dict[int, Hop | None] = {e: None for e, _ in [*seeds, *fresh]}
    inherited = dict([*seeds, *fresh])
    expansion: list[dict] = []
    logic: dict[tuple[int, int], int] = {}      # a query-time logic-track hop (from, to) -> the record it cites
    if (sstate is not None or fresh) and not s.has("no-traversal"):
        # best first: the event with the highest score to pass on expands first, so a strong seed's chain
        # claims its events before a weak seed reaches them by some other relation
        order, depth = dict(inherited), {e: 0 for e in inherited}
        arrival = {e: best_record(sstate, e, scores) for e, _ in seeds} if chain else {}
        arrival.update((b, b) for b, _ in fresh)
        heap = [(-round(sc, 9), 0, e) for e, sc in inherited.items()]
        heapq.heapify(heap)
        while heap:
            key, h, u = heapq.heappop(heap)
            if h >= s.hops or (key, h) != (-round(order[u], 9), depth[u]):      # at the cap, or taken over
                continue
            taken = 0
            if engine.state.nodes[u].kind == Kind.SENTENCE:        # a buffered record: no relation leads from it
                steps = fresh_causes(engine, snap, u, s, logic)
            else:
                steps = continuing(sstate, event_steps(snap, u, chain), u, arrival.get(u), chain)
            for v, etype, rev in steps:
                if taken >= s.branching:
                    break
                # only the chain the question asks for, walked back in time (why: causes, history: earlier
                # states), passes the seed's rank on: its most confident link costs little, each weaker
                # alternative a full hop more; any other relation only makes its records candidates on
                # their own relevance. The chain takes over an event already reached (a weak seed, say)
                # when it passes on more than that event has.
                passed = (inherited[u] - s.chain_hop_cost - taken * s.hop_cost
                          if walks_back(etype, rev, chain) and u in inherited else None)
                if v in parent and (passed is None or passed <= inherited.get(v, float("-inf"))):
                    continue
                parent[v] = Hop(u, v, etype, rev)
                if passed is not None:
                    inherited[v] = passed
                    arrival[v] = logic[(u, v)] if etype == Rel.LOGIC else sstate.edges[(v, u, etype)].evidence[0]
                order[v], depth[v] = inherited.get(v, order[u] - s.hop_cost), h + 1
                taken += 1
                expansion.append({"id": v, "parent": u, "type": etype, "hop": h + 1, "reverse": rev})
                heapq.heappush(heap, (-round(order[v], 9), h + 1, v))
    t2 = time.perf_counter()

    # sentence -> (score, its rounding, -hops, anchor, event it was reached through or None, whether the logic
    # track reached it itself); the path is built for the returned ones only
    best: dict[int, tuple[float, float, int, int, int | None, bool]] = {}

    def offer(sid: int, score: float, key: float, anchor: int, hops: int, event: int | None,
              linked: bool = False) -> None:
        old = best.get(sid)
        if old is None or (key, -hops) > (old[1], old[2]):
            best[sid] = (score, key, -hops, anchor, event, linked)

    records_reached = [u for u in parent if engine.state.nodes[u].kind == Kind.SENTENCE]
    events = [u for u in parent if engine.state.nodes[u].kind != Kind.SENTENCE]
    evidence = snap.derived("evidence", dict) if snap is not None else {}      # event -> its records, in id order
    for e in events:
        if e not in evidence:
            evidence[e] = sorted(sstate.out(e, Rel.EVIDENCE))
    rel, rounded = scores.lookup([sid for e in events for sid in evidence[e]] + buffered + records_reached)
    paths: dict[int, list[Hop]] = {}
    for e in events:
        path = paths[e] = path_to(e, parent)
        cited = _cited(sstate, parent[e], logic)
        records = [sid for sid in evidence[e] if sid in rel]
        hop = parent[e]
        anchor = path[0].src if path else e
        if hop is None or e not in inherited:           # a seed, or reached off the chain: its own relevance
            for sid in records:
                offer(sid, rel[sid], rounded[sid], anchor, len(path) + 1, e)
            continue
        further, further_cost = _further(sstate, records, cited, rounded, settings=s,
                                         on_chain=walks_back(hop.type, hop.reverse, chain))
        for sid in records:
            score, key = rel[sid], rounded[sid]
            passed = inherited[e] if sid in cited else inherited[e] - further_cost if sid == further else -1e9
            if passed > score:
                score, key = passed, round(passed, 9)
            offer(sid, score, key, anchor, len(path) + 1, e)
    for sid in buffered:
        offer(sid, rel[sid], rounded[sid], sid, 0, None)
    for sid in records_reached:           # buffered records on a chain the logic track found at query time
        path = paths[sid] = path_to(sid, parent)
        score = max(rel[sid], inherited.get(sid, rel[sid]))
        offer(sid, score, round(score, 9), path[0].src if path else sid, len(path), None, linked=True)
    ranked = first_by(list(best), lambda i: (-best[i][1], -rounded[i], i), s.max_evidence)
    candidates = []
    for sid in ranked:
        score, _, _, anchor, e, linked = best[sid]
        path = paths[e] + [Hop(e, sid, Rel.EVIDENCE)] if e is not None else paths[sid] if linked else []
        candidates.append(_result(engine, sid, (score, anchor, path), scores))
    t3 = time.perf_counter()
    stages = {"seed_ms": (t1 - t0) * 1e3, "traverse_ms": (t2 - t1) * 1e3, "ground_ms": (t3 - t2) * 1e3,
              "total_ms": (t3 - t0) * 1e3}
    anchors = sorted([*seeds, *fresh], key=lambda x: (-round(x[1], DECIMALS), x[0]))
    return RetrievalResult.ranked(query, anchors, expansion, candidates, s.final_k, k, stages, reading.text())


def fresh_seeds(scores: KindRelevance, seeds: list[tuple[int, float]], buffered: list[int], top: int
                ) -> list[tuple[int, float]]:
    """The buffered records that rank among the `top` seeds when records and events compete on one score: the
    newest turns, which no steward run has curated yet, seed a why-question's chain too (the freshness
    failsafe of the dual stream, §3.6)."""
    own, _ = scores.lookup(buffered[:top])
    pool = sorted([*((e, sc, False) for e, sc in seeds), *((b, own[b], True) for b in buffered[:top])],
                  key=lambda x: (-round(x[1], DECIMALS), x[0]))[:top]
    return [(b, sc) for b, sc, is_record in pool if is_record]


def fresh_causes(engine: MemLoomContext, snap: MemLoomContext | None, record: int, settings,
                 logic: dict[tuple[int, int], int]) -> list[tuple[int, str, bool]]:
    """A buffered record's causes as the logic track scores them now, before any steward run: the earlier
    published events and buffered records its strongest links reach at the relation gate (θ_rel), the most
    probable first, at most `branching`. Each step is a `logic_link` walked back, and `logic` records the
    earlier record it cites, so the walk goes on from there along the curated relations."""
    track = engine.derived("logic_track", lambda: LogicTrack(engine, snap))
    steps = []
    for gid, (logit, cited, _) in track.links(record):
        if probability(logit) < settings.theta_rel or len(steps) >= settings.branching:
            break
        logic[(record, gid)] = cited
        steps.append((gid, Rel.LOGIC, True))
    return steps


class LogicTrack:
    """The logic track at query time over one state: the link scorer of every sentence record, the groups a
    buffered record may link into (published events, buffered records), and each asked record's links, kept
    until the state changes (a streaming benchmark asks all of a checkpoint's questions of one state). Only the
    records a walk expands are scored, one row each, so a long unconsolidated buffer costs nothing up front."""

    def __init__(self, engine: MemLoomContext, snap: MemLoomContext | None):
        self.scorer = link_scorer(engine)
        pos = self.scorer.pos
        groups = [SimpleNamespace(id=int(e), members=list(snap.state.nodes[int(e)].members))
                  for e in published_events(snap)[0]] if snap is not None else []
        groups += [SimpleNamespace(id=int(b), members=[int(b)]) for b in buffered_records(engine) if int(b) in pos]
        self.groups = sorted((g for g in groups if g.members and all(m in pos for m in g.members)),
                             key=lambda g: (g.members[-1], g.id))
        self.rows: dict[int, list[tuple[int, tuple[float, int, int]]]] = {}

    def links(self, record: int) -> list[tuple[int, tuple[float, int, int]]]:
        """`record`'s strongest link into each earlier group, strongest first (ties by group id)."""
        if record not in self.rows:
            earlier = [g for g in self.groups if g.members[-1] < record]
            found = strongest_links_of_each(self.scorer, [record], earlier)[0] if earlier and record in \
                self.scorer.pos else {}
            self.rows[record] = sorted(found.items(), key=lambda kv: (-kv[1][0], kv[0]))
        return self.rows[record]


def walks_back(etype: str, reverse: bool, chain: tuple[str, ...]) -> bool:
    """Whether a step walks the asked chain back in time: a stored relation of it against its direction, or a
    query-time logic link (found from the effect to its cause). Only such steps pass the seed's score on."""
    return reverse and (etype in chain or etype == Rel.LOGIC)


def event_steps(snap: MemLoomContext, u: int, chain: tuple[str, ...]) -> list[tuple[int, str, bool]]:
    """The events one relation away from `u` on the snapshot, (event, type, reverse), in the order the walk
    tries them: the asked chain walked back first, then the chain's other direction, then by type priority,
    confidence and id (kept until the snapshot changes)."""
    memo = snap.derived("event_steps", dict)
    found = memo.get((u, chain))
    if found is None:
        state = snap.state
        steps = []
        for etype in TRAVERSED:
            steps += [(v, etype, False) for v in state.out(u, etype)]
            steps += [(v, etype, True) for v in state.inc(u, etype)]
        steps.sort(key=lambda x: (not (x[1] in chain and x[2]), x[1] not in chain, PRIORITY[x[1]],
                                  -(_conf(state, u, x) or 0.0), x[0]))
        found = memo[(u, chain)] = [x for x in steps if state.nodes[x[0]].kind == Kind.EVENT]
    return found


def best_record(state, event: int, rel: KindRelevance) -> int | None:
    """The record that made `event` a seed: its most relevant member (ties by id)."""
    scores, _ = rel.lookup(list(state.nodes[event].members))
    return min(scores, key=lambda sid: (-round(scores[sid], DECIMALS), sid), default=None)


def continuing(state, steps: list[tuple[int, str, bool]], u: int, arrived: int | None, chain: tuple[str, ...]
               ) -> list[tuple[int, str, bool]]:
    """`steps` with the asked chain's links that continue from the record the walk arrived at first.

    An event can hold two stories (a session's news and a friend's race); the chain goes on from the record
    it came in by, so a relation whose effect is that record comes before a more confident one whose effect
    is another record of the event, and the event's other relations (its context) come before that other
    story's chain too. Walking every chain link first instead cost 8 of LoCoMo dev's 46 why-questions their
    gold turn, which sits beside the question's turn, and left the causal validation split's SCR@5 as it was.
    Otherwise the order of `event_steps` stands."""
    if arrived is None:
        return steps

    def elsewhere(step: tuple[int, str, bool]) -> bool:
        v, etype, rev = step
        if not (rev and etype in chain):
            return False
        evidence = state.edges[(v, u, etype)].evidence
        return not evidence or evidence[-1] != arrived
    return sorted(steps, key=elsewhere)


def _conf(state, u: int, step: tuple[int, str, bool]) -> float | None:
    v, etype, rev = step
    edge = state.edges.get((v, u, etype) if rev else (u, v, etype))
    return edge.confidence if edge is not None else None


def _further(state, records: list[int], cited: set[int], order: dict[int, float], on_chain: bool,
             settings) -> tuple[int | None, float]:
    """The one record of a reached event the relation does not cite that follows its citations, and what it
    costs. On the asked chain, an event is often longer than one step of it (a meeting's topic, a session's
    news): the latest record before the cited cause in which its speaker reports a change is the chain's
    previous step inside the event, one `chain_hop_cost` further back. Otherwise a record reporting a change
    (the likelier cause or earlier state) comes first, then the most relevant, at `uncited_cost`."""
    uncited = [sid for sid in records if sid not in cited]
    cited_here = cited.intersection(records)
    if on_chain and cited_here:
        first = min(cited_here)
        speaker = state.nodes[first].speakers
        before = [sid for sid in uncited if sid < first and state.nodes[sid].speakers == speaker
                  and has_change(state.nodes[sid].raw)]
        if before:
            return max(before), settings.chain_hop_cost
    further = min(uncited, default=None, key=lambda i: (not has_change(state.nodes[i].raw), -order[i], i))
    return further, settings.uncited_cost


def _cited(state, hop: Hop | None, logic: dict[tuple[int, int], int]) -> set[int]:
    """Sentence records the relation that reached an event cites as its evidence (for a query-time logic link,
    the earlier record it found)."""
    if hop is None or state is None:
        return set()
    if hop.type == Rel.LOGIC:
        return {logic[(hop.src, hop.dst)]}
    edge = state.edges.get(hop.edge_key)
    return set(edge.evidence) if edge is not None else set()


def _result(engine, sid: int, found: tuple[float, int, list[Hop]], rel: KindRelevance) -> RetrievedUnit:
    score, anchor, path = found
    u = engine.state.nodes[sid]
    return RetrievedUnit(id=sid, visible=u.visible, score=round(score, 6), dense=round(rel.dense[sid], 6),
                         lexical=round(rel.lexical[sid], 6),
                         anchor=anchor, hop=len(path), path=path, source_ids=list(u.source_ids), time=u.time,
                         raw=u.raw, kind=u.kind, status=u.status)

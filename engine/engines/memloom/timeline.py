"""MemLoom's timeline repair (§3.5.1): where a session's topic changes, and one event for each stretch between.

Its own module because the coarse repair is a concept of its own: the steward proposes a BOUNDARY (closing an
event at a topic change) or a REPAIR (one event for a stretch of records) from the depth rule's cuts, and
applies an accepted REPAIR here too, so drafting and applying a repair sit side by side.
"""
from __future__ import annotations

import numpy as np

from engine.core.edge import Edge
from engine.core.node import Node, node_id_of
from engine.core.proposal import Proposal
from engine.core.segments import deepest_boundaries, topic_depths, turn_sizes
from engine.core.text import strip_speaker
from engine.core.tx import Tx
from engine.engines.memloom import online
from engine.engines.memloom.context import MemLoomContext
from engine.engines.memloom.proposals import Drafts
from engine.engines.memloom.schema import Kind, Life, Op, Rel
from engine.engines.memloom.settings import MemLoomSettings


def chronological(events: list[Node]) -> list[Node]:
    return sorted(events, key=lambda e: (e.time, e.created_turn, e.id))


def propose_repairs(engine: MemLoomContext, drafts: Drafts, events: list[Node], fresh: set[int]
                    ) -> tuple[list[Proposal], set[int]]:
    """The coarse timeline repair: cut each session where the topic changes, merge what lies between cuts.

    A session's undecided stretch starts after the last event a boundary closed. Its gaps are scored by
    `topic_depths` (what is said and who holds the floor, over windows of words) and cut by
    `deepest_boundaries` under the settings' `DepthRule`, after the last stretch a run repaired (a cut may
    pass through an online event: its records on each side go to each side's event). Each stretch between
    two cuts becomes one event: a REPAIR of its events, or a BOUNDARY closing its only event; the stretch
    after the last cut stays open and is repaired into one event too once it holds `min_size` words (a
    topic's least size), so what a run merged stays merged (a later run decides only what came after it). A
    chat session shorter than that keeps the router's events.

    Returns the proposals and the events they retire or close (no relation is synthesised for those in
    this run: the events that replace them are, in the run that follows).
    """
    state, s = engine.state, engine.settings
    rule = s.depth_rule()
    records: dict[str, list[Node]] = {}
    for t in state.turn_ids:
        if t in state.turn_units:
            r = state.nodes[state.turn_units[t]]
            records.setdefault(r.session, []).append(r)
    by_session: dict[str, list[Node]] = {}
    for e in events:
        by_session.setdefault(e.session, []).append(e)
    out: list[Proposal] = []
    busy: set[int] = set()
    for session, evs in by_session.items():
        if not any(e.id in fresh for e in evs) or session not in records:
            continue
        recs = records[session]
        pos = {r.id: i for i, r in enumerate(recs)}
        span = {e.id: (min(pos[m] for m in e.members if m in pos), max(pos[m] for m in e.members if m in pos))
                for e in evs if any(m in pos for m in e.members)}
        decided = [span[e.id][1] + 1 for e in evs if e.id in span and e.attrs.get("boundary")]
        start = max(decided, default=0)
        # every event holding a record after it, including an online event an earlier cut split (its records
        # before the cut are held by a repaired event; those after it are still to be placed)
        region = sorted((e for e in evs if e.id in span and span[e.id][1] >= start),
                        key=lambda e: (span[e.id][0], e.id))
        if not region:
            continue
        n = len(recs)
        # the stretch a run already repaired stays whole; online events after it may be split at a cut
        frozen = max((span[e.id][1] + 1 for e in region if e.made_by not in ("", "online")), default=start)
        allowed = range(max(frozen, start + 1), n)
        texts = [strip_speaker(r.raw)[1] for r in recs]
        depth = topic_depths(np.stack([engine.utterance_vector(r) for r in recs]), texts,
                             [(r.speakers or [""])[0] for r in recs], rule)
        cuts = deepest_boundaries(depth, turn_sizes(texts), rule.threshold, rule.min_size, rule.lookahead,
                                  start=start, allowed=allowed)
        edges = [start, *cuts, n]
        sizes = np.concatenate([[0.0], np.cumsum(turn_sizes(texts))])
        for a, b in zip(edges, edges[1:]):
            if b == n and sizes[n] - sizes[a] < rule.min_size:
                continue                # too short to be a topic of its own yet: the router's events stand
            group = [e for e in region if any(a <= pos[m] < b for m in e.members if m in pos)]
            if not group:
                continue
            members = [r.id for r in recs[a:b] if any(r.id in e.members for e in group)]
            inside = [float(depth[g - 1]) for g in allowed if a < g < b and depth[g - 1] < rule.threshold]
            boundary = None if b == n else {"turn": recs[b].source_ids[0], "depth": round(float(depth[b - 1]), 4),
                                            "threshold": rule.threshold, "session": session}
            whole = len(group) == 1 and set(group[0].members) <= set(members)
            if whole and boundary and group[0].status in Life.JOINABLE:
                d = boundary["depth"]
                out.append(drafts.propose(Op.BOUNDARY, [group[0].id], d / (d + rule.threshold) if d else 0.0,
                                          f"topic boundary before turn {boundary['turn']}",
                                          {"turn": boundary["turn"], "boundary": boundary,
                                           "rationale": f"depth {d:.3f} ≥ {rule.threshold:.3f}"},
                                          {"depth": d}))
                busy.add(group[0].id)
            elif not whole:
                keep = rule.threshold / (rule.threshold + max(inside, default=0.0)) if rule.threshold else 1.0
                out.append(_merge_proposal(engine, drafts, group, members, keep, boundary,
                                           max(inside, default=0.0)))
                busy.update(e.id for e in group)
    return out, busy

def _merge_proposal(engine: MemLoomContext, drafts: Drafts, group: list[Node], members: list[int],
                    confidence: float, boundary: dict | None, inside: float) -> Proposal:
    """One stretch between cuts as one event: the `members` (in turn order) of the `group` events that lie in
    it; an online event the cut passes through gives its records on each side to each side's event."""
    nodes = engine.state.nodes
    texts = [nodes[m].raw for m in members]
    keywords = list(dict.fromkeys(k for e in group for k in e.keywords))[:10]
    summary = texts[0] if len(texts) == 1 else f"{texts[0]} … {texts[-1]}"
    ends = (f"; a topic boundary (depth {boundary['depth']:.3f}) ends it before turn {boundary['turn']}"
            if boundary else "; still open")
    split = [e.id for e in group if not set(e.members) <= set(members)]
    return drafts.propose(Op.REPAIR, [e.id for e in group], confidence,
                          f"{len(members)} records of {len(group)} adjacent event(s), one topic",
                          {"summary": summary[:400], "keywords": keywords, "boundary": boundary,
                           "members": [str(m) for m in members],
                           "rationale": f"no gap between them reaches the boundary depth (deepest "
                                        f"{inside:.3f}){ends}" + (f"; the cut splits u{split}" if split else "")},
                          {"events": len(group), "records": len(members)})


def repair(settings: MemLoomSettings, tx: Tx, p: Proposal) -> int:
    """ENTR's ⊕: a new event holds the stretch's records (all of its events', or one side of an event a cut
    passes through); the events retire into the lineage once every record of theirs is held (`execute`)."""
    nodes = tx.state.nodes
    parts = [nodes[t] for t in p.targets]
    members = sorted({node_id_of(m) for m in p.plan["members"]}, key=lambda m: (nodes[m].created_turn, m))
    first, last = nodes[members[0]], nodes[members[-1]]
    stats = online.event_stats([nodes[m] for m in members])
    eid = tx.state.next_node_id
    tx.create_node(Node(id=eid, raw="", summary=p.plan["summary"], keywords=list(p.plan["keywords"])[:10],
                        time=first.time, kind=Kind.EVENT,
                        source_ids=[s for m in members for s in nodes[m].source_ids],
                        speakers=list(dict.fromkeys(sp for m in members for sp in nodes[m].speakers)),
                        session=first.session, status=Life.PROVISIONAL, created_turn=tx.turn,
                        made_by=tx.run_id or "", members=members,
                        attrs={**stats, "last_time": last.time, "last_turn": last.created_turn}))
    for old in parts:
        tx.add_edge(Edge(eid, old.id, Rel.LINEAGE, tx.run_id or "", None, tx.turn))
    for m in members:                           # evidence first: a closed event takes none
        tx.add_edge(Edge(eid, m, Rel.EVIDENCE, tx.run_id or "", None, tx.turn))
    cause = {"rule": "timeline_repair", "run": tx.run_id, "of": p.targets}
    was = {e.status for e in parts}
    boundary = p.plan.get("boundary")
    if online.maturity(settings, stats) >= settings.tau_maturity or was & set(Life.CURATED):
        tx.set_status(eid, Life.ACTIVE, cause)
    if boundary:
        tx.set_status(eid, Life.CLOSED, {"rule": "boundary", **boundary, "run": tx.run_id, "of": p.targets})
        tx.update_node(eid, attrs={**tx.state.nodes[eid].attrs, "boundary": boundary})
    elif Life.CLOSED in was:
        tx.set_status(eid, Life.CLOSED, cause)
    return eid

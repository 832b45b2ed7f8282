"""MemLoom's relation synthesis (§3.5.2): the dual track's candidate causes of each fresh event, judged by the LLM.

Its own module because the logic track (the link scorer over every sentence record), the event payload the
LLM reads and the one `relation_synthesis` call per fresh event form one concept: what the steward proposes
as a relation between two events, before the contract (`proposals.validate`) checks it.
"""
from __future__ import annotations

import numpy as np

from engine.core.node import Node, node_id_of
from engine.core.proposal import GateVerdict, Proposal, Status, call_reason_code
from engine.core.text import strip_speaker
from engine.engines.memloom.context import MemLoomContext
from engine.engines.memloom.proposals import Drafts
from engine.engines.memloom.schema import Life, Op, Rel
from engine.retrieval.links import LinkScorer, Utterance, cue_of, has_change, probability, strongest_links_of_each


def event_payload(engine: MemLoomContext, e: Node, must: list[int] = (), limit: int = 12) -> dict:
    """An event as the LLM sees it: its utterances (at most `limit`, always those in `must`)."""
    nodes = engine.state.nodes
    keep = list(dict.fromkeys([*must, *e.members]))[:limit]
    members = [nodes[m] for m in e.members if m in keep]
    return {"id": str(e.id), "time": e.time, "session": e.session, "speakers": e.speakers,
            "sentences": [{"id": str(m.id), "speaker": (m.speakers or [""])[0], "text": m.raw.partition(": ")[2]
                           or m.raw, "time": m.time} for m in members]}


def link_scorer(engine: MemLoomContext) -> LinkScorer:
    """The logic track over every sentence record of the conversation (engine/retrieval/links.py)."""
    state = engine.state
    records = [state.nodes[state.turn_units[t]] for t in state.turn_ids if t in state.turn_units]
    sessions = {sess: i for i, sess in enumerate(dict.fromkeys(r.session for r in records))}
    utts = [Utterance(r.id, (r.speakers or [""])[0], strip_speaker(r.raw)[1], sessions[r.session])
            for r in records]
    vectors = np.stack([engine.utterance_vector(r) for r in records]) if records else np.zeros((0, engine.embedder.dim))
    return LinkScorer(utts, vectors)


def candidate_causes(scorer: LinkScorer, members: list[int], earlier: list[Node], limit: int
                     ) -> list[tuple[int, tuple[float, int, int]]]:
    """At most `limit` earlier events offered as causes of a target event, taken from its records' own rankings
    in turn (every record's strongest cause, then every record's second, ...), each event with the strongest
    link it has to any record; strongest first (ties by id).

    An event can hold two stories: ranked by the event's single strongest link, one story's causes would
    crowd out the other's."""
    rankings = [sorted(links.items(), key=lambda kv: (-kv[1][0], kv[0]))
                for links in strongest_links_of_each(scorer, members, earlier)]
    best: dict[int, tuple[float, int, int]] = {}
    for depth in range(max(map(len, rankings), default=0)):
        for ranking in rankings:
            if depth < len(ranking):
                eid, link = ranking[depth]
                if (eid in best and link[0] > best[eid][0]) or (eid not in best and len(best) < limit):
                    best[eid] = link
        if len(best) >= limit:
            break
    return sorted(best.items(), key=lambda kv: (-kv[1][0], kv[0]))


def propose_relations(engine: MemLoomContext, drafts: Drafts, events: list[Node], fresh: set[int]
                      ) -> list[Proposal]:
    """Dual track + bounded synthesis: link-ranked candidate causes per fresh event, one call per target.

    A target's candidates come from the last `LINK_POOL` earlier utterances (`strongest_links_of_each`), so each
    fresh event costs time linear in its own size, not in the conversation's."""
    s = engine.settings
    curated = [e for e in events if e.status in Life.CURATED]
    if not any(e.id in fresh for e in curated):
        return []
    scorer = link_scorer(engine)
    out: list[Proposal] = []
    for i, target in enumerate(curated):
        if target.id not in fresh or i == 0:
            continue
        earlier = curated[:i]
        prev = earlier[-1]
        out.append(drafts.propose(Op.RELATION, [prev.id, target.id], 1.0, "chronologically adjacent events",
                                  {"type": Rel.TEMPORAL_NEXT, "evidence": [str(prev.members[-1]),
                                                                           str(target.members[0])],
                                   "rationale": "the next event in time"}, {"type": Rel.TEMPORAL_NEXT}))
        ranked = candidate_causes(scorer, target.members, earlier, s.relation_candidates)
        zt = engine.vectors[target.id]
        cands = []
        for eid, (logit, c_id, t_id) in ranked:
            cand = engine.state.nodes[eid]
            cands.append({**event_payload(engine, cand, [c_id]), "cosine": round(float(engine.vectors[eid] @ zt), 4),
                          "link": {"source_sentence": str(c_id), "target_sentence": str(t_id),
                                   "score": round(probability(logit), 4), "hooks": scorer.shared(c_id, t_id),
                                   "cue": cue_of(engine.state.nodes[t_id].raw),
                                   "change": has_change(engine.state.nodes[c_id].raw)}})
        call = engine.llm.call("relation_synthesis", {"target": event_payload(engine, target), "candidates": cands})
        if not call.ok:
            p = drafts.propose(Op.RELATION, [target.id], 0.0, call.error or "", None, {})
            p.status, p.gate, p.reason_code = Status.SKIPPED, GateVerdict.FAIL, call_reason_code(call.error_code)
            out.append(p)
            continue
        for r in call.data["relations"]:
            if r["type"] == "NONE":
                continue
            targets = [node_id_of(r["source_id"]), node_id_of(r["target_id"])]
            out.append(drafts.propose(Op.RELATION, targets, float(r["confidence"]), r["rationale"],
                                      {"type": r["type"], "evidence": list(r["evidence"]),
                                       "rationale": r["rationale"]}, {"type": r["type"]}))
    return out

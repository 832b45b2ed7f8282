"""The off-peak steward (MemLoom §3.5): timeline repair, dual-track hooks, relation synthesis, validation,
and the atomic publication of a new snapshot.

Every repair and relation is a proposal reviewed like All-Mem's edits; the
run commits whole (one transaction) and ends by pointing the `snapshot`
variable at itself, which is what the curated retrieval stream reads.
"""
from __future__ import annotations

import numpy as np

from engine.core.edge import Edge
from engine.core.node import Node
from engine.core.proposal import GateVerdict, Proposal, Status, call_reason_code
from engine.core.segments import deepest_boundaries, topic_depths, turn_sizes
from engine.core.text import strip_speaker
from engine.core.tx import Tx
from engine.engines.memloom import online
from engine.engines.memloom.context import MemLoomContext
from engine.engines.memloom.schema import Kind, Life, Op, ReasonCode, Rel
from engine.retrieval.links import LinkScorer, Utterance, cue_of, has_change, probability, strongest_links
from engine.runtime.process import BaseProcess
from engine.runtime.reports import RunReport

ORDERED = (Rel.CAUSAL_FOLLOW, Rel.TEMPORAL_NEXT, Rel.STATE_SUCCESSOR)   # source must precede target
# Topic-track neighbours: fresh events per matrix product, and how far a float32 product's cosine may be
# from the exact one-by-one dot product (unit vectors of 384 dimensions err by ~1e-6; this is far wider).
TOPIC_ROWS = 256
COSINE_MARGIN = 1e-4


def chronological(events: list[Node]) -> list[Node]:
    return sorted(events, key=lambda e: (e.time, e.created_turn, e.id))


class Steward(BaseProcess):
    engine: MemLoomContext

    def run(self) -> RunReport:
        """One scheduled run; when it repaired or closed events, a second run synthesises their relations at
        once (they wait in the buffer), so a published snapshot holds no new event without its relations."""
        first = super().run()
        if not first.created and not any(p.op == Op.BOUNDARY and p.status == Status.APPLIED
                                         for p in first.proposals) or not self.pending():
            return first
        second = super().run()
        return RunReport(run_id=second.run_id, proposals=first.proposals + second.proposals,
                         created=first.created + second.created, archived=first.archived + second.archived,
                         rewired=first.rewired + second.rewired, ops=first.ops + second.ops)

    # -- diagnosis: repairs and relations as proposals -------------------------------------------
    def diagnose(self, run_id: str, manual: bool) -> list[Proposal]:
        s, state = self.engine.settings, self.engine.state
        fresh = {e for e in state.buffer(self.spec.buffer) if e in state.nodes}
        events = chronological([n for n in state.nodes.values() if n.kind == Kind.EVENT
                                and n.status != Life.ARCHIVED])
        self._next = state.next_proposal_id
        self._run, self._turn = run_id, state.turn
        proposals: list[Proposal] = []
        busy: set[int] = set()
        if not s.has("no-repair"):
            proposals, busy = self._segments(events, fresh)
        if not s.has("no-relations"):
            proposals += self._relations([e for e in events if e.id not in busy], fresh - busy)
        self._validate(proposals, manual)
        return proposals

    def _proposal(self, op: str, targets: list[int], conf: float, reason: str, plan: dict | None,
                  detail: dict) -> Proposal:
        p = Proposal(id=self._next, run_id=self._run, op=op, targets=targets, confidence=round(conf, 4),
                     reason=reason, plan=plan,
                     detail={**detail, "threshold": self.engine.settings.theta_rel if op == Op.RELATION
                             else self.engine.settings.theta_repair},
                     made_turn=self._turn)
        self._next += 1
        return p

    def _payload(self, e: Node, must: list[int] = (), limit: int = 12) -> dict:
        """An event as the LLM sees it: its utterances (at most `limit`, always those in `must`)."""
        nodes = self.engine.state.nodes
        keep = list(dict.fromkeys([*must, *e.members]))[:limit]
        members = [nodes[m] for m in e.members if m in keep]
        return {"id": str(e.id), "time": e.time, "session": e.session, "speakers": e.speakers,
                "sentences": [{"id": str(m.id), "speaker": (m.speakers or [""])[0], "text": m.raw.partition(": ")[2]
                               or m.raw, "time": m.time} for m in members]}

    def _segments(self, events: list[Node], fresh: set[int]) -> tuple[list[Proposal], set[int]]:
        """The coarse timeline repair: cut each session where the topic changes, merge what lies between cuts.

        A session's undecided stretch starts after the last event a boundary closed. Its gaps are scored by
        `topic_depths` (what is said and who holds the floor, over windows of words) and cut by
        `deepest_boundaries` under the settings' `DepthRule`, after the last stretch a run repaired (a cut may
        pass through an online event: its records on each side go to each side's event). Each stretch between
        two cuts becomes one event: a REPAIR of its events, or a BOUNDARY closing its only event; the stretch after the last cut stays open and is repaired into
        one event too once it holds `min_size` words (a topic's least size), so what a run merged stays merged
        (a later run decides only what came after it). A chat session shorter than that keeps the router's
        events.
        Returns the proposals and the events they retire or close (no relation is synthesised for those in
        this run: the events that replace them are, in the run that follows).
        """
        eng, state, s = self.engine, self.engine.state, self.engine.settings
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
            depth = topic_depths(np.stack([eng.utterance_vector(r) for r in recs]), texts,
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
                    out.append(self._proposal(Op.BOUNDARY, [group[0].id], d / (d + rule.threshold) if d else 0.0,
                                              f"topic boundary before turn {boundary['turn']}",
                                              {"turn": boundary["turn"], "boundary": boundary,
                                               "rationale": f"depth {d:.3f} ≥ {rule.threshold:.3f}"},
                                              {"depth": d}))
                    busy.add(group[0].id)
                elif not whole:
                    keep = rule.threshold / (rule.threshold + max(inside, default=0.0)) if rule.threshold else 1.0
                    out.append(self._merge_proposal(group, members, keep, boundary, max(inside, default=0.0)))
                    busy.update(e.id for e in group)
        return out, busy

    def _merge_proposal(self, group: list[Node], members: list[int], confidence: float, boundary: dict | None,
                        inside: float) -> Proposal:
        """One stretch between cuts as one event: the `members` (in turn order) of the `group` events that lie in
        it; an online event the cut passes through gives its records on each side to each side's event."""
        nodes = self.engine.state.nodes
        texts = [nodes[m].raw for m in members]
        keywords = list(dict.fromkeys(k for e in group for k in e.keywords))[:10]
        summary = texts[0] if len(texts) == 1 else f"{texts[0]} … {texts[-1]}"
        ends = (f"; a topic boundary (depth {boundary['depth']:.3f}) ends it before turn {boundary['turn']}"
                if boundary else "; still open")
        split = [e.id for e in group if not set(e.members) <= set(members)]
        return self._proposal(Op.REPAIR, [e.id for e in group], confidence,
                              f"{len(members)} records of {len(group)} adjacent event(s), one topic",
                              {"summary": summary[:400], "keywords": keywords, "boundary": boundary,
                               "members": [str(m) for m in members],
                               "rationale": f"no gap between them reaches the boundary depth (deepest "
                                            f"{inside:.3f}){ends}" + (f"; the cut splits u{split}" if split else "")},
                              {"events": len(group), "records": len(members)})

    def link_scorer(self) -> LinkScorer:
        """The logic track over every sentence record of the conversation (engine/retrieval/links.py)."""
        eng, state = self.engine, self.engine.state
        records = [state.nodes[state.turn_units[t]] for t in state.turn_ids if t in state.turn_units]
        sessions = {sess: i for i, sess in enumerate(dict.fromkeys(r.session for r in records))}
        utts = [Utterance(r.id, (r.speakers or [""])[0], strip_speaker(r.raw)[1], sessions[r.session])
                for r in records]
        vectors = np.stack([eng.utterance_vector(r) for r in records]) if records else np.zeros((0, eng.embedder.dim))
        return LinkScorer(utts, vectors)

    def _relations(self, events: list[Node], fresh: set[int]) -> list[Proposal]:
        """Dual track + bounded synthesis: link-ranked candidate causes per fresh event, one call per target.

        A target's candidates come from the last `LINK_POOL` earlier utterances (`strongest_links`), so each
        fresh event costs time linear in its own size, not in the conversation's."""
        s, eng = self.engine.settings, self.engine
        curated = [e for e in events if e.status in Life.CURATED]
        if not any(e.id in fresh for e in curated):
            return []
        scorer = self.link_scorer()
        out: list[Proposal] = []
        for i, target in enumerate(curated):
            if target.id not in fresh or i == 0:
                continue
            earlier = curated[:i]
            prev = earlier[-1]
            out.append(self._proposal(Op.RELATION, [prev.id, target.id], 1.0, "chronologically adjacent events",
                                      {"type": Rel.TEMPORAL_NEXT, "evidence": [str(prev.members[-1]),
                                                                               str(target.members[0])],
                                       "rationale": "the next event in time"}, {"type": Rel.TEMPORAL_NEXT}))
            best = strongest_links(scorer, target.members, earlier)   # event -> its (logit, cause, effect)
            ranked = sorted(best.items(), key=lambda kv: (-kv[1][0], kv[0]))[: s.relation_candidates]
            zt = eng.vectors[target.id]
            cands = []
            for eid, (logit, c_id, t_id) in ranked:
                cand = eng.state.nodes[eid]
                cands.append({**self._payload(cand, [c_id]), "cosine": round(float(eng.vectors[eid] @ zt), 4),
                              "link": {"source_sentence": str(c_id), "target_sentence": str(t_id),
                                       "score": round(probability(logit), 4), "hooks": scorer.shared(c_id, t_id),
                                       "cue": cue_of(eng.state.nodes[t_id].raw),
                                       "change": has_change(eng.state.nodes[c_id].raw)}})
            call = eng.llm.call("relation_synthesis", {"target": self._payload(target), "candidates": cands})
            if not call.ok:
                p = self._proposal(Op.RELATION, [target.id], 0.0, call.error or "", None, {})
                p.status, p.gate, p.reason_code = Status.SKIPPED, GateVerdict.FAIL, call_reason_code(call.error_code)
                out.append(p)
                continue
            for r in call.data["relations"]:
                if r["type"] == "NONE":
                    continue
                targets = [_as_id(r["source_id"]), _as_id(r["target_id"])]
                out.append(self._proposal(Op.RELATION, targets, float(r["confidence"]), r["rationale"],
                                          {"type": r["type"], "evidence": list(r["evidence"]),
                                           "rationale": r["rationale"]}, {"type": r["type"]}))
        return out

    # -- contract validation (CVSP) ---------------------------------------------------------------
    def _validate(self, proposals: list[Proposal], manual: bool) -> None:
        s, nodes = self.engine.settings, self.engine.state.nodes
        seen = set(self.engine.state.edges)
        live = []
        for p in proposals:
            if p.status != Status.PENDING:
                continue
            problem = self._contract(p, nodes)
            if problem:
                p.status, p.gate, (p.reason_code, p.note) = Status.SKIPPED, GateVerdict.FAIL, problem
                continue
            if p.op == Op.RELATION:
                key = (p.targets[0], p.targets[1], p.plan["type"])
                if key in seen:
                    p.status, p.gate, p.reason_code = Status.SKIPPED, GateVerdict.FAIL, ReasonCode.DUPLICATE
                    p.note = "this relation is already in the graph or earlier in the queue"
                    continue
                seen.add(key)
            theta = s.theta_rel if p.op == Op.RELATION else s.theta_repair
            if p.confidence < theta:
                p.gate, p.reason_code = GateVerdict.FAIL, ReasonCode.LOW_CONF
                p.note = f"confidence {p.confidence:.2f} < gate {theta:.2f}"
                if not manual:
                    p.status = Status.SKIPPED
                    continue
            live.append(p)
        relations = sorted((p for p in live if p.op == Op.RELATION and p.gate == GateVerdict.PASS),
                           key=lambda p: (-p.confidence, p.targets, p.id))
        for p in relations[s.relation_budget:]:
            p.status, p.gate, p.reason_code = Status.SKIPPED, GateVerdict.FAIL, ReasonCode.BUDGET
            p.note = f"over the run's budget of {s.relation_budget} relations"

    def _contract(self, p: Proposal, nodes) -> tuple[str, str] | None:
        if any(t not in nodes or nodes[t].kind != Kind.EVENT for t in p.targets) or not p.targets \
                or len(set(p.targets)) != len(p.targets):
            return ReasonCode.SCHEMA_FAIL, f"targets {p.targets} are not distinct events"
        if p.op == Op.BOUNDARY:
            if len(p.targets) != 1:
                return ReasonCode.SCHEMA_FAIL, "a boundary closes exactly one event"
            if nodes[p.targets[0]].status not in Life.JOINABLE:
                return ReasonCode.LIFECYCLE_FAIL, f"event {p.targets[0]} is already {nodes[p.targets[0]].status}"
            return None
        if p.op == Op.REPAIR:
            held = {m for t in p.targets for m in nodes[t].members}
            members = {_as_id(m) for m in p.plan.get("members", [])}
            if not members or not members <= held:
                return ReasonCode.SCHEMA_FAIL, "a repair's records must be records of its events"
            if len(p.targets) < 2 and held <= members:
                return ReasonCode.SCHEMA_FAIL, "a repair of one event must split it"
            return None
        if len(p.targets) < 2:
            return ReasonCode.SCHEMA_FAIL, f"targets {p.targets} are not distinct events"
        if len(p.targets) != 2:
            return ReasonCode.SCHEMA_FAIL, "a relation joins exactly two events"
        a, b = (nodes[t] for t in p.targets)
        rtype = p.plan.get("type")
        if rtype not in Rel.CLOSURE:
            return ReasonCode.TYPE_CLOSURE_FAIL, f"type {rtype!r} is not one of {', '.join(Rel.CLOSURE)}"
        cited = {_as_id(x) for x in p.plan.get("evidence", [])}
        if not (cited & set(a.members)) or not (cited & set(b.members)):
            return ReasonCode.EVIDENCE_FAIL, "the relation must cite at least one record of each event"
        p.plan["evidence"] = [str(x) for x in sorted(cited & (set(a.members) | set(b.members)))]
        if rtype in ORDERED and (a.time, a.created_turn) >= (b.time, b.created_turn):
            return ReasonCode.TEMPORAL_ORDER_FAIL, f"u{a.id} does not precede u{b.id}"
        bad = [e.id for e in (a, b) if e.status not in Life.CURATED]
        if bad:
            return ReasonCode.LIFECYCLE_FAIL, f"event(s) {bad} are not active or closed"
        return None

    # -- execution, curation and publication ---------------------------------------------------------
    def plan(self, p: Proposal):
        return p.plan, None, ""

    def order_key(self, p: Proposal) -> tuple:
        return (Op.ORDER.index(p.op) if p.op in Op.ORDER else 9, p.targets, p.id)

    def execute(self, tx: Tx, accepted: list[Proposal]) -> dict:
        created, archived, touched = [], [], set()
        drawn: dict[int, list[int]] = {}           # event -> the repaired events that took its records
        for p in accepted:
            nodes = tx.state.nodes
            # a repair may take the other side of an event an earlier repair of this run split
            stale = [t for t in p.targets if t not in nodes or nodes[t].status == Life.ARCHIVED
                     or (t in touched and not (p.op == Op.REPAIR and t in drawn))]
            if stale:
                tx.update_proposal(p.id, status=Status.SKIPPED, reason_code=ReasonCode.APPLICABLE_FAIL,
                                   note=f"event(s) {stale} were retired or changed earlier in this run")
                continue
            if p.op == Op.REPAIR:
                new = self._repair(tx, p)
                created.append(new)
                for t in p.targets:
                    drawn.setdefault(t, []).append(new)
                touched.update(p.targets)
            elif p.op == Op.BOUNDARY:
                eid = p.targets[0]
                tx.set_status(eid, Life.CLOSED, {"rule": "boundary", **p.plan["boundary"], "run": tx.run_id})
                tx.update_node(eid, attrs={**tx.state.nodes[eid].attrs, "boundary": p.plan["boundary"]})
                touched.add(eid)
            else:
                src, dst = p.targets
                tx.add_edge(Edge(src, dst, p.plan["type"], tx.run_id or "", p.confidence, tx.turn,
                                 evidence=[int(x) for x in p.plan["evidence"]]))
            tx.update_proposal(p.id, status=Status.APPLIED, note=f"applied ({p.decided_by})")
        # an event retires once repaired events hold all its records (a split one once every side is taken, by
        # this run or an earlier one)
        taken = {m for e in tx.state.nodes.values() if e.kind == Kind.EVENT and e.status != Life.ARCHIVED
                 and e.made_by not in ("", "online") and e.id not in drawn for m in e.members} if drawn else set()
        for old, into in drawn.items():
            if set(tx.state.nodes[old].members) <= taken:
                tx.set_status(old, Life.ARCHIVED, {"rule": "timeline_repair", "into": into, "run": tx.run_id})
                archived.append(old)
        # what this run made or closed is synthesised in the next run (`run` makes it at once)
        waiting = set(tx.state.buffer(self.spec.buffer))
        later = [e for e in created + [p.targets[0] for p in accepted if p.op == Op.BOUNDARY
                                       and p.status == Status.APPLIED]
                 if e not in waiting and tx.state.nodes[e].status != Life.ARCHIVED]
        if later:
            tx.push_buffer(self.spec.buffer, [(e, []) for e in later])
        self._curate(tx)
        archived += self._retain(tx)
        version = (tx.state.engine_state.get("snapshot") or {}).get("version", 0) + 1
        tx.set_var("snapshot", {"version": version, "run": tx.run_id})
        return {"created": created, "archived": archived, "rewired": []}

    def _repair(self, tx: Tx, p: Proposal) -> int:
        """ENTR's ⊕: a new event holds the stretch's records (all of its events', or one side of an event a cut
        passes through); the events retire into the lineage once every record of theirs is held (`execute`)."""
        nodes = tx.state.nodes
        parts = [nodes[t] for t in p.targets]
        members = sorted({_as_id(m) for m in p.plan["members"]}, key=lambda m: (nodes[m].created_turn, m))
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
        if online.maturity(self.engine.settings, stats) >= self.engine.settings.tau_maturity or was & set(Life.CURATED):
            tx.set_status(eid, Life.ACTIVE, cause)
        if boundary:
            tx.set_status(eid, Life.CLOSED, {"rule": "boundary", **boundary, "run": tx.run_id, "of": p.targets})
            tx.update_node(eid, attrs={**tx.state.nodes[eid].attrs, "boundary": boundary})
        elif Life.CLOSED in was:
            tx.set_status(eid, Life.CLOSED, cause)
        return eid

    def _curate(self, tx: Tx) -> None:
        """Publish every active or closed event not yet published: its records leave the real-time buffer."""
        s = self.engine.settings
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
            vec = {e.id: self._vector(e) for e in pool}
            near = topic_neighbours(vec, [e.id for e in fresh], [e.id for e in pool], s.theta_s, s.k_sem)
            for e in fresh:
                for cos, other in near[e.id]:
                    if (other, e.id, Rel.TOPIC) not in tx.state.edges:
                        tx.add_edge(Edge(e.id, other, Rel.TOPIC, tx.run_id or "", round(cos, 4), tx.turn))

    def _vector(self, e: Node) -> np.ndarray:
        vecs = [self.engine.vectors[m] for m in e.members if m in self.engine.vectors]
        return online.centroid(vecs) if vecs else np.zeros(self.engine.embedder.dim, np.float32)

    def _retain(self, tx: Tx) -> list[int]:
        """Retention: closed events more than `retention_sessions` sessions old are archived."""
        keep = self.engine.settings.retention_sessions
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


def _as_id(value) -> int:
    text = str(value).strip().lstrip("u")
    return int(text) if text.isdigit() else -1

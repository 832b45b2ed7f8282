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
from engine.core.text import strip_speaker
from engine.core.tx import Tx
from engine.engines.memloom import online
from engine.engines.memloom.context import MemLoomContext
from engine.engines.memloom.schema import Kind, Life, Op, ReasonCode, Rel
from engine.retrieval.links import LinkScorer, Utterance, cue_of, has_change, probability, strongest_links
from engine.runtime.process import BaseProcess

ORDERED = (Rel.CAUSAL_FOLLOW, Rel.TEMPORAL_NEXT, Rel.STATE_SUCCESSOR)   # source must precede target
# Topic-track neighbours: fresh events per matrix product, and how far a float32 product's cosine may be
# from the exact one-by-one dot product (unit vectors of 384 dimensions err by ~1e-6; this is far wider).
TOPIC_ROWS = 256
COSINE_MARGIN = 1e-4


def chronological(events: list[Node]) -> list[Node]:
    return sorted(events, key=lambda e: (e.time, e.created_turn, e.id))


class Steward(BaseProcess):
    engine: MemLoomContext

    # -- diagnosis: repairs and relations as proposals -------------------------------------------
    def diagnose(self, run_id: str, manual: bool) -> list[Proposal]:
        s, state = self.engine.settings, self.engine.state
        fresh = {e for e in state.buffer(self.spec.buffer) if e in state.nodes}
        events = chronological([n for n in state.nodes.values() if n.kind == Kind.EVENT
                                and n.status != Life.ARCHIVED])
        self._next = state.next_proposal_id
        self._run, self._turn = run_id, state.turn
        proposals: list[Proposal] = []
        if not s.has("no-repair"):
            proposals += self._repairs(events, fresh)
        if not s.has("no-relations"):
            proposals += self._relations(events, fresh)
        self._validate(proposals, manual)
        return proposals

    def _proposal(self, op: str, targets: list[int], conf: float, reason: str, plan: dict | None,
                  detail: dict) -> Proposal:
        p = Proposal(id=self._next, run_id=self._run, op=op, targets=targets, confidence=round(conf, 4),
                     reason=reason, plan=plan,
                     detail={**detail, "threshold": self.engine.settings.theta_repair if op == Op.REPAIR
                             else self.engine.settings.theta_rel},
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

    def _repairs(self, events: list[Node], fresh: set[int]) -> list[Proposal]:
        """ENTR: runs of adjacent events of one session, close in time, that the merge check calls one
        narrative; each run (reaching back at most `repair_window` events before a fresh one) is one
        proposal whose targets are the run in time order."""
        s, eng, out = self.engine.settings, self.engine, []
        sessions: dict[str, list[Node]] = {}
        for e in events:
            sessions.setdefault(e.session, []).append(e)
        for seq in sessions.values():
            marks = [k for k, e in enumerate(seq) if e.id in fresh]
            if not marks:
                continue
            start = max(0, marks[0] - s.repair_window)
            group, confs, rationale = [seq[start]], [], []
            for b in seq[start + 1:] + [None]:
                a = group[-1]
                verdict = None
                if b is not None:
                    gap = online.days_between(a.attrs.get("last_time", a.time), b.time) * 24
                    if gap <= s.repair_hours:
                        cos = float(eng.vectors[a.id] @ eng.vectors[b.id])
                        call = eng.llm.call("event_merge", {"earlier": self._payload(a), "later": self._payload(b),
                                                           "cosine": round(cos, 4), "gap_hours": round(gap, 3)})
                        if call.ok and call.data["merge"] and call.data["confidence"] >= s.theta_repair:
                            verdict = call.data
                if verdict is not None:
                    group.append(b)
                    confs.append(verdict["confidence"])
                    rationale.append(f"u{a.id}+u{b.id}: {verdict['rationale']}")
                    continue
                if len(group) > 1 and any(e.id in fresh for e in group):
                    out.append(self._merge_proposal(group, confs, rationale))
                group, confs, rationale = ([b] if b is not None else []), [], []
        return out

    def _merge_proposal(self, group: list[Node], confs: list[float], rationale: list[str]) -> Proposal:
        nodes = self.engine.state.nodes
        texts = [nodes[m].raw for e in group for m in e.members]
        keywords = list(dict.fromkeys(k for e in group for k in e.keywords))[:10]
        summary = texts[0] if len(texts) == 1 else f"{texts[0]} … {texts[-1]}"
        return self._proposal(Op.REPAIR, [e.id for e in group], min(confs),
                              f"{len(group)} adjacent fragments of one narrative",
                              {"summary": summary[:400], "keywords": keywords, "rationale": "; ".join(rationale)},
                              {"events": len(group)})

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
            theta = s.theta_repair if p.op == Op.REPAIR else s.theta_rel
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
        if any(t not in nodes or nodes[t].kind != Kind.EVENT for t in p.targets) or len(set(p.targets)) < 2 \
                or len(set(p.targets)) != len(p.targets):
            return ReasonCode.SCHEMA_FAIL, f"targets {p.targets} are not distinct events"
        if p.op == Op.REPAIR:
            return None
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
        for p in accepted:
            nodes = tx.state.nodes
            stale = [t for t in p.targets if t not in nodes or nodes[t].status == Life.ARCHIVED or t in touched]
            if stale:
                tx.update_proposal(p.id, status=Status.SKIPPED, reason_code=ReasonCode.APPLICABLE_FAIL,
                                   note=f"event(s) {stale} were retired or changed earlier in this run")
                continue
            if p.op == Op.REPAIR:
                new = self._repair(tx, p)
                created.append(new)
                archived += p.targets
                touched.update(p.targets)
            else:
                src, dst = p.targets
                tx.add_edge(Edge(src, dst, p.plan["type"], tx.run_id or "", p.confidence, tx.turn,
                                 evidence=[int(x) for x in p.plan["evidence"]]))
            tx.update_proposal(p.id, status=Status.APPLIED, note=f"applied ({p.decided_by})")
        self._curate(tx)
        archived += self._retain(tx)
        version = (tx.state.engine_state.get("snapshot") or {}).get("version", 0) + 1
        tx.set_var("snapshot", {"version": version, "run": tx.run_id})
        return {"created": created, "archived": archived, "rewired": []}

    def _repair(self, tx: Tx, p: Proposal) -> int:
        """ENTR's ⊕: a new event holds the fragments' evidence; the fragments retire into the lineage."""
        nodes = tx.state.nodes
        parts = [nodes[t] for t in p.targets]
        a, b = parts[0], parts[-1]
        members = sorted({m for e in parts for m in e.members}, key=lambda m: (nodes[m].created_turn, m))
        stats = online.event_stats([nodes[m] for m in members])
        eid = tx.state.next_node_id
        tx.create_node(Node(id=eid, raw="", summary=p.plan["summary"], keywords=list(p.plan["keywords"])[:10],
                            time=a.time, kind=Kind.EVENT, source_ids=[s for m in members for s in nodes[m].source_ids],
                            speakers=list(dict.fromkeys(sp for e in parts for sp in e.speakers)), session=a.session,
                            status=Life.PROVISIONAL, created_turn=tx.turn, made_by=tx.run_id or "",
                            members=members, attrs={**stats, "last_time": b.attrs.get("last_time", b.time),
                                                    "last_turn": b.attrs.get("last_turn", b.created_turn)}))
        cause = {"rule": "timeline_repair", "run": tx.run_id, "of": p.targets}
        was = {e.status for e in parts}
        if online.maturity(self.engine.settings, stats) >= self.engine.settings.tau_maturity or was & set(Life.CURATED):
            tx.set_status(eid, Life.ACTIVE, cause)
        if Life.CLOSED in was:
            tx.set_status(eid, Life.CLOSED, cause)
        for old in parts:
            tx.set_status(old.id, Life.ARCHIVED, {"rule": "timeline_repair", "into": eid, "run": tx.run_id})
            tx.add_edge(Edge(eid, old.id, Rel.LINEAGE, tx.run_id or "", None, tx.turn))
        for m in members:
            tx.add_edge(Edge(eid, m, Rel.EVIDENCE, tx.run_id or "", None, tx.turn))
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

"""GAM's semantic consolidation state (§3.3, App. A): the two offline processes.

`Consolidation` reads the episodic buffer on a sparse trigger: the detector role cuts it into segments
(its indices validated: a refused answer leaves the buffer one segment, with the reason code on the trigger
record), the tail follows the trigger's policy (`buffering.plan_trigger`), and each segment to consolidate is a
`topic` proposal whose plan holds the topic's keywords and summary (the summary role). Applying it creates the
topic node (c_sum and c_raw), archives the segment's events, links each by a `cross` edge and cuts the
sequential edges that crossed the segment's ends; whatever was not consolidated goes back to the buffer.

`Linking` takes the new topics (the `linking` buffer): each one's top-K earlier topics by cosine of their
summaries, the relation role per pair, and one `relate` proposal per pair; the gate passes it iff the label is
a relation (never `unrelated`) and its confidence is above τ. Applying adds the typed edge new → earlier with
the confidence as its weight.

Both processes switch the engine's `phase` variable to consolidating as their run opens (unless a trigger
already did) and back to episodic when the run is decided, so the topic network is only ever written in the
consolidation state; every switch and trigger is a record with its cause.
"""
from __future__ import annotations

import numpy as np

from engine.core.edge import Edge
from engine.core.node import Node
from engine.core.proposal import GateVerdict, Proposal, Status, call_reason_code, confidence_gate
from engine.core.text import content_tokens, strip_speaker
from engine.core.tx import Tx
from engine.engines.gam.buffering import Detection, plan_trigger, validate
from engine.engines.gam.context import GamContext
from engine.engines.gam.schema import (
    CONSOLIDATION,
    EPISODIC_BUFFER,
    LINKING,
    Kind,
    Life,
    Op,
    Phase,
    ReasonCode,
    Rel,
    Trigger,
)
from engine.runtime.process import BaseProcess


def phase_of(state) -> str:
    return (state.engine_state.get("phase") or {}).get("phase", Phase.EPISODIC)


def open_phase(tx: Tx, opened_by: str, cause: dict) -> bool:
    """Enter the consolidation state (a record with its cause), unless already in it; True if this opened it."""
    if phase_of(tx.state) == Phase.CONSOLIDATING:
        return False
    tx.set_var("phase", {"phase": Phase.CONSOLIDATING, "opened_by": opened_by, **cause})
    return True


def close_phase(tx: Tx, opened_by: str, cause: dict) -> None:
    """Back to episodic buffering, when `opened_by` is the one that entered the consolidation state."""
    now = tx.state.engine_state.get("phase") or {}
    if now.get("phase") == Phase.CONSOLIDATING and now.get("opened_by") == opened_by:
        tx.set_var("phase", {"phase": Phase.EPISODIC, "after": opened_by, **cause})


def utterance(node: Node, index: int | None = None) -> dict:
    speaker, text = strip_speaker(node.raw)
    out = {"speaker": (node.speakers or [speaker])[0], "text": text, "time": node.time}
    return out if index is None else {"index": index, **out}


def buffered_events(state) -> list[Node]:
    """The active event graph in turn order."""
    return [state.nodes[i] for i in sorted(state.buffer(EPISODIC_BUFFER)) if i in state.nodes]


def consistent_events(events: list[Node], keywords: list[str], least: int) -> list[int]:
    """The self-consistency check at consolidation: an event passes when it shares at least `least` of its
    topic's keywords (its content is what the topic says it is about)."""
    topic_terms = {t for k in keywords for t in content_tokens(k)}
    return [e.id for e in events if len(set(content_tokens(strip_speaker(e.raw)[1])) & topic_terms) >= least]


class _Proposals:
    """Numbers the proposals of one diagnosis."""

    def __init__(self, run_id: str, first: int, turn: int):
        self.run_id, self.next, self.turn = run_id, first, turn

    def make(self, op: str, targets: list[int], confidence: float, reason: str, plan: dict | None,
             detail: dict) -> Proposal:
        p = Proposal(id=self.next, run_id=self.run_id, op=op, targets=targets, confidence=round(confidence, 4),
                     reason=reason, plan=plan, detail=detail, made_turn=self.turn)
        self.next += 1
        return p


class Consolidation(BaseProcess):
    engine: GamContext

    def __init__(self, engine, spec):
        super().__init__(engine, spec)
        self.trigger: dict | None = None      # what started the run in progress (None: a person, by hand)
        self.detection: dict | None = None    # the trigger record of the run being proposed

    def run_on(self, trigger: dict):
        """One automatic run for a sparse trigger (`trigger`: name and cause)."""
        self.trigger = trigger
        try:
            return self.run()
        finally:
            self.trigger = None

    # -- diagnosis ------------------------------------------------------------------------------
    def diagnose(self, run_id: str, manual: bool) -> list[Proposal]:
        eng, s = self.engine, self.engine.settings
        events = buffered_events(eng.state)
        trigger = self.trigger or {"trigger": Trigger.MANUAL, "cause": "a person asked for a consolidation"}
        n = len(events)
        tokens = [int(e.attrs.get("tokens", 0)) for e in events]
        detection = self.detect(events)
        plan = plan_trigger(n, detection.starts, trigger["trigger"], tokens, s)
        self.detection = {**trigger, "buffer": [e.id for e in events], "tokens": sum(tokens), "t_max": s.t_max,
                          "tokenizer": s.tokenizer, "boundaries": detection.indices, "answer": detection.raw,
                          "reason_code": detection.code, "message": detection.message, "policy": plan.policy,
                          "segments": [[events[a].id, events[b].id] for a, b in plan.consolidate],
                          "kept": [events[i].id for i in range(plan.kept[0], plan.kept[1] + 1)] if plan.kept else []}
        made = _Proposals(run_id, eng.state.next_proposal_id, eng.state.turn)
        out = []
        refused = (f" The detector's answer was refused ({detection.code}: {detection.message}); the buffer is one "
                   f"segment." if detection.code else "")
        for first, last in plan.consolidate:
            segment = events[first:last + 1]
            call = eng.llm.call("topic_summary", {"utterances": [utterance(e) for e in segment]})
            reason = (f"utterances {first}-{last} of the {n}-utterance buffer ({trigger['trigger'].replace('_', ' ')}"
                      f"; {plan.policy})." + refused)
            detail = {"trigger": trigger["trigger"], "threshold": 0.0}
            if not call.ok:
                p = made.make(Op.TOPIC, [e.id for e in segment], 0.0, reason, None, detail)
                p.status, p.gate, p.reason_code = Status.FAILED, GateVerdict.FAIL, call_reason_code(call.error_code)
                p.note = f"the summary role failed: {call.error}; the segment stays in the buffer"
            else:
                p = made.make(Op.TOPIC, [e.id for e in segment], 1.0, reason,
                              {"summary": call.data["summary"], "keywords": list(call.data["keywords"]),
                               "boundaries": detection.indices, "trigger": trigger["trigger"], "tail": plan.policy},
                              detail)
                if detection.code:
                    p.note = refused.strip()
            out.append(p)
        return out

    def detect(self, events: list[Node]) -> Detection:
        """The detector role over the buffer; a failed call or a refused answer means no boundary."""
        s = self.engine.settings
        if len(events) < 2:
            return Detection()
        call = self.engine.llm.call("boundary_detection", {
            "utterances": [utterance(e, i) for i, e in enumerate(events)], "min_segment": s.min_segment,
            "tiling": {"window": s.tiling_window, "depth_threshold": s.depth_threshold}})
        if not call.ok:
            return Detection([], (), call_reason_code(call.error_code), call.error or "")
        return validate(call.data["boundaries"], len(events))

    def opened(self, tx: Tx) -> None:
        trigger = self.trigger or {"trigger": Trigger.MANUAL, "cause": "a person asked for a consolidation"}
        open_phase(tx, tx.run_id, trigger)
        if self.detection is not None:
            tx.set_var("trigger", {**self.detection, "run": tx.run_id})
            self.detection = None

    # -- execution ------------------------------------------------------------------------------
    def plan(self, p: Proposal):
        return p.plan, None, ""

    def execute(self, tx: Tx, accepted: list[Proposal]) -> dict:

        created, archived = [], []
        for p in accepted:
            nodes = tx.state.nodes
            stale = [t for t in p.targets if t not in nodes or nodes[t].status != Life.BUFFERED]
            if stale:
                tx.update_proposal(p.id, status=Status.SKIPPED, reason_code=ReasonCode.APPLICABLE_FAIL,
                                   note=f"event(s) {stale} are no longer buffered")
                continue
            created.append(self._topic(tx, p, [nodes[t] for t in p.targets]))
            archived += p.targets
            tx.update_proposal(p.id, status=Status.APPLIED, note=f"{p.note} applied ({p.decided_by})".lstrip())
        if not any(q.run_id == tx.run_id and q.status == Status.PENDING for q in tx.state.proposals.values()):
            self._settle(tx)
        if created:
            tx.push_buffer(LINKING, [(t, []) for t in created])
        return {"created": created, "archived": archived, "rewired": []}

    def _topic(self, tx: Tx, p: Proposal, events: list[Node]) -> int:
        """v_new = {c_sum, c_raw}: the topic node, its events archived behind cross edges (one archived graph)."""
        s, state = self.engine.settings, tx.state
        tid = state.next_node_id
        keywords = list(p.plan["keywords"])
        tx.create_node(Node(
            id=tid, raw="\n".join(e.raw for e in events), summary=p.plan["summary"], keywords=keywords,
            time=events[0].time, kind=Kind.TOPIC, source_ids=[sid for e in events for sid in e.source_ids],
            speakers=list(dict.fromkeys(sp for e in events for sp in e.speakers)), session=events[0].session,
            status=Life.TOPIC, created_turn=tx.turn, made_by=tx.run_id or "", members=[e.id for e in events],
            attrs={"events": len(events), "tokens": sum(int(e.attrs.get("tokens", 0)) for e in events),
                   "sessions": list(dict.fromkeys(e.session for e in events)), "end_time": events[-1].time,
                   "trigger": p.plan.get("trigger", ""),
                   "consistent": consistent_events(events, keywords, s.consistency_keywords)}))
        inside = {e.id for e in events}
        for e in events:
            for edge in [*state.out_edges(e.id), *state.in_edges(e.id)]:
                if edge.type == Rel.SEQUENTIAL and not {edge.src, edge.dst} <= inside:
                    tx.remove_edge(*edge.key)          # the archived graph is the segment's own
            tx.set_status(e.id, Life.ARCHIVED, {"rule": "consolidated", "topic": tid, "run": tx.run_id})
            tx.add_edge(Edge(tid, e.id, Rel.CROSS, tx.run_id or "", None, tx.turn))
        return tid

    def _settle(self, tx: Tx) -> None:
        """The run is decided: every event not consolidated goes back to the buffer, its token count is reset,
        and the consolidation state ends if this run entered it."""
        state = tx.state
        back = sorted(n.id for n in state.nodes.values() if n.kind == Kind.EVENT and n.status == Life.BUFFERED
                      and n.id not in state.buffer(EPISODIC_BUFFER))
        tx.push_buffer(EPISODIC_BUFFER, [(i, []) for i in back])
        left = sum(int(state.nodes[i].attrs.get("tokens", 0)) for i in state.buffer(EPISODIC_BUFFER))
        if state.engine_state.get("buffer_tokens") != left:
            tx.set_var("buffer_tokens", left)
        close_phase(tx, tx.run_id, {"cause": "the consolidation run is decided"})


class Linking(BaseProcess):
    engine: GamContext

    def diagnose(self, run_id: str, manual: bool) -> list[Proposal]:
        eng, s = self.engine, self.engine.settings
        state = eng.state
        made = _Proposals(run_id, state.next_proposal_id, state.turn)
        fresh = sorted(t for t in state.buffer(self.spec.buffer) if t in state.nodes
                       and state.nodes[t].kind == Kind.TOPIC)
        topics = sorted(n.id for n in state.nodes.values() if n.kind == Kind.TOPIC)
        speakers = sorted({sp for n in state.nodes.values() if n.kind == Kind.EVENT for sp in n.speakers})
        out: list[Proposal] = []
        for t in fresh:
            earlier = [c for c in topics if c < t]
            if not earlier:
                continue
            zt = eng.vectors[t]
            sims = np.stack([eng.vectors[c] for c in earlier]) @ zt
            ranked = sorted(zip(earlier, sims.tolist()), key=lambda cs: (-round(cs[1], 9), -cs[0]))
            for rank, (c, cos) in enumerate(ranked[:s.link_candidates], 1):
                distance = topics.index(t) - topics.index(c)
                out.append(self._relate(made, t, c, cos, distance, rank, speakers, manual))
        return out

    def _relate(self, made: _Proposals, t: int, c: int, cos: float, distance: int, rank: int, speakers: list[str],
                manual: bool) -> Proposal:
        eng, s = self.engine, self.engine.settings
        state = eng.state
        new, old = state.nodes[t], state.nodes[c]
        call = eng.llm.call("topic_relation", {
            "memory_1": _memory(new), "memory_2": _memory(old), "cosine": round(cos, 4), "distance": distance,
            "calibration": {"a": s.relation_a, "c": s.relation_c, "b": s.relation_b}, "speakers": speakers})
        detail = {"cosine": round(cos, 4), "distance": distance, "threshold": s.tau}
        segment = [str(e) for e in new.members]
        if not call.ok:
            p = made.make(Op.RELATE, [t, c], 0.0, call.error or "", None, detail)
            p.status, p.gate, p.reason_code = Status.SKIPPED, GateVerdict.FAIL, call_reason_code(call.error_code)
            return p
        label, conf = str(call.data["relation"]).strip().lower(), float(call.data["confidence"])
        reason = f"candidate {rank} of the top {s.link_candidates} earlier topics: cosine {cos:.3f} of the summaries"
        plan = {"relation": label, "segment": segment,
                "rationale": f"the relation role said {label} with confidence {conf:.2f}"}
        p = made.make(Op.RELATE, [t, c], conf, reason, plan, {"relation": label, **detail})
        if label not in Rel.LABELS:
            p.status, p.gate, p.reason_code = Status.SKIPPED, GateVerdict.FAIL, ReasonCode.LABEL_FAIL
            p.note = f"{label!r} is not one of {', '.join(Rel.LABELS)}"
        elif label == Rel.UNRELATED:
            p.status, p.gate, p.reason_code = Status.SKIPPED, GateVerdict.FAIL, ReasonCode.UNRELATED
            p.note = "unrelated topics never get an edge"
        elif any(e.type in Rel.TOPIC for e in state.out_edges(t) + state.in_edges(t) if c in (e.src, e.dst)):
            p.status, p.gate, p.reason_code = Status.SKIPPED, GateVerdict.FAIL, ReasonCode.DUPLICATE
            p.note = "the two topics are already related"
        else:
            confidence_gate(p, s.tau, manual, name="τ", strict=True)
        return p

    def opened(self, tx: Tx) -> None:
        open_phase(tx, tx.run_id, {"trigger": LINKING, "cause": "new topics wait to be linked"})

    def plan(self, p: Proposal):
        return p.plan, None, ""

    def execute(self, tx: Tx, accepted: list[Proposal]) -> dict:
        for p in accepted:
            t, c = p.targets
            nodes = tx.state.nodes
            if any(x not in nodes or nodes[x].kind != Kind.TOPIC for x in (t, c)):
                tx.update_proposal(p.id, status=Status.SKIPPED, reason_code=ReasonCode.APPLICABLE_FAIL,
                                   note="a topic is gone")
                continue
            tx.add_edge(Edge(t, c, p.plan["relation"], tx.run_id or "", p.confidence, tx.turn))
            tx.update_proposal(p.id, status=Status.APPLIED, note=f"applied ({p.decided_by})")
        if not any(q.run_id == tx.run_id and q.status == Status.PENDING for q in tx.state.proposals.values()):
            close_phase(tx, tx.run_id, {"cause": "the linking run is decided"})
        return {"created": [], "archived": [], "rewired": []}


def _memory(topic: Node) -> dict:
    """A topic as the relation role sees it: its summary and keywords (c_sum)."""
    return {"id": str(topic.id), "summary": topic.summary, "keywords": list(topic.keywords), "time": topic.time}


__all__ = ["CONSOLIDATION", "LINKING", "Consolidation", "Linking", "phase_of"]

"""The steward's proposals: numbered as a run drafts them, then checked against MemLoom's contract.

Their own module because the timeline repair and the relation synthesis both draft proposals and the
validation (CVSP) judges them all: a `Drafts` carries the run's numbering and each proposal's gate, so the
drafting modules take it as an argument rather than reading per-run state off the steward.
"""
from __future__ import annotations

from dataclasses import dataclass

from engine.core.node import node_id_of
from engine.core.proposal import GateVerdict, Proposal, Status, confidence_gate
from engine.engines.memloom.context import MemLoomContext
from engine.engines.memloom.schema import Kind, Life, Op, ReasonCode, Rel
from engine.engines.memloom.settings import MemLoomSettings

ORDERED = (Rel.CAUSAL_FOLLOW, Rel.TEMPORAL_NEXT, Rel.STATE_SUCCESSOR)   # source must precede target


@dataclass
class Drafts:
    """One run's proposals as they are drafted: numbered from `next_id`, made at `turn`, each with the
    threshold of the gate it faces."""
    settings: MemLoomSettings
    run_id: str
    turn: int
    next_id: int

    def propose(self, op: str, targets: list[int], conf: float, reason: str, plan: dict | None,
                detail: dict) -> Proposal:
        p = Proposal(id=self.next_id, run_id=self.run_id, op=op, targets=targets, confidence=round(conf, 4),
                     reason=reason, plan=plan,
                     detail={**detail, "threshold": self.settings.theta_rel if op == Op.RELATION
                             else self.settings.theta_repair},
                     made_turn=self.turn)
        self.next_id += 1
        return p


def validate(engine: MemLoomContext, proposals: list[Proposal], manual: bool) -> None:
    """Contract validation (CVSP): a proposal that breaks the contract, repeats a relation, falls under its
    gate (skipped unless the run is manual) or is over the run's relation budget is marked so, with why."""
    s, nodes = engine.settings, engine.state.nodes
    seen = set(engine.state.edges)
    live = []
    for p in proposals:
        if p.status != Status.PENDING:
            continue
        problem = _contract(p, nodes)
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
        confidence_gate(p, s.theta_rel if p.op == Op.RELATION else s.theta_repair, manual)
        if p.status == Status.PENDING:
            live.append(p)
    relations = sorted((p for p in live if p.op == Op.RELATION and p.gate == GateVerdict.PASS),
                       key=lambda p: (-p.confidence, p.targets, p.id))
    for p in relations[s.relation_budget:]:
        p.status, p.gate, p.reason_code = Status.SKIPPED, GateVerdict.FAIL, ReasonCode.BUDGET
        p.note = f"over the run's budget of {s.relation_budget} relations"

def _contract(p: Proposal, nodes) -> tuple[str, str] | None:
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
        members = {node_id_of(m) for m in p.plan.get("members", [])}
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
    cited = {node_id_of(x) for x in p.plan.get("evidence", [])}
    if not (cited & set(a.members)) or not (cited & set(b.members)):
        return ReasonCode.EVIDENCE_FAIL, "the relation must cite at least one record of each event"
    p.plan["evidence"] = [str(x) for x in sorted(cited & (set(a.members) | set(b.members)))]
    if rtype in ORDERED and (a.time, a.created_turn) >= (b.time, b.created_turn):
        return ReasonCode.TEMPORAL_ORDER_FAIL, f"u{a.id} does not precede u{b.id}"
    bad = [e.id for e in (a, b) if e.status not in Life.CURATED]
    if bad:
        return ReasonCode.LIFECYCLE_FAIL, f"event(s) {bad} are not active or closed"
    return None

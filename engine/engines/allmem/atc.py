"""Agentic Topology Consolidation, routing half: diagnosis -> gate -> Norm -> queues.

Turns each buffered context into proposals, records why each one is kept or
dropped (one reason code per drop), and leaves the survivors pending for a
human or the gate to decide (App. C.1-C.2).
"""
from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations

import numpy as np

from engine.core.node import node_id_of
from engine.core.proposal import GateVerdict, Proposal, Status, call_reason_code, confidence_gate, fail_gate
from engine.engines.allmem.context import AllMemContext
from engine.engines.allmem.schema import Op, ReasonCode


@dataclass
class Diagnosis:
    target: int
    context: list[int]
    call_ok: bool
    error_code: str | None


def coherence(vectors: list[np.ndarray]) -> float:
    """Coh(S): mean pairwise cosine of the set's embeddings (Eq. 29)."""
    pairs = list(combinations(vectors, 2))
    return float(np.mean([a @ b for a, b in pairs])) if pairs else 0.0


def unit_payload(engine: AllMemContext, uid: int, position: dict[str, int] | None = None) -> dict:
    """A unit as a role reads it; with `position` (turn id -> place in the conversation) also `asked`: what the
    other speaker said just before the unit's turn, which an answer ("No, I stopped in February") takes its
    subject from."""
    u = engine.state.units[uid]
    out = {"id": str(uid), "raw": u.raw, "summary": u.summary, "keywords": list(u.keywords), "time": u.time,
           "speaker": ", ".join(u.speakers), "visible": u.visible}
    if position is not None:
        out["asked"] = asked_before(engine.state, u, position)
    return out


def asked_before(state, u, position: dict[str, int]) -> str:
    """The raw text of the turn before `u`'s first turn when another speaker said it, else ""."""
    at = position.get(u.source_ids[0], 0) if u.source_ids else 0
    if at == 0:
        return ""
    prev = state.nodes.get(state.turn_units.get(state.turn_ids[at - 1], -1))
    return prev.raw if prev is not None and prev.speakers != u.speakers else ""


def diagnose(engine: AllMemContext, run_id: str, manual: bool) -> list[Proposal]:
    """Diagnose every buffered target and route the resulting proposals."""
    s, state = engine.settings, engine.state
    proposals: list[Proposal] = []
    next_id = state.next_proposal_id
    targets = [t for t in state.buffer("atc") if t in state.units]
    position = {tid: i for i, tid in enumerate(state.turn_ids)}
    payloads = {t: {"target": unit_payload(engine, t, position),
                    "context": [unit_payload(engine, c, position)
                                for c, _ in engine.visible_neighbours(t, s.diagnosis_anchors)]}
                for t in targets}
    engine.llm.prefetch("diagnosis", list(payloads.values()))
    for target in targets:
        call = engine.llm.call("diagnosis", payloads[target])
        if not call.ok:
            proposals.append(Proposal(id=next_id, run_id=run_id, op="diagnosis", targets=[target], confidence=0.0,
                                      reason=call.error or "", context_target=target, gate=GateVerdict.FAIL,
                                      reason_code=call_reason_code(call.error_code), status=Status.SKIPPED,
                                      made_turn=state.turn))
            next_id += 1
            continue
        for op, targets, conf, reason in _tasks(call.data):
            proposals.append(Proposal(id=next_id, run_id=run_id, op=op, targets=targets, confidence=float(conf),
                                      reason=reason, context_target=target, made_turn=state.turn))
            next_id += 1
    for p in proposals:
        if p.op in Op.ORDER and s.has(f"no-{p.op}"):
            p.status, p.note = Status.SKIPPED, f"operator disabled by ablation no-{p.op}"
    _route(engine, [p for p in proposals if p.status == Status.PENDING], manual)
    return proposals


def _tasks(data: dict):
    """Map diagnosis JSON to (op, targets, p, reason); ids that are not integers are kept as -1 for Norm."""
    for t in data["split_tasks"]:
        yield Op.SPLIT, [node_id_of(t["node_id"])], t["confidence"], t["reason"]
    for t in data["merge_tasks"]:
        yield Op.MERGE, [node_id_of(i) for i in t["node_ids"]], t["confidence"], t["reason"]
    for t in data["update_tasks"]:
        yield Op.UPDATE, [node_id_of(t["new_node_id"]), node_id_of(t["old_node_id"])], t["confidence"], t["reason"]


def _route(engine: AllMemContext, proposals: list[Proposal], manual: bool) -> None:
    """Gate, normalise, de-duplicate and resolve overlaps, in place (App. C.2)."""
    s = engine.settings
    for p in proposals:
        problem = normalise(engine, p)
        if problem:
            p.status, p.reason_code, p.note = Status.SKIPPED, ReasonCode.NORM_FILTER, problem
            continue
        if p.op == Op.MERGE:
            p.detail["coherence"] = round(coherence([engine.vector(u) for u in p.targets]), 4)
        p.detail["threshold"] = s.theta[p.op]
        if confidence_gate(p, s.theta[p.op], manual) and p.op == Op.MERGE \
                and p.detail["coherence"] < s.gamma_merge:
            fail_gate(p, ReasonCode.COH_FAIL, f"coherence {p.detail['coherence']:.2f} < gamma {s.gamma_merge:.2f}",
                      manual)
    live = [p for p in proposals if p.status == Status.PENDING]
    _dedupe(live)
    _resolve_merge_overlaps([p for p in live if p.status == Status.PENDING and p.op == Op.MERGE])


def normalise(engine: AllMemContext, p: Proposal) -> str:
    """Norm: canonical ids plus visibility and arity rules; returns the problem or ''."""
    units = engine.state.units
    if p.op == Op.UPDATE:
        if len(p.targets) != 2 or p.targets[0] == p.targets[1]:
            return "update needs an ordered pair (current, superseded) of two ids"
    else:
        p.targets = sorted(set(p.targets))
    missing = [t for t in p.targets if t not in units]
    if missing:
        return f"unknown unit id(s) {missing}"
    if p.op == Op.SPLIT and len(p.targets) != 1:
        return "split takes exactly one unit"
    if p.op == Op.MERGE and not 2 <= len(p.targets) <= engine.settings.merge_max:
        return f"merge takes 2-{engine.settings.merge_max} units, got {len(p.targets)}"
    must_be_visible = p.targets[:1] if p.op == Op.UPDATE else p.targets
    hidden = [t for t in must_be_visible if not units[t].visible]
    if hidden:
        return f"unit(s) {hidden} are archived"
    return ""


def _identity(p: Proposal) -> tuple:
    return (p.op, tuple(p.targets))


def _dedupe(proposals: list[Proposal]) -> None:
    """Keep the most confident copy of identical targets; ties by id list then proposal id."""
    best: dict[tuple, Proposal] = {}
    for p in sorted(proposals, key=lambda p: (-p.confidence, p.targets, p.id)):
        if p.status != Status.PENDING:
            continue
        key = _identity(p)
        if key in best:
            p.status, p.reason_code = Status.SKIPPED, ReasonCode.DUPLICATE
            p.note = f"same targets as proposal {best[key].id}"
        else:
            best[key] = p


def _resolve_merge_overlaps(merges: list[Proposal]) -> None:
    """Overlapping merges: keep higher coherence, then confidence, then id list (fail closed).

    The kept merges are indexed by the units they hold, so a clash (the earliest kept merge sharing a unit)
    is found in O(targets) rather than by scanning every kept merge: O(merges) per run, not O(merges²).
    """
    kept: list[Proposal] = []
    holder: dict[int, int] = {}                       # unit -> position in `kept` of the merge holding it
    for p in sorted(merges, key=lambda p: (-p.detail["coherence"], -p.confidence, p.targets)):
        clashes = [holder[t] for t in p.targets if t in holder]
        if not clashes:
            holder.update((t, len(kept)) for t in p.targets)
            kept.append(p)
        else:
            p.status, p.reason_code = Status.SKIPPED, ReasonCode.OVERLAP
            p.note = f"overlaps merge proposal {kept[min(clashes)].id}, which is more coherent"

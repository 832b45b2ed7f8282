"""The off-peak steward (MemLoom §3.5): timeline repair, dual-track hooks, relation synthesis, validation,
and the atomic publication of a new snapshot.

Every repair and relation is a proposal reviewed like All-Mem's edits; the
run commits whole (one transaction) and ends by pointing the `snapshot`
variable at itself, which is what the curated retrieval stream reads. This
module runs the stages in order; each lives in a module of its own:
`timeline` (repairs and boundaries), `relations` (synthesis), `proposals`
(numbering and contract validation), `curation` (publication and retention).
"""
from __future__ import annotations

from engine.core.edge import Edge
from engine.core.proposal import Proposal, Status
from engine.core.tx import Tx
from engine.engines.memloom import curation, relations, timeline
from engine.engines.memloom.context import MemLoomContext
from engine.engines.memloom.proposals import Drafts, validate
from engine.engines.memloom.schema import Kind, Life, Op, ReasonCode
from engine.runtime.process import BaseProcess
from engine.runtime.reports import RunReport


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
        events = timeline.chronological([n for n in state.nodes.values() if n.kind == Kind.EVENT
                                         and n.status != Life.ARCHIVED])
        drafts = Drafts(s, run_id, state.turn, state.next_proposal_id)
        proposals: list[Proposal] = []
        busy: set[int] = set()
        if not s.has("no-repair"):
            proposals, busy = timeline.propose_repairs(self.engine, drafts, events, fresh)
        if not s.has("no-relations"):
            proposals += relations.propose_relations(self.engine, drafts, [e for e in events if e.id not in busy],
                                                     fresh - busy)
        validate(self.engine, proposals, manual)
        return proposals

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
                new = timeline.repair(self.engine.settings, tx, p)
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
        curation.curate(self.engine, tx)
        archived += curation.retain(self.engine.settings, tx)
        version = (tx.state.engine_state.get("snapshot") or {}).get("version", 0) + 1
        tx.set_var("snapshot", {"version": version, "run": tx.run_id})
        return {"created": created, "archived": archived, "rewired": []}

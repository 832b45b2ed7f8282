"""The offline-process skeleton: propose → (preview) → decide → apply, as one run in the log.

An engine's process (All-Mem's ATC, MemLoom's steward ...) supplies diagnosis,
plans and execution; the skeleton logs the run, the decisions, the skips and
the summary, and commits each step whole.
"""
from __future__ import annotations

from engine.core.oplog import OpKind
from engine.core.ops import payload_of
from engine.core.payloads import Note, RunCommitted, RunStarted
from engine.core.proposal import GateVerdict, Proposal, ProposalCounts, Status
from engine.core.schema import ProcessSpec
from engine.core.tx import Tx
from engine.runtime.engine import BaseEngine, writes
from engine.runtime.errors import RunError
from engine.runtime.reports import RunReport


class BaseProcess:
    """propose → (preview) → decide → apply, as one run in the log; engines supply the middle."""

    spec: ProcessSpec

    def __init__(self, engine: BaseEngine, spec: ProcessSpec):
        self.engine, self.spec = engine, spec

    def writing(self):
        """The engine's write lock (what `writes` takes for a process method)."""
        return self.engine.writing()

    # -- what an engine provides ----------------------------------------------------------
    def diagnose(self, run_id: str, manual: bool) -> list[Proposal]:
        """Proposals for the buffered work, routed (gate verdicts and closed ones marked)."""
        raise NotImplementedError

    def plan(self, p: Proposal) -> tuple[dict | None, str | None, str]:
        """The plan an accepted proposal would execute: (plan, reason code on failure, message)."""
        return {}, None, ""

    def execute(self, tx: Tx, accepted: list[Proposal]) -> dict:
        """Apply accepted proposals inside `tx`; returns {created, archived, rewired} for the run summary."""
        raise NotImplementedError

    def order_key(self, p: Proposal) -> tuple:
        return (p.targets, p.id)

    def opened(self, tx: Tx) -> None:
        """Records the process writes as its run opens, right after `run_started` (GAM: its phase switch)."""

    # -- the skeleton -------------------------------------------------------------------------
    def pending(self) -> int:
        return len(self.engine.state.buffer(self.spec.buffer))

    @writes
    def propose(self, manual: bool = True) -> list[Proposal]:
        eng = self.engine
        if eng.open_run():
            raise RunError(f"run {eng.open_run()} still has undecided proposals; decide them or defer the rest first")
        run_id = f"run-{len(eng.state.runs) + 1:04d}"
        proposals = self.diagnose(run_id, manual)
        tx = Tx(eng.state, turn=eng.state.turn, run_id=run_id, isolated=False)
        tx.emit(RunStarted(mode="manual" if manual else "auto", process=self.spec.name,
                           buffer=list(eng.state.buffer(self.spec.buffer))))
        self.opened(tx)
        for p in proposals:
            tx.make_proposal(p)
        tx.flush_buffer(self.spec.buffer)
        eng.commit(tx.ops)
        made = [eng.state.proposals[p.id] for p in proposals]
        if manual and not any(p.status == Status.PENDING for p in made):
            self.apply(None, "diagnosis", run_id)       # nothing to decide: a run left open would only block ingest
        return [eng.state.proposals[p.id] for p in proposals]

    @writes
    def preview(self, proposal_id: int) -> dict | None:
        eng = self.engine
        p = eng.state.proposals[proposal_id]
        if p.plan is None and p.status == Status.PENDING and eng.schema.operator(p.op):
            plan, code, message = self.plan(p)
            tx = Tx(eng.state, turn=eng.state.turn, run_id=p.run_id, isolated=False)
            if plan is not None:
                tx.update_proposal(p.id, plan=plan)
            else:
                tx.update_proposal(p.id, status=Status.FAILED, reason_code=code, note=message)
            eng.commit(tx.ops)
        return eng.state.proposals[proposal_id].plan

    @writes
    def apply(self, decisions: dict[int, bool] | None, decided_by: str, run_id: str,
              defer_rest: bool = False) -> RunReport:
        """Decide and execute proposals of an open run atomically. `decisions` None lets the gate decide every
        pending proposal; otherwise only the proposals in `decisions` are decided and the rest stay pending for
        a later apply of the same run, unless `defer_rest` closes them as skipped with a note naming who deferred
        them. The run is committed once none of its proposals is pending; until then each apply is logged as a
        note holding its part of the run summary."""
        eng = self.engine
        pending = sorted((p for p in eng.state.proposals.values() if p.run_id == run_id
                          and p.status == Status.PENDING), key=self.order_key)
        unknown = sorted(set(decisions or {}) - {p.id for p in pending})
        if unknown:
            raise RunError(f"proposal(s) {unknown} are not pending in {run_id}")
        if pending and decisions is not None and not decisions and not defer_rest:
            raise RunError(f"nothing to apply in {run_id}: decide at least one proposal, or defer the rest")
        tx = Tx(eng.state, turn=eng.state.turn, run_id=run_id)
        accepted, decided = [], []
        for p in pending:
            if decisions is None:
                accept, who = p.gate == GateVerdict.PASS, "gate"
            elif p.id in decisions:
                accept, who = bool(decisions[p.id]), decided_by
            else:
                if defer_rest:
                    tx.update_proposal(p.id, actor=decided_by, status=Status.SKIPPED, decided_by=decided_by,
                                       note=f"deferred by {decided_by}: left undecided when the run was closed")
                    decided.append(p.id)
                continue
            tx.update_proposal(p.id, actor=who, status=Status.ACCEPTED if accept else Status.REJECTED, decided_by=who)
            decided.append(p.id)
            if accept:
                accepted.append(tx.state.proposals[p.id])
        made = self.execute(tx, accepted)
        now = ProposalCounts.of(tx.state.proposals[i] for i in decided)
        part = {"applied": now.applied, "skipped": now.skipped, "failed": now.failed, "rejected": now.rejected,
                "created": made.get("created", []), "archived": made.get("archived", []),
                "rewired": len(made.get("rewired", []))}
        in_run = [p.id for p in tx.state.proposals.values() if p.run_id == run_id]
        run = ProposalCounts.of(tx.state.proposals[i] for i in in_run)
        if run.pending:
            tx.emit(Note(text=f"{run_id} partly applied ({now.applied} applied, {now.rejected} rejected); "
                              f"{run.pending} proposal(s) still pending", details={"part": part}), actor=decided_by)
        else:
            notes = eng.store.ops(run_id=run_id, kinds=[OpKind.NOTE], upto_seq=eng.state.seq)
            parts = [note.details["part"] for note in map(payload_of, notes) if "part" in note.details]
            made_by_run = {key: sum((earlier[key] for earlier in parts), type(part[key])()) + part[key]
                           for key in ("created", "archived", "rewired")}
            # proposals by status over the whole run (those routing closed at diagnosis too), as every page counts
            tx.emit(RunCommitted(summary={**run.to_dict(), **made_by_run}, decided_by=decided_by))
        ops = eng.commit(tx.ops)
        props = [eng.state.proposals[i] for i in in_run]
        return RunReport(run_id=run_id, proposals=props, created=made.get("created", []),
                         archived=made.get("archived", []), rewired=made.get("rewired", []), ops=ops)

    def run(self) -> RunReport:
        """One automatic run: diagnose the buffer and let the gate decide, in one transaction (a crash
        between the two leaves no half-made run behind)."""
        with self.engine.writing():
            self.propose(manual=False)
            return self.apply(None, "gate", self.engine.open_run())

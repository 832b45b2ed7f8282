"""The engine base every memory design builds on: the store, the live fold, writing, runs, undo, time travel.

An engine ingests turns, runs offline processes (each proposing edits that are
previewed, decided and applied as one run, or run automatically with the gate
deciding), undoes a run, retrieves with provenance, and gives a read-only view
of itself at a past turn or seq. It declares an `EngineSchema` so the UI and
CLI learn its kinds, statuses, edge types, operators and stages without
importing its package.

`BaseEngine` holds what all engines share: the store and the live fold, the
derived views (`engine.runtime.views`), the commit of ops together with the LLM
calls they caused, generic undo from the op specs' inverses, time travel and
export. A subclass implements `ingest`, `retrieve` and `explain`, and names
its offline processes (`engine.runtime.process.BaseProcess` subclasses).
"""
from __future__ import annotations

import functools
from abc import ABC, abstractmethod
from contextlib import contextmanager
from dataclasses import replace
from typing import Any, ClassVar, Iterable, Iterator

from engine.core import ops as opspecs
from engine.core.conversation import Turn
from engine.core.node import Node, node_label
from engine.core.oplog import OpKind, OpRecord, RunStatus
from engine.core.payloads import LLMCallMade, RunDiscarded, RunUndone, TurnIngested
from engine.core.proposal import CLOSED, Proposal, ProposalCounts, Status
from engine.core.schema import EngineSchema
from engine.core.state import MemoryState
from engine.core.tx import Tx
from engine.llm.base import LLM, LLMCall
from engine.llm.embedder import Embedder
from engine.retrieval.explain import Placement
from engine.retrieval.result import RetrievalResult
from engine.runtime.errors import RunError, UndoError
from engine.runtime.protocols import OfflineProcess
from engine.runtime.reports import IngestReport, RunReport
from engine.runtime.views import DerivedViews
from engine.store.log_store import Store


def writes(method):
    """An engine method that writes: it runs under the store's write lock, on a state caught up with
    everything other writers committed, and all its commits land together or not at all."""
    @functools.wraps(method)
    def under_lock(self, *args, **kwargs):
        with self.writing():
            return method(self, *args, **kwargs)
    return under_lock


class BaseEngine(DerivedViews, ABC):
    """Shared machinery; subclasses set `name`, `schema`, `Settings` and implement ingest, retrieve and explain."""

    name: ClassVar[str] = ""
    schema: ClassVar[EngineSchema]
    Settings: ClassVar[type]
    read_only: bool = False

    def __init__(self, store: Store, llm: LLM, embedder: Embedder, settings: Any = None,
                 state: MemoryState | None = None):
        self.store, self.llm, self.embedder = store, llm, embedder
        self.settings = settings if settings is not None else self.Settings()
        store.schema = self.schema
        self.state = state if state is not None else store.load_state()
        self.pending_calls: list[LLMCall] = []
        self.llm.recorder = self.pending_calls.append
        self.others_records = 0          # records other writers committed that this engine caught up with
        self._processes = self.make_processes()
        self._rebuild_views()

    # -- what a subclass provides --------------------------------------------------------
    def make_processes(self) -> dict[str, OfflineProcess]:
        return {}

    @abstractmethod
    def ingest(self, turn: Turn) -> IngestReport:
        """Write one turn: its node(s), edges and buffer entries, committed together."""

    @abstractmethod
    def retrieve(self, query: str, k: int | None = None) -> RetrievalResult:
        """Retrieve with provenance: every returned unit carries the path that reached it."""

    @abstractmethod
    def explain(self, res: RetrievalResult, uids: Iterable[int]) -> dict[int, Placement]:
        """Why each unit ranked where it did in `res` (retrieved from this state), or which stage dropped
        it (`engine.retrieval.explain`)."""

    # -- writing ---------------------------------------------------------------------------
    @contextmanager
    def writing(self) -> Iterator[None]:
        """Hold the store's write lock for a block: one transaction, all or nothing.

        First the engine catches up with records other processes committed since it last looked, so
        every id and decision it makes is made on the stored log. If the block raises, the transaction
        is rolled back and the engine re-reads the log, keeping nothing half-done."""
        if self.read_only:
            raise RunError("this is a read-only view of a past point; edit the live session instead")
        if self.store.in_write:
            yield
            return
        try:
            with self.store.writing():
                self.catch_up()
                yield
        except BaseException:
            self.pending_calls.clear()
            self.reload()
            raise

    def catch_up(self) -> int:
        """Fold in what other writers committed since this engine's state was read; returns how many records."""
        head = self.store.last_seq()
        if head == self.state.seq:
            return 0
        behind = head - self.state.seq
        self.reload()
        self.others_records += behind
        return behind

    def reload(self) -> None:
        """Re-read the state from the log and rebuild the derived views (same state object)."""
        fresh = self.store.load_state()
        self.state.__dict__.update(fresh.__dict__)
        self._rebuild_views()

    def commit(self, ops: list[OpRecord]) -> list[OpRecord]:
        """Store `ops` plus the LLM calls made while building them, in one transaction."""
        if self.read_only:
            raise RunError("this is a read-only view of a past point; edit the live session instead")
        turn = ops[0].turn if ops else self.state.turn     # calls belong to the turn their ops belong to
        run_id = ops[0].run_id if ops else None
        ops = ops + [LLMCallMade(call=c.to_dict()).record(turn=turn, run_id=run_id, actor="llm")
                     for c in self.pending_calls]
        self.pending_calls.clear()
        self.store.commit(ops, self.state)
        self._sync(ops)
        return ops

    def prefetch(self, turns: list[Turn]) -> None:
        """Embed what ingesting `turns` will need in large batches (an optimisation: results are cached)."""
        texts = [t.raw for t in turns]
        self.embedder.embed_ahead(texts)

    def check_new_turn(self, turn: Turn) -> None:
        if turn.id in self.state.turn_units:
            raise ValueError(f"turn {turn.id} is already in memory (node u{self.state.turn_units[turn.id]})")

    def turn_node(self, turn: Turn, kind: str, status: str) -> Node:
        """The node that keeps one turn as said (its text as raw and summary, no keywords), numbered next: how an
        engine that stores every turn starts its ingest."""
        return Node(id=self.state.next_node_id, raw=turn.raw, summary=turn.raw, keywords=[], time=turn.time,
                    kind=kind, source_ids=[turn.id], speakers=[turn.speaker], session=turn.session, status=status,
                    created_turn=self.state.turn + 1)

    @staticmethod
    def ingested(turn: Turn, **details) -> TurnIngested:
        """The `turn_ingested` payload: where the turn sits and its content hash (what a later replay of
        the file is checked against, `engine.runtime.replay.check_replayable`), plus the engine's own details."""
        return TurnIngested(turn_id=turn.id, index=turn.index, session=turn.session, sha256=turn.content_hash,
                            details=details)

    # -- offline processes --------------------------------------------------------------------
    def processes(self) -> dict[str, OfflineProcess]:
        return self._processes

    def process(self, name: str | None = None) -> OfflineProcess:
        """A process by name; without a name, the engine's first (All-Mem has one: ATC)."""
        if not self._processes:
            raise RunError(f"the {self.name} engine has no offline process")
        if name is None:
            return next(iter(self._processes.values()))
        try:
            return self._processes[name]
        except KeyError:
            raise RunError(f"the {self.name} engine has no process {name!r}; it has "
                           f"{', '.join(self._processes)}") from None

    def pending(self) -> int:
        """Work waiting for any offline process."""
        return sum(p.pending() for p in self._processes.values())

    def open_run(self) -> str | None:
        open_runs = self.state.open_runs()
        return open_runs[-1].run_id if open_runs else None

    def run_process(self, run_id: str) -> OfflineProcess:
        return self.process(self.state.runs[run_id].process or None)

    @writes
    def propose(self, manual: bool = True, process: str | None = None) -> list[Proposal]:
        return self.process(process).propose(manual)

    @writes
    def preview_plan(self, proposal_id: int) -> dict | None:
        return self.run_process(self.state.proposals[proposal_id].run_id).preview(proposal_id)

    @writes
    def apply(self, decisions: dict[int, bool] | None = None, decided_by: str = "gate",
              run_id: str | None = None, defer_rest: bool = False) -> RunReport:
        """Decide proposals of the open run (`BaseProcess.apply`): undecided ones stay pending unless deferred."""
        run_id = run_id or self.open_run()
        if run_id is None:
            raise RunError("no open run: propose first")
        if run_id not in self.state.runs or self.state.runs[run_id].status != RunStatus.OPEN:
            raise RunError(f"{run_id} is not an open run")
        return self.run_process(run_id).apply(decisions, decided_by, run_id, defer_rest)

    @writes
    def consolidate(self, process: str | None = None) -> RunReport:
        """One automatic run of a process (the first by default), the gate deciding."""
        return self.process(process).run()

    @writes
    def run_scheduled(self) -> list[RunReport]:
        """Run every scheduled process that has work, the gate deciding (what a replay schedule triggers).

        An open run blocks it: a scheduled consolidation is never skipped silently."""
        run = self.open_run()
        if run:
            raise RunError(open_run_message(self.state, run, self.store.location))
        return [p.run() for p in self._processes.values() if p.spec.scheduled and p.pending()]

    @writes
    def end_of_stream(self) -> list[RunReport]:
        """The conversation ended: what a replay runs after its last turn (unless its schedule is manual). By
        default the scheduled processes that have work; an engine whose consolidation waits for a stream event
        (GAM's session end) overrides it."""
        return self.run_scheduled()

    @writes
    def discard_run(self, run_id: str, actor: str = "human") -> str:
        """Close an open run without applying anything: its undecided proposals are closed as skipped and
        the buffered work it took is put back, so the next run diagnoses it again."""
        run = self.state.runs.get(run_id)
        if run is None or run.status != RunStatus.OPEN:
            raise RunError(f"{run_id} is not an open run")
        tx = Tx(self.state, turn=self.state.turn, run_id=run_id, actor=actor)
        for p in sorted(tx.state.proposals.values(), key=lambda p: p.id):
            if p.run_id == run_id and p.status not in CLOSED:
                tx.update_proposal(p.id, status=Status.SKIPPED, decided_by=actor,
                                   note=f"{p.note}; discarded with {run_id}".lstrip("; "))
        applied = {t for p in tx.state.proposals.values() if p.run_id == run_id and p.status == Status.APPLIED
                   for t in p.targets}                  # a part applied earlier already dealt with these
        for op in self.store.ops(run_id=run_id, kinds=[OpKind.BUFFER_FLUSHED]):
            for back in opspecs.inverse(tx.state, op):
                entries = [[u, a] for u, a in back.entries if u not in applied]
                if entries:
                    tx.emit(replace(back, entries=entries))
        tx.emit(RunDiscarded())
        self.commit(tx.ops)
        return run_id

    @writes
    def undo_last_run(self, actor: str = "human") -> str:
        """Append the inverses of the last committed run's records, newest first."""
        run = self.state.last_committed_run()
        if run is None:
            raise UndoError("no committed run to undo")
        later = [r for r in self.state.runs.values() if r.first_seq > run.last_seq
                 and r.status not in (RunStatus.UNDONE, RunStatus.DISCARDED)]
        if later:
            raise UndoError(f"run {run.run_id} is not the latest run")
        tx = Tx(self.state, turn=self.state.turn, run_id=f"undo-{run.run_id}", actor=actor)
        for op in reversed(list(self.store.ops(run_id=run.run_id))):
            for back in opspecs.inverse(tx.state, op):
                tx.emit(back)
        for p in sorted(tx.state.proposals.values(), key=lambda p: p.id):
            if p.run_id == run.run_id and p.status == Status.APPLIED:
                tx.update_proposal(p.id, note=f"{p.note}; undone")
        tx.emit(RunUndone(undone_run=run.run_id))
        self.commit(tx.ops)
        return run.run_id

    # -- views -------------------------------------------------------------------------------
    def at(self, upto_turn: int | None = None, upto_seq: int | None = None) -> "BaseEngine":
        """A read-only engine over the state folded to a past point (time travel)."""
        view = type(self).__new__(type(self))
        view.__dict__.update({k: v for k, v in self.__dict__.items()
                              if k in ("store", "llm", "embedder", "settings")})
        view.state = self.store.load_state(upto_turn=upto_turn, upto_seq=upto_seq)
        view.pending_calls, view.read_only = [], True
        view._processes = view.make_processes()
        view._rebuild_views()
        return view

    def snapshot(self) -> dict:
        return self.export()

    def export(self, labels: bool = False) -> dict:
        """Every node with its kind, status and derived visibility, and every edge."""
        return export_state(self.state, labels)


def open_run_message(state: MemoryState, run_id: str, db: str = "DB") -> str:
    """What to do about an open run, for any message that an open run blocks something."""
    undecided = ProposalCounts.of(state.proposals.values(), run_id).pending
    return (f"{run_id} is open with {undecided} undecided proposal(s); decide it first: apply it (the gate "
            f"decides what is left: `memwb runs apply {run_id} --db {db}`) or discard it (`memwb runs "
            f"discard {run_id} --db {db}`), or review it on the Consolidation page")


def export_state(state: MemoryState, labels: bool = False) -> dict:
    """Every node and edge; with `labels`, ids written as the pages write them ("u4"), for JSON a person reads."""
    name = node_label if labels else int
    units = [{"id": name(u.id), "kind": u.kind, "status": u.status, "visible": u.visible, "raw": u.raw,
              "summary": u.summary, "keywords": list(u.keywords), "time": u.time,
              "source_ids": list(u.source_ids), "members": [name(m) for m in u.members]}
             for u in sorted(state.nodes.values(), key=lambda u: u.id)]
    edges = [{"src": name(e.src), "dst": name(e.dst), "type": e.type}
             for e in sorted(state.edges.values(), key=lambda e: e.key)]
    return {"units": units, "edges": edges}

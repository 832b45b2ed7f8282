"""The memory-engine interface every engine implements, and the machinery they share.

An engine ingests turns, runs offline processes (each proposing edits that are
previewed, decided and applied as one run, or run automatically with the gate
deciding), undoes a run, retrieves with provenance, and gives a read-only view
of itself at a past turn or seq. It declares an `EngineSchema` so the UI and
CLI learn its kinds, statuses, edge types, operators and stages without
importing its package.

`BaseEngine` holds what all engines share: the store and the live fold, the
derived views (node vectors, the FAISS index of the retrieval surface, BM25),
the commit of ops together with the LLM calls they caused, generic undo from
the op specs' inverses, time travel and export. `BaseProcess` is the
propose → decide → apply skeleton; an engine supplies diagnosis and execution.
"""
from __future__ import annotations

import functools
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, ClassVar, Iterable, Iterator, Protocol, runtime_checkable

import numpy as np

from engine.core import ops as opspecs
from engine.core.conversation import Turn
from engine.core.edge import Edge
from engine.llm.embedder import Embedder
from engine.retrieval.explain import Placement
from engine.retrieval.index import VisibleIndex
from engine.retrieval.lexical import BM25
from engine.llm.base import LLM, LLMCall
from engine.core.node import Node
from engine.core.oplog import OpKind, OpRecord
from engine.core.proposal import GateVerdict, Proposal, Status
from engine.retrieval.result import RetrievalResult
from engine.core.schema import EngineSchema, ProcessSpec
from engine.core.state import MemoryState
from engine.store.log_store import Store
from engine.core.tx import Tx


@dataclass
class IngestReport:
    """What one turn caused: the node(s), anchors, edges, buffers, and engine-specific figures."""

    turn_id: str
    unit_id: int
    anchors: list[tuple[int, float]]
    edges: list[Edge]
    buffer_size: int
    ops: list[OpRecord] = field(default_factory=list)
    created: list[int] = field(default_factory=list)
    details: dict = field(default_factory=dict)


@dataclass
class RunReport:
    run_id: str
    proposals: list[Proposal]
    created: list[int] = field(default_factory=list)
    archived: list[int] = field(default_factory=list)
    rewired: list[tuple[int, int, int]] = field(default_factory=list)
    ops: list[OpRecord] = field(default_factory=list)

    @property
    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for p in self.proposals:
            out[p.status] = out.get(p.status, 0) + 1
        return out


class UndoError(Exception):
    pass


class RunError(RuntimeError):
    pass


def writes(method):
    """An engine method that writes: it runs under the store's write lock, on a state caught up with
    everything other writers committed, and all its commits land together or not at all."""
    @functools.wraps(method)
    def under_lock(self, *args, **kwargs):
        engine = self.engine if isinstance(self, BaseProcess) else self
        with engine.writing():
            return method(self, *args, **kwargs)
    return under_lock


@runtime_checkable
class OfflineProcess(Protocol):
    spec: ProcessSpec

    def pending(self) -> int: ...
    def propose(self, manual: bool = True) -> list[Proposal]: ...
    def preview(self, proposal_id: int) -> dict | None: ...
    def apply(self, decisions: dict[int, bool] | None, decided_by: str, run_id: str,
              defer_rest: bool = False) -> RunReport: ...
    def run(self) -> RunReport: ...


@runtime_checkable
class MemoryEngine(Protocol):
    name: ClassVar[str]
    schema: ClassVar[EngineSchema]
    Settings: ClassVar[type]
    store: Store
    state: MemoryState
    settings: Any

    def prefetch(self, turns: list[Turn]) -> None: ...
    def ingest(self, turn: Turn) -> IngestReport: ...
    def processes(self) -> dict[str, OfflineProcess]: ...
    def undo_last_run(self, actor: str = "human") -> str: ...
    def retrieve(self, query: str, k: int | None = None) -> RetrievalResult: ...
    def explain(self, res: RetrievalResult, uids: Iterable[int]) -> dict[int, Placement]: ...
    def at(self, upto_turn: int | None = None, upto_seq: int | None = None) -> "MemoryEngine": ...
    def export(self) -> dict: ...


class BaseEngine:
    """Shared machinery; subclasses set `name`, `schema`, `Settings` and implement ingest and retrieve."""

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
    def make_processes(self) -> dict[str, "BaseProcess"]:
        return {}

    def embed_text(self, node: Node) -> str:
        return node.embed_text

    def lexical_text(self, node: Node) -> str | None:
        """The text BM25 indexes for a node; None keeps the node out of the lexical index."""
        return f"{node.raw} {' '.join(node.keywords)}"

    def ingest(self, turn: Turn) -> IngestReport:
        raise NotImplementedError

    def retrieve(self, query: str, k: int | None = None) -> RetrievalResult:
        raise NotImplementedError

    def explain(self, res: RetrievalResult, uids: Iterable[int]) -> dict[int, Placement]:
        """Why each unit ranked where it did in `res` (retrieved from this state), or which stage dropped
        it (`engine.retrieval.explain`)."""
        raise NotImplementedError

    # -- derived views (vectors, the surface index, BM25) ---------------------------------
    def embed_nodes(self, nodes: list[Node]) -> dict[int, np.ndarray]:
        """Vectors of many nodes at once (one batch through the embedder)."""
        vecs = self.embedder.embed([self.embed_text(u) for u in nodes]) if nodes else \
            np.zeros((0, self.embedder.dim), np.float32)
        return {u.id: v for u, v in zip(nodes, vecs)}

    def _rebuild_views(self) -> None:
        nodes = list(self.state.nodes.values())
        self.vectors: dict[int, np.ndarray] = self.embed_nodes(nodes)
        self.index = VisibleIndex(self.embedder.dim)
        visible = [u.id for u in nodes if u.visible]
        if visible:
            self.index.add(visible, np.stack([self.vectors[i] for i in visible]))
        self.bm25 = BM25()
        for u in nodes:
            self._index_lexical(u)

    def _index_lexical(self, u: Node) -> None:
        text = self.lexical_text(u)
        if text is not None:
            self.bm25.add(u.id, text)

    def _sync(self, ops: list[OpRecord]) -> None:
        """Keep vectors, the surface index and BM25 in step with applied ops.

        A created node, a new descriptor or new members (a group node's centroid) re-derive the node's
        vector, its lexical entry and its place on the surface index."""
        for op in ops:
            p = op.payload
            if op.kind in (OpKind.NODE_CREATED, OpKind.DESCRIPTOR_CHANGED, OpKind.NODE_UPDATED):
                uid = p["node"]["id"] if op.kind == OpKind.NODE_CREATED else p["node"]
                u = self.state.nodes.get(uid)
                if u is None:
                    continue
                self.vectors[u.id] = self.embed_node(u)
                self._index_lexical(u)
                if u.visible:
                    self.index.add([u.id], self.vectors[u.id][None, :])
            elif op.kind == OpKind.STATUS_CHANGED and p["node"] in self.state.nodes:
                uid = p["node"]
                if self.state.nodes[uid].visible:
                    self.index.add([uid], self.vectors[uid][None, :])
                else:
                    self.index.remove([uid])
            elif op.kind == OpKind.NODE_RETRACTED:
                self.index.remove([p["node"]])
                self.bm25.remove(p["node"])
                self.vectors.pop(p["node"], None)

    def embed_node(self, node: Node) -> np.ndarray:
        return self.embedder.embed_one(self.embed_text(node))

    def vector(self, uid: int) -> np.ndarray:
        return self.vectors[uid]

    def visible_neighbours(self, uid: int, k: int) -> list[tuple[int, float]]:
        return [(i, s) for i, s in self.index.search(self.vectors[uid], k + 1) if i != uid][:k]

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
        ops = ops + [OpRecord(kind=OpKind.LLM_CALL, payload=c.to_dict(), turn=turn,
                              run_id=ops[0].run_id if ops else None, actor="llm") for c in self.pending_calls]
        self.pending_calls.clear()
        self.store.commit(ops, self.state)
        self._sync(ops)
        return ops

    def prefetch(self, turns: list[Turn]) -> None:
        """Embed what ingesting `turns` will need in large batches (an optimisation: results are cached)."""
        texts = [t.raw for t in turns]
        for start in range(0, len(texts), 256):
            self.embedder.embed(texts[start:start + 256])

    def check_new_turn(self, turn: Turn) -> None:
        if turn.id in self.state.turn_units:
            raise ValueError(f"turn {turn.id} is already in memory (node u{self.state.turn_units[turn.id]})")

    @staticmethod
    def ingested(turn: Turn, **details) -> dict:
        """The `turn_ingested` payload: where the turn sits and its content hash (what a later replay of
        the file is checked against, `engine.runtime.replay.check_replayable`), plus the engine's own details."""
        return {"turn_id": turn.id, "index": turn.index, "session": turn.session, "sha256": turn.content_hash,
                **details}

    # -- offline processes --------------------------------------------------------------------
    def processes(self) -> dict[str, "BaseProcess"]:
        return self._processes

    def process(self, name: str | None = None) -> "BaseProcess":
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

    def run_process(self, run_id: str) -> "BaseProcess":
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
        if run_id not in self.state.runs or self.state.runs[run_id].status != "open":
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
        if run is None or run.status != "open":
            raise RunError(f"{run_id} is not an open run")
        tx = Tx(self.state, turn=self.state.turn, run_id=run_id, actor=actor)
        for p in sorted(tx.state.proposals.values(), key=lambda p: p.id):
            if p.run_id == run_id and p.status not in Status.CLOSED:
                tx.update_proposal(p.id, status=Status.SKIPPED, decided_by=actor,
                                   note=f"{p.note}; discarded with {run_id}".lstrip("; "))
        applied = {t for p in tx.state.proposals.values() if p.run_id == run_id and p.status == Status.APPLIED
                   for t in p.targets}                  # a part applied earlier already dealt with these
        for op in self.store.ops(run_id=run_id, kinds=[OpKind.BUFFER_FLUSHED]):
            for kind, payload in opspecs.spec(op.kind).inverse(tx.state, op):
                payload["entries"] = [[u, a] for u, a in payload.get("entries", []) if u not in applied]
                if payload["entries"]:
                    tx.emit(kind, payload)
        tx.emit(OpKind.RUN_DISCARDED, {})
        self.commit(tx.ops)
        return run_id

    @writes
    def undo_last_run(self, actor: str = "human") -> str:
        """Append the inverses of the last committed run's records, newest first."""
        run = self.state.last_committed_run()
        if run is None:
            raise UndoError("no committed run to undo")
        later = [r for r in self.state.runs.values() if r.first_seq > run.last_seq
                 and r.status not in ("undone", "discarded")]
        if later:
            raise UndoError(f"run {run.run_id} is not the latest run")
        tx = Tx(self.state, turn=self.state.turn, run_id=f"undo-{run.run_id}", actor=actor)
        for op in reversed(list(self.store.ops(run_id=run.run_id))):
            inverse = opspecs.spec(op.kind).inverse
            for kind, payload in (inverse(tx.state, opspecs.current(op)) if inverse else []):
                tx.emit(kind, payload)
        for p in sorted(tx.state.proposals.values(), key=lambda p: p.id):
            if p.run_id == run.run_id and p.status == Status.APPLIED:
                tx.update_proposal(p.id, note=f"{p.note}; undone")
        tx.emit(OpKind.RUN_UNDONE, {"undone_run": run.run_id})
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

    def export(self) -> dict:
        """Every node with its kind, status and derived visibility, and every edge."""
        return export_state(self.state)


def process_classes() -> list[type["BaseProcess"]]:
    """Every offline process class of every registered engine (each engine is loaded through the registry);
    for tools that instrument processes without importing an engine's package."""
    from engine.engines import engine_class, known_engines

    for name in known_engines():
        engine_class(name)

    def below(cls: type) -> list[type]:
        return [sub for direct in cls.__subclasses__() for sub in (direct, *below(direct))]
    return below(BaseProcess)


def open_run_message(state: MemoryState, run_id: str, db: str = "DB") -> str:
    """What to do about an open run, for any message that an open run blocks something."""
    undecided = sum(1 for p in state.proposals.values() if p.run_id == run_id and p.status == Status.PENDING)
    return (f"{run_id} is open with {undecided} undecided proposal(s); decide it first: apply it (the gate "
            f"decides what is left: `memwb runs apply {run_id} --db {db}`) or discard it (`memwb runs "
            f"discard {run_id} --db {db}`), or review it on the Consolidation page")


def export_state(state: MemoryState) -> dict:
    units = [{"id": u.id, "kind": u.kind, "status": u.status, "visible": u.visible, "raw": u.raw,
              "summary": u.summary, "keywords": list(u.keywords), "time": u.time,
              "source_ids": list(u.source_ids), "members": list(u.members)}
             for u in sorted(state.nodes.values(), key=lambda u: u.id)]
    edges = [{"src": e.src, "dst": e.dst, "type": e.type} for e in sorted(state.edges.values(), key=lambda e: e.key)]
    return {"units": units, "edges": edges}


class BaseProcess:
    """propose → (preview) → decide → apply, as one run in the log; engines supply the middle."""

    spec: ProcessSpec

    def __init__(self, engine: BaseEngine, spec: ProcessSpec):
        self.engine, self.spec = engine, spec

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
        tx.emit(OpKind.RUN_STARTED, {"mode": "manual" if manual else "auto", "process": self.spec.name,
                                     "buffer": list(eng.state.buffer(self.spec.buffer))})
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
            raise ValueError(f"proposal(s) {unknown} are not pending in {run_id}")
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
        part = {s: sum(tx.state.proposals[i].status == s for i in decided)
                for s in (Status.APPLIED, Status.SKIPPED, Status.FAILED, Status.REJECTED)}
        part.update({"created": made.get("created", []), "archived": made.get("archived", []),
                     "rewired": len(made.get("rewired", []))})
        left = sum(tx.state.proposals[p.id].status == Status.PENDING for p in pending)
        if left:
            tx.emit(OpKind.NOTE, {"text": f"{run_id} partly applied ({part['applied']} applied, {part['rejected']} "
                                          f"rejected); {left} proposal(s) still pending", "part": part},
                    actor=decided_by)
        else:
            parts = [op.payload["part"] for op in eng.store.ops(run_id=run_id, kinds=[OpKind.NOTE],
                                                                upto_seq=eng.state.seq) if "part" in op.payload]
            summary = {key: sum((earlier[key] for earlier in parts), type(value)()) + value
                       for key, value in part.items()}
            tx.emit(OpKind.RUN_COMMITTED, {"summary": summary, "decided_by": decided_by})
        ops = eng.commit(tx.ops)
        props = [p for p in eng.state.proposals.values() if p.run_id == run_id]
        return RunReport(run_id=run_id, proposals=props, created=made.get("created", []),
                         archived=made.get("archived", []), rewired=made.get("rewired", []), ops=ops)

    def run(self) -> RunReport:
        """One automatic run: diagnose the buffer and let the gate decide, in one transaction (a crash
        between the two leaves no half-made run behind)."""
        with self.engine.writing():
            self.propose(manual=False)
            return self.apply(None, "gate", self.engine.open_run())

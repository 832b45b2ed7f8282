"""The All-Mem engine: online write, offline ATC, three-stage retrieval, over one store."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from engine.allmem import atc
from engine.allmem.executor import Executor, make_plan
from engine.allmem.ranking import temporal_key, top_cap
from engine.allmem.retrieval import RetrievalResult, retrieve
from engine.allmem.settings import AllMemSettings
from engine.conversation import Turn
from engine.edge import Edge, EdgeType
from engine.embedder import Embedder
from engine.index import VisibleIndex
from engine.lexical import BM25
from engine.llm.base import LLM, LLMCall
from engine.oplog import OpKind, OpRecord
from engine.proposal import GateVerdict, Op, Proposal, Status
from engine.state import MemoryState
from engine.store import Store
from engine.text import strip_speaker
from engine.tx import Tx
from engine.unit import Unit, UnitKind


@dataclass
class IngestReport:
    """What one turn caused: the unit, its anchors, the edges it added, the buffer."""

    turn_id: str
    unit_id: int
    anchors: list[tuple[int, float]]
    edges: list[Edge]
    buffer_size: int
    ops: list[OpRecord] = field(default_factory=list)


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


class AllMemEngine:
    name = "allmem"

    def __init__(self, store: Store, llm: LLM, embedder: Embedder, settings: AllMemSettings | None = None,
                 state: MemoryState | None = None):
        self.store, self.llm, self.embedder = store, llm, embedder
        self.settings = settings or AllMemSettings()
        self.state = state if state is not None else store.load_state()
        self.pending_calls: list[LLMCall] = []
        self.llm.recorder = self.pending_calls.append
        self.vectors: dict[int, np.ndarray] = {}
        self.index = VisibleIndex()
        self.bm25 = BM25()
        self._rebuild_views()

    # -- derived views (vectors, FAISS, BM25) -------------------------------------
    def _rebuild_views(self) -> None:
        units = list(self.state.units.values())
        vecs = self.embedder.embed([u.embed_text for u in units]) if units else \
            np.zeros((0, self.embedder.dim), np.float32)
        self.vectors = {u.id: v for u, v in zip(units, vecs)}
        self.index = VisibleIndex(self.embedder.dim)
        visible = [u.id for u in units if u.visible]
        if visible:
            self.index.add(visible, np.stack([self.vectors[i] for i in visible]))
        self.bm25 = BM25()
        for u in units:
            self.bm25.add(u.id, self._lexical_text(u))

    @staticmethod
    def _lexical_text(u: Unit) -> str:
        return f"{u.raw} {' '.join(u.keywords)}"

    def _sync(self, ops: list[OpRecord]) -> None:
        """Keep vectors, the visible-surface index and BM25 in step with applied ops."""
        for op in ops:
            p = op.payload
            uid = p["unit"]["id"] if op.kind == OpKind.UNIT_CREATED else p.get("unit")
            if op.kind in (OpKind.UNIT_CREATED, OpKind.DESCRIPTOR_CHANGED):
                u = self.state.units.get(uid)
                if u is None:
                    continue
                self.vectors[u.id] = self.embed_unit(u)
                self.bm25.add(u.id, self._lexical_text(u))
                if u.visible:
                    self.index.add([u.id], self.vectors[u.id][None, :])
            elif op.kind == OpKind.VISIBILITY_CHANGED and uid in self.state.units:
                if self.state.units[uid].visible:
                    self.index.add([uid], self.vectors[uid][None, :])
                else:
                    self.index.remove([uid])
            elif op.kind == OpKind.UNIT_RETRACTED:
                self.index.remove([uid])
                self.bm25.remove(uid)
                self.vectors.pop(uid, None)

    def embed_unit(self, unit: Unit) -> np.ndarray:
        return self.embedder.embed_one(unit.embed_text)

    def vector(self, uid: int) -> np.ndarray:
        return self.vectors[uid]

    def visible_neighbours(self, uid: int, k: int) -> list[tuple[int, float]]:
        return [(i, s) for i, s in self.index.search(self.vectors[uid], k + 1) if i != uid][:k]

    def _commit(self, ops: list[OpRecord]) -> list[OpRecord]:
        turn = ops[0].turn if ops else self.state.turn     # calls belong to the turn their ops belong to
        ops = ops + [OpRecord(kind=OpKind.LLM_CALL, payload=c.to_dict(), turn=turn,
                              run_id=ops[0].run_id if ops else None, actor="llm") for c in self.pending_calls]
        self.pending_calls.clear()
        self.store.commit(ops, self.state)
        self._sync(ops)
        return ops

    # -- online write ---------------------------------------------------------------
    def prefetch(self, turns: list[Turn]) -> None:
        """Embed what ingesting and diagnosing `turns` will need in large batches.

        Only an optimisation: every vector lands in the content-hash cache, so
        the per-turn calls that follow find it there instead of running the
        model one sentence at a time.
        """
        from engine.llm.offline import OfflineBackend, keywords_of, summary_of

        texts = [strip_speaker(t.raw)[1] for t in turns]
        if isinstance(self.llm.backend, OfflineBackend):
            texts += [Unit(0, t.raw, summary_of(t.raw, t.speaker, t.time), keywords_of(t.raw), t.time, "turn",
                           []).embed_text for t in turns]
        for start in range(0, len(texts), 256):
            self.embedder.embed(texts[start:start + 256])

    def ingest(self, turn: Turn) -> IngestReport:
        s, state = self.settings, self.state
        if turn.id in state.turn_units:
            raise ValueError(f"turn {turn.id} is already in memory (unit u{state.turn_units[turn.id]})")
        turn_no = state.turn + 1
        call = self.llm.call("descriptor", {"text": turn.raw, "speaker": turn.speaker, "time": turn.time})
        if call.ok:
            summary, keywords = call.data["summary"], list(dict.fromkeys(call.data["keywords"]))
        else:
            summary, keywords = turn.raw, []
        unit = Unit(id=state.next_unit_id, raw=turn.raw, summary=summary, keywords=keywords, time=turn.time,
                    kind=UnitKind.TURN, source_ids=[turn.id], speakers=[turn.speaker], session=turn.session,
                    created_turn=turn_no, made_by="online")
        z = self.embed_unit(unit)
        anchors = self.index.search(z, s.write_anchors)
        tx = Tx(state, turn=turn_no, actor="online", isolated=False)
        tx.emit(OpKind.TURN_INGESTED, {"turn_id": turn.id, "index": turn.index, "session": turn.session,
                                       "descriptor_ok": call.ok, "descriptor_error": call.error_code})
        tx.create_unit(unit)
        edges: list[Edge] = []
        prev = self._session_predecessor(turn.session, turn.time)
        if prev is not None:
            edges.append(Edge(unit.id, prev, EdgeType.TEMPORAL, "online", None, turn_no))
        semantic = [(a, c) for a, c in anchors if c >= s.semantic_min_cosine][: min(s.online_semantic_links,
                                                                                   s.cap_semantic)]
        for a, c in semantic:
            edges.append(Edge(unit.id, a, EdgeType.SEMANTIC, "online", round(c, 4), turn_no))
        for e in edges:
            tx.emit(OpKind.EDGE_ADDED, {"edge": e.to_dict()})
        tx.emit(OpKind.BUFFER_PUSHED, {"unit": unit.id, "anchors": [a for a, _ in anchors]})
        ops = self._commit(tx.ops)
        return IngestReport(turn_id=turn.id, unit_id=unit.id, anchors=anchors, edges=edges,
                            buffer_size=len(state.buffer), ops=ops)

    def _session_predecessor(self, session: str, t: str) -> int | None:
        """The latest earlier turn unit of the same session (Key_tau, cap 1)."""
        cands = [u.id for u in self.state.units.values()
                 if u.kind == UnitKind.TURN and u.session == session and u.time <= t]
        best = top_cap(cands, self.settings.cap_temporal, lambda i: temporal_key(self.state.units[i]))
        return best[0] if best else None

    # -- offline consolidation ----------------------------------------------------------
    def open_run(self) -> str | None:
        open_runs = [r for r in self.state.runs.values() if r.status == "open"]
        return open_runs[-1].run_id if open_runs else None

    def propose(self, manual: bool = True) -> list[Proposal]:
        """Diagnose the buffer into proposals; in manual mode they wait for `apply`."""
        if self.open_run():
            raise RuntimeError(f"run {self.open_run()} still has undecided proposals; apply or discard it first")
        run_id = f"run-{len(self.state.runs) + 1:04d}"
        turn = self.state.turn
        proposals = atc.diagnose(self, run_id, manual)
        tx = Tx(self.state, turn=turn, run_id=run_id, isolated=False)
        tx.emit(OpKind.RUN_STARTED, {"mode": "manual" if manual else "auto", "buffer": list(self.state.buffer)})
        for p in proposals:
            tx.emit(OpKind.PROPOSAL_MADE, {"proposal": p.to_dict()})
        tx.emit(OpKind.BUFFER_FLUSHED, {"units": list(self.state.buffer)})
        self._commit(tx.ops)
        return [self.state.proposals[p.id] for p in proposals]

    def preview_plan(self, proposal_id: int) -> dict | None:
        """The plan an accepted proposal would execute, stored so apply runs exactly this plan."""
        p = self.state.proposals[proposal_id]
        if p.plan is None and p.status == Status.PENDING and p.op in Op.ORDER:
            plan, code, message = make_plan(self, p)
            tx = Tx(self.state, turn=self.state.turn, run_id=p.run_id, isolated=False)
            if plan is not None:
                tx.update_proposal(p.id, plan=plan)
            else:
                tx.update_proposal(p.id, status=Status.FAILED, reason_code=code, note=message)
            self._commit(tx.ops)
        return self.state.proposals[proposal_id].plan

    def apply(self, decisions: dict[int, bool] | None = None, decided_by: str = "gate",
              run_id: str | None = None) -> RunReport:
        """Execute a run's accepted proposals atomically.

        `decisions` maps proposal id -> accept?; None lets the gate decide.
        Undecided proposals are closed as skipped.
        """
        run_id = run_id or self.open_run()
        if run_id is None:
            raise RuntimeError("no open consolidation run: call propose() first")
        pending = sorted((p for p in self.state.proposals.values() if p.run_id == run_id
                          and p.status == Status.PENDING), key=lambda p: (Op.ORDER.index(p.op), p.targets, p.id))
        unknown = sorted(set(decisions or {}) - {p.id for p in pending})
        if unknown:
            raise ValueError(f"proposal(s) {unknown} are not pending in {run_id}")
        tx = Tx(self.state, turn=self.state.turn, run_id=run_id)
        accepted = []
        for p in pending:
            if decisions is None:
                accept, who = p.gate == GateVerdict.PASS, "gate"
            elif p.id in decisions:
                accept, who = bool(decisions[p.id]), decided_by
            else:
                tx.update_proposal(p.id, status=Status.SKIPPED, note="left undecided when the run was applied")
                continue
            tx.update_proposal(p.id, actor=who, status=Status.ACCEPTED if accept else Status.REJECTED, decided_by=who)
            if accept:
                accepted.append(p.id)
        ex = Executor(self, tx)
        for pid in accepted:
            ex.run(tx.state.proposals[pid], tx.state.proposals[pid].decided_by or decided_by)
        closed = [tx.state.proposals[p.id] for p in pending]
        summary = {"applied": sum(p.status == Status.APPLIED for p in closed),
                   "skipped": sum(p.status == Status.SKIPPED for p in closed),
                   "failed": sum(p.status == Status.FAILED for p in closed),
                   "rejected": sum(p.status == Status.REJECTED for p in closed),
                   "created": ex.created, "archived": ex.archived, "rewired": len(ex.rewired)}
        tx.emit(OpKind.RUN_COMMITTED, {"summary": summary, "decided_by": decided_by})
        ops = self._commit(tx.ops)
        props = [p for p in self.state.proposals.values() if p.run_id == run_id]
        return RunReport(run_id=run_id, proposals=props, created=ex.created, archived=ex.archived,
                         rewired=ex.rewired, ops=ops)

    def consolidate(self) -> RunReport:
        """One automatic ATC run: diagnose the buffer and let the gate decide."""
        self.propose(manual=False)
        return self.apply(None, decided_by="gate")

    def undo_last_run(self, actor: str = "human") -> str:
        """Append compensating ops that revert the last committed run's edits."""
        run = self.state.last_committed_run()
        if run is None:
            raise UndoError("no committed consolidation run to undo")
        later = [r for r in self.state.runs.values() if r.first_seq > run.last_seq and r.status != "undone"]
        if later:
            raise UndoError(f"run {run.run_id} is not the latest run")
        run_ops = list(self.store.ops(run_id=run.run_id))
        tx = Tx(self.state, turn=self.state.turn, run_id=f"undo-{run.run_id}", actor=actor)
        for op in reversed(run_ops):
            p = op.payload
            if op.kind == OpKind.UNIT_CREATED and p["unit"]["id"] in tx.state.units:
                tx.emit(OpKind.UNIT_RETRACTED, {"unit": p["unit"]["id"]})
            elif op.kind == OpKind.VISIBILITY_CHANGED and p["unit"] in tx.state.units:
                tx.set_visible(p["unit"], bool(p["was"]))
            elif op.kind == OpKind.DESCRIPTOR_CHANGED and p["unit"] in tx.state.units:
                tx.set_descriptor(p["unit"], p["prev_summary"], p["prev_keywords"])
            elif op.kind == OpKind.EDGE_ADDED:
                e = p["edge"]
                tx.remove_edge(e["src"], e["dst"], e["type"])
            elif op.kind == OpKind.EDGE_REMOVED:
                e = p["edge"]
                if e["src"] in tx.state.units and e["dst"] in tx.state.units:
                    tx.add_edge(Edge(**e))
        for p in tx.state.proposals.values():
            if p.run_id == run.run_id and p.status == Status.APPLIED:
                tx.update_proposal(p.id, note=f"{p.note}; undone")
        started = next((op for op in run_ops if op.kind == OpKind.RUN_STARTED), None)
        for uid in (started.payload.get("buffer", []) if started else []):
            if uid in tx.state.units and uid not in tx.state.buffer:
                tx.emit(OpKind.BUFFER_PUSHED, {"unit": uid, "anchors": []})   # diagnosable again
        tx.emit(OpKind.RUN_UNDONE, {"undone_run": run.run_id})
        self._commit(tx.ops)
        return run.run_id

    # -- retrieval and views --------------------------------------------------------------
    def retrieve(self, query: str, k: int | None = None) -> RetrievalResult:
        return retrieve(self, query, k_sources=k)

    def snapshot(self) -> dict:
        return export(self.state)

    def at(self, upto_turn: int | None = None, upto_seq: int | None = None) -> "AllMemEngine":
        """A read-only engine over the state folded to a past point (time travel)."""
        state = self.store.load_state(upto_turn=upto_turn, upto_seq=upto_seq)
        view = AllMemEngine.__new__(AllMemEngine)
        view.store, view.llm, view.embedder, view.settings = self.store, self.llm, self.embedder, self.settings
        view.state, view.pending_calls = state, []
        view._rebuild_views()
        return view


def export(state: MemoryState) -> dict:
    units = [{"id": u.id, "visible": u.visible, "kind": u.kind, "raw": u.raw, "summary": u.summary,
              "keywords": list(u.keywords), "time": u.time, "source_ids": list(u.source_ids)}
             for u in sorted(state.units.values(), key=lambda u: u.id)]
    edges = [{"src": e.src, "dst": e.dst, "type": e.type} for e in sorted(state.edges.values(), key=lambda e: e.key)]
    return {"units": units, "edges": edges}

"""The GAM engine: episodic buffering, sparse triggers into semantic consolidation, graph-guided retrieval.

Each utterance becomes an `event` node of the active event graph (a `sequential` edge from the one before it),
waits in the `episodic` buffer and adds its tokens (named tokenizer, `tokens.py`) to `buffer_tokens`; the topic
network is never written while buffering. A sparse trigger (the session of the buffered utterances ends, or the
buffer passes T_max tokens) enters the consolidation state: the `consolidation` process runs on the buffer and,
when the gate decides topic edges (`link_review` gate, the paper), the `linking` process runs right after; then
the engine is back in episodic buffering. Each switch and trigger is an `engine_state_set` record with its cause.
"""
from __future__ import annotations

from typing import Iterable

from engine.core.conversation import Turn
from engine.core.edge import Edge
from engine.core.node import Node
from engine.core.payloads import Note
from engine.core.text import human_date, keywords_of, strip_speaker
from engine.core.tx import Tx
from engine.engines.gam import tokens
from engine.engines.gam.buffering import TriggerPlan, plan_trigger
from engine.engines.gam.consolidation import Consolidation, Linking, buffered_events, close_phase, open_phase, phase_of
from engine.engines.gam.explain import explain
from engine.engines.gam.retrieval import retrieve
from engine.engines.gam.schema import CONSOLIDATION, EPISODIC_BUFFER, LINKING, SCHEMA, Kind, Life, Phase, Rel, Trigger
from engine.engines.gam.settings import GamSettings
from engine.retrieval.explain import Placement
from engine.retrieval.result import RetrievalResult
from engine.runtime.engine import BaseEngine, writes
from engine.runtime.errors import RunError
from engine.runtime.process import BaseProcess
from engine.runtime.reports import IngestReport, RunReport

TRIGGER = "trigger"          # `opened_by` of a consolidation state a sparse trigger entered


class GamEngine(BaseEngine):
    name = "gam"
    schema = SCHEMA
    Settings = GamSettings

    def make_processes(self) -> dict[str, BaseProcess]:
        return {CONSOLIDATION: Consolidation(self, SCHEMA.processes[0]), LINKING: Linking(self, SCHEMA.processes[1])}

    @staticmethod
    def plan_trigger(n: int, starts, trigger: str, token_counts: list[int], settings) -> TriggerPlan:
        """Which segments a trigger consolidates and what happens to the tail (`buffering.plan_trigger`); the
        detector's fit script replays the same policy through the registry."""
        return plan_trigger(n, starts, trigger, token_counts, settings)

    @staticmethod
    def token_counter(name: str):
        """text -> token count for a `tokenizer` setting (`tokens.counter`), for scripts replaying the policy."""
        return tokens.counter(name)

    # -- views ------------------------------------------------------------------------------------
    def embed_text(self, node: Node) -> str:
        """An event is embedded as its dated descriptor; a topic as c_sum (summary ‖ keywords)."""
        return node.summary if node.kind == Kind.EVENT else node.embed_text

    @staticmethod
    def descriptor(turn: Turn) -> str:
        return f"{turn.speaker} ({human_date(turn.time)}): {turn.text}"

    def prefetch(self, turns: list[Turn]) -> None:
        """The events' descriptors and bare utterances (what the detector and the summary role embed)."""
        texts = [self.descriptor(t) for t in turns] + [strip_speaker(t.raw)[1] for t in turns]
        self.embedder.embed_ahead(texts)

    def count_tokens(self, text: str) -> int:
        return self.token_counter(self.settings.tokenizer)(text)

    # -- episodic buffering -----------------------------------------------------------------------
    @writes
    def ingest(self, turn: Turn) -> IngestReport:
        s, state = self.settings, self.state
        self.check_new_turn(turn)
        triggered: list[dict] = []
        waiting = buffered_events(state)
        if waiting and waiting[-1].session != turn.session:
            triggered.append(self._trigger(Trigger.SESSION_END, state.turn, {
                "cause": f"session {waiting[-1].session} ended (the next utterance opens session {turn.session})",
                "session": waiting[-1].session})[0])
            waiting = buffered_events(state)
        turn_no = state.turn + 1
        count = self.count_tokens(turn.raw)
        total = int(state.engine_state.get("buffer_tokens", 0)) + count
        tx = Tx(state, turn=turn_no, actor="online", isolated=False)
        event = Node(id=state.next_node_id, raw=turn.raw, summary=self.descriptor(turn), keywords=keywords_of(turn.raw),
                     time=turn.time, kind=Kind.EVENT, source_ids=[turn.id], speakers=[turn.speaker],
                     session=turn.session, status=Life.BUFFERED, created_turn=turn_no, attrs={"tokens": count})
        buffer = {"tokens": total, "t_max": s.t_max, "tokenizer": s.tokenizer, "turn_tokens": count,
                  "events": len(waiting) + 1, "phase": phase_of(state)}
        tx.emit(self.ingested(turn, buffer=buffer))
        tx.create_node(event)
        edges = []
        if waiting:
            edges.append(Edge(waiting[-1].id, event.id, Rel.SEQUENTIAL, "online", None, turn_no))
            tx.add_edge(edges[0])
        tx.push_buffer(EPISODIC_BUFFER, [(event.id, [])])
        tx.set_var("buffer_tokens", total)
        ops = self.commit(tx.ops)
        if total > s.t_max:
            triggered.append(self._trigger(Trigger.OVERFLOW, turn_no, {
                "cause": f"the buffer holds {total} tokens > T_max {s.t_max} ({s.tokenizer})"})[0])
        return IngestReport(turn_id=turn.id, unit_id=event.id, anchors=[], edges=edges,
                            buffer_size=len(state.buffer(EPISODIC_BUFFER)), ops=ops, created=[event.id],
                            details={"buffer": buffer, "triggers": triggered, "phase": phase_of(state)})

    # -- the consolidation state ------------------------------------------------------------------
    def _trigger(self, trigger: str, turn: int, cause: dict) -> tuple[dict, list[RunReport]]:
        """Enter the consolidation state for a sparse trigger, consolidate, link (gate mode), leave it.

        An open run (a person's review in progress) defers the trigger: a note says so and the buffer waits
        for the next trigger, so a replay goes on."""
        record = {"trigger": trigger, **cause}
        open_run = self.open_run()
        if open_run:
            tx = Tx(self.state, turn=turn, actor="engine", isolated=False)
            tx.emit(Note(text=f"{trigger.replace('_', ' ')} trigger deferred: {open_run} is open",
                         details={"trigger": record}))
            self.commit(tx.ops)
            return {**record, "deferred_by": open_run}, []
        tx = Tx(self.state, turn=turn, actor="engine", isolated=False)
        open_phase(tx, TRIGGER, record)
        self.commit(tx.ops)
        reports = [self.process(CONSOLIDATION).run_on(record)]
        if self.settings.link_review == "gate" and self.process(LINKING).pending():
            reports.append(self.process(LINKING).run())
        runs = [r.run_id for r in reports]
        tx = Tx(self.state, turn=turn, actor="engine", isolated=False)
        close_phase(tx, TRIGGER, {"cause": f"{trigger.replace('_', ' ')} consolidated", "runs": runs})
        self.commit(tx.ops)
        return {**record, "runs": runs}, reports

    @writes
    def consolidate(self, process: str | None = None) -> RunReport:
        """Without a process: a manual trigger (consolidation, then gate-decided linking). With one: one
        automatic run of that process."""
        if process is not None:
            return self.process(process).run()
        record, reports = self._trigger(Trigger.MANUAL, self.state.turn,
                                        {"cause": "consolidation asked for by hand"})
        if not reports:
            raise RunError(f"the manual trigger was deferred: {record['deferred_by']} is open")
        return reports[0]

    @writes
    def end_of_stream(self) -> list[RunReport]:
        """The conversation ended, so the last session did: its buffer is consolidated, then the scheduled
        processes run (the linking of topics a person was to review, decided by the gate)."""
        waiting = buffered_events(self.state)
        if waiting:
            self._trigger(Trigger.SESSION_END, self.state.turn, {
                "cause": f"the conversation ended (session {waiting[-1].session})", "session": waiting[-1].session})
        return self.run_scheduled()

    def phase(self) -> str:
        return phase_of(self.state)

    # -- retrieval ----------------------------------------------------------------------------------
    def retrieve(self, query: str, k: int | None = None) -> RetrievalResult:
        return retrieve(self, query, k)

    def explain(self, res: RetrievalResult, uids: Iterable[int]) -> dict[int, Placement]:
        return explain(self, res, uids)


__all__ = ["GamEngine", "Phase"]

"""The MemLoom engine: sentence records, HDRA routing into events with a lifecycle, the steward, BDSR."""
from __future__ import annotations

from typing import Iterable

import numpy as np

from engine.core.conversation import Turn
from engine.core.edge import Edge
from engine.core.node import Node
from engine.core.oplog import OpRecord, RunStatus
from engine.core.payloads import EdgeAdded, StatusChanged
from engine.core.text import content_tokens, human_date, keywords_of, strip_speaker
from engine.core.tx import Tx
from engine.engines.memloom import online
from engine.engines.memloom.explain import explain
from engine.engines.memloom.retrieval import retrieve
from engine.engines.memloom.schema import SCHEMA, Kind, Life, Rel
from engine.engines.memloom.settings import MemLoomSettings
from engine.engines.memloom.steward import Steward
from engine.llm.pronouns import readable
from engine.retrieval.explain import Placement
from engine.retrieval.result import RetrievalResult
from engine.runtime.engine import BaseEngine, writes
from engine.runtime.process import BaseProcess
from engine.runtime.reports import IngestReport, RunReport

REALTIME, STEWARD = "realtime", "steward"


class MemLoomEngine(BaseEngine):
    name = "memloom"
    schema = SCHEMA
    Settings = MemLoomSettings

    def make_processes(self) -> dict[str, BaseProcess]:
        return {"steward": Steward(self, SCHEMA.processes[0])}

    # -- views: events are indexed by their centroid and stay out of BM25 ---------------------------
    def embed_text(self, node: Node) -> str:
        """A sentence record is embedded as its routed descriptor: speaker, date, rewritten text (its summary is
        the same, worded for a reader)."""
        return self.indexed_text(node)

    def indexed_text(self, node: Node) -> str:
        """What a sentence record is found by: the router's rewrite, every pronoun a name ("Priya cancelled
        Priya's holiday", which a query about Priya matches), after its speaker and date."""
        rewritten = node.attrs.get("rewritten") if node.kind == Kind.SENTENCE else None
        if rewritten is None or not node.speakers:
            return node.summary
        return self._descriptor(node.speakers[0], node.time, rewritten)

    def embed_node(self, node: Node) -> np.ndarray:
        """A sentence record's retrieval vector (its descriptor); an event's centroid c_j."""
        if node.kind == Kind.EVENT:
            members = [self.route_vector(self.state.nodes[m]) for m in node.members if m in self.state.nodes]
            return online.centroid(members) if members else np.zeros(self.embedder.dim, np.float32)
        return super().embed_node(node)

    def route_vector(self, node: Node) -> np.ndarray:
        """v_m for routing: the utterance as said (its speaker's prefix stripped), which the event centroids
        c_j average too."""
        return self.embedder.embed_one(strip_speaker(node.raw)[1])

    def utterance_vector(self, node: Node) -> np.ndarray:
        """The raw utterance's embedding: what the steward's link model (engine/retrieval/links.py) was fit on."""
        return self.embedder.embed_one(strip_speaker(node.raw)[1])

    def embed_nodes(self, nodes: list[Node]) -> dict[int, np.ndarray]:
        """Sentence records in one batch (and their route vectors), then event centroids from them."""
        sentences = [n for n in nodes if n.kind == Kind.SENTENCE]
        self.embedder.embed([strip_speaker(n.raw)[1] for n in sentences])
        out = super().embed_nodes(sentences)
        out.update({n.id: self.embed_node(n) for n in nodes if n.kind == Kind.EVENT})
        return out

    def _rebuild_views(self) -> None:
        super()._rebuild_views()
        self._published, self._pointer = None, None

    def lexical_text(self, node: Node) -> str | None:
        return None if node.kind == Kind.EVENT else f"{node.raw} {self.indexed_text(node)}"

    # -- the published snapshot ---------------------------------------------------------------------
    def published_seq(self) -> int:
        """The seq at which the last published steward run committed (0 before the first)."""
        snap = self.state.engine_state.get("snapshot")
        run = self.state.runs.get(snap["run"]) if snap else None
        return run.last_seq if run is not None and run.status == RunStatus.COMMITTED else 0

    def commit(self, ops: list[OpRecord]) -> list[OpRecord]:
        ops = super().commit(ops)
        self.store.after_commit(self._publish)    # switched only once the whole run is applied and stored
        return ops

    def _publish(self) -> None:
        self._pointer = self.published_seq()

    def published_view(self) -> "MemLoomEngine | None":
        """The engine as of the last published snapshot S_t: what the curated stream reads.

        The pointer is one integer assigned after a steward run is committed and applied whole, and the
        view is a fold of the store up to it, so a reader (another thread, or another process reading the
        database) sees either the previous snapshot or the new one, never a run half applied.
        """
        seq = getattr(self, "_pointer", None)
        if seq is None:
            seq = self._pointer = self.published_seq()
        if not seq:
            return None
        cached = getattr(self, "_published", None)
        if cached is None or cached[0] != seq:
            cached = (seq, self if self.read_only and self.state.seq == seq else self.at(upto_seq=seq))
            self._published = cached
        return cached[1]

    # -- online path ----------------------------------------------------------------------------------
    def prefetch(self, turns: list[Turn]) -> None:
        """Embed the utterances, and the descriptors where the backend foresees the router's rewrite (the offline
        rules do), in large batches: only an optimisation, every vector lands in the cache. The rewrite alone is
        read by no stage (`scripts/embedded_texts.py`), so it is not embedded."""
        texts = [strip_speaker(t.raw)[1] for t in turns]
        window: list[dict] = []
        for t in turns:
            routed = None if self.settings.has("no-router") else self.llm.foresee(
                "router", self.router_payload(t, window[-self.settings.router_window:]))
            if routed is None:
                texts.append(self._descriptor(t.speaker, t.time, strip_speaker(t.raw)[1]))
            else:
                texts.append(self._descriptor(t.speaker, t.time, routed["rewritten"]))
            window.append({"speaker": t.speaker, "text": t.raw, "time": t.time})
        self.embedder.embed_ahead(texts)

    @staticmethod
    def router_payload(turn: Turn, window: list[dict]) -> dict:
        """What the router role is asked about a turn, given the utterances before it, at ingest and ahead of it."""
        return {"utterance": strip_speaker(turn.raw)[1], "speaker": turn.speaker, "time": turn.time,
                "window": window}

    @staticmethod
    def _descriptor(speaker: str, time: str, body: str) -> str:
        body = strip_speaker(body)[1] if body.startswith(f"{speaker}: ") else body
        return f"{speaker} ({human_date(time)}): {body}"

    @staticmethod
    def _names(turn: Turn, routed: dict) -> set[str]:
        """The people a rewrite names: the speaker and whoever its pronouns were resolved to."""
        resolved = {str(r.get("resolved", "")).split(" ")[0].removesuffix("'s") for r in routed["references"]
                    if isinstance(r, dict)}
        return {turn.speaker} | resolved

    def _window(self) -> list[dict]:
        n = self.settings.router_window
        if not n:
            return []
        ids = [self.state.turn_units[t] for t in self.state.turn_ids[-n:] if t in self.state.turn_units]
        return [{"speaker": (self.state.nodes[i].speakers or [""])[0], "text": self.state.nodes[i].raw,
                 "time": self.state.nodes[i].time} for i in ids]

    @writes
    def ingest(self, turn: Turn) -> IngestReport:
        s, state = self.settings, self.state
        self.check_new_turn(turn)
        turn_no = state.turn + 1
        tx = Tx(state, turn=turn_no, actor="online", isolated=False)     # ops apply at commit
        routed = {"rewritten": strip_speaker(turn.raw)[1], "intent": "", "topics": [], "references": [],
                  "dates": []}
        if not s.has("no-router"):
            call = self.llm.call("router", self.router_payload(turn, self._window()))
            if call.ok:
                routed = call.data
        sentence = Node(id=state.next_node_id, raw=turn.raw, summary=self._descriptor(
                            turn.speaker, turn.time, readable(routed["rewritten"], self._names(turn, routed))),
                        keywords=keywords_of(turn.raw), time=turn.time, kind=Kind.SENTENCE, source_ids=[turn.id],
                        speakers=[turn.speaker], session=turn.session, status=Life.BUFFERED, created_turn=turn_no,
                        attrs={k: routed[k] for k in ("rewritten", "intent", "topics", "references", "dates")})
        v_m = self.route_vector(sentence)
        events = online.joinable(self.nodes_in_status(Kind.EVENT, Life.JOINABLE), turn.session, turn_no,
                                 s.join_window)
        cands = online.score_candidates(s, v_m, events, {e.id: self.vectors[e.id] for e in events}, turn.time,
                                        turn_no)
        decision = "NEW_EVENT" if not cands or cands[0].score < s.tau_new else "CONTINUE"
        routing = {"decision": decision, "tau_new": s.tau_new, "candidates": [c.to_dict() for c in cands[:8]]}
        if decision == "NEW_EVENT" and events and len(content_tokens(turn.text)) < s.gate_min_tokens:
            # the router's gate: a backchannel carries too little to open an event; it joins the latest one
            latest = max(events, key=lambda e: (e.attrs.get("last_turn", e.created_turn), e.id))
            cands = [c for c in cands if c.event == latest.id] + [c for c in cands if c.event != latest.id]
            decision = routing["decision"] = "GATED"
        tx.emit(self.ingested(turn, routing=routing))
        closed = self._close_on_session_shift(tx, turn)
        tx.create_node(sentence)
        created = [sentence.id]
        if decision == "NEW_EVENT":
            stats = online.event_stats([sentence])
            event = Node(id=sentence.id + 1, raw="", summary=sentence.summary, keywords=sentence.keywords[:8],
                         time=turn.time, kind=Kind.EVENT, source_ids=[turn.id], speakers=[turn.speaker],
                         session=turn.session, status=Life.PROVISIONAL, created_turn=turn_no,
                         members=[sentence.id],
                         attrs={**stats, "last_time": turn.time, "last_turn": turn_no})
            tx.create_node(event)
            created.append(event.id)
            eid, status = event.id, Life.PROVISIONAL
        else:
            eid = cands[0].event
            e = state.nodes[eid]
            stats = online.event_stats([state.nodes[m] for m in e.members] + [sentence])
            tx.update_node(eid, members=e.members + [sentence.id], source_ids=e.source_ids + [turn.id],
                           speakers=list(dict.fromkeys(e.speakers + [turn.speaker])),
                           attrs={**e.attrs, **stats, "last_time": turn.time, "last_turn": turn_no})
            status = e.status
        routing["chosen"] = eid
        edge = Edge(eid, sentence.id, Rel.EVIDENCE, "online", None, turn_no)
        tx.emit(EdgeAdded(edge=edge.to_dict()))
        routing["maturity"] = {"event": eid, "M": round(online.maturity(s, stats), 4), "tau": s.tau_maturity,
                               "n": stats["n"], "H": round(online.entropy(stats["p"]), 4), "V": stats["V"]}
        transitions = self._lifecycle(tx, eid, status, stats, turn)
        tx.push_buffer(REALTIME, [(sentence.id, [])])
        if eid not in state.buffer(STEWARD):
            tx.push_buffer(STEWARD, [(eid, [])])
        ops = self.commit(tx.ops)
        routing.update({"closed": closed, "transitions": transitions})
        return IngestReport(turn_id=turn.id, unit_id=sentence.id, anchors=[],
                            edges=[edge], buffer_size=len(state.buffer(REALTIME)), ops=ops, created=created,
                            details={"routing": routing})

    def _close_on_session_shift(self, tx: Tx, turn: Turn) -> list[int]:
        """Φ_close: a new session closes the open events of earlier sessions, mature or not (a provisional event
        that never matured ends there too), and puts them before the steward."""
        return self._close_open_events(tx, lambda e: e.session != turn.session,
                                       lambda e: {"rule": "session_shift", "from_session": e.session,
                                                  "to_session": turn.session})

    @writes
    def end_of_stream(self) -> list[RunReport]:
        """The conversation ended, so its last session did: Φ_close closes that session's open events as the
        next session's first turn would, and the scheduled processes curate them. Without it, an event of the
        last session that never matured stays provisional, and the steward relates nothing to it (a cause told
        in the last session and its effect were never compared)."""
        tx = Tx(self.state, turn=self.state.turn, actor="online", isolated=False)
        if self._close_open_events(tx, lambda e: True,
                                   lambda e: {"rule": "conversation_end", "from_session": e.session}):
            self.commit(tx.ops)
        return self.run_scheduled()

    def _close_open_events(self, tx: Tx, which, cause) -> list[int]:
        """Close the open events `which` holds (each with its `cause`), and hand them to the steward."""
        if not self.settings.close_on_session_shift:
            return []
        closed = []
        for e in (n for n in self.nodes_in_status(Kind.EVENT, Life.JOINABLE) if which(n)):
            tx.set_status(e.id, Life.CLOSED, cause(e))
            closed.append(e.id)
        waiting = set(self.state.buffer(STEWARD)) if closed else set()
        handed = [(e, []) for e in closed if e not in waiting]
        if handed:
            tx.push_buffer(STEWARD, handed)
        return closed

    def _lifecycle(self, tx: Tx, eid: int, status: str, stats: dict, turn: Turn) -> list[dict]:
        """provisional → active at maturity; active → closed when the turn completes the task."""
        s, done = self.settings, []
        if status == Life.PROVISIONAL:
            m = online.maturity(s, stats)
            if m >= s.tau_maturity:
                cause = {"rule": "maturity", "M": round(m, 4), "tau": s.tau_maturity, "n": stats["n"],
                         "H": round(online.entropy(stats["p"]), 4), "V": stats["V"]}
                tx.emit(StatusChanged(node=eid, status=Life.ACTIVE, was=status, cause=cause))
                done.append({"event": eid, "to": Life.ACTIVE, **cause})
                status = Life.ACTIVE
        cue = online.completes_task(turn.raw)
        if cue and status == Life.ACTIVE:
            cause = {"rule": "task_completion", "cue": cue}
            tx.emit(StatusChanged(node=eid, status=Life.CLOSED, was=status, cause=cause))
            done.append({"event": eid, "to": Life.CLOSED, **cause})
        return done

    # -- retrieval ----------------------------------------------------------------------------------
    def retrieve(self, query: str, k: int | None = None) -> RetrievalResult:
        return retrieve(self, query, k)

    def explain(self, res: RetrievalResult, uids: Iterable[int]) -> dict[int, Placement]:
        return explain(self, res, uids)

"""The RecMem engine: exchange units in a subconscious store, merge-first and the recurrence gate in ingest,
consolidation into episodes and facts as a reviewed process, three-layer retrieval (seeds/recmem.txt §3).

Ingest never calls an LLM. Each message is stored raw; when its exchange closes (`units`) the unit is created,
embedded with its date, and gated (`gate`): near an episode it is queued for the merge role, with enough
recurring neighbours it is queued, with its cluster, for consolidation; otherwise it simply stays
subconscious. What the gate saw is the `gate` list of the turn's `turn_ingested` record, and its counters are
the `recurrence` engine variable. Queued work waits in the `recurrence` buffer for the consolidation process,
which a replay runs on its schedule (every turn reproduces the paper: consolidation right at the trigger), or a
person runs on the Consolidation page; units queued there are not counted again by later gates.
"""
from __future__ import annotations

from collections import Counter
from typing import Iterable

import numpy as np

from engine.core.conversation import Turn
from engine.core.edge import Edge
from engine.core.node import Node
from engine.core.oplog import OpRecord
from engine.core.ops import payload_of
from engine.core.payloads import BufferFlushed, BufferPushed, NodePayload, NodeRetracted
from engine.core.text import keywords_of
from engine.core.tx import Tx
from engine.engines.recmem import gate as gates
from engine.engines.recmem.consolidation import BUFFER, Consolidation
from engine.engines.recmem.explain import explain
from engine.engines.recmem.retrieval import retrieve
from engine.engines.recmem.schema import SCHEMA, Kind, Life, Rel
from engine.engines.recmem.settings import RecMemSettings
from engine.engines.recmem.sweep import SweepCell, SweepUnit, threshold_sweep
from engine.engines.recmem.units import (
    ASSISTANT_OPENS,
    REPLY,
    SESSION_END,
    exchange_raw,
    exchanges,
    formatted,
    opens_alone,
)
from engine.retrieval.explain import Placement
from engine.retrieval.index import VectorRows
from engine.retrieval.result import RetrievalResult
from engine.runtime.engine import BaseEngine, writes
from engine.runtime.process import BaseProcess
from engine.runtime.reports import IngestReport

COUNTERS = "recurrence"           # the engine variable holding the gate's counters
# Records after which a node may be in another store or have another vector (the views re-derive it then).


class RecMemEngine(BaseEngine):
    name = "recmem"
    schema = SCHEMA
    Settings = RecMemSettings

    def make_processes(self) -> dict[str, BaseProcess]:
        return {"consolidation": Consolidation(self, SCHEMA.processes[0])}

    # -- views: what is embedded and indexed, and the two stores the gate reads --------------------------
    def embed_text(self, node: Node) -> str:
        """Φ's input: a message or an exchange with its date (Fmt(u)); an episode or a fact its own text."""
        if node.kind == Kind.MESSAGE:
            return formatted(node.time, node.raw)
        return node.summary

    def lexical_text(self, node: Node) -> str | None:
        if node.kind in (Kind.MESSAGE, Kind.UNIT):
            return node.raw
        return f"{node.summary} {' '.join(node.keywords)}"

    def _rebuild_views(self) -> None:
        super()._rebuild_views()
        self.claims: Counter[int] = Counter()          # id -> buffer entries naming it (queued or an anchor)
        self._claim_of: dict[int, list[int]] = {}      # buffer entry -> the ids it claims
        for uid in self.state.buffer(BUFFER):
            self._claim(uid)
        self.stores: dict[str, VectorRows] = {Life.SUBCONSCIOUS: VectorRows(), Life.EPISODIC: VectorRows()}
        for uid in sorted(self.state.nodes):
            self._place(uid)

    def _sync(self, ops: list[OpRecord]) -> None:
        super()._sync(ops)
        touched: list[int] = []
        for op in ops:
            p = payload_of(op)
            if isinstance(p, NodePayload):
                touched.append(p.node_id)
            if isinstance(p, (BufferPushed, BufferFlushed)) and p.buffer == BUFFER:
                for uid, _ in p.entries:
                    touched += self._claim(uid)
            elif isinstance(p, NodeRetracted):
                touched += self._claim(p.node)
        for uid in dict.fromkeys(touched):
            self._place(uid)

    def _claim(self, uid: int) -> list[int]:
        """Bring `claims` in step with the buffer's entry for `uid` as it is now; returns the ids whose claim
        may have changed."""
        old = self._claim_of.pop(uid, [])
        for c in old:
            self.claims[c] -= 1
            if not self.claims[c]:
                del self.claims[c]
        entry = self.state.buffer(BUFFER).get(uid)
        new = [uid, *entry] if entry is not None else []
        if new:
            self._claim_of[uid] = new
            self.claims.update(new)
        return old + new

    def _place(self, uid: int) -> None:
        """Keep `stores` in step with one node: S_sub's units that no buffer entry claims and S_epi's episodes,
        with their vectors, which the gate scores at every unit."""
        node = self.state.nodes.get(uid)
        free = uid not in self.claims
        for status, rows in self.stores.items():
            if node is not None and node.status == status and (free or status != Life.SUBCONSCIOUS):
                rows.add(uid, self.vectors[uid])
            else:
                rows.remove(uid)

    def prefetch(self, turns: list[Turn]) -> None:
        """Embed the messages and the exchanges ingest will form from them, in large batches."""
        texts = [formatted(t.time, t.raw) for t in turns]
        texts += [formatted(ex[0].time, exchange_raw(ex)) for ex in exchanges(turns)]
        self.embedder.embed_ahead(texts)

    # -- online path -------------------------------------------------------------------------------------
    def waiting_message(self) -> Node | None:
        """The message whose exchange is still open: only the latest message can be."""
        st = self.state
        if not st.turn_ids:
            return None
        node = st.nodes.get(st.turn_units.get(st.turn_ids[-1], -1))
        return node if node is not None and node.status == Life.WAITING else None

    @writes
    def ingest(self, turn: Turn) -> IngestReport:
        self.check_new_turn(turn)
        state = self.state
        turn_no = state.turn + 1
        tx = Tx(state, turn=turn_no, actor="online", isolated=False)       # ops apply at commit
        traces: list[dict] = []
        tx.emit(self.ingested(turn, gate=traces))
        next_id = state.next_node_id
        waiting = self.waiting_message()
        exchanges_closed: list[tuple[list[Node], str]] = []
        if waiting is not None and waiting.session != turn.session:
            exchanges_closed.append(([waiting], SESSION_END))
            waiting = None
        message = Node(id=next_id, raw=turn.raw, summary=turn.raw, keywords=keywords_of(turn.raw), time=turn.time,
                       kind=Kind.MESSAGE, source_ids=[turn.id], speakers=[turn.speaker], session=turn.session,
                       status=Life.WAITING, created_turn=turn_no)
        next_id += 1
        if waiting is not None:
            exchanges_closed.append(([waiting, message], REPLY))
        elif opens_alone(turn):
            exchanges_closed.append(([message], ASSISTANT_OPENS))
        if any(m is message for ms, _ in exchanges_closed for m in ms):
            message.status = Life.PAIRED
        tx.create_node(message)
        created, edges = [message.id], []
        counters = dict(state.engine_state.get(COUNTERS) or {"units": 0, "merges": 0, "triggers": 0})
        fresh: list[tuple[Node, np.ndarray]] = []             # units made in this ingest, for the next gate
        taken: set[int] = set()                                # units this ingest queued
        for messages, closed_by in exchanges_closed:
            unit = self._unit(next_id, messages, closed_by, turn_no)
            next_id += 1
            tx.create_node(unit)
            created.append(unit.id)
            for m in messages:
                if m.id != message.id:
                    tx.set_status(m.id, Life.PAIRED, {"rule": "pairing", "unit": unit.id, "closed_by": closed_by})
                edge = Edge(unit.id, m.id, Rel.DERIVED_FROM, "online", None, turn_no)
                tx.add_edge(edge)
                edges.append(edge)
            v = self.embedder.embed_one(self.embed_text(unit))
            trace = self._gate(unit, v, fresh, taken)
            counters["units"] += 1
            if trace.fired == gates.MERGE:
                counters["merges"] += 1
                tx.push_buffer(BUFFER, [(unit.id, [trace.episode])])
                taken.add(unit.id)
            elif trace.fired == gates.CONSOLIDATE:
                counters["triggers"] += 1
                times = {n.id: n.time for n, _ in fresh} | {unit.id: unit.time}
                cluster = sorted(trace.cluster, key=lambda u: (times.get(u) or self.state.nodes[u].time, u))
                trace.cluster = cluster
                tx.push_buffer(BUFFER, [(unit.id, [u for u in cluster if u != unit.id])])
                taken.update(cluster)
            fresh.append((unit, v))
            traces.append({**trace.to_dict(), "messages": [m.id for m in messages], "closed_by": closed_by})
        if exchanges_closed:
            tx.set_var(COUNTERS, counters)
        ops = self.commit(tx.ops)
        return IngestReport(turn_id=turn.id, unit_id=message.id, anchors=[], edges=edges,
                            buffer_size=len(self.state.buffer(BUFFER)), ops=ops, created=created,
                            details={"gate": traces})

    def _unit(self, uid: int, messages: list[Node], closed_by: str, turn_no: int) -> Node:
        raw = exchange_raw([m.raw for m in messages])
        first = messages[0]
        return Node(id=uid, raw=raw, summary=formatted(first.time, raw), keywords=keywords_of(raw), time=first.time,
                    kind=Kind.UNIT, source_ids=[s for m in messages for s in m.source_ids],
                    speakers=list(dict.fromkeys(sp for m in messages for sp in m.speakers)), session=first.session,
                    status=Life.SUBCONSCIOUS, created_turn=turn_no, members=[m.id for m in messages],
                    attrs={"messages": len(messages), "closed_by": closed_by})

    def gate_params(self) -> gates.GateParams:
        s = self.settings
        return gates.GateParams(theta_sim=s.theta_sim, theta_count=s.theta_count, theta_merge=s.theta_merge,
                                k=s.gate_k, merge_first=not s.has("no-merge"))

    def _gate(self, unit: Node, v: np.ndarray, fresh: list[tuple[Node, np.ndarray]], taken: set[int]
              ) -> gates.GateTrace:
        """Merge-first and the recurrence gate over the subconscious units nobody has queued (those made
        earlier in this ingest included; `taken`: those this ingest queued) and the episodes."""
        sub_ids, sub_cosines = self.stores[Life.SUBCONSCIOUS].dots(v)
        if taken:
            free = ~np.isin(sub_ids, np.fromiter(taken, dtype=np.int64, count=len(taken)))
            sub_ids, sub_cosines = sub_ids[free], sub_cosines[free]
        made = [(node.id, vec) for node, vec in fresh if node.id not in taken]
        if made:
            sub_ids = np.concatenate([sub_ids, [uid for uid, _ in made]])
            sub_cosines = np.concatenate([sub_cosines, np.stack([vec for _, vec in made]) @ v])
        return gates.gate(unit.id, self.gate_params(), sub_ids, sub_cosines, *self.stores[Life.EPISODIC].dots(v))

    # -- retrieval and the sweep -----------------------------------------------------------------------
    def retrieve(self, query: str, k: int | None = None) -> RetrievalResult:
        return retrieve(self, query, k)

    def explain(self, res: RetrievalResult, uids: Iterable[int]) -> dict[int, Placement]:
        return explain(self, res, uids)

    def threshold_sweep(self, theta_sims: Iterable[float], theta_counts: Iterable[int],
                        turns: list[Turn] | None = None) -> list[SweepCell]:
        """What each (θ_sim, θ_count) pair would do, with no LLM (`sweep.threshold_sweep`), to this memory's units
        so far, or to every exchange of `turns` (a whole loaded conversation); the other settings are this
        engine's."""
        if turns is None:
            units = sorted((n for n in self.state.nodes.values() if n.kind == Kind.UNIT), key=lambda n: n.id)
            found = [SweepUnit(u.id, u.time, u.raw, self.vectors[u.id]) for u in units]
        else:
            closed = [ex for ex in exchanges(turns) if len(ex) > 1 or ex[0] is not turns[-1] or opens_alone(ex[0])]
            texts = [formatted(ex[0].time, exchange_raw(ex)) for ex in closed]
            vecs = self.embedder.embed(texts) if texts else []
            found = [SweepUnit(i, ex[0].time, exchange_raw(ex), v) for i, (ex, v) in enumerate(zip(closed, vecs))]
        return threshold_sweep(found, theta_sims, theta_counts, self.settings)

"""mem0's add() as a reviewed run: the turns waiting become one conversation, mem0's fact extraction and its
update decision are asked (mem0's prompts, through the workbench's LLM path), and each entry of mem0's reply
becomes a proposal carrying mem0's own reason: its event, the memory it names (as mem0 showed it to the model)
and the text it would write. Accepting a proposal lets mem0 carry it out: `Memory.add` / `update` / `delete`
write its FAISS store and its history db, and the workbench records the version that results.

Diagnosis routes by mem0's own rules (what mem0 would not carry out, it does not offer): a NONE changes
nothing and is closed at once; an entry with no text, an id mem0 did not show, or an ADD of a text mem0 already
holds is turned down by the gate with its reason code. mem0 gives no confidence: every proposal carries 1.0 and
the gate is those rules alone.
"""
from __future__ import annotations

import numpy as np
from mem0.memory.utils import parse_messages

from engine.core.edge import Edge
from engine.core.node import Node
from engine.core.proposal import GateVerdict, Proposal, Status, call_reason_code, fail_gate
from engine.core.text import keywords_of, strip_speaker
from engine.core.tx import Tx
from engine.runtime.process import BaseProcess
from memwb_mem0.library import mem0_id
from memwb_mem0.schema import FACTS_ROLE, UPDATE_ROLE, Kind, Life, Op, ReasonCode, Rel

QUOTE = 120          # characters of a memory quoted in a reason


def _q(text: str) -> str:
    text = " ".join(text.split())
    return f"\"{text if len(text) <= QUOTE else text[:QUOTE] + '…'}\""


class Mem0Process(BaseProcess):

    # -- diagnosis: mem0's two calls, one proposal per entry of its reply -------------------------------------
    def diagnose(self, run_id: str, manual: bool) -> list[Proposal]:
        eng = self.engine
        state = eng.state
        turns = [state.nodes[u] for u in sorted(state.buffer(self.spec.buffer)) if u in state.nodes]
        if not turns:
            return []
        made = Made(state.next_proposal_id, run_id, state.turn)
        conversation = parse_messages([{"role": "user", "content": t.raw} for t in turns])
        call = eng.llm.call(FACTS_ROLE, {"today": turns[-1].time[:10], "conversation": conversation})
        if not call.ok:
            return [made.failed([t.id for t in turns], "mem0's fact extraction", call)]
        facts = list(dict.fromkeys(f.strip() for f in call.data["facts"] if f.strip()))
        if not facts:
            return []
        library = eng.library()
        current = eng.current_memories()                     # mem0 id -> node id
        shown: dict[str, int] = {}                           # the id mem0 shows the model -> node id
        for fact in facts:
            for found, _ in library.similar(fact, eng.settings.search_k):
                if found in current and current[found] not in shown.values():
                    shown[str(len(shown))] = current[found]
        old_memory = [{"id": key, "text": state.nodes[uid].summary} for key, uid in shown.items()]
        call = eng.llm.call(UPDATE_ROLE, {"old_memory": old_memory, "facts": facts})
        if not call.ok:
            return [made.failed([t.id for t in turns], "mem0's update decision", call)]
        held = {n.summary.strip() for n in state.nodes.values() if n.kind == Kind.MEMORY and n.status == Life.CURRENT}
        out = []
        for entry in call.data["memory"]:
            p = self._proposal(made, entry, turns, shown, facts)
            self._route(p, manual, held)
            out.append(p)
        return out

    def _proposal(self, made: "Made", entry: dict, turns: list[Node], shown: dict[str, int], facts: list[str]
                  ) -> Proposal:
        state = self.engine.state
        event, text = entry["event"], entry["text"].strip()
        op = Op.EVENTS[event]
        source = self._source(text, turns)
        target = shown.get(entry["id"])
        old = state.nodes[target].summary if target is not None else None
        plan = {"event": event, "id": entry["id"], "text": text, "facts": facts,
                "old_memory": old if old is not None else "",
                "model_old_memory": entry.get("old_memory", "")}
        detail = {"mem0_entry": entry, "shown": {k: f"u{v}" for k, v in shown.items()}}
        if event == "ADD":
            return made.proposal(op, [source], f"mem0 ADD {_q(text)}: a new memory", plan, detail)
        if target is None:
            return made.proposal(op, [source], f"mem0 {event} of memory id {entry['id']!r}, which is not one of the "
                                               f"{len(shown)} memories it was shown", plan, detail)
        reason = {"UPDATE": f"mem0 UPDATE u{target} {_q(old)} → {_q(text)}",
                  "DELETE": f"mem0 DELETE u{target} {_q(old)}",
                  "NONE": f"mem0 NONE: u{target} {_q(old)} stays as it is"}[event]
        return made.proposal(op, [target, source], reason, plan, detail)

    def _source(self, text: str, turns: list[Node]) -> int:
        """The turn a memory came from: the only one; among several given together, the first that says it word
        for word ("Maya: I've been dying to ask." is in "Jon! How did the Bridges Half go? I've been dying to
        ask."), else the one whose text is most like it (mem0 does not say; ties to the earlier turn)."""
        if len(turns) == 1 or not text:
            return turns[-1].id
        said = next((t.id for t in turns if _says(t.raw, text)), None)
        if said is not None:
            return said
        vecs = self.engine.embedder.embed([t.raw for t in turns])
        cos = vecs @ self.engine.embedder.embed_one(text)
        return turns[int(np.argmax(np.round(cos, 6)))].id

    def _route(self, p: Proposal, manual: bool, held: set[str]) -> None:
        """mem0's own rules for what it would not carry out."""
        known = p.op == Op.ADD or len(p.targets) == 2
        if p.op == Op.NONE and known:
            p.gate, p.reason_code, p.status = GateVerdict.FAIL, ReasonCode.NO_CHANGE, Status.SKIPPED
            p.note = "mem0 leaves this memory unchanged"
        elif not known:
            fail_gate(p, ReasonCode.UNKNOWN_ID, f"id {p.plan['id']!r} is not among the memories mem0 showed "
                                                 f"({', '.join(p.detail['shown']) or 'none'}); mem0 fails it", manual)
        elif p.op in (Op.ADD, Op.UPDATE) and not p.plan["text"]:
            fail_gate(p, ReasonCode.EMPTY_TEXT, "the entry's text is empty; mem0 skips it", manual)
        elif p.op == Op.ADD and p.plan["text"] in held:
            fail_gate(p, ReasonCode.SAME_TEXT, "mem0 already holds this text; its hash dedup skips it", manual)
        if p.op == Op.ADD and p.status != Status.SKIPPED:
            held.add(p.plan["text"])

    # -- carrying out: mem0 writes, the workbench records the version --------------------------------------
    def execute(self, tx: Tx, accepted: list[Proposal]) -> dict:
        eng = self.engine
        library = eng.library()
        library.follows = None               # mem0 changes from here; the state catches up at the commit
        created, archived = [], []
        for p in sorted(accepted, key=lambda p: p.id):
            nodes = tx.state.nodes
            target = nodes.get(p.targets[0]) if p.op != Op.ADD else None
            if target is not None and target.status != Life.CURRENT:
                tx.update_proposal(p.id, status=Status.FAILED, reason_code=ReasonCode.APPLICABLE_FAIL,
                                   note=f"u{target.id} is {target.status} already (earlier in this run)")
                continue
            source = nodes[p.targets[-1]]
            if p.op == Op.NONE:
                tx.update_proposal(p.id, status=Status.APPLIED, note=f"applied ({p.decided_by}): mem0 changed nothing")
                continue
            if p.op == Op.DELETE:
                row = library.delete(target.attrs["mem0_id"])
                tx.set_status(target.id, Life.DELETED, {"event": "DELETE", "turn": source.source_ids, "run": tx.run_id})
                tx.add_edge(Edge(source.id, target.id, Rel.DELETES, tx.run_id or "", None, tx.turn))
                archived.append(target.id)
                tx.update_proposal(p.id, status=Status.APPLIED, detail={**p.detail, "history": row},
                                   note=f"applied ({p.decided_by}): mem0 deleted u{target.id}")
                continue
            uid = tx.state.next_node_id
            text = p.plan["text"]
            if p.op == Op.ADD:
                memory, version = mem0_id(uid), 1
                row = library.add(memory, text)
                sources = list(source.source_ids)
            else:
                memory, version = target.attrs["mem0_id"], target.attrs["version"] + 1
                row = library.update(memory, text)
                sources = list(dict.fromkeys(target.source_ids + source.source_ids))
            tx.create_node(Node(id=uid, raw=text, summary=text, keywords=keywords_of(text), time=source.time,
                                kind=Kind.MEMORY, source_ids=sources, speakers=list(source.speakers),
                                session=source.session, status=Life.CURRENT, created_turn=tx.turn,
                                made_by=tx.run_id or "", attrs={"mem0_id": memory, "version": version,
                                                               "event": row["event"]}))
            tx.add_edge(Edge(uid, source.id, Rel.DERIVED_FROM, tx.run_id or "", None, tx.turn))
            if target is not None:
                tx.add_edge(Edge(uid, target.id, Rel.VERSION, tx.run_id or "", None, tx.turn))
                tx.set_status(target.id, Life.SUPERSEDED, {"event": "UPDATE", "by": uid, "run": tx.run_id})
                archived.append(target.id)
            created.append(uid)
            tx.update_proposal(p.id, status=Status.APPLIED, detail={**p.detail, "history": row, "made": uid},
                               note=f"applied ({p.decided_by}): mem0 {row['event']} → u{uid} (version {version})")
        library.moved_to(tx.state)
        return {"created": created, "archived": archived, "rewired": []}


class Made:
    """Proposal numbering for one diagnosis."""

    def __init__(self, next_id: int, run_id: str, turn: int):
        self.next_id, self.run_id, self.turn = next_id, run_id, turn

    def proposal(self, op: str, targets: list[int], reason: str, plan: dict, detail: dict) -> Proposal:
        p = Proposal(id=self.next_id, run_id=self.run_id, op=op, targets=targets, confidence=1.0, reason=reason,
                     plan=plan, detail=detail, made_turn=self.turn)
        self.next_id += 1
        return p

    def failed(self, targets: list[int], step: str, call) -> Proposal:
        """A failed call is a no-op: one failed proposal saying which of mem0's steps failed and why."""
        p = self.proposal(Op.ADD, targets, f"{step} failed: nothing is added, updated or deleted", {},
                          {"error": call.error})
        p.status, p.gate, p.reason_code, p.note = (Status.FAILED, GateVerdict.FAIL, call_reason_code(call.error_code),
                                                   call.error or "")
        return p


def _says(raw: str, memory: str) -> bool:
    """Whether a turn ("Maya: …") holds a memory's words, the memory with or without its speaker's prefix."""
    speaker, said = strip_speaker(raw)
    body = memory.removeprefix(f"{speaker}: ") if speaker else memory
    return bool(body) and " ".join(body.split()).lower() in " ".join(said.split()).lower()

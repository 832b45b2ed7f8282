"""The consolidation process (§3.3-3.4): the work the gate queued, as proposals a person or the gate decides.

Each queued trigger becomes a `consolidate` proposal (the cluster in time order, with each unit's cosine to the
trigger and the cluster's coherence), each queued merge a `merge` proposal (the unit, its nearest episode and
their cosine), and each of them is followed by a `refine` proposal for the episode(s) it writes. Diagnosis calls
no LLM: the roles are asked when a plan is previewed or, at the latest, when the proposal is applied, so a
rejected proposal costs nothing. Applying writes episodes and facts with `derived_from` links (fact → episode,
citing the units the fact rests on; episode → unit; unit → message) and takes the consolidated units out of the
subconscious store. Every failure is a reason code on its proposal and changes nothing: the units stay
subconscious and the run goes on.
"""
from __future__ import annotations

from itertools import combinations

import numpy as np

from engine.core.edge import Edge
from engine.engines.recmem.context import RecMemContext
from engine.engines.recmem.schema import Kind, Life, Op, ReasonCode, Rel
from engine.runtime.process import BaseProcess
from engine.core.node import Node, parse_id
from engine.core.proposal import GateVerdict, Proposal, Status, call_reason_code, confidence_gate, fail_gate
from engine.core.state import MemoryState
from engine.core.text import keywords_of, strip_speaker
from engine.core.tx import Tx

BUFFER = "recurrence"
CLUSTER_TEXT = 160          # characters of a unit's text shown in a proposal's cluster table


class PlanFailed(Exception):
    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code


def label(uid: int) -> str:
    return f"u{uid}"


class Consolidation(BaseProcess):
    engine: RecMemContext

    # -- diagnosis: proposals from the buffer, no LLM ------------------------------------------------
    def diagnose(self, run_id: str, manual: bool) -> list[Proposal]:
        eng, s = self.engine, self.engine.settings
        state = eng.state
        next_id = state.next_proposal_id
        out: list[Proposal] = []
        for key, anchors in sorted(state.buffer(self.spec.buffer).items()):
            first = state.nodes.get(anchors[0]) if anchors else None
            if first is not None and first.kind == Kind.EPISODE:
                p = self._merge_proposal(next_id, run_id, first.id, key)
            else:
                p = self._cluster_proposal(next_id, run_id, [key, *anchors])
            out.append(p)
            next_id += 1
            if not s.has("no-semantic"):
                units = [key] if p.op == Op.MERGE else p.targets
                out.append(Proposal(id=next_id, run_id=run_id, op=Op.REFINE, targets=list(units),
                                    confidence=p.confidence, made_turn=state.turn,
                                    reason=f"refine the episode proposal #{p.id} writes into atomic facts, from "
                                           f"{'this unit' if len(units) == 1 else f'these {len(units)} units'}",
                                    detail={"threshold": s.theta_accept, "after": [p.id]}))
                next_id += 1
        self._route(out, manual)
        return out

    def _merge_proposal(self, pid: int, run_id: str, episode: int, unit: int) -> Proposal:
        eng, s = self.engine, self.engine.settings
        if unit not in eng.state.nodes or episode not in eng.state.nodes:
            return self._gone(pid, run_id, Op.MERGE, [episode, unit])
        cos = float(eng.vectors[unit] @ eng.vectors[episode])
        return Proposal(id=pid, run_id=run_id, op=Op.MERGE, targets=[episode, unit], confidence=round(cos, 4),
                        reason=f"merge-first: {label(unit)} is at cosine {cos:.3f} ≥ θ_merge {s.theta_merge:.2f} "
                               f"with its nearest episode {label(episode)}",
                        detail={"threshold": s.theta_accept, "cosine": round(cos, 4), "theta_merge": s.theta_merge},
                        made_turn=eng.state.turn)

    def _cluster_proposal(self, pid: int, run_id: str, ids: list[int]) -> Proposal:
        eng, s = self.engine, self.engine.settings
        nodes = eng.state.nodes
        if any(u not in nodes for u in ids):
            return self._gone(pid, run_id, Op.CONSOLIDATE, ids)
        trigger = ids[0]
        cluster = sorted(ids, key=lambda u: (nodes[u].time, u))
        vecs = {u: eng.vectors[u] for u in cluster}
        coherence = float(np.mean([vecs[a] @ vecs[b] for a, b in combinations(cluster, 2)])) if len(cluster) > 1 \
            else 1.0
        rows = [{"unit": label(u), "role": "trigger" if u == trigger else "neighbour",
                 "cosine": round(float(vecs[u] @ vecs[trigger]), 4), "time": nodes[u].time,
                 "text": _clip(nodes[u].raw)} for u in cluster]
        return Proposal(id=pid, run_id=run_id, op=Op.CONSOLIDATE, targets=cluster, confidence=round(coherence, 4),
                        reason=f"recurrence: {label(trigger)} and {len(cluster) - 1} subconscious unit(s) at cosine "
                               f"≥ θ_sim {s.theta_sim:.2f} (|R| = {len(cluster)} ≥ θ_count {s.theta_count}); "
                               f"confidence is the cluster's mean pairwise cosine",
                        detail={"threshold": s.theta_accept, "coherence": round(coherence, 4),
                                "theta_sim": s.theta_sim, "cluster": rows},
                        made_turn=eng.state.turn)

    def _gone(self, pid: int, run_id: str, op: str, targets: list[int]) -> Proposal:
        return Proposal(id=pid, run_id=run_id, op=op, targets=targets, confidence=0.0, reason="queued node missing",
                        gate=GateVerdict.FAIL, reason_code=ReasonCode.APPLICABLE_FAIL, status=Status.SKIPPED,
                        made_turn=self.engine.state.turn)

    def _route(self, proposals: list[Proposal], manual: bool) -> None:
        """The gate: confidence ≥ θ_accept; a refinement follows the verdict of the proposal it refines."""
        theta = self.engine.settings.theta_accept
        by_id = {p.id: p for p in proposals}
        for p in proposals:
            if p.status != Status.PENDING:
                continue
            parent = by_id.get((p.detail.get("after") or [None])[0])
            if parent is None:
                confidence_gate(p, theta, manual, name="θ_accept")
            elif parent.gate == GateVerdict.FAIL:
                fail_gate(p, ReasonCode.LOW_CONF, f"follows #{parent.id}, which the gate rejects", manual)

    # -- plans: the LLM roles ---------------------------------------------------------------------------
    def plan(self, p: Proposal) -> tuple[dict | None, str | None, str]:
        try:
            if p.op == Op.CONSOLIDATE:
                return self.episodes_plan(self.engine.state, p.targets), None, ""
            if p.op == Op.MERGE:
                return self.merge_plan(self.engine.state, *p.targets), None, ""
            parent = self.engine.state.proposals[p.detail["after"][0]]
            if parent.plan is None and parent.status == Status.PENDING:
                self.preview(parent.id)
                parent = self.engine.state.proposals[parent.id]
            return self.refine_plan(self.engine.state, self._proposed(parent, p)), None, ""
        except PlanFailed as exc:
            return None, exc.code, str(exc)

    def _call(self, role: str, payload: dict) -> dict:
        call = self.engine.llm.call(role, payload)
        if not call.ok:
            raise PlanFailed(call_reason_code(call.error_code), call.error or f"the {role} call failed")
        return call.data

    def unit_payload(self, state: MemoryState, uid: int) -> dict:
        unit = state.nodes[uid]
        messages = []
        for m in unit.members:
            msg = state.nodes[m]
            speaker, text = strip_speaker(msg.raw)
            messages.append({"speaker": (msg.speakers or [speaker])[0], "text": text})
        return {"id": label(uid), "time": unit.time, "messages": messages}

    def episodes_plan(self, state: MemoryState, cluster: list[int]) -> dict:
        """LLM_epi over the time-ordered cluster (Eq. 7): 1-3 episodes, each citing the units it is drawn from."""
        data = self._call("episode_extraction", {"units": [self.unit_payload(state, u) for u in cluster]})
        if not data["episodes"]:
            raise PlanFailed(ReasonCode.NO_EPISODE, "the episode role formed no episode from the cluster")
        episodes = []
        for i, ep in enumerate(data["episodes"], 1):
            cited = _cited(ep["units"], cluster, f"episode {i}")
            if not ep["text"].strip():
                raise PlanFailed(ReasonCode.SCHEMA_FAIL, f"episode {i} has no text")
            episodes.append({"text": ep["text"].strip(), "units": [label(u) for u in cited]})
        return {"episodes": episodes}

    def merge_plan(self, state: MemoryState, episode: int, unit: int) -> dict:
        """LLM_merge (Eq. 6): does the unit continue the episode, and the episode rewritten if so."""
        ep = state.nodes[episode]
        cos = float(self.engine.vector(unit) @ self.engine.embedder.embed_one(ep.summary))
        data = self._call("episode_merge", {"new": self.unit_payload(state, unit),
                                            "past": {"id": label(episode), "time": ep.time, "text": ep.summary},
                                            "cosine": round(cos, 4)})
        merged = data["merged_memory"].strip()
        if data["should_merge"] == "yes" and not merged:
            raise PlanFailed(ReasonCode.SCHEMA_FAIL, "should_merge is yes but merged_memory is empty")
        return {"should_merge": data["should_merge"], "merged_memory": merged, "past_memory": ep.summary,
                "keywords": keywords_of(merged) if merged else [], "confidence": data["confidence"]}

    def known_facts(self, state: MemoryState, text: str) -> list[Node]:
        """TopK_k(S_sem, Φ(E)) (Eq. 8): the facts nearest the episode, ties by id."""
        k = self.engine.settings.k_known
        facts = sorted((n for n in state.nodes.values() if n.kind == Kind.FACT and n.status == Life.SEMANTIC),
                       key=lambda n: n.id)
        if not facts or not k:
            return []
        vecs = self.engine.embedder.embed([text] + [f.summary for f in facts])
        sims = vecs[1:] @ vecs[0]
        order = sorted(range(len(facts)), key=lambda i: (-round(float(sims[i]), 9), facts[i].id))[:k]
        return [facts[i] for i in order]

    def refine_plan(self, state: MemoryState, inputs: list[tuple[str, list[int]]]) -> dict:
        """LLM_refine (Eq. 9) for each (episode text, units it refines): new facts with the units they rest on,
        the updates of known facts, and the candidates dropped as known."""
        facts, dropped, known_ids = [], [], []
        for i, (text, units) in enumerate(inputs, 1):
            known = self.known_facts(state, text)
            known_ids += [label(k.id) for k in known if label(k.id) not in known_ids]
            data = self._call("fact_refinement", {
                "episode": {"id": f"episode {i}", "text": text},
                "units": [self.unit_payload(state, u) for u in units],
                "known": [{"id": label(k.id), "time": k.time, "text": k.summary} for k in known]})
            allowed = {k.id for k in known}
            for f in data["facts"]:
                cited = _cited(f["units"], units, "a fact")
                old = parse_id(f["updates"]) if f["updates"].strip() else None
                if f["updates"].strip() and old not in allowed:
                    raise PlanFailed(ReasonCode.CITATION_FAIL, f"a fact updates {f['updates']!r}, which is not one "
                                                               f"of the known facts it was given")
                facts.append({"episode": i, "text": f["text"].strip(), "type": f["type"],
                              "units": [label(u) for u in cited], "updates": label(old) if old else ""})
            for d in data["dropped"]:
                dropped.append({"episode": i, "text": d["text"], "known": d["known"], "similarity": d["similarity"]})
        return {"facts": [f for f in facts if f["text"]], "dropped": dropped, "known": known_ids,
                "refined": [text for text, _ in inputs]}

    def _proposed(self, parent: Proposal, p: Proposal) -> list[tuple[str, list[int]]]:
        """The episode text(s) and units a refinement reads, as its parent proposal's plan would write them."""
        plan = parent.plan or {}
        if parent.status in (Status.FAILED, Status.SKIPPED, Status.REJECTED) or not plan:
            raise PlanFailed(ReasonCode.PARENT_NOT_APPLIED, f"#{parent.id} has no plan to refine ({parent.status})")
        if parent.op == Op.MERGE:
            if plan.get("should_merge") != "yes":
                raise PlanFailed(ReasonCode.PARENT_NOT_APPLIED, f"#{parent.id} declines the merge: no episode to refine")
            return [(plan["merged_memory"], list(p.targets))]
        return [(ep["text"], [parse_id(u) for u in ep["units"]]) for ep in plan["episodes"]]

    # -- execution ---------------------------------------------------------------------------------------
    def order_key(self, p: Proposal) -> tuple:
        return (p.op == Op.REFINE, p.id)

    def execute(self, tx: Tx, accepted: list[Proposal]) -> dict:
        created: list[int] = []
        consolidated: list[int] = []
        for p in sorted(accepted, key=self.order_key):
            try:
                made, gone = getattr(self, f"_{p.op}")(tx, p)
            except PlanFailed as exc:
                status = Status.SKIPPED if exc.code in (ReasonCode.APPLICABLE_FAIL, ReasonCode.MERGE_DECLINED,
                                                         ReasonCode.PARENT_NOT_APPLIED) else Status.FAILED
                tx.update_proposal(p.id, status=status, reason_code=exc.code, note=str(exc))
                continue
            created += made
            consolidated += gone
        # what the new episodes and facts are indexed by, in one batch (the engine then finds them cached)
        self.engine.embedder.embed([self.engine.embed_text(tx.state.nodes[n]) for n in created])
        return {"created": created, "archived": consolidated, "rewired": []}

    def _fresh_plan(self, tx: Tx, p: Proposal, stale: bool, make) -> dict:
        """The stored plan, or a new one (stored on the proposal) when there is none or it no longer fits."""
        if p.plan is not None and not stale:
            return p.plan
        plan = make()
        tx.update_proposal(p.id, plan=plan)
        return plan

    def _consolidate(self, tx: Tx, p: Proposal) -> tuple[list[int], list[int]]:
        nodes = tx.state.nodes
        bad = [u for u in p.targets if u not in nodes or nodes[u].status != Life.SUBCONSCIOUS]
        if bad:
            raise PlanFailed(ReasonCode.APPLICABLE_FAIL, f"unit(s) {bad} left the subconscious store earlier")
        plan = self._fresh_plan(tx, p, False, lambda: self.episodes_plan(tx.state, p.targets))
        made, gone = [], []
        for ep in plan["episodes"]:
            members = _cited(ep["units"], p.targets, "an episode")
            eid = tx.state.next_node_id
            units = [nodes[u] for u in members]
            tx.create_node(Node(id=eid, raw="", summary=ep["text"], keywords=keywords_of(ep["text"]),
                                time=units[0].time, kind=Kind.EPISODE,
                                source_ids=[s for u in units for s in u.source_ids],
                                speakers=list(dict.fromkeys(sp for u in units for sp in u.speakers)),
                                session=units[0].session, status=Life.EPISODIC, created_turn=tx.turn,
                                made_by=tx.run_id or "", members=members,
                                attrs={"units": len(members), "last_time": units[-1].time, "merges": 0}))
            for u in members:
                tx.add_edge(Edge(eid, u, Rel.DERIVED_FROM, tx.run_id or "", None, tx.turn))
            made.append(eid)
            for u in members:
                if u not in gone:
                    tx.set_status(u, Life.CONSOLIDATED, {"rule": "recurrence", "episode": eid, "run": tx.run_id})
                    gone.append(u)
        tx.update_proposal(p.id, status=Status.APPLIED, detail={**p.detail, "episodes": made},
                           note=f"applied ({p.decided_by}): {len(made)} episode(s), {len(gone)} unit(s) consolidated")
        return made, gone

    def _merge(self, tx: Tx, p: Proposal) -> tuple[list[int], list[int]]:
        nodes = tx.state.nodes
        episode, unit = p.targets
        if episode not in nodes or nodes[episode].status != Life.EPISODIC:
            raise PlanFailed(ReasonCode.APPLICABLE_FAIL, f"episode {label(episode)} is gone")
        if unit not in nodes or nodes[unit].status != Life.SUBCONSCIOUS:
            raise PlanFailed(ReasonCode.APPLICABLE_FAIL, f"{label(unit)} left the subconscious store earlier")
        ep = nodes[episode]
        stale = p.plan is not None and p.plan.get("past_memory") != ep.summary     # merged into earlier this run
        plan = self._fresh_plan(tx, p, stale, lambda: self.merge_plan(tx.state, episode, unit))
        if plan["should_merge"] != "yes":
            raise PlanFailed(ReasonCode.MERGE_DECLINED, f"the merge role says {label(unit)} does not continue "
                                                        f"{label(episode)} (confidence {plan['confidence']:.2f})")
        tx.set_descriptor(episode, plan["merged_memory"], list(plan["keywords"]))
        u = nodes[unit]
        tx.update_node(episode, members=ep.members + [unit], source_ids=ep.source_ids + u.source_ids,
                       speakers=list(dict.fromkeys(ep.speakers + u.speakers)),
                       attrs={**ep.attrs, "units": len(ep.members) + 1, "last_time": u.time,
                              "merges": ep.attrs.get("merges", 0) + 1})
        tx.add_edge(Edge(episode, unit, Rel.DERIVED_FROM, tx.run_id or "", None, tx.turn))
        tx.set_status(unit, Life.CONSOLIDATED, {"rule": "merge-first", "episode": episode, "run": tx.run_id})
        tx.update_proposal(p.id, status=Status.APPLIED, detail={**p.detail, "episodes": [episode]},
                           note=f"applied ({p.decided_by}): {label(unit)} merged into {label(episode)}")
        return [], [unit]

    def _refine(self, tx: Tx, p: Proposal) -> tuple[list[int], list[int]]:
        nodes = tx.state.nodes
        parent = tx.state.proposals[p.detail["after"][0]]
        if parent.status != Status.APPLIED:
            raise PlanFailed(ReasonCode.PARENT_NOT_APPLIED, f"#{parent.id} was not applied ({parent.status})")
        episodes = [e for e in parent.detail.get("episodes", []) if e in nodes]
        inputs = [(nodes[e].summary, list(p.targets) if parent.op == Op.MERGE else list(nodes[e].members))
                  for e in episodes]
        stale = p.plan is not None and p.plan.get("refined") != [text for text, _ in inputs]
        plan = self._fresh_plan(tx, p, stale, lambda: self.refine_plan(tx.state, inputs))
        made = []
        for f in plan["facts"]:
            eid = episodes[f["episode"] - 1]
            cited = [parse_id(u) for u in f["units"]]
            units = [nodes[u] for u in cited]
            fid = tx.state.next_node_id
            tx.create_node(Node(id=fid, raw="", summary=f["text"], keywords=keywords_of(f["text"]),
                                time=max(u.time for u in units), kind=Kind.FACT,
                                source_ids=list(dict.fromkeys(s for u in units for s in u.source_ids)),
                                speakers=list(dict.fromkeys(sp for u in units for sp in u.speakers)),
                                session=units[0].session, status=Life.SEMANTIC, created_turn=tx.turn,
                                made_by=tx.run_id or "", attrs={"type": f["type"], "episode": eid}))
            tx.add_edge(Edge(fid, eid, Rel.DERIVED_FROM, tx.run_id or "", None, tx.turn, evidence=cited))
            old = parse_id(f["updates"]) if f["updates"] else None
            if old is not None and old in nodes and nodes[old].kind == Kind.FACT:
                tx.add_edge(Edge(fid, old, Rel.UPDATES, tx.run_id or "", None, tx.turn))
            made.append(fid)
        tx.update_proposal(p.id, status=Status.APPLIED,
                           note=f"applied ({p.decided_by}): {len(made)} fact(s), {len(plan['dropped'])} dropped as "
                                f"known")
        return made, []


def _cited(values: list, allowed: list[int], what: str) -> list[int]:
    """The unit ids an episode or fact cites, in the order of `allowed`; any id outside it fails the plan."""
    ids = [parse_id(v) for v in values]
    outside = [v for v, i in zip(values, ids) if i not in allowed]
    if outside:
        raise PlanFailed(ReasonCode.CITATION_FAIL, f"{what} cites {outside}, not among the units it was given "
                                                   f"({', '.join(label(u) for u in allowed)})")
    if not ids:
        raise PlanFailed(ReasonCode.CITATION_FAIL, f"{what} cites no unit")
    return [u for u in allowed if u in set(ids)]


def _clip(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= CLUSTER_TEXT else text[: CLUSTER_TEXT - 1] + "…"

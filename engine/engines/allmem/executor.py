"""ATC editing half: applicability, plan, validation, deterministic edits (App. B, C.2.1, C.3).

The LLM only supplies plans (segments, descriptors); every archive, edge and
rewiring decision is made here by fixed rules with id tie-breaks, inside one
transaction, so a run commits whole or not at all.
"""
from __future__ import annotations

import numpy as np

from engine.core.edge import Edge
from engine.core.node import Node
from engine.core.proposal import Proposal, Status, call_reason_code
from engine.core.tx import Tx
from engine.engines.allmem.atc import coherence, unit_payload
from engine.engines.allmem.context import AllMemContext
from engine.engines.allmem.ranking import semantic_key, top_cap
from engine.engines.allmem.schema import EdgeType, Kind, Life, Op, ReasonCode
from engine.retrieval.index import top_k

PLAN_ROLE = {Op.SPLIT: "split_plan", Op.MERGE: "merge_plan", Op.UPDATE: "update_plan"}


class PlanInvalid(Exception):
    pass


def plan_payload(engine: AllMemContext, p: Proposal) -> dict:
    units = engine.state.units
    if p.op == Op.SPLIT:
        return {"node_id": str(p.targets[0]), "original_text": units[p.targets[0]].raw, "reason": p.reason}
    if p.op == Op.MERGE:
        return {"sources": [unit_payload(engine, t) for t in p.targets], "reason": p.reason}
    cur, old = p.targets
    anchors = [unit_payload(engine, a) for a, _ in engine.visible_neighbours(cur, engine.settings.diagnosis_anchors)
               if a not in (cur, old)]
    return {"current": unit_payload(engine, cur), "superseded": unit_payload(engine, old), "anchors": anchors,
            "reason": p.reason}


def make_plan(engine: AllMemContext, p: Proposal) -> tuple[dict | None, str | None, str]:
    """Ask the LLM for the operator's plan: (plan, reason code on failure, message)."""
    call = engine.llm.call(PLAN_ROLE[p.op], plan_payload(engine, p))
    if call.ok:
        return call.data, None, ""
    return None, call_reason_code(call.error_code), call.error or ""


class Executor:
    def __init__(self, engine: AllMemContext, tx: Tx):
        self.engine, self.tx = engine, tx
        self.s = engine.settings
        self.touched: set[int] = set()
        self.z: dict[int, np.ndarray] = {}
        self.next_id = tx.state.next_unit_id
        self.created: list[int] = []
        self.archived: list[int] = []
        self.rewired: list[tuple[int, int, int]] = []

    # -- per proposal ------------------------------------------------------
    def run(self, p: Proposal, decided_by: str) -> None:
        problem = self.applicable(p)
        if problem:
            code = ReasonCode.COH_FAIL if problem.startswith("coherence") else ReasonCode.APPLICABLE_FAIL
            self.tx.update_proposal(p.id, status=Status.SKIPPED, reason_code=code, note=problem)
            return
        plan = p.plan
        if plan is None:
            plan, code, message = make_plan(self.engine, p)
            if plan is None:
                self.tx.update_proposal(p.id, status=Status.FAILED, reason_code=code, note=message)
                return
        try:
            self.validate(p, plan)
        except PlanInvalid as exc:
            self.tx.update_proposal(p.id, status=Status.FAILED, reason_code=ReasonCode.PLAN_VALIDATION_FAIL,
                                    note=str(exc), plan=plan)
            return
        getattr(self, f"_{p.op}")(p, plan)
        self.tx.update_proposal(p.id, status=Status.APPLIED, plan=plan, note=f"applied ({decided_by})")

    def applicable(self, p: Proposal) -> str:
        units = self.tx.state.units
        missing = [t for t in p.targets if t not in units]
        if missing:
            return f"unit(s) {missing} no longer exist"
        stale = [t for t in p.targets if t in self.touched]
        if stale:
            return f"unit(s) {stale} were already edited in this run"
        must_be_visible = p.targets[:1] if p.op == Op.UPDATE else p.targets
        hidden = [t for t in must_be_visible if not units[t].visible]
        if hidden:
            return f"unit(s) {hidden} are archived"
        if p.op == Op.MERGE:
            if not 2 <= len(p.targets) <= self.s.merge_max:
                return f"merge arity {len(p.targets)} out of range"
            coh = coherence([self.vec(t) for t in p.targets])
            if coh < self.s.gamma_merge and p.decided_by == "gate":
                return f"coherence {coh:.2f} < gamma {self.s.gamma_merge:.2f} at execution time"
        return ""

    def validate(self, p: Proposal, plan: dict) -> None:
        """Executor-side checks (App. C.3.1); raise PlanInvalid naming the broken rule."""
        if p.op == Op.SPLIT:
            raw = self.tx.state.units[p.targets[0]].raw
            segs = plan["segments"]
            if not plan["do_split"]:
                raise PlanInvalid("plan declined to split (do_split=false)")
            if len(segs) < 2:
                raise PlanInvalid(f"split needs at least 2 segments, plan has {len(segs)}")
            for i, seg in enumerate(segs):
                if not seg["segment_text"].strip():
                    raise PlanInvalid(f"segment {i + 1} is empty")
                if seg["segment_text"] not in raw:
                    raise PlanInvalid(f"segment {i + 1} is not an exact substring of the raw evidence")
                if not seg["segment_summary"].strip() or not _clean_keywords(seg["segment_keywords"]):
                    raise PlanInvalid(f"segment {i + 1} lacks a summary or keywords")
        else:
            summary = plan["summary" if p.op == Op.MERGE else "updated_summary"]
            keywords = plan["keywords" if p.op == Op.MERGE else "updated_keywords"]
            if not summary.strip() or not _clean_keywords(keywords):
                raise PlanInvalid("descriptor needs a non-empty summary and keywords")
            if len(summary) > self.s.max_summary_chars:
                raise PlanInvalid(f"summary longer than {self.s.max_summary_chars} characters")

    # -- operators -----------------------------------------------------------
    def _split(self, p: Proposal, plan: dict) -> None:
        v = self.tx.state.units[p.targets[0]]
        siblings = []
        for seg in plan["segments"]:
            w = self._new_unit(Node(
                id=0, raw=seg["segment_text"], summary=seg["segment_summary"].strip(),
                keywords=_clean_keywords(seg["segment_keywords"])[: self.s.max_keywords], time=v.time,
                kind=Kind.SPLIT_PART, source_ids=list(v.source_ids), speakers=list(v.speakers),
                session=v.session, created_turn=self.tx.turn, made_by=self.tx.run_id or ""))
            siblings.append(w)
        self._archive(v.id)
        for w in siblings:
            self._edge(w, v.id, EdgeType.VERSION)
        for w in siblings:
            others = [o for o in siblings if o != w]
            for o in top_cap(others, self.s.cap_sibling, self._sem_key(w)):
                self._edge(w, o, EdgeType.SIBLING, confidence=round(float(self.vec(w) @ self.vec(o)), 4))
        self._redirect_incoming(v.id, siblings)
        for w in siblings:
            self._representative_links(w, [v.id], exclude=set(siblings))
        self.touched.update([v.id, *siblings])

    def _merge(self, p: Proposal, plan: dict) -> None:
        sources = sorted((self.tx.state.units[t] for t in p.targets), key=lambda u: (u.time, u.id))
        latest = sources[-1]
        rep = self._new_unit(Node(
            id=0, raw="\n".join(u.raw for u in sources), summary=plan["summary"].strip(),
            keywords=_clean_keywords(plan["keywords"])[: self.s.max_keywords], time=latest.time,
            kind=Kind.MERGED, source_ids=list(dict.fromkeys(s for u in sources for s in u.source_ids)),
            speakers=list(dict.fromkeys(s for u in sources for s in u.speakers)), session=latest.session,
            created_turn=self.tx.turn, made_by=self.tx.run_id or ""))
        for u in sources:
            self._archive(u.id)
            self._edge(rep, u.id, EdgeType.VERSION)
        for u in sources:
            self._redirect_incoming(u.id, [rep])
        self._representative_links(rep, [u.id for u in sources], exclude=set(p.targets))
        self.touched.update([rep, *p.targets])

    def _update(self, p: Proposal, plan: dict) -> None:
        cur, old = p.targets
        if self.tx.set_descriptor(cur, plan["updated_summary"].strip(),
                                  _clean_keywords(plan["updated_keywords"])[: self.s.max_keywords]):
            self.z[cur] = self.engine.embed_node(self.tx.state.units[cur])
        self._archive(old)
        self._edge(cur, old, EdgeType.VERSION)
        self._redirect_incoming(old, [cur])
        self._cap_semantic(cur)
        self.touched.update([cur, old])

    # -- primitives ------------------------------------------------------------
    def vec(self, uid: int) -> np.ndarray:
        return self.z[uid] if uid in self.z else self.engine.vector(uid)

    def _sem_key(self, src: int):
        zs = self.vec(src)
        units = self.tx.state.units
        return lambda dst: semantic_key(zs, units[dst], self.vec(dst))

    def _new_unit(self, unit: Node) -> int:
        unit.id = self.next_id
        unit.status = Life.VISIBLE
        self.next_id += 1
        self.tx.create_node(unit)
        self.z[unit.id] = self.engine.embed_node(unit)
        self.created.append(unit.id)
        return unit.id

    def _archive(self, uid: int) -> None:
        if self.s.has("no-visibility"):
            return
        if self.tx.state.units[uid].visible:
            self.tx.set_status(uid, Life.ARCHIVED, {"run": self.tx.run_id})
            self.archived.append(uid)

    def _edge(self, src: int, dst: int, etype: str, confidence: float | None = None) -> None:
        self.tx.add_edge(Edge(src=src, dst=dst, type=etype, made_by=self.tx.run_id or "",
                              confidence=confidence, created_turn=self.tx.turn))

    def _redirect_incoming(self, archived: int, reps: list[int]) -> None:
        """Redirect-to-representative: visible p -> x (sigma) becomes p -> best rep (Eq. 20)."""
        if self.tx.state.units[archived].visible:
            return
        for src in sorted(self.tx.state.inc(archived, EdgeType.SEMANTIC)):
            if not self.tx.state.units[src].visible or src in reps:
                continue
            best = max(reps, key=self._sem_key(src))
            self.tx.remove_edge(src, archived, EdgeType.SEMANTIC)
            self._edge(src, best, EdgeType.SEMANTIC, confidence=round(float(self.vec(src) @ self.vec(best)), 4))
            self.rewired.append((src, archived, best))
            self._cap_semantic(src)

    def _representative_links(self, w: int, sources: list[int], exclude: set[int]) -> None:
        """Semantic out-links of a new node: its anchors plus its sources' sigma neighbours (Eq. 21)."""
        units = self.tx.state.units
        candidates = set(self._anchors(w, self.s.write_anchors, exclude | {w}))
        for x in sources:
            candidates |= {u for u in self.tx.state.out(x, EdgeType.SEMANTIC) if units[u].visible}
        candidates -= exclude | {w} | set(sources)
        for dst in top_cap(candidates, self.s.cap_semantic, self._sem_key(w)):
            self._edge(w, dst, EdgeType.SEMANTIC, confidence=round(float(self.vec(w) @ self.vec(dst)), 4))

    def _cap_semantic(self, src: int) -> None:
        current = self.tx.state.out(src, EdgeType.SEMANTIC)
        if len(current) <= self.s.cap_semantic:
            return
        keep = set(top_cap(current, self.s.cap_semantic, self._sem_key(src)))
        for dst in sorted(current - keep):
            self.tx.remove_edge(src, dst, EdgeType.SEMANTIC)

    def _anchors(self, w: int, k: int, exclude: set[int]) -> list[int]:
        """Top-k visible neighbours in the run's working state (the index is not yet updated)."""
        ids = [u for u in self.tx.state.visible_ids if u not in exclude]
        if not ids:
            return []
        return top_k(ids, np.stack([self.vec(u) for u in ids]) @ self.vec(w), k)


def _clean_keywords(keywords: list[str]) -> list[str]:
    return list(dict.fromkeys(k.strip() for k in keywords if isinstance(k, str) and k.strip()))

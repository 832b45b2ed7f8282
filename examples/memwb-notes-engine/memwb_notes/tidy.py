"""The `tidy` process: each buffered note is paired with the closest older current note of its speaker; the pair
becomes a `supersede` proposal that the gate (θ_accept) or a person decides."""
from __future__ import annotations

from engine.core.edge import Edge
from engine.core.proposal import Proposal, Status, confidence_gate, fail_gate
from engine.core.tx import Tx
from engine.runtime.process import BaseProcess

from memwb_notes.schema import CURRENT, SUPERSEDE, SUPERSEDED, SUPERSEDES, ReasonCode

NEIGHBOURS = 8          # surface neighbours looked at per note


class Tidy(BaseProcess):
    def diagnose(self, run_id: str, manual: bool) -> list[Proposal]:
        eng, s = self.engine, self.engine.settings
        nodes = eng.state.nodes
        out: list[Proposal] = []
        for uid in sorted(eng.state.buffer(self.spec.buffer)):
            note = nodes.get(uid)
            if note is None or note.status != CURRENT:
                continue
            older = sorted(((score, other) for other, score in eng.visible_neighbours(uid, NEIGHBOURS)
                            if other < uid and nodes[other].speakers == note.speakers and score >= s.theta_pair),
                           key=lambda pair: (-pair[0], pair[1]))
            if not older:
                continue
            cosine, other = older[0]
            p = Proposal(id=eng.state.next_proposal_id + len(out), run_id=run_id, op=SUPERSEDE,
                         targets=[uid, other], confidence=round(float(cosine), 4), made_turn=eng.state.turn,
                         reason=f"u{uid} repeats the older u{other} of {note.speakers[0]} at cosine {cosine:.3f}",
                         detail={"threshold": s.theta_accept, "theta_pair": s.theta_pair})
            out.append(p)
        taken: set[int] = set()
        for p in sorted(out, key=lambda p: (-p.confidence, p.id)):
            if p.targets[1] in taken:
                fail_gate(p, ReasonCode.DUPLICATE, f"u{p.targets[1]} is superseded by a closer note", manual)
            elif confidence_gate(p, s.theta_accept, manual, name="θ_accept"):
                taken.add(p.targets[1])
        return out

    def execute(self, tx: Tx, accepted: list[Proposal]) -> dict:
        """Every accepted proposal ends applied, or skipped when a note left the surface earlier in the run."""
        archived = []
        for p in sorted(accepted, key=self.order_key):
            newer, older = p.targets
            nodes = tx.state.nodes
            if any(u not in nodes or nodes[u].status != CURRENT for u in p.targets):
                tx.update_proposal(p.id, status=Status.SKIPPED, reason_code=ReasonCode.APPLICABLE_FAIL,
                                   note="one of the two left the surface earlier")
                continue
            tx.set_status(older, SUPERSEDED, cause={"proposal": p.id})
            tx.add_edge(Edge(newer, older, SUPERSEDES, tx.run_id or "", p.confidence, tx.turn))
            tx.update_proposal(p.id, status=Status.APPLIED, note=f"applied ({p.decided_by})")
            archived.append(older)
        return {"created": [], "archived": archived, "rewired": []}

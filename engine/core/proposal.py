"""Proposals: an edit of an offline process before it is applied, and why it was or was not.

Operators and most reason codes belong to an engine (its schema declares
them); the statuses, gate verdicts and the codes of the LLM boundary are
shared by every engine.
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace

from engine.core.node import json_copy


class Status:
    PENDING = "pending"
    ACCEPTED = "accepted"
    REJECTED = "rejected"
    APPLIED = "applied"
    SKIPPED = "skipped"
    FAILED = "failed"
    CLOSED = (REJECTED, APPLIED, SKIPPED, FAILED)
    ALL = (PENDING, ACCEPTED, APPLIED, REJECTED, SKIPPED, FAILED)       # the order counts are shown in


class LLMReason:
    """Reason codes of the LLM boundary, the same for every engine and role."""

    JSON_PARSE_FAIL = "JSON_PARSE_FAIL"
    SCHEMA_FAIL = "SCHEMA_FAIL"
    OUTPUT_TOO_LONG = "OUTPUT_TOO_LONG"          # a field beyond its role's cap (`engine.llm.schemas.CAPS`)
    DUPLICATE_SEGMENTS = "DUPLICATE_SEGMENTS"    # a Split plan that repeats a segment
    LLM_FAIL = "LLM_FAIL"            # backend could not answer (timeout, HTTP error)
    REPLY = (JSON_PARSE_FAIL, SCHEMA_FAIL, OUTPUT_TOO_LONG, DUPLICATE_SEGMENTS)   # a reply came and was refused


def call_reason_code(code: str | None) -> str:
    """The reason code for a failed LLM call: a refused reply keeps its code, the rest is LLM_FAIL."""
    return code if code in LLMReason.REPLY else LLMReason.LLM_FAIL


class GateVerdict:
    PASS = "pass"
    FAIL = "fail"


@dataclass
class Proposal:
    """One proposed edit `(op, targets, p)` and its life until applied or dropped.

    `op` is one of the engine schema's operators; ordered operators (All-Mem's
    Update: [current, superseded]) keep target order. `detail` holds figures the
    decision rests on (merge coherence, the gate threshold, evidence cited).
    """

    id: int
    run_id: str
    op: str
    targets: list[int]
    confidence: float
    reason: str
    context_target: int | None = None
    gate: str = GateVerdict.PASS
    reason_code: str | None = None
    status: str = Status.PENDING
    plan: dict | None = None
    decided_by: str | None = None
    note: str = ""
    detail: dict = field(default_factory=dict)
    made_turn: int = 0

    def to_dict(self) -> dict:
        """Every field in field order, lists and dicts copied, as `dataclasses.asdict` gives them; written out
        because asdict's generic recursion was a seventh of a 10,000-turn GAM ingest (its checkpoints)."""
        return {"id": self.id, "run_id": self.run_id, "op": self.op, "targets": list(self.targets),
                "confidence": self.confidence, "reason": self.reason, "context_target": self.context_target,
                "gate": self.gate, "reason_code": self.reason_code, "status": self.status,
                "plan": json_copy(self.plan), "decided_by": self.decided_by, "note": self.note,
                "detail": json_copy(self.detail), "made_turn": self.made_turn}

    def copy(self) -> "Proposal":
        """An independent copy (its targets, plan and detail its own): a state's clone copies every proposal."""
        return replace(self, targets=list(self.targets), plan=json_copy(self.plan), detail=json_copy(self.detail))

    @classmethod
    def from_dict(cls, data: dict) -> "Proposal":
        return cls(**json_copy(data))


@dataclass(frozen=True)
class ProposalCounts:
    """How many proposals are in each status, and how many of the skipped ones routing closed at diagnosis
    before any decision reached them (a duplicate, an overlap, a filtered or disabled operator).

    The one definition of a count of proposals: the run summary in the log, the Consolidation page's banner,
    review queue and run diff, the Replay page and the CLI all count through it, so no two of them disagree.
    A skip is "at diagnosis" when nobody decided it: a deferral, a discard and an accepted proposal that was
    no longer applicable all record who decided.
    """

    pending: int = 0
    accepted: int = 0
    applied: int = 0
    rejected: int = 0
    skipped: int = 0
    failed: int = 0
    skipped_at_diagnosis: int = 0

    @classmethod
    def of(cls, proposals: Iterable[Proposal], run_id: str | None = None) -> "ProposalCounts":
        """The counts of `proposals`, or of those of one run."""
        chosen = [p for p in proposals if run_id is None or p.run_id == run_id]
        by_status = {s: sum(p.status == s for p in chosen) for s in Status.ALL}
        routed = sum(p.status == Status.SKIPPED and not p.decided_by for p in chosen)
        return cls(**by_status, skipped_at_diagnosis=routed)

    @property
    def total(self) -> int:
        return sum(self.by_status().values())

    def by_status(self) -> dict[str, int]:
        """Every status with its count, zeros included, in `Status.ALL` order."""
        return {s: getattr(self, s) for s in Status.ALL}

    def to_dict(self) -> dict[str, int]:
        """Every count, as a run summary stores it."""
        return {**self.by_status(), "skipped_at_diagnosis": self.skipped_at_diagnosis}

    def line(self) -> str:
        """The counts as the CLI prints them: the closed statuses always, pending and accepted when any, and the
        skips made at diagnosis when any (`applied=1 rejected=0 skipped=11 failed=0 skipped_at_diagnosis=5`)."""
        shown = [f"{s}={n}" for s, n in self.by_status().items() if n or s in Status.CLOSED]
        if self.skipped_at_diagnosis:
            shown.append(f"skipped_at_diagnosis={self.skipped_at_diagnosis}")
        return " ".join(shown)

"""Proposals: an edit of an offline process before it is applied, and why it was or was not.

Operators and most reason codes belong to an engine (its schema declares
them); the statuses, gate verdicts, the codes of the LLM boundary and of the
shared routing steps, and the gate step itself (`confidence_gate`) are shared
by every engine.
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from enum import StrEnum

from engine.core.node import json_copy


class Status(StrEnum):
    """Where a proposal stands: pending until decided, accepted on its way to being applied, or closed."""

    PENDING = "pending"
    ACCEPTED = "accepted"
    REJECTED = "rejected"
    APPLIED = "applied"
    SKIPPED = "skipped"
    FAILED = "failed"


CLOSED = frozenset((Status.REJECTED, Status.APPLIED, Status.SKIPPED, Status.FAILED))   # nothing more happens to it
# the order counts are shown in
SHOWN = (Status.PENDING, Status.ACCEPTED, Status.APPLIED, Status.REJECTED, Status.SKIPPED, Status.FAILED)


class LLMReason(StrEnum):
    """Reason codes of the LLM boundary, the same for every engine and role."""

    JSON_PARSE_FAIL = "JSON_PARSE_FAIL"
    SCHEMA_FAIL = "SCHEMA_FAIL"
    OUTPUT_TOO_LONG = "OUTPUT_TOO_LONG"          # a field beyond its role's cap (`engine.llm.schemas.CAPS`)
    DUPLICATE_SEGMENTS = "DUPLICATE_SEGMENTS"    # a Split plan that repeats a segment
    LLM_FAIL = "LLM_FAIL"            # backend could not answer (timeout, HTTP error)


REPLY_REFUSED = frozenset((LLMReason.JSON_PARSE_FAIL, LLMReason.SCHEMA_FAIL, LLMReason.OUTPUT_TOO_LONG,
                           LLMReason.DUPLICATE_SEGMENTS))      # a reply came and the boundary refused it


def call_reason_code(code: str | None) -> str:
    """The reason code for a failed LLM call: a refused reply keeps its code, the rest is LLM_FAIL."""
    return code if code in REPLY_REFUSED else LLMReason.LLM_FAIL


class Reason(StrEnum):
    """Reason codes of the routing steps engines share."""

    LOW_CONF = "LOW_CONF"                  # confidence under the gate's threshold (`confidence_gate`)
    DUPLICATE = "DUPLICATE"                # the same edit is already made, or proposed more confidently
    APPLICABLE_FAIL = "APPLICABLE_FAIL"    # a target changed or went earlier in the run


class SharedReasons:
    """Every shared reason code under one roof, for an engine's own codes to extend:
    `class ReasonCode(SharedReasons): NORM_FILTER = "NORM_FILTER"` (its schema's `reason_codes` says which it
    uses and what each means there)."""

    JSON_PARSE_FAIL = LLMReason.JSON_PARSE_FAIL
    SCHEMA_FAIL = LLMReason.SCHEMA_FAIL
    OUTPUT_TOO_LONG = LLMReason.OUTPUT_TOO_LONG
    DUPLICATE_SEGMENTS = LLMReason.DUPLICATE_SEGMENTS
    LLM_FAIL = LLMReason.LLM_FAIL
    LOW_CONF = Reason.LOW_CONF
    DUPLICATE = Reason.DUPLICATE
    APPLICABLE_FAIL = Reason.APPLICABLE_FAIL


class GateVerdict(StrEnum):
    """The gate's decision on a proposal in an automatic run: applied (pass) or skipped (fail)."""

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
    gate: GateVerdict = GateVerdict.PASS
    reason_code: str | None = None
    status: Status = Status.PENDING
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

    def change(self, changes: dict) -> None:
        """Set fields from a `proposal_updated` record's changes (copied; a status or verdict as its enum)."""
        for key, value in _typed(json_copy(changes)).items():
            setattr(self, key, value)

    @classmethod
    def from_dict(cls, data: dict) -> "Proposal":
        return cls(**_typed(json_copy(data)))


def fail_gate(p: Proposal, code: str, note: str, manual: bool) -> None:
    """The gate turns `p` down with `code` and a note saying why: an automatic run skips it, a manual one leaves
    it pending, for a person to decide against the verdict if they see fit."""
    p.gate, p.reason_code, p.note = GateVerdict.FAIL, code, note
    if not manual:
        p.status = Status.SKIPPED


def confidence_gate(p: Proposal, theta: float, manual: bool, name: str = "θ", strict: bool = False) -> bool:
    """The gate step every engine shares: a proposal whose confidence is below `theta` (`strict`: not above it)
    fails with LOW_CONF and the note "confidence 0.42 < θ 0.50" (`name`: what the engine calls the threshold);
    returns whether it passed."""
    if p.confidence > theta if strict else p.confidence >= theta:
        return True
    fail_gate(p, Reason.LOW_CONF, f"confidence {p.confidence:.2f} {'not above' if strict else '<'} {name} {theta:.2f}",
              manual)
    return False


def _typed(fields: dict) -> dict:
    """Stored fields with the status and gate verdict read back into their enums."""
    if "status" in fields:
        fields["status"] = Status(fields["status"])
    if "gate" in fields:
        fields["gate"] = GateVerdict(fields["gate"])
    return fields


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
        by_status = {s.value: sum(p.status == s for p in chosen) for s in SHOWN}
        routed = sum(p.status == Status.SKIPPED and not p.decided_by for p in chosen)
        return cls(**by_status, skipped_at_diagnosis=routed)

    @property
    def total(self) -> int:
        return sum(self.by_status().values())

    def by_status(self) -> dict[str, int]:
        """Every status with its count, zeros included, in `SHOWN` order."""
        return {s.value: getattr(self, s.value) for s in SHOWN}

    def to_dict(self) -> dict[str, int]:
        """Every count, as a run summary stores it."""
        return {**self.by_status(), "skipped_at_diagnosis": self.skipped_at_diagnosis}

    def line(self) -> str:
        """The counts as the CLI prints them: the closed statuses always, pending and accepted when any, and the
        skips made at diagnosis when any (`applied=1 rejected=0 skipped=11 failed=0 skipped_at_diagnosis=5`)."""
        shown = [f"{s}={n}" for s, n in self.by_status().items() if n or s in CLOSED]
        if self.skipped_at_diagnosis:
            shown.append(f"skipped_at_diagnosis={self.skipped_at_diagnosis}")
        return " ".join(shown)

"""Consolidation proposals: an edit before it is applied, and why it was or was not."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field


class Op:
    SPLIT = "split"
    MERGE = "merge"
    UPDATE = "update"
    ORDER = (SPLIT, MERGE, UPDATE)   # fixed execution order (All-Mem Alg. 1)


class Status:
    PENDING = "pending"
    ACCEPTED = "accepted"
    REJECTED = "rejected"
    APPLIED = "applied"
    SKIPPED = "skipped"
    FAILED = "failed"
    CLOSED = (REJECTED, APPLIED, SKIPPED, FAILED)


class ReasonCode:
    """The fail-closed taxonomy of All-Mem App. C.5: one code per drop or skip."""

    JSON_PARSE_FAIL = "JSON_PARSE_FAIL"
    SCHEMA_FAIL = "SCHEMA_FAIL"
    LOW_CONF = "LOW_CONF"
    NORM_FILTER = "NORM_FILTER"
    COH_FAIL = "COH_FAIL"
    APPLICABLE_FAIL = "APPLICABLE_FAIL"
    PLAN_VALIDATION_FAIL = "PLAN_VALIDATION_FAIL"
    DUPLICATE = "DUPLICATE"          # lost intra-queue de-duplication
    OVERLAP = "OVERLAP"              # lost merge overlap resolution
    LLM_FAIL = "LLM_FAIL"            # backend could not answer (timeout, HTTP error)
    ALL = (JSON_PARSE_FAIL, SCHEMA_FAIL, LOW_CONF, NORM_FILTER, COH_FAIL, APPLICABLE_FAIL,
           PLAN_VALIDATION_FAIL, DUPLICATE, OVERLAP, LLM_FAIL)


class GateVerdict:
    PASS = "pass"
    FAIL = "fail"


@dataclass
class Proposal:
    """One diagnosed edit `(op, targets, p)` and its life until applied or dropped.

    Update targets are the ordered pair [current, superseded]. `detail` holds
    figures the decision rests on (merge coherence, target texts' cosines).
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
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "Proposal":
        return cls(**data)

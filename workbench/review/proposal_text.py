"""How a proposal reads: its operator's label, its targets and their roles, its details and gate θ.

Operator labels, target roles (and whether target order matters) and the reason codes with their
descriptions all come from the engine's schema (`state.schema`); the gate θ a proposal was judged against is
in `proposal.detail["threshold"]`. The review queue, the run's proposal table and the audit log all name
proposals through these, so a proposal reads the same in each.
"""
from __future__ import annotations

from engine.core.proposal import CLOSED, Proposal, ProposalCounts, Status
from engine.core.schema import EngineSchema, OperatorSpec


def operator(schema: EngineSchema | None, op: str) -> OperatorSpec | None:
    return schema.operator(op) if schema is not None else None


def op_label(schema: EngineSchema | None, op: str) -> str:
    """The operator's label ("Update"); a step that is not an operator (All-Mem's failed "diagnosis") capitalised."""
    spec = operator(schema, op)
    return spec.label if spec else op.replace("_", " ").capitalize()


def process_operators(schema: EngineSchema | None, process: str | None) -> list[OperatorSpec]:
    """The operators of one process, in the schema's order."""
    if schema is None:
        return []
    return [o for o in schema.operators if process is None or o.process == process]


def reason_description(schema: EngineSchema | None, code: str | None) -> str:
    spec = next((r for r in schema.reason_codes if r.code == code), None) if schema is not None and code else None
    return spec.description if spec else ""


def threshold(p: Proposal) -> float | None:
    """The gate θ this proposal was judged against, as the engine recorded it."""
    value = p.detail.get("threshold")
    return float(value) if isinstance(value, (int, float)) else None


def process_label(schema: EngineSchema | None, run) -> str:
    """The name of the offline process a run belongs to ("Off-peak steward", "Consolidation (ATC)"), from the
    schema."""
    spec = schema.process(run.process) if schema is not None and run.process else None
    return spec.label if spec else "Consolidation"


RUN_MODES = {"auto": "scheduled", "manual": "manual"}      # a run's mode as the log stores it, in words


def run_label(schema: EngineSchema | None, run, status: str | None = None) -> str:
    """A run as the pages name it: "run-0002 · Off-peak steward, manual run at turn 30 · committed"."""
    return (f"{run.run_id} · {process_label(schema, run)}, {RUN_MODES.get(run.mode, run.mode)} run at turn "
            f"{run.turn} · {status or run.status}")


def target_roles(schema: EngineSchema | None, p: Proposal) -> list[str]:
    """What each target is to the operator ("current (kept, …)", "superseded (archived on apply)")."""
    spec = operator(schema, p.op)
    return [spec.role(i) if spec else "diagnosed target" for i in range(len(p.targets))]


def targets_label(schema: EngineSchema | None, p: Proposal) -> str:
    """`u7 → u3` when target order matters to the operator, `u3, u7` when it does not."""
    spec = operator(schema, p.op)
    ids = [f"u{t}" for t in p.targets]
    return " → ".join(ids) if spec is not None and spec.ordered_targets else ", ".join(ids)


def is_structural(schema: EngineSchema | None, p: Proposal) -> bool:
    """A proposal of an edge type the schema calls structural (it follows from the timeline alone)."""
    spec = schema.edge_type(p.detail.get("type")) if schema is not None and isinstance(p.detail.get("type"), str) \
        else None
    return bool(spec and spec.structural)


def detail_labels(p: Proposal) -> list[str]:
    """The proposal's text details (a relation's type): what the queue can be filtered by."""
    return [v for k, v in p.detail.items() if k != "threshold" and isinstance(v, str) and v]


def detail_text(p: Proposal) -> str:
    """The proposal's own details besides the gate θ, in one line ("CAUSAL_FOLLOW", "cosine 0.820")."""
    parts = []
    for key, value in p.detail.items():
        if key == "threshold" or isinstance(value, bool):
            continue
        if isinstance(value, str):
            parts.append(value)
        elif isinstance(value, (int, float)):
            parts.append(f"{key.replace('_', ' ')} {value:.3f}")
    return " · ".join(parts)


def counts_text(counts: ProposalCounts) -> str:
    """A run's proposals in words, from the one count the CLI and every page use: "1 applied, 0 rejected, 11 skipped
    (5 at diagnosis), 0 failed", with pending and accepted ones named only when there are any."""
    parts = []
    for status, n in counts.by_status().items():
        if n or status in CLOSED:
            at = f" ({counts.skipped_at_diagnosis} at diagnosis)" if status == Status.SKIPPED \
                and counts.skipped_at_diagnosis else ""
            parts.append(f"{n} {status}{at}")
    return ", ".join(parts)


def sources_text(ids: list[str], limit: int = 6) -> str:
    """Source ids, shortened for a long group: "D1:1, D1:2, … D1:14 (14)"."""
    if len(ids) <= limit:
        return ", ".join(ids)
    return f"{', '.join(ids[:limit - 2])}, … {ids[-1]} ({len(ids)})"

"""Events: groups of units with a lifecycle (MemLoom FSM). Used by event-based engines."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field


class EventState:
    PROVISIONAL = "provisional"
    ACTIVE = "active"
    CLOSED = "closed"
    ARCHIVED = "archived"
    ORDER = (PROVISIONAL, ACTIVE, CLOSED, ARCHIVED)


@dataclass
class Event:
    id: int
    state: str = EventState.PROVISIONAL
    unit_ids: list[int] = field(default_factory=list)
    evidence_count: int = 0
    participants: dict[str, int] = field(default_factory=dict)
    token_mass: int = 0
    created_turn: int = 0

    def to_dict(self) -> dict:
        return asdict(self)

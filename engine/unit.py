"""The memory unit: immutable raw evidence plus regenerable descriptors."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field


class UnitKind:
    TURN = "turn"
    MERGED = "merged"
    SPLIT_PART = "split-part"
    ALL = (TURN, MERGED, SPLIT_PART, "sentence", "event", "episode", "fact", "topic")


@dataclass
class Unit:
    """A memory item (DESIGN §2).

    `raw` is the evidence c and never changes after creation; `summary` and
    `keywords` are the regenerable descriptor whose embedding is the index
    vector. `source_ids` are the dataset turn ids the unit derives from: the
    provenance pointers retrieval reports.
    """

    id: int
    raw: str
    summary: str
    keywords: list[str]
    time: str
    kind: str
    source_ids: list[str]
    speakers: list[str] = field(default_factory=list)
    session: str = ""
    visible: bool = True
    created_turn: int = 0
    made_by: str = "online"

    @property
    def label(self) -> str:
        return f"u{self.id}"

    @property
    def embed_text(self) -> str:
        """The string whose embedding is z: summary ‖ keywords."""
        return f"{self.summary} || {', '.join(self.keywords)}"

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "Unit":
        return cls(**data)

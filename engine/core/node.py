"""Nodes: every item of memory (a turn unit, a split part, an event, a topic, a fact).

`raw` is the evidence c and never changes after creation; `summary` and
`keywords` are the regenerable descriptor whose embedding is the index vector.
`status` is a lifecycle status declared by the engine's schema; `visible` is
derived from it by the fold (is the status on the retrieval surface?) and is
not part of the logged payload. `source_ids` are the dataset turn ids the node
derives from: the provenance pointers retrieval reports. Group nodes (events,
episodes, topics) list their evidence nodes in `members` and keep their
statistics in `attrs` (JSON values only).
"""
from __future__ import annotations

import copy
from dataclasses import dataclass, field

TURN_KIND = "turn"       # the node kind every engine makes for an ingested dataset turn


_SCALARS = frozenset((str, int, float, bool, type(None)))


def json_copy(value):
    """A deep copy of a JSON value (dicts, lists, scalars), as `copy.deepcopy` makes it without its memo and
    dispatch: node attributes and member lists are copied on every update and checkpoint."""
    kind = type(value)
    if kind is dict:
        return {k: v if type(v) in _SCALARS else json_copy(v) for k, v in value.items()}
    if kind is list:
        return [v if type(v) in _SCALARS else json_copy(v) for v in value]
    if kind in _SCALARS:
        return value
    return copy.deepcopy(value)


def node_label(node_id: int) -> str:
    """A node's id as every page and JSON output writes it: "u4"."""
    return f"u{node_id}"


def node_id_of(value) -> int:
    """A node id as an LLM or a plan writes it ("12", "u12", 12); -1 when it is none."""
    text = str(value).strip().lstrip("u")
    return int(text) if text.isdigit() else -1


@dataclass
class Node:
    id: int
    raw: str
    summary: str
    keywords: list[str]
    time: str
    kind: str
    source_ids: list[str]
    speakers: list[str] = field(default_factory=list)
    session: str = ""
    status: str = ""
    created_turn: int = 0
    made_by: str = "online"
    members: list[int] = field(default_factory=list)
    attrs: dict = field(default_factory=dict)
    visible: bool = True

    @property
    def label(self) -> str:
        return node_label(self.id)

    @property
    def embed_text(self) -> str:
        """The string whose embedding is z: summary ‖ keywords."""
        return f"{self.summary} || {', '.join(self.keywords)}"

    def to_dict(self) -> dict:
        """Every field, as `dataclasses.asdict` gives them (lists and attrs copied), in field order; written out
        because asdict's generic recursion is most of the cost of a checkpoint or a state copy."""
        return {"id": self.id, "raw": self.raw, "summary": self.summary, "keywords": list(self.keywords),
                "time": self.time, "kind": self.kind, "source_ids": list(self.source_ids),
                "speakers": list(self.speakers), "session": self.session, "status": self.status,
                "created_turn": self.created_turn, "made_by": self.made_by, "members": list(self.members),
                "attrs": json_copy(self.attrs), "visible": self.visible}

    def payload(self) -> dict:
        """What the log stores: everything but the derived `visible`."""
        data = self.to_dict()
        data.pop("visible")
        return data

    def copy(self) -> "Node":
        """An independent copy (its lists and attrs are its own)."""
        return Node(**self.to_dict())

    @classmethod
    def from_dict(cls, data: dict) -> "Node":
        names = cls.__dataclass_fields__
        return cls(**{k: json_copy(v) for k, v in data.items() if k in names})


def parse_id(value) -> int | None:
    """A node reference as a model writes it ("u12", "12" or 12) as an id; None if it names no id."""
    text = str(value).strip()
    text = text[1:] if text[:1] in ("u", "U") else text
    return int(text) if text.isdigit() else None


Unit = Node     # the All-Mem paper's word for a node; kept so engine code reads like the paper

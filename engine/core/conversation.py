"""Dataset-side records: a conversation is turns plus the questions asked about it (and, in a decision set,
the consolidation decisions labelled on it).

Every loader (LoCoMo, JSONL, LongMemEval) produces these, so engines and the
workbench never see a dataset's own layout.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field

from engine.core.decision import Decision

IMAGE_NOTE = " [shares an image: "     # opens the note a turn's raw text carries for a shared image


@dataclass(frozen=True)
class Turn:
    """One utterance as the dataset gives it.

    `id` is the dataset's own pointer (LoCoMo `dia_id` such as ``D3:7``); it is
    what provenance and gold evidence refer to. `time` is the dataset's time
    as ISO 8601 (``2023-05-08T13:56:00``), never wall-clock. `index` is the
    position in conversation order and breaks ties between equal times.
    """

    id: str
    speaker: str
    text: str
    time: str
    session: str
    index: int
    image_caption: str | None = None

    @property
    def raw(self) -> str:
        """The immutable evidence string a unit stores for this turn."""
        text = f"{self.speaker}: {self.text}"
        if self.image_caption:
            text += f"{IMAGE_NOTE}{self.image_caption}]"
        return text

    @property
    def content_hash(self) -> str:
        """SHA-256 of what the turn says and when (speaker, text, time, session, image caption).

        Stored with each ingested turn, so a replay into an existing memory can tell that the file's
        turn is no longer the one the memory was built from."""
        blob = json.dumps([self.speaker, self.text, self.time, self.session, self.image_caption])
        return hashlib.sha256(blob.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class Question:
    """A question about the conversation with turn-level gold evidence when known."""

    id: str
    question: str
    answer: str | None
    evidence: tuple[str, ...] = ()
    category: int | None = None
    time: str | None = None


@dataclass
class Conversation:
    id: str
    turns: list[Turn]
    questions: list[Question] = field(default_factory=list)
    speakers: tuple[str, ...] = ()
    source: str = ""
    decisions: list[Decision] = field(default_factory=list)     # labelled consolidation decisions (a decision set)

    @property
    def sessions(self) -> list[str]:
        seen: dict[str, None] = {}
        for t in self.turns:
            seen.setdefault(t.session, None)
        return list(seen)

    def turn_ids(self) -> set[str]:
        return {t.id for t in self.turns}

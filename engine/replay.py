"""Replaying a conversation into an engine on a consolidation schedule."""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable

from engine.conversation import Conversation, Turn


@dataclass(frozen=True)
class Schedule:
    """When an engine's scheduled offline processes run: every N sessions (All-Mem default 3), every N
    turns, or never (manual)."""

    kind: str          # "sessions" | "turns" | "manual"
    every: int = 0

    @classmethod
    def parse(cls, text: str) -> "Schedule":
        if text == "manual":
            return cls("manual")
        m = re.fullmatch(r"every-(\d+)-(sessions?|turns?)", text)
        if not m or int(m.group(1)) < 1:
            raise ValueError(f"bad consolidation schedule {text!r}: use every-3-sessions, every-N-turns or manual")
        return cls("sessions" if m.group(2).startswith("session") else "turns", int(m.group(1)))

    def due_before(self, turns: list[Turn], i: int) -> bool:
        """Is a run due before ingesting turns[i]? (a session boundary closing every N-th session)"""
        if self.kind != "sessions" or i == 0 or turns[i].session == turns[i - 1].session:
            return False
        closed = sum(1 for j in range(1, i + 1) if turns[j].session != turns[j - 1].session)
        return closed % self.every == 0

    def due_after(self, ingested: int) -> bool:
        return self.kind == "turns" and ingested % self.every == 0


@dataclass
class ReplaySummary:
    turns: int
    units: int
    visible: int
    archived: int
    statuses: dict[str, int]
    edges: dict[str, int]
    applied: int
    skipped: int
    failed: int
    runs: int

    def line(self) -> str:
        edges = " ".join(f"{k}={v}" for k, v in self.edges.items()) or "none"
        statuses = " ".join(f"{k}={v}" for k, v in self.statuses.items())
        return (f"turns={self.turns} units={self.units} visible={self.visible} archived={self.archived} "
                f"status[{statuses}] "
                f"edges[{edges}] proposals applied={self.applied} skipped={self.skipped} failed={self.failed} "
                f"runs={self.runs}")


def step(engine, conversation: Conversation, schedule: Schedule):
    """Ingest the next turn of `conversation`, running the engine's scheduled processes first or after when due; returns the ingest report."""
    turns = conversation.turns
    i = engine.state.turn
    if i >= len(turns):
        return None
    if schedule.due_before(turns, i):
        engine.run_scheduled()
    report = engine.ingest(turns[i])
    if schedule.due_after(i + 1):
        engine.run_scheduled()
    return report


def replay(engine, conversation: Conversation, schedule: Schedule,
           progress: Callable[[int, int], None] | None = None) -> ReplaySummary:
    """Ingest every remaining turn in time order; a final run consolidates what is left (unless manual)."""
    total = len(conversation.turns)
    engine.prefetch(conversation.turns[engine.state.turn:])
    while engine.state.turn < total:
        step(engine, conversation, schedule)
        if progress:
            progress(engine.state.turn, total)
    if schedule.kind != "manual":
        engine.run_scheduled()
    return summarize(engine)


def summarize(engine) -> ReplaySummary:
    st = engine.state
    statuses = [p.status for p in st.proposals.values()]
    return ReplaySummary(turns=st.turn, units=len(st.units), visible=len(st.visible_ids),
                         archived=len(st.archived_ids), statuses=st.status_counts(), edges=st.edge_counts(),
                         applied=statuses.count("applied"), skipped=statuses.count("skipped"), failed=statuses.count("failed"), runs=len(st.runs))

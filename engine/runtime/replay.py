"""Replaying a conversation into an engine on a consolidation schedule."""
from __future__ import annotations

import re
import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Callable, Iterator

from engine.core.conversation import Conversation, Turn
from engine.core.errors import WorkbenchError
from engine.core.oplog import OpKind
from engine.core.proposal import ProposalCounts
from engine.runtime.collector import batch_pace
from engine.runtime.engine import open_run_message
from engine.runtime.errors import RunError


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
    off_surface: int           # nodes off the retrieval surface, whatever their status (`statuses` has "archived")
    statuses: dict[str, int]
    edges: dict[str, int]
    proposals: ProposalCounts
    runs: int
    ingested: int = 0          # turns this replay ingested (fewer than `turns` when resumed or shared)
    others: int = 0            # records other writers committed while it ran

    def line(self) -> str:
        edges = " ".join(f"{k}={v}" for k, v in self.edges.items()) or "none"
        statuses = " ".join(f"{k}={v}" for k, v in self.statuses.items())
        return (f"turns={self.turns} units={self.units} visible={self.visible} off_surface={self.off_surface} "
                f"status[{statuses}] "
                f"edges[{edges}] proposals {self.proposals.line()} runs={self.runs}" + self.share_note())

    def share_note(self) -> str:
        """Said when this replay did not make the whole memory: it resumed one, or shared it with other writers."""
        if self.ingested == self.turns and not self.others:
            return ""
        others = f"; other writers added {self.others} records meanwhile" if self.others else ""
        return f" (this replay ingested {self.ingested} turns{others})"


class ReplayMismatch(WorkbenchError, ValueError):
    """The memory was built from other turns than the conversation now holds."""


def check_replayable(engine, conversation: Conversation) -> None:
    """Refuse to continue a memory from a conversation that no longer matches what it ingested.

    Replay resumes at position `engine.state.turn` of the file, so every turn before it must be the stored
    one: same conversation, same turn id at the same position and, where the `turn_ingested` record carries
    one, the same content hash (records written before hashes were stored are not compared). Raises before
    anything is ingested, naming the first turn that differs.
    """
    store = engine.store
    stored_conversation = store.get_meta("conversation")
    if stored_conversation and stored_conversation != conversation.id:
        raise ReplayMismatch(f"{store.location} holds conversation {stored_conversation!r}, not "
                             f"{conversation.id!r}; replay into a new database")
    stored = [op.payload for op in store.ops(kinds=[OpKind.TURN_INGESTED])]
    problem = _first_difference(stored, conversation.turns)
    if problem:
        source = conversation.source or conversation.id
        raise ReplayMismatch(f"{store.location} was built from other turns than {source} now holds: {problem}; "
                             "nothing was ingested (replay into a new database, or restore the file)")


def _first_difference(stored: list[dict], turns: list[Turn]) -> str | None:
    """What differs first between the stored `turn_ingested` payloads and the conversation's turns, if anything."""
    for position, record in enumerate(stored):
        turn_id, place = record["turn_id"], f"turn {position + 1}"
        if position >= len(turns):
            return (f"stored turn {turn_id} ({place}) is not in the file, which has {len(turns)} turns "
                    f"where the memory holds {len(stored)}")
        turn = turns[position]
        if turn.id != turn_id:
            if any(t.id == turn_id for t in turns):
                return f"turn order differs at {place}: the memory has {turn_id} there, the file {turn.id}"
            return f"stored turn {turn_id} ({place}) is no longer in the file, which has {turn.id} there"
        if record.get("sha256") not in (None, turn.content_hash):
            return f"turn {turn_id} ({place}) content differs from the stored turn"
    return None


def step(engine, conversation: Conversation, schedule: Schedule, timings: dict[str, float] | None = None):
    """Ingest the next turn of `conversation`, running the engine's scheduled processes first or after when due;
    returns the ingest report (None when every turn is in memory).

    One transaction under the write lock: a crash leaves either the whole step or none of it, so a resumed
    replay runs a due consolidation again rather than skipping it. When another process wrote since this
    engine last looked, the step continues from the stored log (after checking it still matches the file).
    `timings`, when given, receives the milliseconds of the ingest (`ingest`) and of any scheduled run
    (`offline`), for a benchmark's insert latency per stage.
    """
    seen = engine.others_records
    with engine.writing():
        if engine.others_records != seen:
            check_replayable(engine, conversation)
        turns = conversation.turns
        i = engine.state.turn
        if i >= len(turns):
            return None
        clock = _Clock(timings)
        if schedule.due_before(turns, i):
            with clock("offline"):
                engine.run_scheduled()
        with clock("ingest"):
            report = engine.ingest(turns[i])
        if schedule.due_after(i + 1):
            with clock("offline"):
                engine.run_scheduled()
        return report


class _Clock:
    """Adds the milliseconds of each timed block to `timings[stage]` (nothing when `timings` is None)."""

    def __init__(self, timings: dict[str, float] | None):
        self.timings = timings

    @contextmanager
    def __call__(self, stage: str) -> Iterator[None]:
        if self.timings is None:
            yield
            return
        started = time.perf_counter()
        try:
            yield
        finally:
            self.timings[stage] = self.timings.get(stage, 0.0) + (time.perf_counter() - started) * 1e3


PREFETCH_BATCH = 64          # turns embedded per batch before stepping, so progress can be shown between


def prefetch_turns(engine, turns: list[Turn], progress: Callable[[int, int], None] | None = None) -> None:
    """Embed what ingesting `turns` will need before stepping through them, `PREFETCH_BATCH` turns at a time
    sorted by length (like lengths batch with little padding), calling `workbench.replay.progress(done, total)` after each
    batch; an exception from it stops before the next batch."""
    todo = sorted(turns, key=lambda t: (len(t.raw), t.index))
    for start in range(0, len(todo), PREFETCH_BATCH):
        engine.prefetch(todo[start:start + PREFETCH_BATCH])
        if progress:
            progress(min(start + PREFETCH_BATCH, len(todo)), len(todo))


def replay(engine, conversation: Conversation, schedule: Schedule,
           progress: Callable[[int, int], None] | None = None) -> ReplaySummary:
    """Ingest every remaining turn in time order; the engine's end of stream consolidates what is left (unless manual).

    The turns already in memory must be the conversation's (`check_replayable`), and no run may be open
    (a scheduled consolidation could not run). Another process may write to the same database meanwhile:
    each step continues from the stored log, and the summary says how many turns this call ingested."""
    check_replayable(engine, conversation)
    if schedule.kind != "manual" and engine.open_run():
        raise RunError(open_run_message(engine.state, engine.open_run(), engine.store.location))
    total = len(conversation.turns)
    engine.prefetch(conversation.turns[engine.state.turn:])
    ingested, others = 0, engine.others_records
    with batch_pace():
        while engine.state.turn < total:
            if step(engine, conversation, schedule) is not None:
                ingested += 1
            if progress:
                progress(engine.state.turn, total)
        if schedule.kind != "manual":
            engine.end_of_stream()
    return summarize(engine, ingested=ingested, others=engine.others_records - others)


def summarize(engine, ingested: int | None = None, others: int = 0) -> ReplaySummary:
    st = engine.state
    return ReplaySummary(turns=st.turn, units=len(st.units), visible=len(st.visible_ids),
                         off_surface=len(st.archived_ids), statuses=st.status_counts(), edges=st.edge_counts(),
                         proposals=ProposalCounts.of(st.proposals.values()), runs=len(st.runs),
                         ingested=st.turn if ingested is None else ingested, others=others)

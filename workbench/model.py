"""The workbench's session model: what is loaded, where the cursor is, and how stepping works.

Plain Python (no Streamlit) so it can be tested directly. Every page reads the
same `Workbench`: source, conversation, engine, settings and the current turn.

Stepping semantics: the engine's log may run ahead of the cursor. `next` when
the cursor is behind the log only moves the cursor (the view is a fold of the
log); at the head of the log it ingests the next turn. `back` and `jump` fold
the log to the target turn instead of re-running anything. An edit while the
cursor is behind the head (say, consolidating at turn 20 when the log is at
40) branches: the log up to the cursor is copied into a new database and the
edit happens there, so the original history stays intact.
"""
from __future__ import annotations

import itertools
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from engine.allmem import AllMemEngine
from engine.conversation import Conversation
from engine.embedder import Embedder
from engine.loaders import load_conversation, load_conversations
from engine.replay import Schedule, step
from engine.session import open_session

ROOT = Path(__file__).resolve().parents[1]
DEMO_PATH = ROOT / "datasets" / "demo" / "demo.jsonl"
LOCOMO_PATH = ROOT.parent / "shared" / "data" / "locomo" / "locomo-dev8.json"
UPLOAD_LIMIT_BYTES = 20 * 1024 * 1024
_COUNTER = itertools.count(1)


@dataclass
class Workbench:
    source_label: str
    source_path: Path
    conversation: Conversation
    engine: AllMemEngine
    schedule: Schedule
    db_path: Path
    cursor: int = 0                       # turns visible in the view (0 = nothing ingested)
    last_ingest: object | None = None     # IngestReport of the most recent step forward
    last_run: object | None = None        # RunReport of the most recent consolidation apply
    branches: list[Path] = field(default_factory=list)
    _view: AllMemEngine | None = None
    _view_turn: int = -1

    # -- construction ---------------------------------------------------------------
    @classmethod
    def open(cls, path: Path, conversation_id: str | None = None, label: str | None = None,
             schedule: str = "manual", settings: dict | None = None, llm: str = "offline",
             workdir: Path | None = None, embedder: Embedder | None = None) -> "Workbench":
        conversation = load_conversation(path, conversation_id)
        workdir = workdir or Path(tempfile.mkdtemp(prefix="memwb-"))
        db = workdir / f"{_safe(conversation.id)}-{next(_COUNTER)}.sqlite"
        engine = open_session(db, llm=llm, settings=settings, conversation=conversation.id, source=str(path),
                              schedule=schedule, embedder=embedder)
        wb = cls(source_label=label or Path(path).name, source_path=Path(path), conversation=conversation,
                 engine=engine, schedule=Schedule.parse(schedule), db_path=db)
        return wb

    @classmethod
    def demo(cls, **kwargs) -> "Workbench":
        """The conversation a fresh session opens on; MEMWB_DEMO names another single-conversation file."""
        path = Path(os.environ.get("MEMWB_DEMO", DEMO_PATH))
        return cls.open(path, None, label="bundled demo" if path == DEMO_PATH else path.name, **kwargs)

    # -- the view at the cursor ---------------------------------------------------------
    @property
    def head(self) -> int:
        """Turns ingested in the log (the cursor can be at most this)."""
        return self.engine.state.turn

    @property
    def at_head(self) -> bool:
        return self.cursor >= self.head

    @property
    def view(self) -> AllMemEngine:
        """The engine as of the cursor: the live engine at the head, a fold of the log behind it."""
        if self.at_head:
            return self.engine
        if self._view is None or self._view_turn != self.cursor:
            self._view, self._view_turn = self.engine.at(upto_turn=self.cursor), self.cursor
        return self._view

    @property
    def total_turns(self) -> int:
        return len(self.conversation.turns)

    @property
    def current_turn(self):
        return self.conversation.turns[self.cursor - 1] if self.cursor else None

    # -- stepping -------------------------------------------------------------------------
    def _check_no_open_run(self) -> None:
        """Ingesting while proposals await review would mix new turns into that run's diff."""
        run = self.engine.open_run()
        if run:
            raise RuntimeError(f"{run} has proposals waiting for a decision: apply it on the Consolidation page "
                               "before ingesting more turns")

    def next(self) -> None:
        if self.cursor < self.head:
            self.cursor += 1
            self.last_ingest = None
            return
        if self.head >= self.total_turns:
            return
        self._check_no_open_run()
        self.last_ingest = step(self.engine, self.conversation, self.schedule)
        self.cursor = self.head

    def back(self) -> None:
        self.cursor = max(0, self.cursor - 1)
        self.last_ingest = None

    def jump(self, turn: int) -> None:
        """Move the cursor to `turn` (1-based count of turns seen), ingesting if it is past the head."""
        turn = max(0, min(turn, self.total_turns))
        if turn <= self.head:
            self.cursor = turn
            self.last_ingest = None
            return
        self._check_no_open_run()
        self.cursor = self.head
        self.engine.prefetch(self.conversation.turns[self.head:turn])
        while self.head < turn:
            self.last_ingest = step(self.engine, self.conversation, self.schedule)
        self.cursor = self.head

    def jump_to_session(self, session: str) -> None:
        """Cursor to the first turn of `session` (so that turn is the one just ingested)."""
        index = next(i for i, t in enumerate(self.conversation.turns) if t.session == session)
        self.jump(index + 1)

    def play_to_session_end(self) -> None:
        """Ingest through the last turn of the session the next turn belongs to."""
        if self.cursor >= self.total_turns:
            return
        current = self.conversation.turns[self.cursor].session
        self.jump(max(i for i, t in enumerate(self.conversation.turns) if t.session == current) + 1)

    def ensure_head(self) -> None:
        """Before an edit: if the cursor is behind the head, branch the log at the cursor."""
        if self.at_head:
            return
        seq = self.engine.store.last_seq(upto_turn=self.cursor)
        target = self.db_path.with_name(f"{self.db_path.stem}-branch{next(_COUNTER)}.sqlite")
        self.engine.store.branch(target, seq)
        self.branches.append(self.db_path)
        self.engine = open_session(target, embedder=self.engine.embedder)
        self.db_path = target
        self._view = None

    def reload(self) -> None:
        """Invalidate cached views after the engine changed."""
        self._view, self._view_turn = None, -1


def list_conversations(path: Path) -> list[str]:
    return [c.id for c in load_conversations(path)]


def _safe(text: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_" else "_" for ch in text)[:40] or "conversation"

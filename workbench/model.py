"""The workbench's session model: what is loaded, where the cursor is, and how stepping works.

Plain Python (no Streamlit) so it can be tested directly. Every page reads the
same `Workbench`: source, conversation, engine, settings and the current turn.
The engine is any registered one (`engine.engines.known_engines()`), reached
only through the engine interface and its schema.

Stepping semantics: the engine's log may run ahead of the cursor. `next` when
the cursor is behind the log only moves the cursor (the view is a fold of the
log); at the head of the log it ingests the next turn. `back` and `jump` fold
the log to the target turn instead of re-running anything. An edit while the
cursor is behind the head (say, consolidating at turn 20 when the log is at
40) branches: the log up to the cursor is copied into a new database and the
edit happens there, so the original history stays intact.

Session databases (branches too) go into the workspace's sessions folder
(`engine.store.workspace.sessions_dir`), where the session picker lists them; a
branch's meta names its parent session. `Workbench.resume` reopens any of them.
"""
from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from engine.bench.talk import FIT_META
from engine.core.conversation import Conversation
from engine.engines import engine_class, engine_schema, known_engines
from engine.llm.embedder import Embedder
from engine.loaders import load_conversation, load_conversations
from engine.runtime.engine import BaseEngine
from engine.runtime.errors import RunError
from engine.runtime.replay import Schedule, check_replayable, prefetch_turns, step
from engine.session import DEFAULT_ENGINE, SessionError, open_session, scratch_engine
from engine.store.catalog import OWNER, PARENT, mark_opened, new_session_path, read_session, session_name
from engine.store.data_paths import shared_data

ROOT = Path(__file__).resolve().parents[1]
DEMO_PATH = ROOT / "datasets" / "demo" / "demo.jsonl"
LOCOMO_PATH = shared_data() / "locomo" / "locomo-dev8.json"
UPLOAD_LIMIT_BYTES = 20 * 1024 * 1024
PEERS_KEPT = 3                        # scratch peer engines cached per workbench



def demo_choice() -> tuple[Path, str, str]:
    """The demo a fresh session opens: its file, engine and label (MEMWB_DEMO and MEMWB_ENGINE override)."""
    path = Path(os.environ.get("MEMWB_DEMO", DEMO_PATH))
    return path, os.environ.get("MEMWB_ENGINE") or DEFAULT_ENGINE, "bundled demo" if path == DEMO_PATH else path.name

@dataclass(frozen=True)
class JumpProgress:
    """Where a jump is: embedding its turn texts, then ingesting them one committed step at a time."""

    phase: str            # "embedding" | "ingesting"
    done: int             # texts embedded, or turns ingested, by this jump so far
    total: int            # of this phase
    cursor: int           # the cursor now (the last completed turn)
    target: int           # the cursor the jump goes to


class JumpCancelled(Exception):
    """A jump stopped on request (`Workbench.cancel`) between two committed steps."""


@dataclass
class Workbench:
    source_label: str
    source_path: Path
    conversation: Conversation
    engine: BaseEngine
    schedule: Schedule
    db_path: Path
    workdir: Path | None = None           # where this workbench's new databases go (None: the workspace)
    cursor: int = 0                       # turns visible in the view (0 = nothing ingested)
    last_ingest: object | None = None     # IngestReport of the most recent step forward
    last_run: object | None = None        # RunReport of the most recent consolidation apply
    branches: list[Path] = field(default_factory=list)
    _view: BaseEngine | None = None
    _view_turn: int = -1
    _peers: dict = field(default_factory=dict)     # (engine name, cursor) -> scratch engine
    _stepping: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)
    _cancel: threading.Event = field(default_factory=threading.Event, repr=False, compare=False)

    # -- construction ---------------------------------------------------------------
    @classmethod
    def open(cls, path: Path, conversation_id: str | None = None, engine: str = DEFAULT_ENGINE,
             label: str | None = None, schedule: str = "manual", settings: dict | None = None,
             llm: str = "offline", workdir: Path | None = None, embedder: Embedder | None = None,
             owner: str | None = None, fit: str | None = None) -> "Workbench":
        """Load a conversation and open a new database for `engine` (any registered engine name) in `workdir`,
        the workspace's sessions folder by default, owned by `owner` (the identity that loaded it); `fit` names the
        kind of talk whose fit the settings and schedule carry (`engine.bench.talk`), stored for the header.

        An engine without offline processes never consolidates, so its schedule is always manual.
        """
        conversation = load_conversation(path, conversation_id)
        if not engine_schema(engine).processes:
            schedule = "manual"
        Schedule.parse(schedule)                  # a bad schedule or settings fail before any file is made
        engine_class(engine).Settings.from_dict(settings or {})
        label = label or Path(path).name
        db = new_session_path(f"{_safe(conversation.id)}-{engine}", workdir)
        opened = open_session(db, engine=engine, llm=llm, settings=settings, conversation=conversation.id,
                              source=str(Path(path).resolve()), schedule=schedule, label=label, embedder=embedder,
                              **({OWNER: owner} if owner else {}), **({FIT_META: fit} if fit else {}))
        check_replayable(opened, conversation)        # stepping resumes at the log's head: same turns before it
        mark_opened(opened.store)
        return cls(source_label=label, source_path=Path(path), conversation=conversation, engine=opened,
                   schedule=Schedule.parse(schedule), db_path=db, workdir=workdir)

    @classmethod
    def resume(cls, db: Path, embedder: Embedder | None = None, workdir: Path | None = None) -> "Workbench":
        """Reopen a session database at its log head: source file, conversation, engine and schedule come from
        its meta. Raises `SessionError` naming what is missing (the database, or the source file it was
        replayed from); the database is not changed then."""
        db = Path(db)
        if not db.is_file():
            raise SessionError(f"no session database at {db}")
        problem = read_session(db).problem            # read-only: a foreign file is refused untouched
        if problem:
            raise SessionError(f"cannot open {db}: {problem}")
        engine = open_session(db, create=False, embedder=embedder)
        meta = engine.store.meta()
        source, conversation_id = meta.get("source"), meta.get("conversation")
        if not source or not conversation_id:
            raise SessionError(f"{db.name} does not record the source file and conversation it was replayed from, "
                               "so the workbench cannot show it")
        if not Path(source).is_file():
            raise SessionError(f"{db.name} was replayed from {source}, which is gone; put the file back there "
                               "to open this session")
        conversation = load_conversation(Path(source), conversation_id)
        check_replayable(engine, conversation)
        mark_opened(engine.store)
        schedule = Schedule.parse(meta.get("schedule") or "manual") if engine.processes() else Schedule.parse("manual")
        wb = cls(source_label=meta.get("label") or Path(source).name, source_path=Path(source),
                 conversation=conversation, engine=engine, schedule=schedule, db_path=db, workdir=workdir)
        wb.cursor = wb.head
        return wb

    @classmethod
    def demo(cls, **kwargs) -> "Workbench":
        """The conversation a fresh session opens on; MEMWB_DEMO names another single-conversation file
        and MEMWB_ENGINE another engine."""
        path, engine, label = demo_choice()
        kwargs.setdefault("engine", engine)
        return cls.open(path, None, label=label, **kwargs)

    @property
    def owner(self) -> str | None:
        """Who loaded this session (or made this branch); None for one made outside the workbench."""
        return self.engine.store.meta().get(OWNER)

    @property
    def fit(self) -> str | None:
        """The kind of talk whose fit this session was replayed with ("meetings"); None for the defaults."""
        return self.engine.store.meta().get(FIT_META)

    @property
    def session_name(self) -> str | None:
        """The database's name in the workspace's sessions folder (what a link carries); None elsewhere."""
        return session_name(self.db_path)

    # -- what the engine is ---------------------------------------------------------
    @property
    def engine_name(self) -> str:
        return self.engine.name

    @property
    def schema(self):
        """The engine's EngineSchema: kinds, statuses, edge types, processes, operators, stages."""
        return self.engine.schema

    @property
    def has_processes(self) -> bool:
        return bool(self.engine.processes())

    @property
    def schedule_name(self) -> str:
        """The schedule as the session's meta stores it and `Schedule.parse` reads it ("every-3-sessions")."""
        s = self.schedule
        return "manual" if s.kind == "manual" else f"every-{s.every}-{s.kind}"

    @property
    def schedule_text(self) -> str:
        """The schedule for people: "manual", "every 3 sessions", "every 10 turns"."""
        return self.schedule_name.replace("-", " ")

    # -- the view at the cursor ---------------------------------------------------------
    @property
    def head(self) -> int:
        """Turns ingested in the log (the cursor can be at most this)."""
        return self.engine.state.turn

    @property
    def at_head(self) -> bool:
        return self.cursor >= self.head

    @property
    def view(self) -> BaseEngine:
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
            raise RunError(f"{run} has proposals waiting for a decision: decide them, or defer the rest, on the "
                               "Consolidation page before ingesting more turns")

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

    def jump(self, turn: int, progress: Callable[[JumpProgress], None] | None = None) -> None:
        """Move the cursor to `turn` (1-based count of turns seen), ingesting if it is past the head.

        The jump's turn texts are embedded first, in batches, then each turn is one committed step; the cursor
        follows every step, so an interruption between steps (an exception from `workbench.replay.progress`, which is called
        after each batch and each step, or `cancel` from another thread) leaves the cursor on the last completed
        turn and loses nothing."""
        turn = max(0, min(turn, self.total_turns))
        if turn <= self.head:
            self.cursor = turn
            self.last_ingest = None
            return
        with self._stepping:                     # one jump at a time (a page run may outlive the click that ends it)
            self._check_no_open_run()
            self.cursor = self.head

            def embedded(done: int, total: int) -> None:
                if progress:
                    progress(JumpProgress("embedding", done, total, self.cursor, turn))
                self._stop_if_cancelled()

            self._stop_if_cancelled()
            prefetch_turns(self.engine, self.conversation.turns[self.head:turn], embedded)
            first = self.head
            while self.head < turn:
                self._stop_if_cancelled()
                self.last_ingest = step(self.engine, self.conversation, self.schedule)
                self.cursor = self.head
                if progress:
                    progress(JumpProgress("ingesting", self.head - first, turn - first, self.cursor, turn))

    def _stop_if_cancelled(self) -> None:
        if self._cancel.is_set():
            raise JumpCancelled(f"jump stopped at turn {self.cursor}")

    def cancel(self) -> None:
        """Stop a jump running in another thread before its next step, and return once it has stopped, so the
        cursor read afterwards is the last completed turn (no jump running: nothing to do)."""
        self._cancel.set()
        with self._stepping:
            self._cancel.clear()

    def turns_to_ingest(self, turn: int) -> int:
        """How many turns a jump to `turn` would ingest (0 when the log already holds them)."""
        return max(0, min(turn, self.total_turns) - self.head)

    def session_start(self, session: str) -> int:
        """The cursor that has just ingested the first turn of `session`."""
        return next(i for i, t in enumerate(self.conversation.turns) if t.session == session) + 1

    def session_end(self) -> int:
        """The cursor after the last turn of the session the next turn belongs to (the cursor at the end)."""
        if self.cursor >= self.total_turns:
            return self.cursor
        current = self.conversation.turns[self.cursor].session
        return max(i for i, t in enumerate(self.conversation.turns) if t.session == current) + 1

    def jump_to_session(self, session: str) -> None:
        """Cursor to the first turn of `session` (so that turn is the one just ingested)."""
        self.jump(self.session_start(session))

    def play_to_session_end(self) -> None:
        """Ingest through the last turn of the session the next turn belongs to."""
        self.jump(self.session_end())

    def ensure_head(self, owner: str | None = None) -> None:
        """Before an edit: if the cursor is behind the head, branch the log at the cursor (owned by `owner`)."""
        if not self.at_head:
            self._branch(self.engine.store.last_seq(upto_turn=self.cursor), owner)

    def fork(self, owner: str) -> None:
        """Go on in a private branch of `owner` holding the whole log: what a viewer's replay writes into when
        the session belongs to someone else (the original stays untouched)."""
        self._branch(self.engine.store.last_seq(), owner)

    def _branch(self, seq: int, owner: str | None) -> None:
        target = new_session_path(f"{self.db_path.stem}-branch", self.workdir)
        branch = self.engine.store.branch(target, seq)
        branch.set_meta(**{PARENT: session_name(self.db_path, target.parent) or str(self.db_path.resolve())},
                        **({OWNER: owner} if owner else {}))
        mark_opened(branch)
        self.branches.append(self.db_path)
        self.engine = open_session(target, embedder=self.engine.embedder)
        self.db_path = target
        self._view = None

    def reload(self) -> None:
        """Invalidate cached views after the engine changed."""
        self._view, self._view_turn = None, -1

    # -- a peer engine for side-by-side views ----------------------------------------------
    def default_peer(self) -> str:
        """The engine to compare with: naive RAG, or (when this is naive RAG) the first other engine."""
        others = [n for n in known_engines() if n != self.engine_name]
        return "naive" if "naive" in others else (others[0] if others else self.engine_name)

    def has_peer(self, name: str) -> bool:
        """Whether `peer(name)` is ready at the cursor (otherwise it is built, which takes a while)."""
        return self.cursor == 0 or (name, self.cursor) in self._peers

    def peer(self, name: str, progress: Callable[[JumpProgress], None] | None = None) -> BaseEngine | None:
        """An engine of `name` holding the turns up to the cursor (None before the first turn).

        Built in a throwaway database with its own embedder (sharing this one's vectors), cached per
        (engine, cursor): comparing at the same turn again costs nothing. `workbench.replay.progress` hears how the build goes.
        """
        if self.cursor == 0:
            return None
        key = (name, self.cursor)
        if key not in self._peers:
            while len(self._peers) >= PEERS_KEPT:
                self._peers.pop(next(iter(self._peers)))
            turns = Conversation(self.conversation.id, self.conversation.turns[: self.cursor],
                                 speakers=self.conversation.speakers)
            report = (lambda phase, done, total: progress(JumpProgress(phase, done, total, done, self.cursor))
                      ) if progress else None
            self._peers[key] = scratch_engine(name, turns, self.engine.embedder, progress=report)
        return self._peers[key]


def list_conversations(path: Path) -> list[str]:
    return [c.id for c in load_conversations(path)]


def _safe(text: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_" else "_" for ch in text)[:40] or "conversation"

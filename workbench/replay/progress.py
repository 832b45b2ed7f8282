"""Progress bars for work the pages wait on: a jump's clock (elapsed, an estimate, when to redraw), and building
a peer engine for a side-by-side view."""
from __future__ import annotations

import time
from collections.abc import Callable

import streamlit as st

from engine.core.text import seconds_text
from engine.engines import engine_schema
from engine.runtime.engine import BaseEngine
from workbench.model import JumpProgress, Workbench


class JumpClock:
    """Times a jump for its progress bar: elapsed time, an estimate from the current phase's rate, and whether
    the page should redraw now (at most every `every` seconds, and always at the start and end of a phase)."""

    def __init__(self, every: float = 0.25, now: Callable[[], float] = time.monotonic):
        self.now, self.every = now, every
        self.start = self.previous = now()
        self.last_drawn: float | None = None
        self.phase, self.phase_start = "", self.start

    def due(self, progress) -> bool:
        t = self.now()
        new_phase = progress.phase != self.phase
        if new_phase:                              # a phase starts where the previous one's last step ended
            self.phase, self.phase_start = progress.phase, self.previous
        self.previous = t
        if new_phase or self.last_drawn is None or t - self.last_drawn >= self.every or \
                progress.done >= progress.total:
            self.last_drawn = t
            return True
        return False

    def left(self, progress) -> float | None:
        """Seconds the current phase still needs at its rate so far (None before its first step)."""
        if progress.done <= 0:
            return None
        return (self.previous - self.phase_start) / progress.done * (progress.total - progress.done)

    def text(self, progress) -> str:
        elapsed = f"{seconds_text(self.previous - self.start)} elapsed"
        left = self.left(progress)
        if progress.phase == "embedding":
            eta = "" if left is None else f" · about {seconds_text(left)} left for the texts"
            return (f"Jump to turn {progress.target}: embedding its turn texts {progress.done} / {progress.total}"
                    f" · {elapsed}{eta}")
        eta = "" if left is None else f" · about {seconds_text(left)} left"
        return (f"Turn {progress.cursor} / {progress.target} · {progress.done} of {progress.total} turns ingested"
                f" · {elapsed}{eta}")


def peer_with_progress(wb: Workbench, name: str) -> BaseEngine | None:
    """`wb.peer(name)`, with a progress bar (texts embedded, then turns ingested, an estimate) while it is built."""
    if wb.has_peer(name):
        return wb.peer(name)
    label = engine_schema(name).label
    bar = st.progress(0.0, text=f"Building {label} over the {wb.cursor} turns seen…")
    clock = JumpClock()

    def show(progress: JumpProgress) -> None:
        if clock.due(progress):
            left = clock.left(progress)
            eta = "" if left is None else f" · about {seconds_text(left)} left"
            bar.progress(progress.done / max(progress.total, 1),
                         text=f"Building {label} over the {wb.cursor} turns seen: {progress.phase} "
                              f"{progress.done} / {progress.total} · "
                              f"{seconds_text(clock.previous - clock.start)} elapsed{eta}")

    peer = wb.peer(name, show)
    bar.empty()
    return peer

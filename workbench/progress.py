"""Progress bars for work the pages wait on beyond a jump: building a peer engine for a side-by-side view."""
from __future__ import annotations

import streamlit as st

from engine.core.text import seconds_text
from engine.engines import engine_schema
from engine.runtime.engine import BaseEngine
from workbench.model import JumpProgress, Workbench
from workbench.replay_view import JumpClock


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

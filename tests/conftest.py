"""Shared fixtures: a real embedder, real SQLite files, hand-written turns."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from engine.conversation import Turn  # noqa: E402
from engine.session import open_session  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = ROOT.parent / "shared" / "data"
LOCOMO = SHARED_DATA / "locomo" / "locomo-dev8.json"


def turn(i: int, speaker: str, text: str, session: str = "1", day: int = 1) -> Turn:
    """A hand-written turn; time grows with `day` and `i` so order is unambiguous."""
    return Turn(id=f"D{session}:{i}", speaker=speaker, text=text, time=f"2024-01-{day:02d}T10:{i:02d}:00",
                session=session, index=i)


@pytest.fixture
def make_engine(tmp_path):
    """Build an All-Mem engine on a fresh SQLite file; settings and LLM overridable."""
    counter = iter(range(1000))

    def build(settings: dict | None = None, llm: str | None = None, **kw):
        return open_session(tmp_path / f"mem{next(counter)}.sqlite", settings=settings, llm=llm, **kw)

    return build


def locomo_or_skip() -> Path:
    if not LOCOMO.exists():
        pytest.skip(f"LoCoMo data not found at {LOCOMO}")
    return LOCOMO

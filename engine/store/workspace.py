"""The workspace: one folder per user that outlives any browser session.

It holds every session database the workbench creates (`sessions/`) and the
embedding cache shared by all of them (`embeddings.sqlite`), so a reload, a
restart or a second replay of the same data finds its work again. The default
follows the XDG convention; `MEMWB_WORKSPACE` overrides it (tests point it at a
temporary folder).
"""
from __future__ import annotations

import os
from pathlib import Path

ENV = "MEMWB_WORKSPACE"


def workspace_dir() -> Path:
    """The workspace folder, created on first use."""
    env = os.environ.get(ENV)
    if env:
        root = Path(env).expanduser()
    else:
        data_home = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
        root = Path(data_home) / "memory-workbench"
    root.mkdir(parents=True, exist_ok=True)
    return root


def sessions_dir() -> Path:
    """Where the workbench's session databases live."""
    path = workspace_dir() / "sessions"
    path.mkdir(parents=True, exist_ok=True)
    return path


def embedding_cache_path() -> Path:
    """The embedding cache every session shares (per model and content hash)."""
    return workspace_dir() / "embeddings.sqlite"

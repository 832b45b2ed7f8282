"""Which files the workbench may read when a page or a link names one: the data folders rule.

A page's path box (a dataset file on Replay, a result file on Benchmark), a path
a file names (a benchmark result's session database) and any URL parameter that
names a file all go through `resolve_data_path`: the path is resolved (``~``,
``..`` and every symbolic link followed) and must land inside one of the data
folders, or it is refused before anything is opened, so a refusal says nothing
about what exists outside them. The data folders are the workspace, the
repository's bundled `datasets/` and the folders `MEMWB_DATA_DIRS` lists
(`os.pathsep`-separated; `memwb ui --data-dir DIR` adds to it). Uploads are
written into the workspace, so they stay readable.

The command line is not subject to this: whoever types `memwb replay FILE` can
read FILE anyway.
"""
from __future__ import annotations

import os
from pathlib import Path

from engine.core.errors import WorkbenchError
from engine.store.workspace import workspace_dir

DATA_DIRS_ENV = "MEMWB_DATA_DIRS"
BUNDLED = Path(__file__).resolve().parents[2] / "datasets"
SHARED_DATA_ENV = "MEMWB_SHARED_DATA"


def shared_data() -> Path:
    """The real datasets beside the repository (`../shared/data`: LoCoMo, QMSum), or `MEMWB_SHARED_DATA`."""
    return Path(os.environ.get(SHARED_DATA_ENV) or BUNDLED.parent.parent / "shared" / "data").expanduser()


class PathRefused(WorkbenchError, ValueError):
    """A path outside the data folders (or not a path at all); nothing was read."""


def data_dirs() -> list[Path]:
    """The folders pages may read from, resolved, in order: the workspace, the bundled datasets, then each
    `MEMWB_DATA_DIRS` entry (empty entries skipped)."""
    extra = [Path(p).expanduser() for p in os.environ.get(DATA_DIRS_ENV, "").split(os.pathsep) if p.strip()]
    out: list[Path] = []
    for folder in (workspace_dir(), BUNDLED, *extra):
        resolved = folder.resolve()
        if resolved not in out:
            out.append(resolved)
    return out


def is_allowed(path: Path, folders: list[Path] | None = None) -> bool:
    """Whether `path`, with every link followed, is inside one of the data folders."""
    resolved = path.expanduser().resolve()
    return any(resolved.is_relative_to(folder) for folder in (folders or data_dirs()))


def resolve_data_path(text: str | os.PathLike, what: str = "file") -> Path:
    """The real path `text` names, if it lies inside a data folder; else `PathRefused` with a message saying
    which folders are allowed and how to add one. A relative path is taken relative to each data folder in
    turn (the first that holds it wins, else the first folder). Existence is not checked here."""
    raw = os.fspath(text).strip()
    if not raw or "\x00" in raw:
        raise PathRefused(f"no {what} path given" if not raw else f"the {what} path holds a NUL character")
    folders = data_dirs()
    path = Path(raw).expanduser()
    if not path.is_absolute():
        candidates = [folder / path for folder in folders]
        path = next((c for c in candidates if is_allowed(c, folders) and c.exists()), candidates[0])
    resolved = path.resolve()
    if not any(resolved.is_relative_to(folder) for folder in folders):
        raise PathRefused(f"{raw} is outside the folders the workbench reads from "
                          f"({', '.join(str(f) for f in folders)}); nothing was read. Put the {what} in one of "
                          f"them, upload it, or add its folder to {DATA_DIRS_ENV} (memwb ui --data-dir DIR)")
    return resolved


__all__ = ["BUNDLED", "DATA_DIRS_ENV", "PathRefused", "data_dirs", "is_allowed", "resolve_data_path"]

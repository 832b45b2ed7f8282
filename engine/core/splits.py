"""Validation and test splits, and the lock that keeps tuning code off the test split (the SCDS protocol).

MemLoom's SCDS tunes on a validation split and reports on a disjoint test split. A case set's cases are
assigned to one or the other (on the Annotate page, or by file: ``test.jsonl``, ``cases/test/``,
``decisions/test/``). Locking the test split writes ``splits.lock`` in the dataset folder (or, for cases in a
session, a row of its case set); every script that fits anything calls `refuse_locked` on what it reads, and
a locked split stops it with a message that says what to do instead. Scoring (`memwb bench`, `--report`) reads
a locked split as before: the lock is against tuning, not against measuring.

``splits.lock``::

    {"format": "memwb-splits-lock", "locked": ["test"], "by": "rita", "at": "2026-12-06T07:00:00+00:00"}
"""
from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import datetime, timezone
from pathlib import Path

from engine.core.errors import WorkbenchError

SPLITS = ("validation", "test")
LOCK_FILE = "splits.lock"
LOCK_FORMAT = "memwb-splits-lock"
_NAMES = {"test": "test", "validation": "validation", "dev": "validation"}


class LockedSplit(WorkbenchError, PermissionError):
    """Tuning code was pointed at a locked split; nothing was fitted or written."""


def split_of(path: Path) -> str | None:
    """The split a dataset path belongs to, by its name or a folder's (test.jsonl, cases/test/x.json, dev/)."""
    for part in (Path(path).stem, *(p.name for p in Path(path).parents)):
        if part in _NAMES:
            return _NAMES[part]
    return None


def lock_file(path: Path) -> Path | None:
    """The nearest ``splits.lock`` at or above `path` (a file's folder, then its parents)."""
    path = Path(path).resolve()
    for folder in ([path] if path.is_dir() else []) + list(path.parents):
        if (folder / LOCK_FILE).is_file():
            return folder / LOCK_FILE
    return None


def locked_splits(path: Path) -> tuple[list[str], Path | None]:
    found = lock_file(path)
    if found is None:
        return [], None
    try:
        data = json.loads(found.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise LockedSplit(f"{found}: cannot read the split lock ({exc}); refusing to tune until it is fixed") \
            from None
    if not isinstance(data, dict) or data.get("format") != LOCK_FORMAT or not isinstance(data.get("locked"), list):
        raise LockedSplit(f"{found}: not a split lock (format {LOCK_FORMAT!r}); refusing to tune until it is fixed")
    return [str(s) for s in data["locked"]], found


def refuse_locked(paths: Iterable[str | Path], tool: str) -> None:
    """Raise `LockedSplit` if any of `paths` lies in a locked split (by a ``splits.lock`` above it, or, for a
    cases export, by the document's own lock): call it in tuning code on what it reads."""
    for path in paths:
        if Path(path).suffix == ".json" and Path(path).is_file():
            _refuse_locked_export(Path(path), tool)
        split = split_of(Path(path))
        locked, found = locked_splits(Path(path))
        if split is not None and split in locked:
            raise LockedSplit(f"{tool} refuses {path}: it is in the {split} split, which is locked ({found}). "
                              f"Tuning reads the validation split only; score on {split} with `memwb bench` (or "
                              f"the script's --report), or unlock it with `memwb splits unlock {found.parent}`.")


def refuse_locked_cases(document: dict, tool: str, source: str | Path = "cases") -> None:
    """The same for a cases export: its cases in a split the document marks locked are refused."""
    locked = set((document.get("case_set") or {}).get("locked") or [])
    hit = [c["scenario_id"] for c in document.get("cases", []) if c.get("split") in locked]
    if hit:
        raise LockedSplit(f"{tool} refuses {source}: case(s) {', '.join(hit)} are in a locked split "
                          f"({', '.join(sorted(locked))}). Tuning reads validation cases only.")


def _refuse_locked_export(path: Path, tool: str) -> None:
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return                                  # not a cases export: the tool's own loader says what is wrong
    if isinstance(document, dict) and document.get("format") == "memwb-scds-cases":
        refuse_locked_cases(document, tool, path)


def tuning_guard(paths: Iterable[str | Path], tool: str) -> None:
    """For a tuning script's main: stop with the lock's message (exit status 1) instead of a traceback."""
    try:
        refuse_locked(paths, tool)
    except LockedSplit as exc:
        raise SystemExit(str(exc)) from None


def write_lock(folder: Path, splits: Iterable[str], by: str) -> Path:
    """Write (or, with no splits, remove) ``splits.lock`` in `folder`."""
    splits = sorted(set(splits))
    unknown = [s for s in splits if s not in SPLITS]
    if unknown:
        raise WorkbenchError(f"unknown split(s) {', '.join(unknown)}: use {', '.join(SPLITS)}")
    target = Path(folder) / LOCK_FILE
    if not splits:
        target.unlink(missing_ok=True)
        return target
    target.write_text(json.dumps({"format": LOCK_FORMAT, "locked": splits, "by": by,
                                  "at": datetime.now(timezone.utc).isoformat(timespec="seconds")}, indent=1) + "\n",
                      encoding="utf-8")
    return target

"""Errors of the engine runtime: a run that cannot be proposed, applied or discarded, an undo refused."""
from __future__ import annotations

from engine.core.errors import WorkbenchError


class UndoError(WorkbenchError):
    pass


class RunError(WorkbenchError, RuntimeError):
    pass

"""The root of every error the library raises on purpose.

Each layer has its own error types (a store that cannot be opened, a run that
cannot be applied, a malformed dataset file ...); they all derive from
`WorkbenchError`, so a page or a command catches one type and shows its
message, while a bug (any other exception) still surfaces as one.
"""
from __future__ import annotations


class WorkbenchError(Exception):
    """An expected failure with a message meant for the person using the tool."""

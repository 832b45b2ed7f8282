"""The one error every loader raises, plus the small checks that raise it.

Dataset files are large and hand-edited; an error is only useful if it says
which file, which record and which field went wrong, so every failure goes
through `LoaderError` with those three located.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

__all__ = ["LoaderError", "answer_text", "check", "optional", "read_json", "read_text", "require"]


class LoaderError(Exception):
    """A dataset file could not be turned into conversations.

    `path` is the file, `record` locates the bad item inside it (e.g.
    ``conv-26/session_3[4]`` or ``line 7``), `field` names the offending key.
    `record` and `field` are None when the problem is the file as a whole.
    """

    def __init__(
        self,
        path: str | Path,
        message: str,
        *,
        record: str | None = None,
        field: str | None = None,
    ) -> None:
        self.path = str(path)
        self.message = message
        self.record = record
        self.field = field
        super().__init__(str(self))

    def __str__(self) -> str:
        parts = [Path(self.path).name or self.path]
        if self.record is not None:
            parts.append(f"record {self.record}")
        if self.field is not None:
            parts.append(f"field {self.field!r}")
        parts.append(self.message)
        return ": ".join(parts)

    def __reduce__(self) -> tuple[Any, ...]:
        """Keep the error picklable despite keyword-only arguments (multiprocessing)."""
        return (_rebuild, (self.path, self.message, self.record, self.field))


def _rebuild(path: str, message: str, record: str | None, field: str | None) -> LoaderError:
    return LoaderError(path, message, record=record, field=field)


def _kind(value: object) -> str:
    return "null" if value is None else type(value).__name__


def check(
    value: Any,
    kind: type | tuple[type, ...],
    *,
    path: str | Path,
    record: str,
    field: str | None = None,
) -> Any:
    """Return `value` if it is of `kind`, else raise a located type error."""
    kinds = kind if isinstance(kind, tuple) else (kind,)
    # bool is an int subclass; a flag where a number or text belongs is a data error.
    if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
        names = " or ".join(k.__name__ for k in kinds)
        raise LoaderError(path, f"expected {names}, got {_kind(value)}", record=record, field=field)
    return value


def require(
    obj: dict[str, Any],
    key: str,
    kind: type | tuple[type, ...],
    *,
    path: str | Path,
    record: str,
) -> Any:
    """Return ``obj[key]`` if present and of `kind`, else raise a located error."""
    if key not in obj:
        raise LoaderError(path, "missing", record=record, field=key)
    return check(obj[key], kind, path=path, record=record, field=key)


def optional(
    obj: dict[str, Any],
    key: str,
    kind: type | tuple[type, ...],
    *,
    path: str | Path,
    record: str,
) -> Any:
    """Like `require`, but an absent or null value gives None."""
    value = obj.get(key)
    return None if value is None else check(value, kind, path=path, record=record, field=key)


def answer_text(value: object, *, path: str | Path, record: str, field: str = "answer") -> str | None:
    """Gold answers are compared as text; datasets sometimes store numbers (``2022``)."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    raise LoaderError(path, f"expected text or a number, got {_kind(value)}", record=record, field=field)


def read_text(path: str | Path) -> str:
    """Read a dataset file, turning I/O and encoding failures into `LoaderError`."""
    try:
        return Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise LoaderError(path, f"cannot read file: {exc}") from exc


def read_json(path: str | Path) -> Any:
    """Parse a whole-file JSON dataset, locating syntax errors by line."""
    text = read_text(path)
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise LoaderError(
            path, f"not valid JSON: {exc.msg} (column {exc.colno})", record=f"line {exc.lineno}"
        ) from exc


def parse_list(data: Any, path: str | Path, what: str, id_field: str,
               parse_one: Callable[[dict[str, Any], str | Path, int], Any]) -> list:
    """Parse a JSON list of conversation records, rejecting non-objects and duplicate ids."""
    if not isinstance(data, list):
        raise LoaderError(path, f"expected a JSON list of {what}, got {type(data).__name__}")
    items: list = []
    seen: dict[str, int] = {}
    for position, record in enumerate(data):
        check(record, dict, path=path, record=f"item {position}")
        item = parse_one(record, path, position)
        if item.id in seen:
            raise LoaderError(path, f"duplicate of item {seen[item.id]}", record=f"item {position}", field=id_field)
        seen[item.id] = position
        items.append(item)
    return items

"""The one error every loader raises, plus the small checks that raise it.

Dataset files are large and hand-edited; an error is only useful if it says
which file, which record and which field went wrong, so every failure goes
through `LoaderError` with those three located.

Every string a loader keeps passes `check` (directly or through `require`,
`optional`, `answer_text`), which is where text that UTF-8 cannot encode is
refused; every file is read by `read_text` and decoded by `decode_json`, and
every turn's utterance goes through `turn_text`, which is where the size
limits (`MEMWB_MAX_FILE_MB`, `MEMWB_MAX_TURN_CHARS`) are enforced.
"""
from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any, Callable

from engine.core.errors import WorkbenchError

__all__ = [
    "DEFAULT_MAX_FILE_MB", "DEFAULT_MAX_TURN_CHARS", "LoaderError", "answer_text", "check", "decode_json",
    "max_file_mb", "max_turn_chars", "optional", "read_json", "read_text", "require", "turn_text",
]

DEFAULT_MAX_FILE_MB = 64
DEFAULT_MAX_TURN_CHARS = 100_000


class LoaderError(WorkbenchError):
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
    if isinstance(value, str):
        _check_unicode(value, path=path, record=record, field=field)
    return value


def _check_unicode(value: str, *, path: str | Path, record: str, field: str | None) -> None:
    """Refuse text UTF-8 cannot encode: a JSON escape such as ``"\\ud800"`` decodes to a lone surrogate,
    which would otherwise fail much later, in the embedder or the store, far from the file."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        message = (f"invalid Unicode: lone surrogate U+{ord(value[exc.start]):04X} at character {exc.start} "
                   "(half of a \\u surrogate pair escape)")
        raise LoaderError(path, message, record=record, field=field) from None


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
    if value is None:
        return value
    if isinstance(value, str):
        return check(value, str, path=path, record=record, field=field)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    raise LoaderError(path, f"expected text or a number, got {_kind(value)}", record=record, field=field)


def _limit(variable: str, default: float) -> float:
    """A size limit from the environment, so a researcher can raise it without editing code."""
    raw = os.environ.get(variable, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not value > 0:
        raise ValueError(f"{variable}={raw!r}: expected a positive number")
    return value


def max_file_mb() -> float:
    """Largest dataset file read, in MB (``MEMWB_MAX_FILE_MB``): a whole file is decoded in memory."""
    return _limit("MEMWB_MAX_FILE_MB", DEFAULT_MAX_FILE_MB)


def max_turn_chars() -> int:
    """Longest utterance of one turn, in characters (``MEMWB_MAX_TURN_CHARS``)."""
    return int(_limit("MEMWB_MAX_TURN_CHARS", DEFAULT_MAX_TURN_CHARS))


def turn_text(obj: dict[str, Any], key: str, *, path: str | Path, record: str) -> str:
    """A turn's utterance: required text within the per-turn limit, since every turn is embedded,
    summarised and shown whole, and one runaway line would swamp all three."""
    text = require(obj, key, str, path=path, record=record)
    limit = max_turn_chars()
    if len(text) > limit:
        message = (f"{len(text)} characters, more than the limit of {limit} for one turn; "
                   f"raise it with MEMWB_MAX_TURN_CHARS={len(text)} (or more)")
        raise LoaderError(path, message, record=record, field=key)
    return text


def read_text(path: str | Path) -> str:
    """Read a dataset file within the size limit, turning I/O and encoding failures into `LoaderError`."""
    try:
        size = Path(path).stat().st_size
        limit = max_file_mb()
        if size > limit * 1024 * 1024:
            megabytes = size / (1024 * 1024)
            raise LoaderError(path, f"file is {megabytes:.1f} MB, more than the limit of {limit:g} MB; "
                                    f"raise it with MEMWB_MAX_FILE_MB={math.ceil(megabytes)} (or more)")
        return Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise LoaderError(path, f"cannot read file: {exc}") from exc


def decode_json(text: str, path: str | Path, *, record: str | None = None) -> Any:
    """Decode JSON text; a syntax error is located by line (or `record`), and nesting deeper than the
    parser's recursion limit is refused by name instead of escaping as a bare RecursionError."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise LoaderError(
            path, f"not valid JSON: {exc.msg} (column {exc.colno})", record=record or f"line {exc.lineno}"
        ) from exc
    except RecursionError:
        raise LoaderError(path, "JSON nested too deeply to decode (arrays or objects nested beyond Python's "
                                "recursion limit; no dataset layout needs that depth)",
                          record=record) from None


def read_json(path: str | Path) -> Any:
    """Parse a whole-file JSON dataset, locating syntax errors by line."""
    return decode_json(read_text(path), path)


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

"""What the store needs from a PostgreSQL connection that SQLite gives for free.

PostgreSQL `text` cannot hold the NUL character, yet a turn may (raw text is
kept byte for byte, and the materialized `node.raw` column holds it verbatim).
Every connection of a PostgreSQL store therefore writes strings with NUL
escaped and reads them back unescaped, for every table alike (the log, the
materialized fold, annotations, any side table): U+2400 SYMBOL FOR NULL is the
escape character, ``\\x00`` is stored as ``␀0`` and a literal ``␀`` as ``␀␀``.
Text without either character, which is practically all text, is stored as
is, so the tables stay readable with plain SQL. The log's JSON payloads never
need it (JSON escapes NUL as ``\\u0000``).
"""
from __future__ import annotations

import re

from psycopg.types.string import StrDumperUnknown, TextLoader
from sqlalchemy import Engine
from sqlalchemy import event as sa_event

ESCAPE = "\u2400"
_ESCAPED = re.compile(ESCAPE + "(.)", re.DOTALL)
_TEXT_TYPES = ("text", "varchar", "bpchar", "name")


def escape_nul(text: str) -> str:
    if "\x00" not in text and ESCAPE not in text:
        return text
    return text.replace(ESCAPE, ESCAPE + ESCAPE).replace("\x00", ESCAPE + "0")


def unescape_nul(text: str) -> str:
    if ESCAPE not in text:
        return text
    return _ESCAPED.sub(lambda m: "\x00" if m[1] == "0" else m[1], text)


class _NulSafeDumper(StrDumperUnknown):
    """psycopg's default string dumper (server-inferred type) with NUL escaped."""

    def dump(self, obj: str):
        return super().dump(escape_nul(obj))


class _NulSafeLoader(TextLoader):
    def load(self, data):
        text = super().load(data)
        return unescape_nul(text) if isinstance(text, str) else text


def _adapt(dbapi_conn, _record) -> None:
    dbapi_conn.adapters.register_dumper(str, _NulSafeDumper)
    for name in _TEXT_TYPES:
        dbapi_conn.adapters.register_loader(name, _NulSafeLoader)


def prepare(engine: Engine) -> Engine:
    """Give every connection of a PostgreSQL `engine` (psycopg 3) the NUL escaping; others are left alone."""
    if engine.dialect.name == "postgresql" and engine.dialect.driver == "psycopg":
        sa_event.listen(engine, "connect", _adapt)
    return engine


__all__ = ["prepare", "escape_nul", "unescape_nul"]

"""Credentials out of any text that is logged, stored, shown or exported.

Three kinds are scrubbed. A URL's user and password (``http://user:pass@host:8000/v1``,
the usual way to reach a proxy or gateway, or a ``postgresql://`` URL) become
``***@``. The value of every secret the environment holds (an API key such as
``OPENAI_API_KEY``, a ``PGPASSWORD``: any variable whose name ends in ``API_KEY``,
``TOKEN``, ``SECRET`` or ``PASSWORD``) becomes ``***`` wherever it appears: a
server that echoes the key back in its error message is the usual way one leaks.
And key-shaped strings (``sk-…``, ``Bearer …``) are cut to their prefix.

Call records, error messages, proposals and the meta table are kept in the
session database and shown in the workbench, `memwb` prints errors, and
`memwb ui` passes the server's output through `redact` line by line, so every
surface goes through here.
"""
from __future__ import annotations

import os
import re

__all__ = ["KNOWN_SECRETS", "redact", "secret_names", "secret_status"]

# scheme://userinfo@ : userinfo runs to the last "@" before the path, so an unescaped "@" in a password
# does not leave its tail behind.
_USERINFO = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.\-]*://)[^/\s?#]*@")
_SECRET_NAME = re.compile(r"(API_?KEY|TOKEN|SECRET|PASSWORD|PASSWD)$", re.IGNORECASE)
_KEY_SHAPED = re.compile(r"\b(?P<prefix>sk|rk|pk)-(?:proj-)?[A-Za-z0-9_\-]{16,}")
_BEARER = re.compile(r"(?P<prefix>\bBearer\s+)[A-Za-z0-9._~+/\-]{8,}=*", re.IGNORECASE)
_SHORTEST = 8          # shorter values ("EMPTY", the placeholder local servers accept) are not secrets
KNOWN_SECRETS = ("MEMWB_OPENAI_API_KEY", "OPENAI_API_KEY", "PGPASSWORD")   # the ones the engine reads


def secret_names() -> list[str]:
    """The environment variables treated as secrets: the known ones and any other whose name says so."""
    return list(KNOWN_SECRETS) + sorted(n for n in os.environ if _SECRET_NAME.search(n) and n not in KNOWN_SECRETS)


def _secret_values() -> list[str]:
    values = {os.environ.get(n, "") for n in secret_names()}
    return sorted((v for v in values if len(v) >= _SHORTEST), key=len, reverse=True)


def redact(text: str) -> str:
    """`text` with URL credentials, the environment's secret values and key-shaped strings replaced."""
    text = _USERINFO.sub(r"\g<scheme>***@", text)
    for value in _secret_values():
        text = text.replace(value, "***")
    text = _KEY_SHAPED.sub(r"\g<prefix>-***", text)
    return _BEARER.sub(r"\g<prefix>***", text)


def secret_status() -> dict[str, bool]:
    """For a settings view: each secret variable and whether it is set (never its value)."""
    return {name: bool(os.environ.get(name)) for name in secret_names()}

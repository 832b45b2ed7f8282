"""Credentials out of any text the LLM boundary logs or stores.

A base URL may carry a user and password (``http://user:pass@host:8000/v1``,
the usual way to reach a proxy or gateway); call records, error messages,
proposals and the meta table are kept in the session database and shown in
the workbench, so every URL is scrubbed before it reaches them.
"""
from __future__ import annotations

import re

__all__ = ["redact"]

# scheme://userinfo@ : userinfo runs to the last "@" before the path, so an unescaped "@" in a password
# does not leave its tail behind.
_USERINFO = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.\-]*://)[^/\s?#]*@")


def redact(text: str) -> str:
    """`text` with the ``user:password@`` part of every URL in it replaced by ``***@``."""
    return _USERINFO.sub(r"\g<scheme>***@", text)

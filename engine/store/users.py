"""The workbench's users for sign-in without an identity provider: names, roles and hashed secrets.

One JSON file in the workspace (`users.json`, mode 0600), written by `memwb auth`
and read by the workbench at each sign-in. A secret is a token `memwb auth`
generates (or a password the operator types) and is stored only as its scrypt
hash with a per-user salt; the plain secret is shown once, to the operator, and
never stored, logged or put in a URL. A user marked `oidc` signs in through the
identity provider configured in Streamlit's secrets (`[auth]`) and has no secret
here: the file only gives that address its role. A name starting with "@" gives
a role to every identity-provider address in that domain ("@lab.example").

File format::

    {"format": "memwb-users", "version": 1,
     "users": {"alice": {"role": "reviewer", "kdf": {"name": "scrypt", "n": 32768, "r": 8, "p": 1,
                                                     "salt": "<hex>"}, "hash": "<hex>"},
               "bob@lab.example": {"role": "viewer", "oidc": true}}}
"""
from __future__ import annotations

import hashlib
import hmac
import json
import os
import re
import secrets
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from engine.core.access import Identity, Role
from engine.core.errors import WorkbenchError
from engine.store.workspace import workspace_dir

FORMAT, VERSION = "memwb-users", 1
USERS_FILE = "users.json"
SCRYPT = {"name": "scrypt", "n": 2 ** 15, "r": 8, "p": 1}      # 32 MiB, about 0.1-0.2 s per check here
_MAXMEM = 128 * 2 ** 20
_NAME = re.compile(r"@?[A-Za-z0-9][A-Za-z0-9._+@-]{0,127}")
MIN_PASSWORD = 12


class UserBookError(WorkbenchError, ValueError):
    """The users file cannot be read or the change asked for is refused; the message says why."""


@dataclass(frozen=True)
class User:
    name: str
    role: Role
    oidc: bool = False             # signs in through the identity provider; no secret stored here
    kdf: dict | None = None
    hash: str | None = None

    @property
    def stamp(self) -> str:
        """Changes whenever the secret changes (a short digest of the stored hash, never of the secret)."""
        return hashlib.sha256((self.hash or "oidc").encode()).hexdigest()[:16]

    def to_dict(self) -> dict:
        if self.oidc:
            return {"role": self.role.value, "oidc": True}
        return {"role": self.role.value, "kdf": self.kdf, "hash": self.hash}


def _derive(secret: str, kdf: dict) -> str:
    return hashlib.scrypt(secret.encode("utf-8"), salt=bytes.fromhex(kdf["salt"]), n=kdf["n"], r=kdf["r"],
                          p=kdf["p"], maxmem=_MAXMEM, dklen=32).hex()


_DUMMY_KDF = {**SCRYPT, "salt": "00" * 16}        # unknown names cost as much as known ones (no timing oracle)


def check_name(name: str) -> str:
    if not _NAME.fullmatch(name or "") or name.startswith("local:"):
        raise UserBookError(f"user name {name!r} is not allowed: use letters, digits and . _ + @ - (an e-mail "
                            "address is fine; '@domain' names a whole identity-provider domain)")
    return name


class UserBook:
    """The users file: read on every call (it is small and may change while the workbench runs)."""

    def __init__(self, path: Path | None = None):
        self.path = Path(path) if path else workspace_dir() / USERS_FILE

    # -- reading ------------------------------------------------------------------------
    def users(self) -> dict[str, User]:
        if not self.path.exists():
            return {}
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise UserBookError(f"cannot read the users file {self.path}: {exc}") from None
        if not isinstance(data, dict) or data.get("format") != FORMAT or not isinstance(data.get("users"), dict):
            raise UserBookError(f"{self.path} is not a Memory Workbench users file (format {FORMAT!r})")
        out = {}
        for name, row in data["users"].items():
            try:
                out[name] = User(name, Role(row["role"]), oidc=bool(row.get("oidc")), kdf=row.get("kdf"),
                                 hash=row.get("hash"))
            except (KeyError, TypeError, ValueError):
                raise UserBookError(f"{self.path}: user {name!r} has no valid role (viewer, annotator or reviewer)") from None
        return out

    def has_token_users(self) -> bool:
        return any(not u.oidc for u in self.users().values())

    def verify(self, name: str, secret: str) -> Identity | None:
        """The identity `name` signs in as with `secret`, or None (a wrong secret, an unknown or OIDC name)."""
        user = self.users().get((name or "").strip())
        usable = user is not None and not user.oidc and user.kdf and user.hash
        derived = _derive(secret or "", user.kdf if usable else _DUMMY_KDF)
        if not usable or not hmac.compare_digest(derived, user.hash):
            return None
        return Identity(user.name, user.role, "token", user.stamp)

    def current(self, identity: Identity) -> Identity | None:
        """A token identity as the file has it now: None once the user is removed or their secret rotated; the
        role follows the file."""
        user = self.users().get(identity.name)
        if user is None or user.oidc or user.stamp != identity.stamp:
            return None
        return Identity(user.name, user.role, "token", user.stamp)

    def oidc_identity(self, address: str | None) -> Identity | None:
        """The identity an identity-provider address signs in as: its own entry, else its domain's; None when
        neither is listed (any account of a public provider could otherwise get in)."""
        if not address:
            return None
        users = self.users()
        user = users.get(address)
        if user is None and "@" in address:
            user = users.get("@" + address.rsplit("@", 1)[1].lower())
        if user is None or not user.oidc:
            return None
        return Identity(address, user.role, "oidc")

    # -- changing (memwb auth) ---------------------------------------------------------------
    def add(self, name: str, role: Role, oidc: bool = False, password: str | None = None) -> str | None:
        """Add a user; returns the secret to hand over (a new token, or None for an OIDC user)."""
        users = self.users()
        check_name(name)
        if name in users:
            raise UserBookError(f"user {name!r} exists already: `memwb auth rotate {name}` gives a new token, "
                                f"`memwb auth role {name} ROLE` changes the role")
        if name.startswith("@") and not oidc:
            raise UserBookError(f"{name!r} names a domain: add it with --oidc")
        if oidc:
            users[name] = User(name, role, oidc=True)
            self._write(users)
            return None
        secret, user = _with_secret(name, role, password)
        users[name] = user
        self._write(users)
        return secret

    def rotate(self, name: str, password: str | None = None) -> str:
        """A new secret for a token user; the old one stops working and its browser sessions are signed out."""
        users = self.users()
        user = self._existing(users, name)
        if user.oidc:
            raise UserBookError(f"{name!r} signs in through the identity provider and has no token to rotate")
        secret, users[name] = _with_secret(name, user.role, password)
        self._write(users)
        return secret

    def set_role(self, name: str, role: Role) -> None:
        users = self.users()
        user = self._existing(users, name)
        users[name] = User(name, role, user.oidc, user.kdf, user.hash)
        self._write(users)

    def remove(self, name: str) -> None:
        users = self.users()
        self._existing(users, name)
        del users[name]
        self._write(users)

    def _existing(self, users: dict[str, User], name: str) -> User:
        if name not in users:
            raise UserBookError(f"no user {name!r} in {self.path} (`memwb auth list` shows them)")
        return users[name]

    def _write(self, users: dict[str, User]) -> None:
        """Replace the file atomically, readable by its owner only."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        data = {"format": FORMAT, "version": VERSION,
                "users": {n: u.to_dict() for n, u in sorted(users.items())}}
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(data, f, indent=1)
            f.write("\n")
        os.replace(tmp, self.path)


def _with_secret(name: str, role: Role, password: str | None) -> tuple[str, User]:
    if password is not None and len(password) < MIN_PASSWORD:
        raise UserBookError(f"a password needs at least {MIN_PASSWORD} characters; leave it out to get a "
                            "generated token instead")
    secret = password if password is not None else secrets.token_urlsafe(24)
    kdf = {**SCRYPT, "salt": secrets.token_hex(16)}
    return secret, User(name, role, kdf=kdf, hash=_derive(secret, kdf))


class SignInThrottle:
    """At most `limit` failed sign-ins per name within `window` seconds; then that name waits."""

    def __init__(self, limit: int = 5, window: float = 60.0, clock: Callable[[], float] = time.monotonic):
        self.limit, self.window, self.clock = limit, window, clock
        self._failures: dict[str, deque[float]] = {}

    def wait(self, name: str) -> float:
        """Seconds `name` must wait before the next attempt (0: go ahead)."""
        now = self.clock()
        failures = self._failures.get(name)
        if not failures:
            return 0.0
        while failures and now - failures[0] > self.window:
            failures.popleft()
        return max(0.0, self.window - (now - failures[0])) if len(failures) >= self.limit else 0.0

    def failed(self, name: str) -> None:
        self._failures.setdefault(name, deque()).append(self.clock())

    def succeeded(self, name: str) -> None:
        self._failures.pop(name, None)


__all__ = ["MIN_PASSWORD", "SignInThrottle", "User", "UserBook", "UserBookError", "check_name"]

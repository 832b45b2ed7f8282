"""Running the workbench's server for `memwb ui`: who could sign in, what a wide bind exposes, a clean stop.

The Streamlit server runs as a child process in a session of its own, so a
terminal's Ctrl-C reaches `memwb ui` once and is forwarded once. SIGINT,
SIGTERM and SIGHUP are forwarded to the child, which is waited for (and killed
with its process group if it has not stopped within `STOP_WAIT` seconds); on
Linux the child also gets SIGTERM if `memwb ui` itself dies, so no orphan keeps
the port. Every line the server prints passes through `redact` on its way out.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from engine.core.redact import redact
from engine.store.users import UserBook
from engine.store.workspace import workspace_dir

STOP_WAIT = 15.0                    # seconds the server gets to stop after a forwarded signal
FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def loopback_hosts(host: str) -> list[str]:
    """The Host header names a loopback server answers to (others are refused: DNS rebinding)."""
    return list(dict.fromkeys([host.strip("[]"), "localhost", "127.0.0.1", "::1"]))


def secrets_files(app: Path) -> list[Path]:
    """Where Streamlit looks for secrets.toml, in its order: the user's, the working folder's, the app's."""
    return [Path.home() / ".streamlit" / "secrets.toml", Path.cwd() / ".streamlit" / "secrets.toml",
            app.parent / ".streamlit" / "secrets.toml"]


@dataclass(frozen=True)
class SignInMethods:
    token_users: int
    oidc: Path | None               # the secrets file holding an [auth] section
    users_file: Path

    @property
    def any(self) -> bool:
        return bool(self.token_users or self.oidc)

    def text(self) -> str:
        parts = [f"{self.token_users} token user(s) in {self.users_file}"]
        parts.append(f"identity provider from {self.oidc}" if self.oidc else "no identity provider")
        return "; ".join(parts)

    def missing_text(self, host: str) -> str:
        return (f"--host {host} makes the workbench reachable beyond this machine, and nobody could sign in: add a "
                "user first (`memwb auth add NAME --role reviewer` prints their token) or configure an identity "
                "provider ([auth] in .streamlit/secrets.toml, see README). Nothing was started.")


def sign_in_methods(app: Path) -> SignInMethods:
    """Token users in the workspace's users file and an identity provider in Streamlit's secrets; raises
    `ValueError` for an [auth] section Streamlit could not use (Authlib missing) or an unreadable file."""
    book = UserBook()
    tokens = sum(not u.oidc for u in book.users().values())          # an unreadable file raises UserBookError
    oidc = None
    for path in secrets_files(app):
        try:
            data = tomllib.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise ValueError(f"cannot read {path}: {exc}") from None
        if isinstance(data.get("auth"), dict):
            oidc = path
    if oidc is not None:
        try:
            import authlib  # noqa: F401
        except ImportError:
            raise ValueError(f"{oidc} configures an identity provider ([auth]), which needs Authlib>=1.3.2: "
                             "pip install 'Authlib>=1.3.2'") from None
    return SignInMethods(tokens, oidc, book.path)


def unwatched_library(root: Path) -> list[str]:
    """Streamlit flags that keep the engine library of the checkout at `root` out of the server's file watcher.

    When a watched module changes, Streamlit drops every watched module and imports them again on the next
    rerun. The engine's tables would then be declared a second time in SQLModel's one metadata, and every page
    would fail until a restart; a session opened before would also go on running the old classes beside new
    ones. So edits to the workbench and the pages show on the next rerun, and the engine is loaded once per
    server (it is watched only when the checkout is on PYTHONPATH, as in the tests and scripts)."""
    return ["--server.folderWatchBlacklist", str(root / "engine")]


def exposure_text(host: str, port: int, sign_in: SignInMethods) -> str:
    return (f"listening on {host}:{port}, beyond this machine. Whoever can reach that address gets the sign-in "
            f"page; once signed in, a viewer reads every session in {workspace_dir()} (the conversation logs), "
            "and a reviewer also decides, applies and undoes runs and spends the LLM key set here. Sign-in: "
            f"{sign_in.text()}. The connection is plain HTTP: put an HTTPS reverse proxy in front of it so tokens "
            "and conversations do not cross the network in the clear.")


def _die_with_parent() -> None:
    """In the child, before exec: ask Linux for SIGTERM when the parent dies (best effort elsewhere)."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)       # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _relay(source: IO[bytes], target: IO[str]) -> None:
    for raw in iter(source.readline, b""):
        target.write(redact(raw.decode("utf-8", errors="replace")))
        target.flush()
    source.close()


def run_server(cmd: list[str], env: dict[str, str]) -> int:
    """Run the server until it exits; forward SIGINT/SIGTERM/SIGHUP and wait for it. Returns its exit code
    (128 + the signal number when a signal ended it)."""
    env = {**env, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
                            preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None)
    relays = [threading.Thread(target=_relay, args=(proc.stdout, sys.stdout), daemon=True),
              threading.Thread(target=_relay, args=(proc.stderr, sys.stderr), daemon=True)]
    for t in relays:
        t.start()
    asked: list[float] = []

    def forward(signum, _frame) -> None:
        if proc.poll() is None:
            proc.send_signal(signum)
        asked.append(time.monotonic())

    previous = {s: signal.signal(s, forward) for s in FORWARDED}
    try:
        while True:
            try:
                code = proc.wait(timeout=0.5)
                break
            except subprocess.TimeoutExpired:
                if asked and time.monotonic() - asked[0] > STOP_WAIT:
                    os.killpg(proc.pid, signal.SIGKILL)
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
    for t in relays:
        t.join(5)
    return 128 - code if code < 0 else code


__all__ = ["SignInMethods", "exposure_text", "loopback_hosts", "run_server", "secrets_files", "sign_in_methods"]

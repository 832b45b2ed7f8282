"""Roles, the users file (hashed secrets), the data folders rule and secret redaction, on real files."""
from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from engine.core.access import AccessDenied, Action, Identity, Role, is_loopback, local_identity, sign_in_required
from engine.store.data_paths import DATA_DIRS_ENV, PathRefused, data_dirs, resolve_data_path
from engine.core.redact import redact, secret_status
from engine.store.users import MIN_PASSWORD, SignInThrottle, UserBook, UserBookError

ROOT = Path(__file__).resolve().parents[1]


# -- roles and the bind rule ---------------------------------------------------------------------------------
def test_a_viewer_browses_replays_and_queries_only():
    viewer, reviewer = Identity("v", Role.VIEWER, "token"), Identity("r", Role.REVIEWER, "token")
    assert {a for a in Action if viewer.can(a)} == {Action.BROWSE, Action.REPLAY, Action.QUERY}
    assert all(reviewer.can(a) for a in Action)
    with pytest.raises(AccessDenied, match=r"v is signed in as a viewer: undoing a run needs the reviewer role"):
        viewer.require(Action.UNDO)


def test_the_local_identity_names_the_os_user_not_human():
    me = local_identity()
    assert me.name.startswith("local:") and me.name != "local:" and me.role == Role.REVIEWER


@pytest.mark.parametrize("address, loopback", [("127.0.0.1", True), ("127.0.0.2", True), ("::1", True),
                                               ("[::1]", True), ("localhost", True), ("0.0.0.0", False),
                                               ("::", False), ("192.0.2.2", False), ("", False), (None, False),
                                               ("my-host.lab", False)])
def test_loopback_addresses(address, loopback):
    assert is_loopback(address) is loopback
    assert sign_in_required(address) is not loopback
    assert sign_in_required(address, forced=True)


# -- the users file -----------------------------------------------------------------------------------------
def test_tokens_are_stored_hashed_and_checked(tmp_path):
    book = UserBook(tmp_path / "users.json")
    token = book.add("alice", Role.REVIEWER)
    assert len(token) >= 32
    text = book.path.read_text()
    assert token not in text and "scrypt" in text
    assert stat.S_IMODE(book.path.stat().st_mode) == 0o600
    assert book.verify("alice", token) == Identity("alice", Role.REVIEWER, "token", book.users()["alice"].stamp)
    assert book.verify("alice", token[:-1] + ("x" if token[-1] != "x" else "y")) is None
    assert book.verify("nobody", token) is None and book.verify("alice", "") is None


def test_rotating_or_removing_signs_the_old_session_out_and_a_role_change_applies(tmp_path):
    book = UserBook(tmp_path / "users.json")
    first = book.add("bob", Role.VIEWER)
    held = book.verify("bob", first)
    book.set_role("bob", Role.REVIEWER)
    assert book.current(held).role == Role.REVIEWER             # same secret: still signed in, new role
    second = book.rotate("bob")
    assert book.current(held) is None and book.verify("bob", first) is None
    held = book.verify("bob", second)
    book.remove("bob")
    assert book.current(held) is None and book.users() == {}


def test_passwords_and_names(tmp_path):
    book = UserBook(tmp_path / "users.json")
    with pytest.raises(UserBookError, match=f"at least {MIN_PASSWORD} characters"):
        book.add("carol", Role.VIEWER, password="short")
    assert book.add("carol", Role.VIEWER, password="a long passphrase") == "a long passphrase"
    assert book.verify("carol", "a long passphrase").role == Role.VIEWER
    with pytest.raises(UserBookError, match="exists already"):
        book.add("carol", Role.VIEWER)
    for bad in ("", "local:root", "a b", "../x", "x" * 200):
        with pytest.raises(UserBookError, match="not allowed"):
            book.add(bad, Role.VIEWER)
    with pytest.raises(UserBookError, match="names a domain: add it with --oidc"):
        book.add("@lab.example", Role.VIEWER)


def test_identity_provider_addresses_need_an_entry_or_their_domain(tmp_path):
    book = UserBook(tmp_path / "users.json")
    assert book.add("dana@lab.example", Role.REVIEWER, oidc=True) is None
    book.add("@lab.example", Role.VIEWER, oidc=True)
    assert book.oidc_identity("dana@lab.example") == Identity("dana@lab.example", Role.REVIEWER, "oidc")
    assert book.oidc_identity("eve@lab.example") == Identity("eve@lab.example", Role.VIEWER, "oidc")
    assert book.oidc_identity("mallory@gmail.example") is None and book.oidc_identity(None) is None
    assert book.verify("dana@lab.example", "") is None                 # no token sign-in for an OIDC user
    with pytest.raises(UserBookError, match="no token to rotate"):
        book.rotate("dana@lab.example")


def test_an_unreadable_users_file_is_named(tmp_path):
    path = tmp_path / "users.json"
    path.write_text("{not json")
    with pytest.raises(UserBookError, match=str(path)):
        UserBook(path).verify("a", "b")
    path.write_text(json.dumps({"format": "memwb-users", "users": {"a": {"role": "admin"}}}))
    with pytest.raises(UserBookError, match="no valid role"):
        UserBook(path).users()


def test_failed_sign_ins_are_throttled_per_name():
    now = [0.0]
    throttle = SignInThrottle(limit=3, window=60, clock=lambda: now[0])
    for _ in range(3):
        assert throttle.wait("a") == 0
        throttle.failed("a")
    assert throttle.wait("a") == 60 and throttle.wait("b") == 0
    now[0] = 61
    assert throttle.wait("a") == 0
    throttle.failed("a")
    throttle.succeeded("a")
    assert throttle.wait("a") == 0


def test_memwb_auth_prints_the_token_once_and_stores_its_hash(tmp_path):
    env = {**os.environ, "MEMWB_WORKSPACE": str(tmp_path), "PYTHONPATH": str(ROOT)}

    def memwb(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "engine.cli", "auth", *args], env=env, cwd=ROOT, text=True,
                              capture_output=True, input=stdin, timeout=60)

    added = memwb("add", "alice", "--role", "reviewer")
    assert added.returncode == 0, added.stderr
    token = added.stdout.strip()
    assert "shown only now" in added.stderr and token not in added.stderr
    assert token not in (tmp_path / "users.json").read_text()
    assert UserBook(tmp_path / "users.json").verify("alice", token).role == Role.REVIEWER
    assert memwb("add", "bob", "--role", "viewer", "--password", stdin="correct horse battery\n").returncode == 0
    assert UserBook(tmp_path / "users.json").verify("bob", "correct horse battery").role == Role.VIEWER
    assert memwb("add", "carol@lab.example", "--role", "viewer", "--oidc").stdout == ""
    listed = memwb("list").stdout.splitlines()
    assert listed == ["alice  reviewer  token", "bob  viewer  token", "carol@lab.example  viewer  identity provider"]
    rotated = memwb("rotate", "alice").stdout.strip()
    assert rotated != token and UserBook(tmp_path / "users.json").verify("alice", token) is None
    assert memwb("role", "bob", "reviewer").returncode == 0
    gone = memwb("remove", "nobody")
    assert gone.returncode == 2 and "no user 'nobody'" in gone.stderr


# -- the data folders rule -----------------------------------------------------------------------------------
@pytest.fixture
def folders(tmp_path, monkeypatch):
    """A workspace, a data folder and, beside them, a folder the pages must not read."""
    workspace, data, outside = tmp_path / "ws", tmp_path / "data", tmp_path / "private"
    for d in (workspace, data, outside):
        d.mkdir()
    monkeypatch.setenv("MEMWB_WORKSPACE", str(workspace))
    monkeypatch.setenv(DATA_DIRS_ENV, os.pathsep.join([str(data), ""]))
    (data / "conv.jsonl").write_text("{}")
    (outside / "secret.jsonl").write_text("{}")
    return workspace, data, outside


def test_paths_inside_the_data_folders_resolve(folders):
    workspace, data, _ = folders
    assert data_dirs()[:2] == [workspace.resolve(), (ROOT / "datasets").resolve()]
    assert data.resolve() in data_dirs()
    assert resolve_data_path(str(data / "conv.jsonl")) == (data / "conv.jsonl").resolve()
    assert resolve_data_path("conv.jsonl") == (data / "conv.jsonl").resolve()          # relative: a data folder
    assert resolve_data_path(f"  {data}/sub/../conv.jsonl ") == (data / "conv.jsonl").resolve()
    assert resolve_data_path(ROOT / "datasets" / "demo" / "demo.jsonl").is_file()


def test_traversal_links_and_outside_paths_are_refused(folders):
    workspace, data, outside = folders
    (data / "link.jsonl").symlink_to(outside / "secret.jsonl")
    (data / "linkdir").symlink_to(outside)
    attempts = [str(outside / "secret.jsonl"), f"{data}/../private/secret.jsonl", "../private/secret.jsonl",
                str(data / "link.jsonl"), str(data / "linkdir" / "secret.jsonl"), "/etc/passwd",
                "~/.ssh/id_rsa", f"{workspace}/../private/secret.jsonl"]
    for text in attempts:
        with pytest.raises(PathRefused, match="outside the folders the workbench reads from"):
            resolve_data_path(text)
    for text in ("", "   ", "a\x00b"):
        with pytest.raises(PathRefused):
            resolve_data_path(text)


# -- secrets ---------------------------------------------------------------------------------------------------
def test_secret_values_urls_and_key_shapes_are_redacted(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-planted-0123456789abcdef")
    monkeypatch.setenv("LAB_SERVICE_TOKEN", "tok_ABCDEFGH12345678")
    monkeypatch.setenv("PGPASSWORD", "pg-pass-1234")
    monkeypatch.setenv("MEMWB_OPENAI_API_KEY", "EMPTY")                # a placeholder, not a secret
    text = ("401: Incorrect API key provided: sk-test-planted-0123456789abcdef; token tok_ABCDEFGH12345678; "
            "postgresql://me:pg-pass-1234@db/x; Authorization: Bearer abcdefghijklmnop; an EMPTY string; "
            "sk-proj-ZZZZZZZZZZZZZZZZZZZZZZZZ")
    out = redact(text)
    for secret in ("sk-test-planted", "tok_ABCDEFGH12345678", "pg-pass-1234", "abcdefghijklmnop", "ZZZZZZZZ"):
        assert secret not in out, out
    assert "postgresql://***@db/x" in out and "an EMPTY string" in out and "Bearer ***" in out
    status = secret_status()
    assert status["OPENAI_API_KEY"] and status["LAB_SERVICE_TOKEN"] and "sk-" not in json.dumps(status)


def test_the_server_output_is_redacted_on_its_way_out(capsys, monkeypatch):
    """`memwb ui` passes every line its server prints through `redact` (here a child that prints the key)."""
    from engine.serve import run_server

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-planted-in-the-server-0123456789")
    code = run_server([sys.executable, "-c", "import os, sys; print('key', os.environ['OPENAI_API_KEY']); "
                                             "print('again', os.environ['OPENAI_API_KEY'], file=sys.stderr); "
                                             "sys.exit(3)"], dict(os.environ))
    out, err = capsys.readouterr()
    assert code == 3 and out == "key ***\n" and err == "again ***\n"

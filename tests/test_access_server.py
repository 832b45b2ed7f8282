"""`memwb ui` as a user starts it: where it listens, sign-in in a real browser, roles against the database,
secrets kept out of pages, logs, dumps and errors, and a clean stop on SIGTERM / SIGINT."""
from __future__ import annotations

import contextlib
import http.server
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import urllib.request
from pathlib import Path

import pytest

from conftest import ROOT
from engine.core.access import Role
from engine.store.log_store import Store
from engine.store.users import UserBook
from workbench.driver import (CHROMIUM, browser_page, click, demo_turn_after, free_port, jump_to_turn, open_page,
                              open_tab, wait_idle, wait_loaded, wait_until_up)

pytestmark = pytest.mark.slow
PLANTED = "sk-test-PLANTED-0123456789abcdefXYZ"          # a fake key: it must never show anywhere
PAGES = ("replay", "graph", "consolidation", "retrieval", "annotate", "benchmark")


def machine_address() -> str | None:
    """A non-loopback IPv4 address of this machine (None if it has none)."""
    try:
        out = subprocess.run(["ip", "-4", "-o", "addr", "show"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        out = ""
    found = [a for a in re.findall(r"inet (\d+\.\d+\.\d+\.\d+)/", out) if not a.startswith("127.")]
    if not found:
        with contextlib.suppress(OSError):
            found = [a for a in socket.gethostbyname_ex(socket.gethostname())[2] if not a.startswith("127.")]
    return found[0] if found else None


def accepts(host: str, port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(3)
        try:
            s.connect((host, port))
            return True
        except OSError:                     # refused (nothing listens there), or unreachable
            return False


def websocket_answer(port: int, host: str) -> str:
    """The status line the server answers a WebSocket handshake with, for a request naming `host`."""
    import base64

    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        key = base64.b64encode(os.urandom(16)).decode()
        s.sendall((f"GET /_stcore/stream HTTP/1.1\r\nHost: {host}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                   f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\nOrigin: http://{host}\r\n"
                   "Sec-WebSocket-Protocol: streamlit\r\n\r\n").encode())
        return s.recv(200).split(b"\r\n")[0].decode()


def children(pid: int) -> list[int]:
    out = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout
    return [int(x) for x in out.split()]


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][0]
    except (OSError, IndexError):
        return False
    return state != "Z"


@contextlib.contextmanager
def memwb_ui(workspace: Path, *args: str, env: dict[str, str] | None = None, host: str = "127.0.0.1",
             log: Path | None = None, port: int | None = None, cwd: Path = ROOT):
    """`memwb ui --headless --port P ARGS` started as a user would (python -m engine.cli, from `cwd`);
    yields (process, port, log file) once it answers on `host`, and stops it (SIGTERM) afterwards."""
    port = port or free_port()
    log = log or workspace.parent / f"ui-{port}.log"
    out = open(log, "w")
    proc = subprocess.Popen([sys.executable, "-m", "engine.cli", "ui", "--headless", "--port", str(port), *args],
                            cwd=cwd, stdout=out, stderr=subprocess.STDOUT,
                            env={**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT),
                                 "MEMWB_WORKSPACE": str(workspace), **(env or {})})
    try:
        wait_until_up(f"http://{host}:{port}", proc, str(log), timeout=180)
        yield proc, port, log
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
        out.close()


# -- where it listens, and a clean stop --------------------------------------------------------------------------
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_ui_listens_on_loopback_only_and_stops_cleanly(tmp_path, sig):
    """Accepts on 127.0.0.1, refuses on the machine's other address (and on 127.0.0.2, which a wildcard bind
    would accept), refuses a page connection naming another host (DNS rebinding); after `kill -TERM` (or -INT) of memwb ui nothing listens on the port and its child is gone."""
    other = machine_address()
    with memwb_ui(tmp_path / "ws") as (proc, port, log):
        assert accepts("127.0.0.1", port)
        assert not accepts("127.0.0.2", port)
        assert websocket_answer(port, f"127.0.0.1:{port}").endswith("101 Switching Protocols")
        assert websocket_answer(port, f"attacker.example:{port}").endswith("403 Forbidden")     # DNS rebinding
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=10) as r:
            assert "_streamlit_xsrf=" in (r.headers.get("Set-Cookie") or "")            # XSRF protection on
        if other is not None:
            assert not accepts(other, port), f"{other}:{port} answered: the server listens beyond loopback"
        server = children(proc.pid)
        assert len(server) == 1 and alive(server[0])
        subprocess.run(["kill", f"-{sig.name.removeprefix('SIG')}", str(proc.pid)], check=True)
        proc.wait(60)
        assert not accepts("127.0.0.1", port)
        assert not alive(server[0]), "the Streamlit child outlived memwb ui"
    assert "URL: http://127.0.0.1:" in log.read_text()
    if other is None:
        pytest.skip("this machine has no non-loopback IPv4 address: only 127.0.0.2 was checked")


def test_a_wide_bind_without_any_way_to_sign_in_is_refused(tmp_path):
    port = free_port()
    run = subprocess.run([sys.executable, "-m", "engine.cli", "ui", "--headless", "--host", "0.0.0.0", "--port",
                          str(port)], cwd=ROOT, capture_output=True, text=True, timeout=60,
                         env={**os.environ, "PYTHONPATH": str(ROOT), "MEMWB_WORKSPACE": str(tmp_path),
                              "HOME": str(tmp_path)})
    assert run.returncode == 2 and "nobody could sign in" in run.stderr and "memwb auth add" in run.stderr
    assert not accepts("127.0.0.1", port)


# -- sign-in and roles in a real browser ---------------------------------------------------------------------------
def sign_in(page, url: str, name: str, secret: str) -> None:
    page.goto(url)
    page.get_by_label("User name").fill(name)
    page.get_by_label("Token or password").fill(secret)
    page.get_by_role("button", name="Sign in", exact=True).click()
    wait_idle(page, 1500)


def open_settings(page) -> None:
    page.get_by_test_id("stSidebar").get_by_text("Settings", exact=True).click()
    wait_idle(page)


def page_text_everywhere(page) -> str:
    """The HTML of the page and of every frame in it (the graph and components live in iframes)."""
    parts = []
    for frame in page.frames:
        with contextlib.suppress(Exception):
            parts.append(frame.content())
    return "\n".join(parts)


needs_browser = pytest.mark.skipif(not shutil.which(CHROMIUM) and not Path(CHROMIUM).exists(),
                                   reason=f"{CHROMIUM} missing: scripts/test.sh installs Debian chromium")


@pytest.mark.browser
@needs_browser
def test_shared_workbench_asks_for_sign_in_and_enforces_roles(tmp_path):
    workspace = tmp_path / "ws"
    book = UserBook(workspace / "users.json")
    rita, vera = book.add("rita", Role.REVIEWER), book.add("vera", Role.VIEWER)
    env = {"OPENAI_API_KEY": PLANTED, "HOME": str(tmp_path)}
    with memwb_ui(workspace, "--host", "0.0.0.0", env=env) as (proc, port, log), browser_page() as page:
        url = f"http://127.0.0.1:{port}"
        # every page asks for sign-in first, and shows nothing of itself
        for path in PAGES:
            page.goto(f"{url}/{path}?session=x.sqlite&turn=3")
            page.get_by_label("Token or password").wait_for()
            wait_loaded(page)
            body = page.inner_text("body")
            assert "sign in" in body.lower() and "Next ▶" not in body and "Turn ·" not in body, (path, body[:300])
            assert page.get_by_test_id("stSidebarNav").count() == 0
        sign_in(page, url, "rita", "not-the-token")
        assert "Unknown name or wrong token" in page.inner_text("body")

        # a reviewer decides: every decision carries her name
        sign_in(page, url, "rita", rita)
        page.get_by_role("button", name="Next ▶").wait_for()
        assert PLANTED not in page_text_everywhere(page)
        jump_to_turn(page, demo_turn_after("D5:9"))
        session = re.search(r"session=([^&]+)", page.url).group(1)
        db = workspace / "sessions" / session
        assert Store(db).meta()["owner"] == "rita"
        open_page(page, "Consolidation")
        click(page, "Run diagnosis")
        click(page, "Accept gate passes, reject the rest")
        page.get_by_role("button", name=re.compile(r"^Apply decisions")).first.click()
        wait_idle(page, 1500)
        page.get_by_text(re.compile(r"committed: \d+ applied")).wait_for()
        state = Store(db).load_state()
        decided = [p for p in state.proposals.values() if p.decided_by]
        assert decided and {p.decided_by for p in decided} == {"rita"}
        run = state.last_committed_run()
        assert run is not None
        open_settings(page)
        assert "OPENAI_API_KEY · set" in page.inner_text("body").replace("\u2060", "")
        assert PLANTED not in page_text_everywhere(page)

        seq = Store(db).last_seq()
        viewer = page.context.browser.new_page(viewport={"width": 1500, "height": 1100})     # another person
        viewer.set_default_timeout(120_000)
        sign_in(viewer, f"{url}/consolidation?session={session}", "vera", vera)
        viewer.get_by_text("Run diff & undo", exact=True).wait_for()
        body = viewer.inner_text("body")
        assert "Signed in as vera (viewer)" in body.replace("\\", "")
        open_tab(viewer, "Run diff & undo")
        undo = viewer.get_by_role("button", name=re.compile(r"^Undo last run"))
        assert undo.is_disabled()
        assert viewer.get_by_role("button", name="Run diagnosis").is_disabled()
        undo.dispatch_event("click")                # a click sent to the disabled button anyway does nothing
        wait_idle(viewer)
        assert Store(db).last_seq() == seq and Store(db).load_state().runs[run.run_id].status == "committed"
        open_page(viewer, "Replay")                  # the viewer's replay: a private branch, rita's untouched
        click(viewer, "Next ▶")
        viewer.get_by_text(re.compile("your private branch")).wait_for()
        assert Store(db).last_seq() == seq
        branch = re.search(r"session=([^&]+)", viewer.url).group(1)
        assert branch != session and Store(workspace / "sessions" / branch).meta()["owner"] == "vera"
        assert PLANTED not in page_text_everywhere(viewer)
    text = log.read_text()
    assert "warning: listening on 0.0.0.0" in text and "plain HTTP" in text
    assert PLANTED not in text


# -- secrets: an endpoint that echoes the key back in its error ---------------------------------------------------
class EchoingEndpoint(http.server.BaseHTTPRequestHandler):
    """An OpenAI-compatible endpoint that refuses every request and quotes the key it was sent (as a careless
    gateway does): the likeliest way a key reaches an error message, a call record and a page."""

    def do_POST(self):  # noqa: N802
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        key = (self.headers.get("Authorization") or "").removeprefix("Bearer ")
        body = json.dumps({"error": {"message": f"Incorrect API key provided: {key}", "type": "invalid_request_error",
                                     "code": "invalid_api_key"}}).encode()
        self.send_response(401)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def echoing_endpoint():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), EchoingEndpoint)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}/v1"
    server.shutdown()
    server.server_close()


@pytest.mark.browser
@needs_browser
def test_a_planted_key_never_shows_in_errors_records_dumps_pages_or_logs(tmp_path, echoing_endpoint):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "MEMWB_WORKSPACE": str(tmp_path / "ws"),
           "OPENAI_API_KEY": PLANTED, "MEMWB_OPENAI_BASE_URL": echoing_endpoint, "MEMWB_OPENAI_MAX_RETRIES": "0"}
    db = tmp_path / "s.sqlite"

    def memwb(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "engine.cli", *args], cwd=ROOT, env=env, capture_output=True,
                              timeout=900)

    replayed = memwb("replay", str(ROOT / "datasets" / "fixtures" / "tiny.jsonl"), "--db", str(db), "--llm", "openai",
                     "--consolidate", "every-5-turns")
    err = replayed.stderr.decode()
    assert replayed.returncode == 1 and "every LLM call failed" in err and "HTTP_401" in err, err[-2000:]
    assert "Incorrect API key provided: ***" in err and PLANTED.encode() not in replayed.stdout + replayed.stderr
    calls = [op.payload for op in Store(db).ops() if op.kind == "llm_call"]
    assert calls and all("Incorrect API key provided: ***" in c["error"] for c in calls)       # the echo was there
    for path in tmp_path.glob("s.sqlite*"):
        assert PLANTED.encode() not in path.read_bytes(), path
    dumped = memwb("dump", "--db", str(db))
    assert dumped.returncode == 0 and b"Incorrect API key provided: ***" in dumped.stdout
    assert PLANTED.encode() not in dumped.stdout + dumped.stderr
    password = "pg-PLANTED-password-42"
    refused = memwb("export", "--db", f"postgresql://memwb:{password}@127.0.0.1:{free_port()}/x")
    assert refused.returncode == 2 and b"memwb export: error:" in refused.stderr
    assert password.encode() not in refused.stderr + refused.stdout

    with memwb_ui(tmp_path / "ws", "--db", str(db), env={k: env[k] for k in ("OPENAI_API_KEY", "MEMWB_OPENAI_BASE_URL",
                                                                         "MEMWB_OPENAI_MAX_RETRIES")}) as \
            (proc, port, log), browser_page() as page:
        url = f"http://127.0.0.1:{port}"
        page.goto(url)
        page.get_by_role("button", name="Next ▶").wait_for()
        wait_loaded(page)
        seen = [page_text_everywhere(page)]
        open_settings(page)
        assert "OPENAI_API_KEY · set" in page.inner_text("body").replace("\u2060", "")
        seen.append(page_text_everywhere(page))
        for title in ("Memory graph", "Retrieval", "Annotate", "Benchmark", "Consolidation"):
            open_page(page, title)
            page.wait_for_timeout(1000)
            seen.append(page_text_everywhere(page))
        open_tab(page, "Audit log", 1500)
        seen.append(page_text_everywhere(page))
        assert not any(PLANTED in html for html in seen)
    assert PLANTED not in log.read_text()


# -- sign-in through an identity provider (st.login) ----------------------------------------------------------------
@pytest.mark.browser
@needs_browser
def test_identity_provider_sign_in_gives_the_listed_role_and_records_the_address(tmp_path):
    """Streamlit's OIDC login against a real (local) provider: a listed address signs in with its role and is
    what the session records; an address the users file does not list gets no page."""
    import secrets as tokens

    from oidc_provider import Provider

    workspace, run = tmp_path / "ws", tmp_path / "run"
    UserBook(workspace / "users.json").add("dana@lab.example", Role.REVIEWER, oidc=True)
    port = free_port()
    with Provider("memwb-test", "client-secret-for-tests") as idp:
        (run / ".streamlit").mkdir(parents=True)
        (run / ".streamlit" / "secrets.toml").write_text(
            f'[auth]\nredirect_uri = "http://127.0.0.1:{port}/oauth2callback"\n'
            f'cookie_secret = "{tokens.token_hex(32)}"\nclient_id = "memwb-test"\n'
            f'client_secret = "client-secret-for-tests"\nserver_metadata_url = "{idp.metadata_url}"\n')
        idp.account = {"sub": "1", "email": "dana@lab.example", "name": "Dana"}
        with memwb_ui(workspace, "--host", "0.0.0.0", port=port, cwd=run, env={"HOME": str(tmp_path)}) as \
                (proc, port, log), browser_page() as page:
            url = f"http://127.0.0.1:{port}"
            page.goto(f"{url}/graph")
            page.get_by_role("button", name="Sign in with the identity provider").click()
            page.get_by_role("button", name="Next ▶").wait_for()             # back from the provider, signed in
            wait_idle(page)
            sidebar = page.get_by_test_id("stSidebar").inner_text().replace("\u2060", "")
            assert "dana@lab.example · reviewer · signed in by oidc" in sidebar, sidebar
            session = re.search(r"session=([^&]+)", page.url).group(1)
            assert Store(workspace / "sessions" / session).meta()["owner"] == "dana@lab.example"

            idp.account = {"sub": "2", "email": "eve@elsewhere.example", "name": "Eve"}
            other = page.context.browser.new_page()
            other.set_default_timeout(120_000)
            other.goto(url)
            other.get_by_role("button", name="Sign in with the identity provider").click()
            other.get_by_text(re.compile("has no role in this workbench")).wait_for()
            wait_idle(other)
            body = other.inner_text("body")
            assert "Next ▶" not in body and "Turn ·" not in body
        assert "client-secret-for-tests" not in log.read_text()

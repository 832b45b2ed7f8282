"""Start the workbench on a free loopback port, the way the tests and the screenshot script need it: as
`streamlit run` on the app, or as a user does with `memwb ui`, and stop it afterwards.
"""
from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Iterator

from engine.core.ports import free_port
from engine.serve import unwatched_library

ROOT = Path(__file__).resolve().parents[2]


@contextlib.contextmanager
def running_app(env: dict[str, str] | None = None, timeout: float = 120, cwd: Path | None = None,
                via_cli: bool = False, cli_args: list[str] | None = None, root: Path = ROOT,
                by_hand: bool = False) -> Iterator[str]:
    """A streamlit server on a free loopback port; yields its base URL and stops it afterwards.

    `via_cli` starts it the way a user does, with `memwb ui` (from `cwd`, the repository by default) and
    `cli_args` after it (say, `["--db", FILE]`). `by_hand` starts it as someone typing `streamlit run
    workbench/app.py` in the checkout would, with only a port: the rest comes from the checkout's
    `.streamlit/config.toml`. `root` is the checkout whose app and library it runs (this one by default; a
    copy, for a test that edits the code under a running server)."""
    port = free_port()
    cli = [sys.executable, "-m", "engine.cli", "ui", "--headless", "--port", str(port), *(cli_args or [])]
    hand = [sys.executable, "-m", "streamlit", "run", "workbench/app.py", "--server.headless", "true",
            "--server.port", str(port)]
    cmd = cli if via_cli else hand if by_hand else \
        [sys.executable, "-m", "streamlit", "run", str(root / "workbench" / "app.py"), "--server.headless", "true",
         "--server.port", str(port), "--server.address", "127.0.0.1", "--browser.gatherUsageStats", "false",
         *unwatched_library(root)]
    log = open(Path(os.environ.get("TMPDIR", "/tmp")) / f"memwb-app-{port}.log", "w")
    path = os.pathsep.join(p for p in (str(root), os.environ.get("PYTHONPATH", "")) if p)
    proc = subprocess.Popen(cmd, cwd=cwd or root, env={**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": path,
                                                       **(env or {})},
                            stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until_up(url, proc, log.name, timeout)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


def wait_until_up(url: str, proc: subprocess.Popen, log_name: str, timeout: float = 120) -> None:
    """Return once the server at `url` answers its health check; raise naming the log if it exits or times out."""
    deadline = time.time() + timeout
    while True:
        try:
            with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            if proc.poll() is not None or time.time() > deadline:
                raise RuntimeError(f"the workbench did not start; see {log_name}") from None
            time.sleep(0.5)

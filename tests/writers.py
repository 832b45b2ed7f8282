"""Shared by the concurrency and crash tests: a short real conversation, `memwb` as a real process, and the
checks that a database written by several processes (or killed mid-write) is whole."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from engine.core.oplog import OpKind
from engine.eval.integrity import check_database
from engine.session import open_session
from engine.store.log_store import Store

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "datasets" / "demo" / "demo.jsonl"
SCHEDULE = "every-10-turns"


def demo_prefix(folder: Path, turns: int) -> Path:
    """The bundled demo's first `turns` turns as a JSONL file (a run every 10 turns gives several runs)."""
    path = folder / f"demo-{turns}.jsonl"
    if not path.exists():
        lines = DEMO.read_text(encoding="utf-8").splitlines()[:turns]
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def env(workspace: str | None = None) -> dict:
    """A writer's environment. Each process gets an empty workspace unless given one, so it runs the model as a
    first replay does and stays busy long enough for a second writer to start beside it (a shared, warm
    embedding cache would let a 40-turn replay end before another process has even started)."""
    return {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT),
            "MEMWB_WORKSPACE": workspace or tempfile.mkdtemp(prefix="memwb-writer-")}


def memwb(*args, paced: float = 0.0, **kw) -> subprocess.Popen:
    """`memwb ARGS` as its own process (stdout and stderr captured). `paced` seconds are spent after each
    turn's records are written (tests/crash_harness.py), so another writer surely starts while this one is
    mid-replay, however fast the machine and its caches are."""
    command = [str(ROOT / "tests" / "crash_harness.py")] if paced else ["-m", "engine.cli"]
    return subprocess.Popen([sys.executable, *command, *map(str, args)], cwd=ROOT,
                            env={**env(), "MEMWB_CRASH_PAUSE": str(paced)},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)


def finish(proc: subprocess.Popen, timeout: float = 900) -> tuple[int, str, str]:
    out, err = proc.communicate(timeout=timeout)
    return proc.returncode, out, err


def replay_args(path: Path, db, schedule: str = SCHEDULE) -> list:
    return ["replay", path, "--db", db, "--consolidate", schedule, "--quiet"]


def assert_whole(db, conversation_path: Path, turns: int | None = None) -> None:
    """`memwb check` finds nothing (ids once, turns once, tables equal to the fold, no run left open,
    archived nodes reachable, raw text intact), and the turns are the file's first ones, in order."""
    report = check_database(db)
    print(f"{str(db)[-40:]}: {len(report.findings)} findings", end="; ")
    assert [f.line() for f in report.findings] == []
    lines = [json.loads(x) for x in conversation_path.read_text(encoding="utf-8").splitlines() if x.strip()]
    state = open_session(db, create=False).state
    expected = [t["id"] for t in lines][: state.turn if turns is None else turns]
    assert state.turn_ids == expected
    print(f"turns {len(state.turn_ids)} in file order")


def turns_in(db) -> int:
    """Turns the log holds now (0 for a database nothing was written to yet)."""
    return sum(1 for _ in Store(db).ops(kinds=[OpKind.TURN_INGESTED]))


def export(db) -> dict:
    return open_session(db, create=False).export()

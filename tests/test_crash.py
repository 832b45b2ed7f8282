"""kill -9 during replay, at least 20 times, in ingest, diagnosis and apply: nothing half-written survives.

A real `memwb replay` process (tests/crash_harness.py: the real command line plus phase markers) is killed
with SIGKILL inside a phase, the database is checked (ids once, turns once and whole, tables equal to the
fold, no open run), the replay is resumed and killed again; in the end the resumed memory must be the one an
uninterrupted replay makes, so no scheduled consolidation was skipped or done twice.
"""
from __future__ import annotations

import random
import signal
import subprocess
import sys
from collections import Counter

import pytest

from tests.writers import ROOT, assert_whole, demo_prefix, env, export, replay_args

pytestmark = pytest.mark.slow
TURNS = 60
KILLS = 21
PHASES = ("ingest", "diagnosis", "apply")


def start(conversation, db, workspace: str, at: str = "") -> subprocess.Popen:
    """The harness replaying `conversation` into `db`, held at `at` ("phase:n") for the kill, else unpaused.
    The processes share one workspace: a kill tests the database, and a warm embedding cache only shortens the
    stretches between the phases."""
    return subprocess.Popen([sys.executable, str(ROOT / "tests" / "crash_harness.py"),
                             *map(str, replay_args(conversation, db))], cwd=ROOT,
                            env={**env(workspace), "MEMWB_CRASH_AT": at, "MEMWB_CRASH_PAUSE": "0"},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def kill_in(proc: subprocess.Popen, phase: str, nth: int) -> bool:
    """SIGKILL `proc` at the `nth` `phase` it reaches, where the harness holds it; False if it finished first."""
    seen = 0
    for line in proc.stdout:
        if line.strip() == f"PHASE {phase}":
            seen += 1
            if seen == nth:
                proc.send_signal(signal.SIGKILL)
                proc.wait()
                return True
    proc.wait()
    return False


def test_kill_dash_nine_during_replay_leaves_a_whole_database(tmp_path):
    conversation = demo_prefix(tmp_path, TURNS)
    workspace = str(tmp_path / "workspace")
    clean = tmp_path / "clean.sqlite"
    proc = start(conversation, clean, workspace)
    _, err = proc.communicate(timeout=900)
    assert proc.returncode == 0, err

    db = tmp_path / "killed.sqlite"
    rng = random.Random(7)
    landed: Counter = Counter()
    attempts = 0
    while sum(landed.values()) < KILLS and attempts < 3 * KILLS:
        attempts += 1
        phase = PHASES[attempts % len(PHASES)]
        nth = rng.randint(1, 8) if phase == "ingest" else 1      # ingest kills move the replay on
        proc = start(conversation, db, workspace, f"{phase}:{nth}")
        if kill_in(proc, phase, nth):
            landed[phase] += 1
            assert_whole(db, conversation)
        else:
            assert proc.returncode == 0, proc.stderr.read()
            db.unlink()
            for side in tmp_path.glob("killed.sqlite-*"):
                side.unlink()
    print(f"kill -9 landed: {dict(landed)} in {attempts} attempts")
    assert sum(landed.values()) >= KILLS and all(landed[p] >= 5 for p in PHASES), landed

    proc = start(conversation, db, workspace)
    out, err = proc.communicate(timeout=900)
    assert proc.returncode == 0, err
    assert_whole(db, conversation, TURNS)
    assert export(db) == export(clean)

"""Shared by the concurrency and crash tests: a short real conversation, `memwb` as a real process, and the
checks that a database written by several processes (or killed mid-write) is whole."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

from engine.oplog import OpKind
from engine.session import open_session
from engine.store import Store, rows_of

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


def env() -> dict:
    return {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT)}


def memwb(*args, **kw) -> subprocess.Popen:
    """`memwb ARGS` as its own process (stdout and stderr captured)."""
    return subprocess.Popen([sys.executable, "-m", "engine.cli", *map(str, args)], cwd=ROOT, env=env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)


def finish(proc: subprocess.Popen, timeout: float = 900) -> tuple[int, str, str]:
    out, err = proc.communicate(timeout=timeout)
    return proc.returncode, out, err


def replay_args(path: Path, db, schedule: str = SCHEDULE) -> list:
    return ["replay", path, "--db", db, "--consolidate", schedule, "--quiet"]


def log_ids(db) -> dict[str, list]:
    """Every id the log hands out, in log order (duplicates kept, to be counted)."""
    out: dict[str, list] = {"node": [], "run": [], "proposal": [], "turn": []}
    for op in Store(db).ops(kinds=[OpKind.NODE_CREATED, OpKind.RUN_STARTED, OpKind.PROPOSAL_MADE,
                                   OpKind.TURN_INGESTED]):
        if op.kind == OpKind.NODE_CREATED and not op.payload.get("restored"):
            out["node"].append(op.payload["node"]["id"])
        elif op.kind == OpKind.RUN_STARTED:
            out["run"].append(op.run_id)
        elif op.kind == OpKind.PROPOSAL_MADE:
            out["proposal"].append(op.payload["proposal"]["id"])
        elif op.kind == OpKind.TURN_INGESTED:
            out["turn"].append(op.payload["turn_id"])
    return out


def duplicates(db) -> dict[str, list]:
    """Ids handed out more than once, per kind (all empty for a whole database)."""
    return {kind: sorted(k for k, n in Counter(ids).items() if n > 1) for kind, ids in log_ids(db).items()}


def assert_whole(db, conversation_path: Path, turns: int | None = None) -> None:
    """No duplicate id, no lost or doubled turn, each turn's text in its unit, tables equal to the fold
    of the log, no run left open."""
    dups = duplicates(db)
    print(f"{str(db)[-40:]}: duplicate ids {sum(map(len, dups.values()))}", end="; ")
    assert dups == {"node": [], "run": [], "proposal": [], "turn": []}
    lines = [json.loads(x) for x in conversation_path.read_text(encoding="utf-8").splitlines() if x.strip()]
    engine = open_session(db, create=False)
    state = engine.state
    expected = [t["id"] for t in lines][: state.turn if turns is None else turns]
    assert state.turn_ids == expected
    for t in lines[: len(expected)]:
        assert state.nodes[state.turn_units[t["id"]]].raw.endswith(t["text"]), t["id"]
    assert rows_of(engine.store.load_state(checkpoints=False)) == rows_of(state) == engine.store.table_rows()
    assert state.open_runs() == []
    print(f"turns {len(state.turn_ids)}/{len(expected)} once each, tables = fold, no open run")


def turns_in(db) -> int:
    """Turns the log holds now (0 for a database nothing was written to yet)."""
    return sum(1 for _ in Store(db).ops(kinds=[OpKind.TURN_INGESTED]))


def export(db) -> dict:
    return open_session(db, create=False).export()

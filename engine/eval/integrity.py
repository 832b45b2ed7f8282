"""`memwb check`: is a memory database what its log says it is?

Each check reads the database as stored and reports findings, one line each,
named by a code. The log is folded once, from its first record and without
checkpoints, and everything else is compared against that fold:

- ``SQLITE_INTEGRITY``: SQLite's own ``PRAGMA integrity_check`` (other databases: skipped).
- ``FOLD_FAILED``: the log does not fold (an unknown kind, a payload that does not apply).
- ``FOLD_MISMATCH``: the materialized node/edge/proposal tables differ from the fold
  (`engine.store.tables.rows_of`), or a checkpoint differs from the fold up to its seq.
- ``CHECKPOINT_UNREADABLE``: a checkpoint of the current format that cannot be decoded.
- ``DUPLICATE_NODE_ID`` / ``DUPLICATE_RUN_ID`` / ``DUPLICATE_PROPOSAL_ID``: an id created,
  started or made more than once in the log.
- ``TURN_INGESTED_TWICE``: two ``turn_ingested`` records for one dataset turn.
- ``OPEN_RUN``: a run with undecided proposals, which blocks every later run.
- ``ARCHIVED_UNREACHABLE``: a node moved off the surface that no recovery link of the
  engine's schema leads to (`engine.eval.diagnostics.retired_orphans`).
- ``RAW_TEXT_CHANGED``: a turn node whose raw text (with its speaker, time and session)
  no longer hashes to the sha256 logged when the turn was ingested. The hash is
  `Turn.content_hash`, over what the turn node keeps: speaker, text, time, session and
  image caption, the text and caption read back out of the node's raw text.

Opening a database for a check creates nothing: a missing file is an error, not an
empty memory.
"""
from __future__ import annotations

import json
import zlib
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from sqlmodel import Session, select

from engine.core.conversation import IMAGE_NOTE, Turn
from engine.core.node import Node
from engine.core.oplog import OpRecord
from engine.core.ops import apply, payload_of
from engine.core.payloads import NodeCreated, ProposalMade, RunStarted, StatusChanged, TurnIngested
from engine.core.proposal import ProposalCounts
from engine.core.state import CHECKPOINT_FORMAT, MemoryState
from engine.engines import engine_schema
from engine.eval.diagnostics import retired_orphans
from engine.store.log_store import Store
from engine.store.tables import CheckpointRow, rows_of

SHOWN = 10          # details listed per finding kind before "… and N more"


class Code:
    SQLITE_INTEGRITY = "SQLITE_INTEGRITY"
    FOLD_FAILED = "FOLD_FAILED"
    FOLD_MISMATCH = "FOLD_MISMATCH"
    CHECKPOINT_UNREADABLE = "CHECKPOINT_UNREADABLE"
    DUPLICATE_NODE_ID = "DUPLICATE_NODE_ID"
    DUPLICATE_RUN_ID = "DUPLICATE_RUN_ID"
    DUPLICATE_PROPOSAL_ID = "DUPLICATE_PROPOSAL_ID"
    TURN_INGESTED_TWICE = "TURN_INGESTED_TWICE"
    OPEN_RUN = "OPEN_RUN"
    ARCHIVED_UNREACHABLE = "ARCHIVED_UNREACHABLE"
    RAW_TEXT_CHANGED = "RAW_TEXT_CHANGED"


@dataclass(frozen=True)
class Finding:
    code: str
    message: str

    def line(self) -> str:
        return f"{self.code} {self.message}"


@dataclass
class CheckReport:
    location: str
    findings: list[Finding] = field(default_factory=list)
    records: int = 0
    nodes: int = 0
    turns: int = 0
    runs: int = 0
    checkpoints: int = 0
    hashed_turns: int = 0          # turns whose raw text was checked against a stored hash

    def add(self, code: str, message: str) -> None:
        self.findings.append(Finding(code, message))

    def ok_line(self) -> str:
        unhashed = self.turns - self.hashed_turns
        note = f"; {unhashed} turn(s) logged without a content hash, raw text not checked" if unhashed else ""
        return (f"ok: {self.location}: {self.records} records fold to the tables and {self.checkpoints} "
                f"checkpoint(s); {self.nodes} nodes, {self.turns} turns, {self.runs} runs; ids unique, no open "
                f"run, archived nodes reachable, raw text intact{note}")


def check_database(target: str | Path) -> CheckReport:
    """Every check on the database at `target` (a file or URL), which must already hold a memory."""
    store = Store(target, create=False)
    name = store.get_meta("engine")
    store.schema = engine_schema(name) if name else None      # which statuses are on the surface
    return check_store(store, shown_db=str(target))


def check_store(store: Store, shown_db: str | None = None) -> CheckReport:
    report = CheckReport(store.location)
    _sqlite_integrity(store, report)
    scan = _LogScan()
    state = MemoryState(schema=store.schema)
    checkpoints = _checkpoints(store, report)
    report.checkpoints = len(checkpoints)
    folded = True
    try:
        for op in store.ops():
            report.records += 1
            try:
                scan.see(op)
                if folded:
                    apply(state, op)
            except Exception as exc:          # any failure is a finding, named with its record
                if folded:
                    report.add(Code.FOLD_FAILED, f"the log does not fold at seq {op.seq} ({op.kind}): "
                                                 f"{type(exc).__name__}: {exc}")
                folded = False
                continue
            if folded and op.seq in checkpoints:
                _compare_checkpoint(state, checkpoints.pop(op.seq), op.seq, report)
    except ValueError as exc:                 # a payload that is not JSON stops the reading of the log
        report.add(Code.FOLD_FAILED, f"the log cannot be read after seq {state.seq}: {exc}")
        folded = False
    for seq in sorted(checkpoints) if folded else ():
        report.add(Code.FOLD_MISMATCH, f"checkpoint at seq {seq} has no record of that seq in the log")
    scan.report(report)
    report.turns = len(scan.ingested)
    if folded:
        report.nodes, report.runs = len(state.nodes), len(state.runs)
        _compare_tables(store, state, report)
        _open_runs(state, report, shown_db or store.location)
        _reachable(state, scan.status_changed, report)
        _raw_text(state, scan, report)
    return report


# -- SQLite ------------------------------------------------------------------------------------
def _sqlite_integrity(store: Store, report: CheckReport) -> None:
    if not store.url.startswith("sqlite"):
        return
    with store.engine.connect() as conn:
        rows = [r[0] for r in conn.exec_driver_sql("PRAGMA integrity_check")]
    if rows != ["ok"]:
        for problem in rows[:SHOWN]:
            report.add(Code.SQLITE_INTEGRITY, problem)
        if len(rows) > SHOWN:
            report.add(Code.SQLITE_INTEGRITY, f"… and {len(rows) - SHOWN} more lines of integrity_check")


# -- one pass over the log ----------------------------------------------------------------------
class _LogScan:
    """Where each id is created, each run started, each proposal made and each turn ingested."""

    def __init__(self) -> None:
        self.nodes: dict[int, list[int]] = defaultdict(list)
        self.runs: dict[str, list[int]] = defaultdict(list)
        self.proposals: dict[int, list[int]] = defaultdict(list)
        self.ingested: dict[str, list[int]] = defaultdict(list)
        self.hashes: dict[str, tuple[str, int]] = {}        # turn id -> (sha256, seq) of its first ingestion
        self.status_changed: set[int] = set()

    def see(self, op: OpRecord) -> None:
        p = payload_of(op)
        if isinstance(p, NodeCreated):
            self.nodes[p.node_id].append(op.seq)
        elif isinstance(p, RunStarted):
            self.runs[op.run_id].append(op.seq)
        elif isinstance(p, ProposalMade):
            self.proposals[p.proposal_id].append(op.seq)
        elif isinstance(p, TurnIngested):
            self.ingested[p.turn_id].append(op.seq)
            if p.sha256 and p.turn_id not in self.hashes:
                self.hashes[p.turn_id] = (p.sha256, op.seq)
        elif isinstance(p, StatusChanged):
            self.status_changed.add(p.node)

    def report(self, report: CheckReport) -> None:
        for code, seen, what, verb in ((Code.DUPLICATE_NODE_ID, self.nodes, "node u{}", "created"),
                                       (Code.DUPLICATE_RUN_ID, self.runs, "run {}", "started"),
                                       (Code.DUPLICATE_PROPOSAL_ID, self.proposals, "proposal {}", "made"),
                                       (Code.TURN_INGESTED_TWICE, self.ingested, "turn {}", "ingested")):
            repeated = [(key, seqs) for key, seqs in seen.items() if len(seqs) > 1]
            for key, seqs in repeated[:SHOWN]:
                report.add(code, f"{what.format(key)} is {verb} {len(seqs)} times in the log "
                                 f"(seq {', '.join(map(str, seqs))})")
            if len(repeated) > SHOWN:
                report.add(code, f"… and {len(repeated) - SHOWN} more")


# -- fold against tables and checkpoints ----------------------------------------------------------
def _compare_tables(store: Store, state: MemoryState, report: CheckReport) -> None:
    expected, stored = rows_of(state), store.table_rows()
    for table, key in (("node", lambda r: r["id"]), ("edge", lambda r: (r["src"], r["dst"], r["type"])),
                       ("proposal", lambda r: r["id"])):
        want = {key(r): r for r in expected[table]}
        have = {key(r): r for r in stored[table]}
        problems = []
        for k in sorted(want.keys() | have.keys(), key=str):
            if k not in have:
                problems.append(f"{_name(table, k)} is in the log's fold but not in the {table} table")
            elif k not in want:
                problems.append(f"{_name(table, k)} is in the {table} table but not in the log's fold")
            elif want[k] != have[k]:
                cols = sorted(c for c in want[k] if want[k][c] != have[k].get(c))
                problems.append(f"{_name(table, k)} differs between the {table} table and the log's fold "
                                f"(column {', '.join(cols)})")
        for problem in problems[:SHOWN]:
            report.add(Code.FOLD_MISMATCH, problem)
        if len(problems) > SHOWN:
            report.add(Code.FOLD_MISMATCH, f"… and {len(problems) - SHOWN} more rows of the {table} table")


def _name(table: str, key) -> str:
    if table == "node":
        return f"node u{key}"
    if table == "edge":
        return f"edge u{key[0]} -{key[2]}-> u{key[1]}"
    return f"proposal {key}"


def _checkpoints(store: Store, report: CheckReport) -> dict[int, dict]:
    """Decoded checkpoints of the current format, by seq (an older format is skipped, as the store does)."""
    out = {}
    with Session(store.engine) as s:
        for row in s.exec(select(CheckpointRow).order_by(CheckpointRow.seq)):
            if row.format != CHECKPOINT_FORMAT:
                continue
            try:
                data = json.loads(zlib.decompress(row.body))
                out[row.seq] = _canonical(MemoryState.from_dict(data, schema=store.schema).to_dict())
            except (ValueError, KeyError, TypeError, zlib.error) as exc:
                report.add(Code.CHECKPOINT_UNREADABLE, f"checkpoint at seq {row.seq}: {type(exc).__name__}: {exc}")
    return out


def _compare_checkpoint(state: MemoryState, stored: dict, seq: int, report: CheckReport) -> None:
    folded = _canonical(state.to_dict())
    if folded != stored:
        parts = sorted(k for k in folded if folded[k] != stored.get(k))
        report.add(Code.FOLD_MISMATCH, f"checkpoint at seq {seq} differs from the fold of the log up to seq {seq} "
                                       f"({', '.join(parts)})")


def _canonical(snapshot: dict) -> dict:
    """A fold snapshot with its lists in a fixed order and JSON values, so two folds compare by content."""
    out = json.loads(json.dumps(snapshot))
    out["nodes"].sort(key=lambda n: n["id"])
    out["edges"].sort(key=lambda e: (e["src"], e["dst"], e["type"]))
    out["proposals"].sort(key=lambda p: p["id"])
    out["runs"].sort(key=lambda r: r["run_id"])
    for entries in out["buffers"].values():
        entries.sort(key=lambda e: e[0])
    return out


# -- runs, reachability, raw text ---------------------------------------------------------------
def _open_runs(state: MemoryState, report: CheckReport, db: str) -> None:
    for run in state.open_runs():
        undecided = ProposalCounts.of(state.proposals.values(), run.run_id).pending
        report.add(Code.OPEN_RUN, f"run {run.run_id} ({run.process or 'process'}, {run.mode}) is open with "
                                  f"{undecided} undecided proposal(s) and blocks every later run; resolve it with "
                                  f"`memwb runs apply {run.run_id} --db {db}` or "
                                  f"`memwb runs discard {run.run_id} --db {db}`")


def _reachable(state: MemoryState, status_changed: set[int], report: CheckReport) -> None:
    orphans = retired_orphans(state, status_changed)
    links = ", ".join(state.schema.recovery_types) if state.schema else ""
    for uid in orphans[:SHOWN]:
        u = state.nodes[uid]
        report.add(Code.ARCHIVED_UNREACHABLE, f"node u{uid} ({u.kind}, {u.status}) is off the surface and no "
                                              f"recovery link ({links or 'none declared'}) leads to it")
    if len(orphans) > SHOWN:
        report.add(Code.ARCHIVED_UNREACHABLE, f"… and {len(orphans) - SHOWN} more nodes")


def _raw_text(state: MemoryState, scan: _LogScan, report: CheckReport) -> None:
    changed = []
    for turn_id, (sha, seq) in scan.hashes.items():
        uid = state.turn_units.get(turn_id)
        node = state.nodes.get(uid) if uid is not None else None
        if node is None or node.kind != state.turn_kind:
            continue
        report.hashed_turns += 1
        if not any(t.content_hash == sha for t in readings(node, turn_id)):
            changed.append(f"turn {turn_id} (node u{node.id}): its raw text, speaker, time or session no "
                           f"longer hash to the sha256 logged when it was ingested (seq {seq}); raw now "
                           f"{node.raw[:60]!r}")
    for line in changed[:SHOWN]:
        report.add(Code.RAW_TEXT_CHANGED, line)
    if len(changed) > SHOWN:
        report.add(Code.RAW_TEXT_CHANGED, f"… and {len(changed) - SHOWN} more turns")


def readings(node: Node, turn_id: str) -> Iterator[Turn]:
    """The dataset turns a turn node can have been made from: its raw text is ``speaker: text`` plus an
    optional image note, so text and caption are read back (every split, should the text itself end like
    an image note); only readings whose `raw` reproduces the node's raw text are kept."""
    speaker = node.speakers[0] if node.speakers else ""
    prefix = f"{speaker}: "
    if not node.raw.startswith(prefix):
        return
    rest = node.raw[len(prefix):]
    splits: list[tuple[str, str | None]] = [(rest, None), (rest, "")]
    if rest.endswith("]"):
        at = rest.find(IMAGE_NOTE)
        while at >= 0:
            splits.append((rest[:at], rest[at + len(IMAGE_NOTE):-1]))
            at = rest.find(IMAGE_NOTE, at + 1)
    for text, caption in splits:
        turn = Turn(id=turn_id, speaker=speaker, text=text, time=node.time, session=node.session, index=0,
                    image_caption=caption)
        if turn.raw == node.raw:
            yield turn

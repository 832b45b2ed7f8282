"""Every count of proposals agrees with the stored proposals: the Consolidation page's banner, review queue and
run diff, the Replay page, the run summary in the log, `memwb runs` and `memwb replay`'s summary line (issue 53.1).

The counts are taken here from the stored proposals themselves, not through `ProposalCounts`, so a second
definition anywhere shows as a disagreement."""
from __future__ import annotations

import re
import subprocess
import sys
from collections import Counter

import pytest
from apptest import open_app_page
from streamlit.testing.v1 import AppTest

from engine.core.oplog import OpKind
from engine.core.proposal import Proposal, ProposalCounts, Status
from engine.store.log_store import Store
from tests.conftest import ROOT, turn
from workbench.model import DEMO_PATH, Workbench
from workbench.review import actions
from workbench.review import decisions as review_decisions

pytestmark = pytest.mark.slow

STATUSES = ("pending", "accepted", "applied", "rejected", "skipped", "failed")


def stored(db, run_id: str | None = None) -> dict[str, int]:
    """Proposals by status as the log holds them (every status, zeros too), and the skips nobody decided."""
    props = [p for p in Store(db).load_state().proposals.values() if run_id is None or p.run_id == run_id]
    counts = Counter(p.status for p in props)
    return {**{s: counts[s] for s in STATUSES},
            "at diagnosis": sum(p.status == "skipped" and p.decided_by is None for p in props)}


def said(text: str) -> dict[str, int]:
    """Counts a page or the CLI wrote as "N status" or "status=N", with "(N at diagnosis)" or
    "skipped_at_diagnosis=N"; a status it leaves out is 0."""
    found = {s: 0 for s in STATUSES}
    found.update({s: int(n) for n, s in re.findall(rf"(\d+) ({'|'.join(STATUSES)})\b", text)})
    found.update({s: int(n) for s, n in re.findall(rf"\b({'|'.join(STATUSES)})=(\d+)", text)})
    diagnosis = re.search(r"\((\d+) at diagnosis\)|skipped_at_diagnosis=(\d+)", text)
    found["at diagnosis"] = int(next(g for g in diagnosis.groups() if g)) if diagnosis else 0
    return found


def memwb(*args) -> str:
    proc = subprocess.run([sys.executable, "-m", "engine.cli", *map(str, args)], cwd=ROOT, capture_output=True,
                          text=True, timeout=1200)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def runs_lines(db) -> dict[str, dict[str, int]]:
    """`memwb runs`: each run's counts."""
    return {line.split()[0]: said(line) for line in memwb("runs", "--db", db).splitlines()}


def diff_tab(at: AppTest, run_id: str) -> tuple[dict[str, int], dict[str, int]]:
    """The Run diff tab on `run_id`: its metrics, and the statuses of its proposals table's rows."""
    at.session_state[actions.TAB_KEY] = actions.DIFF_TAB
    at.session_state["diff_run"] = run_id
    at.run()
    assert not at.exception
    metrics = {m.label: int(m.value) for m in at.metric if m.label in ("Applied", "Rejected", "Skipped", "Failed",
                                                                       "Still pending")}
    shown = {"applied": metrics["Applied"], "rejected": metrics["Rejected"], "skipped": metrics["Skipped"],
             "failed": metrics["Failed"], "pending": metrics.get("Still pending", 0)}
    caption = next((c.value for c in at.caption if c.value.startswith("Status **")), "")
    shown["at diagnosis"] = int(m.group(1)) if (m := re.search(r"(\d+) of the \d+ skipped were closed at "
                                                               r"diagnosis", caption)) else 0
    table = next(d.value for d in at.dataframe if {"status", "decided by", "note"} <= set(d.value.columns))
    rows = Counter(table["status"])
    return shown, {s: rows[s] for s in ("applied", "rejected", "skipped", "failed", "pending")}


def closed_part(counts: dict[str, int]) -> dict[str, int]:
    return {k: counts[k] for k in ("applied", "rejected", "skipped", "failed", "pending", "at diagnosis")}


def test_every_count_of_proposals_agrees_with_the_stored_proposals():
    """The README's story on the demo (turn 68, Run diagnosis, accept the top Update, apply, defer the rest),
    then `memwb replay` carries the same session to its end on All-Mem's schedule: at each step the banner,
    the review queue, the Run diff tab (its metrics and its rows), the Replay page, the run summary in the log,
    `memwb runs` and the replay summary line say what the stored proposals hold."""
    at, wb = open_app_page("../pages/3_consolidation.py", 68)
    db = wb.db_path
    at.button(key="run_diagnosis").click().run()
    assert not at.exception
    run_id = wb.engine.open_run()
    now = stored(db, run_id)
    assert now["at diagnosis"] > 0 and now["pending"] > 1           # the case: routing closed some

    banner = next(s.value for s in at.success if s.value.startswith(f"{run_id}:"))
    total = re.match(rf"{run_id}: (\d+) proposals, (\d+) waiting for a decision; (\d+) skipped at diagnosis", banner)
    assert total and tuple(map(int, total.groups())) == (sum(now[s] for s in STATUSES), now["pending"],
                                                         now["at diagnosis"]), banner
    queue = next(c.value for c in at.caption if c.value.startswith(f"**{run_id}**:"))
    assert closed_part(said(queue)) == closed_part(now), queue
    assert runs_lines(db)[run_id] == now

    state = wb.engine.state
    update = max((p for p in state.proposals.values() if p.run_id == run_id and p.status == Status.PENDING
                  and p.op == "update"), key=lambda p: p.confidence)
    at.session_state["review_decisions"] = {review_decisions.run_key(db.name, run_id): {update.id: True}}
    at.run()
    at.button(key="apply_run").click().run()
    now = stored(db, run_id)
    assert now["applied"] == 1 and now["pending"] > 0
    metrics, rows = diff_tab(at, run_id)
    assert metrics == closed_part(now) and rows == {k: now[k] for k in rows}, (metrics, rows, now)
    assert runs_lines(db)[run_id] == now

    at.session_state[actions.TAB_KEY] = actions.QUEUE_TAB
    at.run()
    at.button(key="apply_defer").click().run()
    assert not at.exception
    now = stored(db, run_id)
    assert now["pending"] == 0 and now["skipped"] > now["at diagnosis"]
    committed = next(s.value for s in at.success if s.value.startswith(f"{run_id} committed:"))
    assert closed_part(said(committed.split("in all:")[1])) == closed_part(now), committed
    metrics, rows = diff_tab(at, run_id)
    assert metrics == closed_part(now) and rows == {k: now[k] for k in rows}, (metrics, rows, now)
    assert runs_lines(db)[run_id] == now
    summary = next(op.payload["summary"] for op in Store(db).ops(run_id=run_id, kinds=[OpKind.RUN_COMMITTED]))
    assert {k: summary[k] for k in STATUSES} == {k: now[k] for k in STATUSES}
    assert summary["skipped_at_diagnosis"] == now["at diagnosis"]

    # the same session on to its end from the command line, consolidating on All-Mem's schedule
    line = memwb("replay", DEMO_PATH, "--db", db, "--quiet").splitlines()[0]
    proposals = re.search(r" proposals (.*) runs=", line).group(1)
    assert said(proposals) == stored(db), line
    listed = runs_lines(db)
    assert len(listed) > 1 and all(listed[r] == stored(db, r) for r in listed), listed

    resumed = Workbench.resume(db, embedder=wb.engine.embedder)
    at.session_state["workbench"] = resumed
    for r in listed:
        metrics, rows = diff_tab(at, r)
        now = stored(db, r)
        assert metrics == closed_part(now) and rows == {k: now[k] for k in rows}, (r, metrics, rows, now)
    last = max(listed)
    at.switch_page("../pages/1_replay.py").run()          # the end-of-stream run, after the last turn
    assert not at.exception
    sentence = next(s.value for s in at.success if f" {last} ran " in s.value)
    assert closed_part(said(sentence.split("Proposals:")[1].split(";")[0])) == closed_part(stored(db, last)), sentence


def proposal(pid: int, status: str, decided_by: str | None = None, run_id: str = "run-0001") -> Proposal:
    return Proposal(id=pid, run_id=run_id, op="merge", targets=[1, 2], confidence=0.5, reason="",
                    status=status, decided_by=decided_by)


def test_a_skip_is_at_diagnosis_only_when_nobody_decided_it():
    """Routing's skips carry no decider; a deferral, a discard and an accepted proposal no longer applicable do."""
    props = [proposal(1, Status.SKIPPED), proposal(2, Status.SKIPPED, "alice"), proposal(3, Status.SKIPPED, "gate"),
             proposal(4, Status.APPLIED, "gate"), proposal(5, Status.PENDING), proposal(6, Status.FAILED),
             proposal(7, Status.REJECTED, "bob", run_id="run-0002")]
    counts = ProposalCounts.of(props)
    assert (counts.total, counts.skipped, counts.skipped_at_diagnosis, counts.rejected) == (7, 3, 1, 1)
    assert ProposalCounts.of(props, "run-0001").by_status() == {"pending": 1, "accepted": 0, "applied": 1,
                                                               "rejected": 0, "skipped": 3, "failed": 1}
    assert ProposalCounts.of(props, "run-0002").line() == "applied=0 rejected=1 skipped=0 failed=0"
    assert counts.line() == "pending=1 applied=1 rejected=1 skipped=3 failed=1 skipped_at_diagnosis=1"


def test_the_replay_summary_counts_rejected_proposals(tmp_path):
    """A run whose gate rejects what it cannot pass: the replay line says how many (issue 53.7)."""
    from engine.runtime.replay import summarize
    from engine.session import open_session

    eng = open_session(tmp_path / "m.sqlite")
    for t in (turn(1, "Maya", "I've run 3 half marathons so far, all of them along the river course."),
              turn(2, "Jon", "My sister Lena lives in Porto and works as a nurse."),
              turn(3, "Maya", "I've run 4 half marathons so far now, all of them along the river course.")):
        eng.ingest(t)
    props = eng.propose(manual=True)
    eng.apply({p.id: False for p in props if p.status == Status.PENDING}, decided_by="alice")
    rejected = sum(p.status == Status.REJECTED for p in eng.state.proposals.values())
    assert rejected > 0
    assert f" rejected={rejected} " in summarize(eng).line()

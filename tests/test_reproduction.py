"""The paper-reproduction report: every paper figure a bench run measures sits beside the run's own figure."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import LOCOMO, ROOT, needs_data
from test_bench import BUDGET_TALK, DEMO, DESIGN_TALK, _meeting, bench, result_of

from engine.core.oplog import OpKind
from engine.eval.metrics import call_tokens
from engine.eval.reproduction import PAPER_ROWS, SAME_WITHIN, reproduction_plan
from engine.eval.significance import compare_systems, per_item
from engine.loaders import load_conversation
from engine.session import open_session

pytestmark = pytest.mark.slow


def reproduce(*args, env=None):
    return subprocess.run([sys.executable, "-m", "engine.cli", "reproduce", *map(str, args)], cwd=ROOT,
                          capture_output=True, text=True, timeout=600, env=env)


def test_the_plan_names_the_ablations_the_paper_rows_use():
    plan = reproduction_plan("allmem")
    assert list(plan) == ["locomo"] and plan["locomo"]["engines"] == ["allmem"]
    assert plan["locomo"]["ablations"] == ["anchors-only", "no-merge", "no-recovery-links", "no-split",
                                           "no-type-priority", "no-update", "no-visibility"]
    assert plan["locomo"]["answer"] is None
    memloom = reproduction_plan("memloom")
    assert memloom == {"qmsum": {"engines": ["memloom"], "ablations": ["no-repair"], "answer": None},
                       "causal": {"engines": ["memloom"], "ablations": ["no-relations"], "answer": None}}
    # GAM's Table 3 scores answers: its run answers every question (offline), with w/o MFR beside the full system
    assert reproduction_plan("gam") == {"locomo": {"engines": ["gam"], "ablations": ["no-mfr"], "answer": "offline"}}
    assert reproduction_plan("recmem") == {"locomo": {"engines": ["recmem"], "ablations": [], "answer": None}}


def test_an_allmem_run_writes_its_paper_rows_beside_the_measured_figures(tmp_path):
    out = tmp_path / "run"
    bench("--dataset", "locomo", DEMO, "--engines", "allmem", "--ablations", "no-split,anchors-only",
          "--protocol", "static", "--out", out)
    result = result_of(out)
    report = json.loads((out / "reproduction.json").read_text(encoding="utf-8"))
    rows = {(r["system"], r["metric"]): r for r in report["rows"]}
    # All-Mem's rows only: the run has no GAM or RecMem, so their papers' rows are not listed
    assert report["dataset"] == "locomo" and len(rows) == sum(r.dataset == "locomo" and r.engine == "allmem"
                                                              for r in PAPER_ROWS)
    assert {r["engine"] for r in report["rows"]} == {"allmem"}
    full = result["summary"]["allmem"]
    for system in ("allmem", "allmem-no-split", "allmem-anchors-only"):
        mine = result["summary"][system]
        assert rows[(system, "r@5")]["project"] == pytest.approx(mine["overall"]["r@5"])
        assert rows[(system, "n@5")]["project"] == pytest.approx(mine["overall"]["n@5"])
    assert rows[("allmem", "visible_ratio")]["project"] == pytest.approx(full["structure"]["visible_ratio"])
    split = rows[("allmem-no-split", "r@5")]
    assert split["paper"] == pytest.approx(0.4512) and split["paper_vs_reference"] == pytest.approx(-0.0151)
    assert split["paper_direction"] == "worse"
    delta = result["summary"]["allmem-no-split"]["overall"]["r@5"] - full["overall"]["r@5"]
    assert split["project_vs_reference"] == pytest.approx(delta, abs=1e-4)
    assert split["project_direction"] == ("same" if abs(delta) < SAME_WITHIN else "worse" if delta < 0 else "better")
    assert split["agrees"] == (split["project_direction"] == "worse")
    assert rows[("allmem-no-merge", "r@5")]["project"] is None            # not run: not measured
    assert report["measured"] == 3 * 2 + 2 and report["directions_checked"] == 5    # R@5, N@5; VR: full, no-split
    text = (out / "reproduction.md").read_text(encoding="utf-8")
    assert "| All-Mem Table 10 | w/o Split | `allmem-no-split` | r@5 | 0.451 |" in text
    # each difference with its paired interval over the questions both systems answered, from the records
    paired = compare_systems(result, "allmem-no-split", "allmem", "r@5")
    assert split["project_interval"] == [paired.low, paired.high] and paired.n == len(per_item(result, "allmem", "r@5"))
    assert split["within_noise"] == (paired.low <= 0 <= paired.high)
    assert paired.low <= split["project_vs_reference"] <= paired.high
    assert rows[("allmem", "visible_ratio")]["project_interval"] is None        # not a per-question figure
    assert report["directions_beyond_noise"] == sum(1 for r in report["rows"] if r["within_noise"] is False
                                                    and r["agrees"] is not None)
    assert f"[{paired.low:+.3f}, {paired.high:+.3f}]" in text
    # summary.md: each ablation against the full system, with the questions it scored higher / lower / same on
    summary = (out / "summary.md").read_text(encoding="utf-8")
    assert "**ablations against the full system**" in summary
    for system in ("allmem-no-split", "allmem-anchors-only"):
        mine, full_r5 = per_item(result, system, "r@5"), per_item(result, "allmem", "r@5")
        higher = sum(mine[k] > full_r5[k] for k in mine)
        lower = sum(mine[k] < full_r5[k] for k in mine)
        line = next(x for x in summary.splitlines() if x.startswith(f"| {system} | allmem |"))
        assert f"| {higher} / {lower} / {len(mine) - higher - lower} |" in line


def test_gam_rows_read_the_offline_answers_and_the_memory_of_the_first_sessions(tmp_path):
    """GAM Table 3 from the offline answers, Table 10 from the memory of the first sessions: each paper figure
    beside what the run's answers and its stored memory hold."""
    out = tmp_path / "run"
    bench("--dataset", "locomo", DEMO, "--engines", "gam", "--ablations", "no-mfr", "--answer", "offline",
          "--protocol", "static", "--out", out)
    result = result_of(out)
    report = json.loads((out / "reproduction.json").read_text(encoding="utf-8"))
    rows = {(r["system"], r["metric"]): r for r in report["rows"]}
    assert {r["engine"] for r in report["rows"]} == {"gam"}
    gam, no_mfr = result["summary"]["gam"], result["summary"]["gam-no-mfr"]
    for metric in ("f1", "bleu1"):
        assert rows[("gam", metric)]["project"] == pytest.approx(gam["overall"][metric])
        mfr = rows[("gam-no-mfr", metric)]
        assert mfr["project"] == pytest.approx(no_mfr["overall"][metric]) and mfr["paper_direction"] == "worse"
        assert mfr["project_vs_reference"] == pytest.approx(no_mfr["overall"][metric] - gam["overall"][metric],
                                                            abs=1e-4)
    # the memory of the first n sessions, read from the session database the run stored
    demo = load_conversation(DEMO)
    sessions = list(dict.fromkeys(t.session for t in demo.turns))
    task = next(t for t in result["tasks"] if t["system"] == "gam")
    engine = open_session(out / task["db"])
    for n in range(1, len(sessions) + 1):
        turns = [t for t in demo.turns if t.session in sessions[:n]]
        grown = gam["growth"][str(n)]
        assert grown["conversations"] == 1 and grown["nodes"]["event"] == len(turns)      # one event per turn
        topics = [u for u in engine.state.nodes.values() if u.kind == "topic"
                  and set(u.source_ids) <= {t.id for t in turns}]
        assert grown["nodes"]["topic"] == len(topics)
    assert gam["growth"][str(len(sessions))]["edges"] == len(engine.state.edges)
    three = rows[("gam", "growth/3/topic")]
    assert three["project"] == gam["growth"]["3"]["nodes"]["topic"] and three["paper"] == 8
    assert three["role"] == "absolute" and rows[("gam", "f1")]["role"] == "reference"
    assert rows[("gam", "growth/15/event")]["project"] is None            # the demo has 7 sessions
    text = (out / "reproduction.md").read_text(encoding="utf-8")
    line = f"| GAM Table 10 | after 3 sessions | `gam` | topic nodes | 8.0 | {three['project']:,.1f} |"
    assert line in text and "absolute figure" in text


def test_reproduce_recmem_sets_its_construction_tokens_beside_table_1(tmp_path):
    """`memwb reproduce recmem` on one LoCoMo conversation: RecMem's construction tokens per conversation (its
    own logged LLM calls while building memory) beside the paper's Table 1, in thousands."""
    needs_data(LOCOMO)
    proc = reproduce("recmem", "--conversations", "conv-26", "--out", tmp_path / "out")
    assert proc.returncode == 0, proc.stderr
    result = result_of(tmp_path / "out" / "locomo")
    report = json.loads((tmp_path / "out" / "locomo" / "reproduction.json").read_text(encoding="utf-8"))
    rows = [r for r in report["rows"] if r["metric"] == "construction_k"]
    assert [r["paper"] for r in rows] == [202.4, 193.2] and all(r["role"] == "absolute" for r in rows)
    task = next(t for t in result["tasks"] if t["system"] == "recmem")
    calls = list(open_session(tmp_path / "out" / "locomo" / task["db"]).store.ops(kinds=[OpKind.LLM_CALL]))
    tokens = sum(sum(call_tokens(c.payload)[:2]) for c in calls)
    assert calls and all(r["project"] == pytest.approx(tokens / 1000) for r in rows)
    assert "construction tokens per conversation (K)" in (tmp_path / "out" / "reproduction.md").read_text(
        encoding="utf-8")


def test_a_qmsum_run_puts_memloom_and_fixed_windows_beside_table_2(tmp_path):
    meetings = tmp_path / "meetings"
    meetings.mkdir()
    budget, design = BUDGET_TALK, DESIGN_TALK
    _meeting(meetings / "Mtg001.json", [("budget", budget), ("design", design), ("budget again", budget[:6])])
    bench("--dataset", "qmsum", meetings, "--out", tmp_path / "out")
    result = result_of(tmp_path / "out")
    report = json.loads((tmp_path / "out" / "reproduction.json").read_text(encoding="utf-8"))
    rows = {(r["system"], r["metric"]): r for r in report["rows"]}
    for system in ("memloom", "fixed-50"):
        for metric in ("pk", "window_diff"):
            assert rows[(system, metric)]["project"] == pytest.approx(result["summary"][system]["overall"][metric])
    chunk = rows[("fixed-50", "pk")]
    assert chunk["lower_is_better"] and chunk["paper_direction"] == "worse"     # 0.604 vs MemLoom's 0.375
    assert rows[("memloom-no-repair", "pk")]["project"] is None


def test_reproduce_refuses_an_engine_without_paper_rows_and_missing_data(tmp_path):
    proc = reproduce("naive")
    assert proc.returncode == 2 and "no paper rows are recorded for engine 'naive'" in proc.stderr
    assert "Traceback" not in proc.stderr
    env = {**__import__("os").environ, "MEMWB_SHARED_DATA": str(tmp_path / "nowhere")}
    proc = reproduce("allmem", "--out", tmp_path / "out", env=env)
    assert proc.returncode == 2 and f"not at {tmp_path / 'nowhere' / 'locomo' / 'locomo-dev8.json'}" in proc.stderr
    assert not Path(tmp_path / "out" / "reproduction.md").exists()

"""The paper-reproduction report: every paper figure a bench run measures sits beside the run's own figure."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT
from test_bench import BUDGET_TALK, DEMO, DESIGN_TALK, _meeting, bench, result_of

from engine.eval.reproduction import PAPER_ROWS, SAME_WITHIN, reproduction_plan
from engine.eval.significance import compare_systems, per_item

pytestmark = pytest.mark.slow


def reproduce(*args, env=None):
    return subprocess.run([sys.executable, "-m", "engine.cli", "reproduce", *map(str, args)], cwd=ROOT,
                          capture_output=True, text=True, timeout=600, env=env)


def test_the_plan_names_the_ablations_the_paper_rows_use():
    plan = reproduction_plan("allmem")
    assert list(plan) == ["locomo"] and plan["locomo"]["engines"] == ["allmem"]
    assert plan["locomo"]["ablations"] == ["anchors-only", "no-merge", "no-recovery-links", "no-split",
                                           "no-type-priority", "no-update", "no-visibility"]
    memloom = reproduction_plan("memloom")
    assert memloom == {"qmsum": {"engines": ["memloom"], "ablations": ["no-repair"]},
                       "causal": {"engines": ["memloom"], "ablations": ["no-relations"]}}


def test_an_allmem_run_writes_its_paper_rows_beside_the_measured_figures(tmp_path):
    out = tmp_path / "run"
    bench("--dataset", "locomo", DEMO, "--engines", "allmem", "--ablations", "no-split,anchors-only",
          "--protocol", "static", "--out", out)
    result = result_of(out)
    report = json.loads((out / "reproduction.json").read_text(encoding="utf-8"))
    rows = {(r["system"], r["metric"]): r for r in report["rows"]}
    assert report["dataset"] == "locomo" and len(rows) == sum(r.dataset == "locomo" for r in PAPER_ROWS)
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

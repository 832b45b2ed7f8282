"""The gold-label audit (flags with reasons), correction overlays, and `memwb bench` on original vs corrected gold;
splits and the test lock that tuning code obeys. Real files, real processes."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import LOCOMO, ROOT, needs_data

from engine.core.splits import LockedSplit, refuse_locked, split_of, write_lock
from engine.eval.gold_audit import (
    CONFIRMED,
    CORRECTED,
    Correction,
    apply_overlay,
    audit_conversations,
    audit_results,
    corrected_figures,
    load_overlay,
    overlay_line,
)
from engine.eval.metrics import recall_at_k
from engine.loaders import LoaderError, load_conversation, load_conversations

TINY = ROOT / "datasets" / "fixtures" / "tiny.jsonl"
OVERLAY = ROOT / "datasets" / "gold" / "locomo-dev8.jsonl"


def memwb(*args, cwd=ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "engine.cli", *map(str, args)], cwd=cwd, capture_output=True,
                          text=True, timeout=1200)


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_answers_missing_from_the_evidence_window_are_flagged_and_dates_and_relative_years_count(tmp_path):
    rows = [{"id": f"t{i}", "speaker": "Ana", "text": text, "time": f"2023-05-08T10:0{i}:00", "session": "1"}
            for i, text in enumerate(["I painted that lake sunrise last year!", "Lovely.", "We met at noon.",
                                      "Weather is grey.", "I adopted a cat called Miso."])]
    rows += [{"type": "question", "id": "q1", "question": "When?", "answer": "2022", "evidence": ["t1"]},
             {"type": "question", "id": "q2", "question": "Cat's name?", "answer": "Miso", "evidence": ["t2"]},
             {"type": "question", "id": "q3", "question": "Day?", "answer": "8 May 2023", "evidence": ["t3"]},
             {"type": "question", "id": "q4", "question": "Likely?", "answer": "Likely yes", "evidence": ["t3"]}]
    conv = load_conversation(write_jsonl(tmp_path / "c.jsonl", rows))
    flags = audit_conversations([conv])
    assert [(f.question_id, f.reason) for f in flags] == [("q2", "answer_not_in_evidence")]   # t0 neighbours t1
    assert "miso" in flags[0].detail
    results = [{"questions": [{"conversation": "c", "question_id": "q2", "ranked": ["t4", "t2"]}]},
               {"questions": [{"conversation": "c", "question_id": "q2", "ranked": ["t0", "t4", "t1"]}]}]
    [ranked_first] = audit_results([conv], results)
    assert ranked_first.reason == "non_gold_turn_ranked_first" and "t4" in ranked_first.detail
    assert audit_results([conv], results[:1]) == []                # one system alone proves nothing


def test_locomo_dev_audit_lists_flags_with_reasons_from_the_cli():
    needs_data(LOCOMO)
    run = memwb("audit-gold", LOCOMO, "--json")
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout)
    flags = {(f["question"], f["reason"]): f for f in report["flags"]}
    assert ("conv-42:q58", "missing_evidence_id") in flags and "D10:19" in flags[("conv-42:q58",
                                                                                   "missing_evidence_id")]["detail"]
    assert ("conv-26:q1", "answer_not_in_evidence") in flags and ("conv-26:q30", "no_evidence") in flags
    assert ("conv-42:q2", "answer_not_in_evidence") not in flags   # "3 years ago" in January 2022: 2019
    assert not any(q.startswith("conv-30:q93") for q, _ in flags)  # adversarial (category 5): by design
    assert report["questions"] == 1586 and sum(report["counts"].values()) == len(report["flags"])
    text = memwb("audit-gold", LOCOMO)
    assert text.returncode == 0 and "questions flagged: missing_evidence_id" in text.stdout.splitlines()[-1]


def test_the_published_locomo_overlay_applies_and_leaves_the_file_unchanged():
    needs_data(LOCOMO)
    before = LOCOMO.read_bytes()
    overlay = load_overlay(OVERLAY)
    assert len(overlay) >= 10 and {c.status for c in overlay.values()} == {CORRECTED, CONFIRMED}
    convs = apply_overlay(load_conversations(LOCOMO), overlay, OVERLAY)
    q = next(q for c in convs if c.id == "conv-41" for q in c.questions if q.id == "conv-41:q5")
    assert q.evidence == ("D3:14",)
    assert LOCOMO.read_bytes() == before


def test_a_bad_overlay_line_is_located(tmp_path):
    bad = write_jsonl(tmp_path / "o.jsonl", [{"type": "gold_correction", "conversation": "tiny", "question": "q1",
                                             "status": "corrected"}])
    with pytest.raises(LoaderError, match="line 1.*evidence"):
        load_overlay(bad)
    wrong = tmp_path / "w.jsonl"
    wrong.write_text(overlay_line(Correction("tiny", "q1", CORRECTED, ("s9:9",))) + "\n", encoding="utf-8")
    with pytest.raises(LoaderError, match="no turn s9:9"):
        apply_overlay(load_conversations(TINY), load_overlay(wrong), wrong)


def test_bench_reports_original_and_corrected_gold_side_by_side_and_names_the_version(tmp_path):
    overlay = tmp_path / "fix.jsonl"
    overlay.write_text(overlay_line(Correction("tiny", "q1", CORRECTED, ("s2:3",), note="s1:1 is the old day"))
                       + "\n", encoding="utf-8")
    run = memwb("bench", "--dataset", "locomo", TINY, "--engines", "naive", "--protocol", "static",
                "--gold-overlay", overlay, "--out", tmp_path / "out")
    assert run.returncode == 0, run.stderr
    result = json.loads((tmp_path / "out" / "result.json").read_text(encoding="utf-8"))
    assert result["dataset_version"].startswith("sha256:") and "--gold-overlay" in result["command"]
    row = result["gold_overlay"]["systems"]["naive"]
    assert (row["n"], row["changed"]) == (2, 1)
    records = {q["question_id"]: q for q in result["questions"]}
    expected = (recall_at_k(records["q1"]["ranked"], ["s2:3"], 5) + records["q2"]["metrics"]["r@5"]) / 2
    assert row["corrected"]["r@5"] == pytest.approx(expected, abs=1e-4)
    assert row["original"]["n@5"] == pytest.approx(
        (records["q1"]["metrics"]["n@5"] + records["q2"]["metrics"]["n@5"]) / 2, abs=1e-4)
    assert row["corrected"]["n@5"] != row["original"]["n@5"]         # s2:3 alone ranks lower than s1:1 did
    assert "original vs corrected gold" in run.stdout and "r@5 corrected" in run.stdout
    from workbench.benchmark.result import load_result
    from workbench.benchmark.view import run_caption

    caption = run_caption(load_result(tmp_path / "out" / "result.json"))       # what the Benchmark page names
    assert f"scored against version {result['dataset_version']}" in caption
    assert result["gold_overlay"]["version"] in caption
    figures = corrected_figures(result["questions"], load_overlay(overlay),
                                lambda ranked, gold, ks: {"r@5": recall_at_k(ranked, list(gold), 5)}, [5])
    assert figures["naive"]["corrected"]["r@5"] == pytest.approx(expected, abs=1e-4)


# -- splits and the lock ----------------------------------------------------------------------------------------
def test_split_names_and_the_lock_refuse_tuning_on_test_only(tmp_path):
    assert split_of(Path("datasets/causal/test.jsonl")) == "test"
    assert split_of(Path("datasets/causal/cases/validation/x.json")) == "validation"
    assert split_of(Path("datasets/decisions/dev")) == "validation"
    folder = tmp_path / "suite"
    (folder / "test").mkdir(parents=True)
    (folder / "validation.jsonl").write_text("", encoding="utf-8")
    refuse_locked([folder / "test"], "fit")                         # not locked yet
    write_lock(folder, ["test"], "rita")
    with pytest.raises(LockedSplit, match=r"fit refuses .*a.jsonl: it is in the test split, which is locked"):
        refuse_locked([folder / "test" / "a.jsonl"], "fit")
    refuse_locked([folder / "validation.jsonl"], "fit")
    write_lock(folder, [], "rita")
    refuse_locked([folder / "test"], "fit")


def test_a_cases_export_with_a_locked_test_split_is_refused(tmp_path):
    doc = {"format": "memwb-scds-cases", "version": 1, "conversation_id": "demo",
           "cases": [{"scenario_id": "a", "split": "validation"}, {"scenario_id": "b", "split": "test"}],
           "case_set": {"version": "sha256:x", "locked": ["test"]}}
    path = tmp_path / "cases.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    with pytest.raises(LockedSplit, match=r"case\(s\) b are in a locked split"):
        refuse_locked([path], "fit")


def test_tuning_scripts_refuse_the_locked_test_split_with_a_clear_message(tmp_path):
    assert json.loads((ROOT / "datasets" / "causal" / "splits.lock").read_text())["locked"] == ["test"]
    run = subprocess.run([sys.executable, "scripts/fit_links.py", "--fit", "validation,test"], cwd=ROOT,
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 1 and "Traceback" not in run.stderr
    assert "scripts/fit_links.py refuses" in run.stderr and "test split, which is locked" in run.stderr
    meetings = tmp_path / "qmsum" / "test"
    meetings.mkdir(parents=True)
    assert memwb("splits", "lock", tmp_path / "qmsum").returncode == 0
    run = subprocess.run([sys.executable, "scripts/fit_boundaries.py", "--dir", str(meetings)], cwd=ROOT,
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 1 and "scripts/fit_boundaries.py refuses" in run.stderr, run.stderr
    assert memwb("splits", "show", tmp_path / "qmsum").stdout.strip().endswith("locked test")


def test_longmemeval_files_are_audited_through_their_has_answer_turns(tmp_path):
    from engine.eval.gold_audit import audit_file

    lme = ROOT / "datasets" / "fixtures" / "longmemeval_tiny.json"
    assert audit_file(lme)[1] == []
    data = json.loads(lme.read_text(encoding="utf-8"))
    data[0]["answer"] = "In the garden shed"                      # a gold answer no evidence turn supports
    broken = tmp_path / "lme.json"
    broken.write_text(json.dumps(data), encoding="utf-8")
    [flag] = audit_file(broken)[1]
    assert (flag.reason, flag.question) == ("answer_not_in_evidence", data[0]["question"])

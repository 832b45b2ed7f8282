"""Where each miss was lost (engine.eval.misses): every gold turn of every question followed through every
registered engine's memory on a real benchmark run of the bundled demo, and the tallies the result file and
its summary carry."""
from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from engine.engines import known_engines
from engine.eval.misses import MISSED, Fate, held_back_by, tally
from engine.retrieval.explain import Signals
from engine.session import open_session
from tests.conftest import ROOT

DEMO = ROOT / "datasets" / "demo" / "demo.jsonl"


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> tuple[Path, dict]:
    out = tmp_path_factory.mktemp("misses") / "demo"
    proc = subprocess.run([sys.executable, "-m", "engine.cli", "bench", "--dataset", "locomo", str(DEMO),
                           "--ablations", "anchors-only", "--rounds", "2", "--out", str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=1800)
    assert proc.returncode == 0, proc.stderr
    return out, json.loads((out / "result.json").read_text(encoding="utf-8"))


@pytest.mark.slow
def test_every_gold_turn_of_every_engine_has_one_fate_that_agrees_with_recall(run):
    """Each registered engine places each gold turn of each question asked at the last round exactly once; the
    turns found are exactly those R@5 counts, and the summary's tallies add the records up."""
    _, result = run
    assert set(known_engines()) <= set(result["systems"])
    k = result["ks"][0]
    for system in result["systems"]:
        records = [q for q in result["questions"] if q["system"] == system]
        assert records and all("misses" in q for q in records), system
        for q in records:
            assert [m["turn"] for m in q["misses"]] == q["gold"]
            found = sum(m["fate"] == Fate.FOUND for m in q["misses"])
            assert found == round(q["metrics"][f"r@{k}"] * len(q["gold"])), (system, q["question_id"])
            for m in q["misses"]:
                assert m["fate"] in {str(f) for f in Fate}
                if m["fate"] == Fate.BELOW_K:       # its unit may be among the returned ones, its turn not in the k
                    assert m["source_rank"] > k and m["signal"] and m["gap"] >= 0 and m["unit"] is not None
                if m["fate"] in (Fate.OFF_SURFACE, Fate.NOT_REACHED):
                    assert m["unit"] is not None and m["drop"] and "source_rank" not in m
        summary = result["summary"][system]["misses"]
        assert summary["k"] == k and summary == {"k": k, **tally(records)}
        assert sum(summary["fates"].values()) == sum(len(q["gold"]) for q in records)
        for cat, fates in summary["by_category"].items():
            assert sum(fates.values()) == sum(len(q["gold"]) for q in records if q["category"] == cat)


@pytest.mark.slow
def test_a_turn_consolidated_away_is_archived_in_the_session_and_recovered_with_stage_2(run):
    """What the anchors-only ablation loses off the surface is a turn whose every unit is archived in that task's
    session database; the full system, whose Stage 2 walks the version links, does not lose it there."""
    out, result = run
    off = [(q, m) for q in result["questions"] if q["system"] == "allmem-anchors-only" for m in q["misses"]
           if m["fate"] == Fate.OFF_SURFACE]
    assert off, "the demo's consolidation archives a gold turn that only Stage 2 recovers"
    db = next(t["db"] for t in result["tasks"] if t["system"] == "allmem-anchors-only")
    engine = open_session(out / db, create=False)
    for q, m in off:
        carriers = [u for u in engine.state.nodes.values() if m["turn"] in u.source_ids]
        assert carriers and not any(u.visible for u in carriers)
        assert m["drop"] == "expansion_off"
        full = next(r for r in result["questions"] if r["system"] == "allmem"
                    and r["question_id"] == q["question_id"])
        assert next(x for x in full["misses"] if x["turn"] == m["turn"])["fate"] != Fate.OFF_SURFACE


@pytest.mark.slow
def test_the_summary_prints_where_the_gold_turns_went(run):
    out, result = run
    text = (out / "summary.md").read_text(encoding="utf-8")
    assert "where the gold turns went" in text and "visible ratio" in text
    for system, s in result["summary"].items():
        row = next(line for line in text.splitlines() if line.startswith(f"| {system} |") and "held" not in line
                   and line.count("|") == len(Fate) + 3)
        assert [int(c) for c in row.split("|")[2:2 + len(Fate)]] == [s["misses"]["fates"][f] for f in Fate]


def test_the_signal_that_held_a_turn_back_is_its_largest_deficit():
    def sig(z_dense, z_lex, penalty=0.0, inherited=0.0):
        rel = z_dense + 0.5 * z_lex - penalty
        return Signals(dense=0.0, lexical=0.0, z_dense=z_dense, z_lexical=z_lex, weight=0.5, penalty=penalty,
                       relevance=rel, score=rel + inherited)

    cut = sig(2.0, 2.0)
    assert held_back_by(sig(1.9, 0.0), cut) == ("lexical", pytest.approx(1.1))
    assert held_back_by(sig(0.5, 2.0), cut) == ("dense", pytest.approx(1.5))
    assert held_back_by(sig(2.0, 2.0, penalty=0.5), cut) == ("penalty", pytest.approx(0.5))
    assert held_back_by(None, cut) == (None, None)


def test_a_multiplicative_re_rank_names_the_factor_whose_ratio_fell_shortest():
    """GAM's score is P_sem · Π β: the factor named is the one with the smallest ratio to the cut's."""
    def sig(p_sem, time=1.0, conf=1.0):
        factors = (("P_sem", p_sem), ("β_time", time), ("β_role", 1.0), ("β_conf", conf))
        return Signals(dense=0.0, lexical=0.0, z_dense=0.0, z_lexical=0.0, weight=0.5, penalty=0.0, relevance=0.0,
                       score=p_sem * time * conf, factors=factors)

    cut = sig(0.5, time=1.4)
    assert held_back_by(sig(0.45), cut) == ("β_time", pytest.approx(0.25))          # 1/1.4 < 0.45/0.5
    assert held_back_by(sig(0.2, time=1.4, conf=1.2), cut) == ("P_sem", pytest.approx(0.364))
    assert tally([{"category": 1, "misses": [{"fate": "below_k", "signal": "β_time"}, {"fate": "found"}]}])[
        "signals"] == {"β_time": 1}
    counted = tally([{"category": "1", "misses": [{"turn": "a", "fate": "below_k", "signal": "dense",
                                                   "drop": "below_k"}, {"turn": "b", "fate": "found"}]}])
    assert counted["fates"]["below_k"] == 1 and counted["fates"]["found"] == 1
    assert counted["signals"] == {"dense": 1} and counted["by_category"]["1"]["below_k"] == 1
    assert set(MISSED) == set(Fate) - {Fate.FOUND} and Counter(counted["drops"]) == Counter({"below_k": 1})


def test_a_turn_its_result_gives_only_its_own_evidence_is_held_back_by_that():
    """A merged representative or an episode gives each turn it carries no more than the turn's own evidence
    (`source_worth`); a turn kept below k that way is named as held back by its own evidence, and every gap is
    between what the turns were given, not the results' scores."""
    from engine.eval.misses import OWN_EVIDENCE, _capped, _the_cut
    from engine.retrieval.result import RetrievalResult, RetrievedUnit

    def unit(uid, score, sources, worth=None):
        return RetrievedUnit(id=uid, visible=True, score=score, dense=0.0, lexical=0.0, anchor=uid, hop=0, path=[],
                             source_ids=sources, time="", raw="", kind="unit", source_worth=worth or {})

    cands = [unit(1, 3.0, ["A", "B"], {"A": 2.9, "B": 0.5}), unit(2, 2.0, ["C"]), unit(3, 1.0, ["D"])]
    res = RetrievalResult.ranked("q", [], [], cands, None, None, {})
    assert res.source_ids == ["A", "C", "D", "B"]
    assert _capped(res, _the_cut(res, 3), "B", 1) == (OWN_EVIDENCE, 0.5)          # the cut is D at 1.0; B was given 0.5
    assert _capped(res, _the_cut(res, 1), "C", 2) == (None, 0.9)                  # the cut, A, was given 2.9 of its result's 3.0
    assert _capped(res, _the_cut(res, 2), "D", 3) is None                         # nothing capped: the signals' own gap stands

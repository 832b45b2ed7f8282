"""Paired differences between two systems of a bench result: which questions changed, and whether the mean
difference is more than the questions that happened to be asked (engine.eval.significance)."""
from __future__ import annotations

import numpy as np
import pytest

from engine.eval.significance import (ablation_references, compare_systems, paired_difference, per_item)


def test_two_systems_that_answer_alike_are_within_noise():
    same = {("c", f"q{i}"): float(i % 3 == 0) for i in range(200)}
    p = paired_difference(same, dict(same))
    assert (p.n, p.delta, p.low, p.high, p.gained, p.lost, p.tied) == (200, 0.0, 0.0, 0.0, 0, 0, 200)
    assert p.within_noise


def test_a_few_changed_questions_that_cancel_out_are_within_noise_and_counted():
    ref = {("c", f"q{i}"): 0.5 for i in range(1000)}
    ours = dict(ref)
    for i in range(6):                      # three questions gained, three lost, the rest unchanged
        ours[("c", f"q{i}")] = 1.0 if i < 3 else 0.0
    p = paired_difference(ours, ref)
    assert (p.gained, p.lost, p.tied, p.delta) == (3, 3, 994, 0.0)
    assert p.low < 0 < p.high and p.within_noise


def test_a_consistent_gain_is_beyond_noise_and_the_interval_matches_the_normal_one():
    rng = np.random.default_rng(7)
    ref = {("c", f"q{i}"): float(v) for i, v in enumerate(rng.random(1500))}
    ours = {k: v + 0.05 + float(rng.normal(0, 0.2)) for k, v in ref.items()}
    p = paired_difference(ours, ref)
    d = np.array([ours[k] - ref[k] for k in ref])
    half = 1.96 * d.std(ddof=1) / len(d) ** 0.5
    assert p.delta == pytest.approx(d.mean(), abs=1e-4)
    assert p.low == pytest.approx(d.mean() - half, abs=0.004) and p.high == pytest.approx(d.mean() + half, abs=0.004)
    assert p.low > 0 and not p.within_noise
    assert paired_difference(ours, ref) == p            # seeded: one result, one interval
    assert p.verdict("full") == "higher than full"
    assert paired_difference(ref, ours).verdict("mine") == "lower than mine"
    assert paired_difference(ref, dict(ref)).verdict("full") == "within noise"


def test_only_items_both_systems_were_scored_on_are_paired():
    ref = {("c", "q1"): 1.0, ("c", "q2"): 0.0, ("c", "q3"): None}
    ours = {("c", "q1"): 0.0, ("c", "q2"): 0.0, ("c", "q3"): 1.0, ("c", "q4"): 1.0}
    p = paired_difference(ours, ref)
    assert (p.n, p.lost, p.tied) == (2, 1, 1)
    assert paired_difference({("c", "q9"): 1.0}, ref) is None


def _record(system, conv, qid, r5_by_round):
    return {"system": system, "conversation": conv, "question_id": qid,
            "by_round": {str(r): {"r@5": v} for r, v in r5_by_round.items()}}


def test_a_bench_result_pairs_questions_at_the_last_round_and_ablations_with_their_full_system():
    result = {"rounds": 2, "systems": {"allmem": {"engine": "allmem", "ablations": []},
                                        "allmem-no-split": {"engine": "allmem", "ablations": ["no-split"]},
                                        "gam-no-x": {"engine": "gam", "ablations": ["no-x"]},
                                        "naive": {"engine": "naive", "ablations": []}},
              "questions": [_record("allmem", "c1", "q1", {1: 0.0, 2: 1.0}),
                            _record("allmem", "c2", "q1", {1: 1.0, 2: 1.0}),
                            _record("allmem", "c1", "q2", {1: 1.0}),                  # not asked at the last round
                            _record("allmem-no-split", "c1", "q1", {1: 1.0, 2: 0.0}),
                            _record("allmem-no-split", "c2", "q1", {1: 1.0, 2: 1.0})]}
    assert per_item(result, "allmem", "r@5") == {("c1", "q1"): 1.0, ("c2", "q1"): 1.0}
    p = compare_systems(result, "allmem-no-split", "allmem", "r@5")
    assert (p.n, p.delta, p.gained, p.lost, p.tied) == (2, -0.5, 0, 1, 1)
    assert ablation_references(result) == {"allmem-no-split": "allmem"}     # gam's full system did not run


def test_meetings_are_paired_for_boundary_metrics():
    result = {"rounds": 1, "questions": [],
              "boundaries": [{"meeting": m, "system": s, "pk": pk} for m, s, pk in
                             (("M1", "memloom", 0.3), ("M2", "memloom", 0.4),
                              ("M1", "memloom-no-repair", 0.5), ("M2", "memloom-no-repair", 0.4))]}
    p = compare_systems(result, "memloom-no-repair", "memloom", "pk")
    assert (p.n, p.delta, p.gained, p.tied) == (2, 0.1, 1, 1)

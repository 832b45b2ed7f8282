"""Retrieval metrics (engine.metrics) and event-boundary metrics (engine.segmentation), by hand.

Every expected value is worked out in a comment next to it so a reader can
check the arithmetic without running anything.
"""
from __future__ import annotations

import math

import pytest

from engine.metrics import chain_recall, ndcg_at_k, recall_at_k, strict_chain_recall
from engine.segmentation import (
    boundaries_from_labels,
    boundaries_from_ranges,
    check_boundaries,
    delta_b,
    delta_b_rate,
    evaluate,
    fixed_windows,
    labels_from_boundaries,
    no_boundaries,
    pk,
    segments_from_boundaries,
    window_diff,
    window_size,
)

RANKED = ["a", "b", "c", "d", "e"]


# --- recall@k ----------------------------------------------------------------


def test_recall_at_k_counts_gold_in_the_top_k():
    # top-2 = {a, b}; gold {b, d}: 1 of 2 found -> 0.5
    assert recall_at_k(RANKED, ["b", "d"], 2) == 0.5
    # top-4 = {a, b, c, d}: both found -> 1.0
    assert recall_at_k(RANKED, ["b", "d"], 4) == 1.0
    # gold {x} never retrieved -> 0.0
    assert recall_at_k(RANKED, ["x"], 5) == 0.0
    # duplicated gold counts once: {b, d} again -> 0.5
    assert recall_at_k(RANKED, ["b", "b", "d"], 2) == 0.5
    # k beyond the list: everything retrieved is in the top-k; gold {e, z} -> 1/2
    assert recall_at_k(RANKED, ["e", "z"], 50) == 0.5


def test_recall_at_k_needs_gold():
    with pytest.raises(ValueError):
        recall_at_k(RANKED, [], 5)


# --- nDCG@k ------------------------------------------------------------------


def test_ndcg_at_k_binary_relevance():
    # gold {b, d} at ranks 2 and 4 (positions 1 and 3):
    # DCG = 1/log2(1+2) + 1/log2(3+2) = 1/log2(3) + 1/log2(5) = 0.63093 + 0.43068 = 1.06161
    # ideal: two hits at ranks 1 and 2 = 1/log2(2) + 1/log2(3) = 1 + 0.63093 = 1.63093
    # nDCG = 1.06161 / 1.63093 = 0.65093
    expected = (1 / math.log2(3) + 1 / math.log2(5)) / (1 + 1 / math.log2(3))
    assert ndcg_at_k(RANKED, ["b", "d"], 5) == pytest.approx(expected)
    assert ndcg_at_k(RANKED, ["b", "d"], 5) == pytest.approx(0.65093, abs=1e-5)
    # gold at the top: DCG = ideal -> 1.0
    assert ndcg_at_k(RANKED, ["a", "b"], 5) == pytest.approx(1.0)
    # k = 2 cuts d off: DCG = 1/log2(3) = 0.63093; ideal for k=2 = 1 + 0.63093 -> 0.38685
    assert ndcg_at_k(RANKED, ["b", "d"], 2) == pytest.approx((1 / math.log2(3)) / (1 + 1 / math.log2(3)))
    # one gold at rank 3: DCG = 1/log2(4) = 0.5; ideal (one hit at rank 1) = 1 -> 0.5
    assert ndcg_at_k(RANKED, ["c"], 5) == pytest.approx(0.5)
    # more gold than k: ideal has k hits; gold {a, b, c}, k = 2: DCG = ideal -> 1.0
    assert ndcg_at_k(RANKED, ["a", "b", "c"], 2) == pytest.approx(1.0)
    assert ndcg_at_k(RANKED, ["x"], 5) == 0.0


def test_ndcg_at_k_needs_gold():
    with pytest.raises(ValueError):
        ndcg_at_k(RANKED, [], 5)


# --- strict chain recall and chain recall ------------------------------------


def test_strict_chain_recall_is_all_or_nothing():
    # chain {a, c}: both in the top-3 {a, b, c} -> 1; top-2 {a, b} misses c -> 0
    assert strict_chain_recall(RANKED, ["a", "c"], 3) == 1.0
    assert strict_chain_recall(RANKED, ["a", "c"], 2) == 0.0
    assert strict_chain_recall(RANKED, ["a", "z"], 5) == 0.0
    assert strict_chain_recall(RANKED, [], 5) == 0.0  # an empty chain is never "recovered"


def test_chain_recall_is_the_fraction_of_the_chain_in_the_top_k():
    # chain {a, c, e}; top-2 {a, b}: 1 of 3
    assert chain_recall(RANKED, ["a", "c", "e"], 2) == pytest.approx(1 / 3)
    # top-3 {a, b, c}: 2 of 3
    assert chain_recall(RANKED, ["a", "c", "e"], 3) == pytest.approx(2 / 3)
    # top-5: 3 of 3
    assert chain_recall(RANKED, ["a", "c", "e"], 5) == 1.0
    # duplicates count once: chain {a, z} -> 1 of 2
    assert chain_recall(RANKED, ["a", "a", "z"], 5) == 0.5
    assert chain_recall(RANKED, ["a"], 0) == 0.0
    assert chain_recall(RANKED, [], 5) == 0.0  # as strict_chain_recall


def test_chain_recall_is_one_exactly_when_scr_is():
    for chain in (["a"], ["a", "c"], ["b", "e"], ["a", "z"], ["e"]):
        for k in range(6):
            cr = chain_recall(RANKED, chain, k)
            scr = strict_chain_recall(RANKED, chain, k)
            assert (cr == 1.0) == (scr == 1.0)
            assert scr <= cr


def test_chain_recall_rejects_negative_k():
    with pytest.raises(ValueError):
        chain_recall(RANKED, ["a"], -1)


# --- segmentation: representation and conversions -----------------------------


def test_conversions_between_labels_boundaries_and_ranges():
    # labels a a b a -> new segments start at 2 (a->b) and 3 (b->a, a returning topic is a new segment)
    assert boundaries_from_labels(["a", "a", "b", "a"]) == [2, 3]
    assert boundaries_from_labels(["x"] * 4) == []
    assert boundaries_from_labels([]) == []
    assert labels_from_boundaries([2, 3], 5) == [0, 0, 1, 2, 2]
    assert segments_from_boundaries([2, 3], 5) == [(0, 1), (2, 2), (3, 4)]
    assert segments_from_boundaries([], 3) == [(0, 2)]
    assert segments_from_boundaries([], 0) == []
    assert boundaries_from_labels(labels_from_boundaries([1, 4, 7], 9)) == [1, 4, 7]
    # a partition given as ranges round-trips
    assert boundaries_from_ranges(segments_from_boundaries([1, 4, 7], 9), 9) == [1, 4, 7]


def test_check_boundaries_sorts_and_rejects_positions_outside_the_sequence():
    assert check_boundaries([3, 1, 3], 5) == [1, 3]
    for bad in ([0], [5], [-1], [1.5]):
        with pytest.raises(ValueError):
            check_boundaries(bad, 5)
    with pytest.raises(ValueError):
        labels_from_boundaries([1], -1)


def test_boundaries_from_ranges_resolves_overlaps_nesting_and_gaps():
    # exact partition 0-3 | 4-9
    assert boundaries_from_ranges([(0, 3), (4, 9)], 10) == [4]
    # overlap 2-6 / 5-9: 0-1 uncovered join 2-6; from 5 the later-started range wins -> [5]
    assert boundaries_from_ranges([(2, 6), (5, 9)], 10) == [5]
    # nesting 0-9 holding 3-4: 0-2 outer, 3-4 inner, 5-9 outer again -> [3, 5]
    assert boundaries_from_ranges([(0, 9), (3, 4)], 10) == [3, 5]
    # gap 4-5 continues 0-3; the next range opens at 6 -> [6]
    assert boundaries_from_ranges([(0, 3), (6, 9)], 10) == [6]
    # trailing gap 7-9 continues 4-6 -> [4]
    assert boundaries_from_ranges([(0, 3), (4, 6)], 10) == [4]
    # leading gap 0-2 joins the first range: no boundary at 3
    assert boundaries_from_ranges([(3, 5), (6, 9)], 10) == [6]
    # same start: the inner (ending first) range wins, then the outer resumes -> [5]
    assert boundaries_from_ranges([(0, 9), (0, 4)], 10) == [5]
    # input order and duplicates do not matter
    assert boundaries_from_ranges([(6, 9), (0, 3), (6, 9)], 10) == [6]
    assert boundaries_from_ranges([], 10) == []
    for bad in ([(0, 10)], [(5, 2)], [(-1, 3)], [(1,)], [("1", "2")]):
        with pytest.raises(ValueError):
            boundaries_from_ranges(bad, 10)


def test_baselines():
    assert no_boundaries(10) == []
    assert fixed_windows(120, 50) == [50, 100]
    assert fixed_windows(100, 50) == [50]  # segments 0-49, 50-99: no empty third segment
    assert fixed_windows(50, 50) == []
    assert fixed_windows(0) == []
    assert fixed_windows(7, 3) == [3, 6]
    for bad in (0, -5, 2.5):
        with pytest.raises(ValueError):
            fixed_windows(10, bad)


# --- window size --------------------------------------------------------------


def test_window_size_is_half_the_mean_gold_segment_rounded_half_up_at_least_2():
    # n 10, one boundary: 2 segments of mean 5 -> 2.5 -> 3 (half up; Python's round() would give 2)
    assert window_size([5], 10) == 3
    # n 100, no boundary: mean 100 -> 50
    assert window_size([], 100) == 50
    # n 12, boundaries 4 and 8: mean 4 -> 2
    assert window_size([4, 8], 12) == 2
    # n 10, nine boundaries: mean 1 -> 0.5 -> 1 -> raised to the minimum 2
    assert window_size(list(range(1, 10)), 10) == 2


# --- Pk and WindowDiff by hand --------------------------------------------------


def test_pk_and_window_diff_against_no_boundaries():
    # n 10, gold [5] (0-4 | 5-9), hyp [] ; k = 3 (see above); probes i = 0..6 (n-k = 7)
    #   pairs (i, i+3): (0,3) (1,4) (2,5) (3,6) (4,7) (5,8) (6,9)
    #   gold same?       y     y     n     n     n     y     y
    #   hyp same?        y     y     y     y     y     y     y
    #   Pk errors 3 -> 3/7
    # WindowDiff, boundaries in i+1..i+3: gold 0 0 1 1 1 0 0, hyp all 0 -> 3 errors -> 3/7
    assert pk([5], [], 10) == pytest.approx(3 / 7)
    assert window_diff([5], [], 10) == pytest.approx(3 / 7)


def test_pk_and_window_diff_differ_on_a_near_miss():
    # n 10, gold [5], hyp [4, 6] (0-3 | 4-5 | 6-9), k = 3, probes i = 0..6
    #   pairs       (0,3) (1,4) (2,5) (3,6) (4,7) (5,8) (6,9)
    #   gold same?    y     y     n     n     n     y     y
    #   hyp same?     y     n     n     n     n     n     y
    #   Pk errors at i = 1 and i = 5 -> 2/7
    # WindowDiff, boundaries in i+1..i+3:
    #   gold          0     0     1     1     1     0     0
    #   hyp           0     1     1     2     1     1     0     ({4}, {4}, {4,6}, {6}, {6})
    #   errors at i = 1, 3, 5 -> 3/7 (WindowDiff also counts the extra boundary at i = 3)
    assert pk([5], [4, 6], 10) == pytest.approx(2 / 7)
    assert window_diff([5], [4, 6], 10) == pytest.approx(3 / 7)
    # explicit k = 2, probes i = 0..7 (8):
    #   pairs (0,2) (1,3) (2,4) (3,5) (4,6) (5,7) (6,8) (7,9)
    #   gold    y     y     y     n     n     y     y     y
    #   hyp     y     y     n     n     n     n     y     y
    #   Pk errors at i = 2, 5 -> 2/8
    assert pk([5], [4, 6], 10, k=2) == pytest.approx(2 / 8)


def test_shifted_boundary():
    # n 8, gold [4], hyp [5]; k = round_half_up(8/2/2 = 2) = 2; probes i = 0..5 (6)
    #   pairs (0,2) (1,3) (2,4) (3,5) (4,6) (5,7)
    #   gold    y     y     n     n     y     y
    #   hyp     y     y     y     n     n     y
    #   Pk errors at i = 2, 4 -> 2/6; WindowDiff counts in i+1..i+2: gold 0 0 1 1 0 0, hyp 0 0 0 1 1 0 -> 2/6
    assert pk([4], [5], 8) == pytest.approx(2 / 6)
    assert window_diff([4], [5], 8) == pytest.approx(2 / 6)


def test_identical_segmentations_score_zero():
    for gold, n in (([3, 7], 12), ([], 5), ([1, 2, 3], 4), ([50, 100], 120)):
        assert pk(gold, list(gold), n) == 0.0
        assert window_diff(gold, list(gold), n) == 0.0
        assert delta_b(gold, list(gold)) == 0
        assert delta_b_rate(gold, list(gold)) == 0.0


def test_all_boundaries_against_none():
    every = [1, 2, 3, 4, 5]  # n 6, every item its own segment
    # gold = every: mean segment 1 -> k = 2; probes i = 0..3, gold never "same", hyp [] always -> 4/4
    assert pk(every, [], 6) == 1.0
    # WindowDiff: gold has 2 boundaries in every window, hyp 0 -> 4/4
    assert window_diff(every, [], 6) == 1.0
    # gold = []: mean 6 -> k = 3; probes i = 0..2, gold always "same", hyp never -> 3/3
    assert pk([], every, 6) == 1.0
    assert window_diff([], every, 6) == 1.0
    # ΔB = B_sys − B_ref
    assert delta_b(every, []) == -5  # over-merging
    assert delta_b([], every) == 5  # fragmentation
    assert delta_b_rate(every, []) == -1.0
    with pytest.raises(ValueError):
        delta_b_rate([], every)  # no gold boundaries: undefined


def test_sequences_shorter_than_the_window():
    # n 2: k = 2 is lowered to n-1 = 1; the one probe (0, 1): gold same, hyp split -> 1.0
    assert pk([], [1], 2) == 1.0
    assert window_diff([], [1], 2) == 1.0
    assert pk([], [], 2) == 0.0
    # explicit k 10 on n 5: k -> 4, one probe (0, 4): gold same, hyp [2] split -> 1.0
    assert pk([], [2], 5, k=10) == 1.0
    assert window_diff([], [2], 5, k=10) == 1.0
    assert window_diff([], [1, 3], 5, k=10) == 1.0
    # gold [2] vs hyp [3], one probe (0, 4): both split -> Pk 0; one boundary each in 1..4 -> WD 0
    assert pk([2], [3], 5, k=10) == 0.0
    assert window_diff([2], [3], 5, k=10) == 0.0
    # fewer than two items: nothing to disagree about
    assert pk([], [], 1) == 0.0 and window_diff([], [], 1) == 0.0
    assert pk([], [], 0) == 0.0 and window_diff([], [], 0) == 0.0


def test_metrics_reject_bad_input():
    with pytest.raises(ValueError):
        pk([0], [], 5)  # item 0 always starts a segment
    with pytest.raises(ValueError):
        window_diff([], [5], 5)  # past the end
    with pytest.raises(ValueError):
        pk([], [], 5, k=0)


def test_delta_b_signs_and_rate():
    # gold [5], hyp [4, 6]: 2 - 1 = +1 (fragmentation); rate +1/1
    assert delta_b([5], [4, 6]) == 1
    assert delta_b_rate([5], [4, 6]) == 1.0
    # gold [2, 5, 8], hyp [5]: 1 - 3 = -2 (over-merging); rate -2/3
    assert delta_b([2, 5, 8], [5]) == -2
    assert delta_b_rate([2, 5, 8], [5]) == pytest.approx(-2 / 3)
    # counts only: [1, 2] vs [8, 9] is ΔB 0 although no boundary matches
    assert delta_b([1, 2], [8, 9]) == 0


def test_evaluate_bundles_the_metrics():
    result = evaluate([5], [4, 6], 10)
    assert result == {"k": 3, "pk": pytest.approx(2 / 7), "window_diff": pytest.approx(3 / 7),
                      "delta_b": 1, "delta_b_rate": 1.0}
    # no gold boundaries but a hypothesis with some: the rate is left out, the rest is reported
    assert "delta_b_rate" not in evaluate([], [3], 10)

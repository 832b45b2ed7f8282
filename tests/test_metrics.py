"""Retrieval, answer, attribution, latency and token metrics (engine.metrics), event-boundary metrics
(engine.segmentation) and the surface ratio (engine.diagnostics), by hand.

Every expected value is worked out in a comment next to it so a reader can
check the arithmetic without running anything.
"""
from __future__ import annotations

import math

import pytest

from engine.core.oplog import OpKind, OpRecord
from engine.core.segments import (
    boundaries_from_labels,
    boundaries_from_ranges,
    check_boundaries,
    fixed_windows,
    labels_from_boundaries,
    no_boundaries,
    segments_from_boundaries,
)
from engine.eval.metrics import (
    attribution_auditability,
    bleu1,
    chain_recall,
    exact_match,
    latency_summary,
    lcs_length,
    llm_tokens_by_role,
    ndcg_at_k,
    normalize_answer,
    percentile,
    recall_at_k,
    rouge_l,
    strict_chain_recall,
    token_f1,
)
from engine.eval.segmentation import delta_b, delta_b_rate, evaluate, pk, window_diff, window_size
from engine.llm.base import LLMCall

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


# --- answers: normalisation, EM, token F1, BLEU-1, ROUGE-L --------------------


def test_normalize_answer_is_squad_style():
    # lower -> delete punctuation ("cat's" -> "cats") -> delete articles -> collapse spaces
    assert normalize_answer("The  Cat's hat!") == "cats hat"
    assert normalize_answer("An apple, a day") == "apple day"
    # Unicode punctuation goes too: curly quotes, the em dash, the ellipsis
    assert normalize_answer("\u201cHello\u201d \u2014 world\u2026") == "hello world"
    # articles only as whole words: "theory", "another", "banana" keep their letters
    assert normalize_answer("the theory of another banana") == "theory of another banana"
    # punctuation is deleted, not spaced: "e-mail" -> "email", "7 May, 2023" -> "7 may 2023"
    assert normalize_answer("e-mail on 7 May, 2023.") == "email on 7 may 2023"
    assert normalize_answer("") == "" and normalize_answer(" the . a ") == ""
    with pytest.raises(TypeError, match="gold answer"):
        token_f1("Porto", None)


def test_exact_match_after_normalisation():
    assert exact_match("The Eiffel Tower.", "eiffel tower") == 1.0
    assert exact_match("Eiffel", "Eiffel Tower") == 0.0
    assert exact_match("", "") == 1.0 and exact_match("the", "!") == 1.0   # both normalise to nothing
    assert exact_match("", "Paris") == 0.0


def test_token_f1_by_hand():
    # pred "the cat sat on the mat" -> [cat, sat, on, mat] (4); gold "a cat on a mat" -> [cat, on, mat] (3)
    # common 3: P = 3/4, R = 3/3, F1 = 2 * 0.75 * 1 / 1.75 = 6/7
    assert token_f1("the cat sat on the mat", "a cat on a mat") == pytest.approx(6 / 7)
    # multisets: pred [cat, cat, cat], gold [cat, dog]: common min(3, 1) = 1; P = 1/3, R = 1/2,
    # F1 = 2 * (1/6) / (5/6) = 0.4
    assert token_f1("cat cat cat", "cat dog") == pytest.approx(0.4)
    assert token_f1("Porto, Portugal", "porto portugal") == 1.0
    assert token_f1("dog", "cat") == 0.0
    # empty answers: 1 only when both are empty (SQuAD v2's rule)
    assert token_f1("", "Paris") == 0.0
    assert token_f1("Paris", "") == 0.0
    assert token_f1("The.", "a") == 1.0


def test_bleu1_by_hand():
    # pred [cat, sat, on, mat] (c = 4), gold [cat, on, mat] (r = 3): clipped matches 3; c > r so BP = 1
    # BLEU-1 = 3/4
    assert bleu1("cat sat on mat", "cat on mat") == pytest.approx(0.75)
    # pred [cat] (c = 1), gold (r = 3): precision 1/1, BP = exp(1 - 3/1) = e^-2 = 0.135335
    assert bleu1("cat", "cat on mat") == pytest.approx(math.exp(-2))
    assert bleu1("cat", "cat on mat") == pytest.approx(0.135335, abs=1e-6)
    # clipping: pred [cat, cat, cat] vs gold [cat, dog]: clipped 1 of 3; c = 3 > r = 2, BP = 1 -> 1/3
    assert bleu1("cat cat cat", "cat dog") == pytest.approx(1 / 3)
    # order-blind: "mat on cat" vs "cat on mat": 3 of 3, c = r so BP = exp(0) = 1 -> 1.0
    assert bleu1("mat on cat", "cat on mat") == 1.0
    assert bleu1("", "cat") == 0.0 and bleu1("cat", "") == 0.0 and bleu1("", "") == 1.0


def test_lcs_length_by_hand():
    # the textbook pair: ABCBDAB vs BDCABA has LCS 4 (e.g. BCBA)
    assert lcs_length(list("ABCBDAB"), list("BDCABA")) == 4
    assert lcs_length(list("BDCABA"), list("ABCBDAB")) == 4
    assert lcs_length([], ["a"]) == 0
    assert lcs_length(["a", "b"], ["a", "b"]) == 2


def test_rouge_l_by_hand():
    # pred [cat, sat, on, mat], gold [cat, on, mat]: LCS = 3 (cat on mat); R = 3/3, P = 3/4
    # beta = 1: F = 2 R P / (R + P) = 1.5 / 1.75 = 6/7
    assert rouge_l("cat sat on mat", "cat on mat") == pytest.approx(6 / 7)
    # beta = 2: F = (1 + 4) R P / (R + 4 P) = 5 * 0.75 / (1 + 3) = 0.9375
    assert rouge_l("cat sat on mat", "cat on mat", beta=2.0) == pytest.approx(0.9375)
    # Lin's example: "police killed the gunman" vs "police kill the gunman" -> [police, killed, gunman] vs
    # [police, kill, gunman]: LCS 2, R = P = 2/3, F = 2/3
    assert rouge_l("police killed the gunman", "police kill the gunman") == pytest.approx(2 / 3)
    # order matters where BLEU-1 ignores it: "mat on cat" vs "cat on mat": LCS 1, R = P = 1/3
    assert rouge_l("mat on cat", "cat on mat") == pytest.approx(1 / 3)
    assert rouge_l("dog", "cat") == 0.0
    assert rouge_l("", "cat") == 0.0 and rouge_l("", "") == 1.0
    with pytest.raises(ValueError):
        rouge_l("a", "b", beta=0)


# --- attribution auditability ------------------------------------------------


def test_attribution_auditability_is_coverage_of_the_gold_keys():
    gold = ["D1:3", "D2:5"]
    assert attribution_auditability(["D2:5", "D9:1", "D1:3"], gold) == 1.0   # extra citations are not penalised
    assert attribution_auditability(["D1:3"], gold) == 0.0                    # one gold key missing
    assert attribution_auditability([], gold) == 0.0                          # a failed answer cites nothing
    assert attribution_auditability(["D1:3", "D1:3", "D2:5"], ["D2:5", "D2:5"]) == 1.0
    assert attribution_auditability(["d1:3", "D2:5"], gold) == 0.0            # keys compare exactly
    with pytest.raises(ValueError, match="gold evidence key"):
        attribution_auditability(["D1:3"], [])


# --- latency -----------------------------------------------------------------


def test_percentile_interpolates_between_ranks():
    # [1, 2, 3, 4]: p50 at position 0.5 * 3 = 1.5 -> 2 + 0.5 * (3 - 2) = 2.5
    # p95 at 0.95 * 3 = 2.85 -> 3 + 0.85 * (4 - 3) = 3.85
    assert percentile([4, 1, 3, 2], 0.5) == pytest.approx(2.5)
    assert percentile([4, 1, 3, 2], 0.95) == pytest.approx(3.85)
    assert percentile([4, 1, 3, 2], 0.0) == 1 and percentile([4, 1, 3, 2], 1.0) == 4
    # 1..20: p95 at 0.95 * 19 = 18.05 -> 19 + 0.05 = 19.05
    assert percentile(list(range(1, 21)), 0.95) == pytest.approx(19.05)
    with pytest.raises(ValueError):
        percentile([], 0.5)
    with pytest.raises(ValueError):
        percentile([1.0], 1.5)


def test_latency_summary_by_hand():
    # mean of 1..4 = 2.5; percentiles as above
    assert latency_summary([4.0, 1.0, 3.0, 2.0]) == {"p50": 2.5, "p95": 3.85, "mean": 2.5, "n": 4}
    assert latency_summary([10.0]) == {"p50": 10.0, "p95": 10.0, "mean": 10.0, "n": 1}
    # rounded to 3 decimals (microseconds of a millisecond figure)
    assert latency_summary([0.1234567]) == {"p50": 0.123, "p95": 0.123, "mean": 0.123, "n": 1}
    # a stage that never ran is None, not zero
    assert latency_summary([]) == {"p50": None, "p95": None, "mean": None, "n": 0}
    for bad in ([1.0, -0.5], [float("nan")], [float("inf")]):
        with pytest.raises(ValueError, match="finite and non-negative"):
            latency_summary(bad)


# --- LLM tokens per role -----------------------------------------------------


def _call(role: str, prompt: str, response: str | None, prompt_tokens: int = 0, completion_tokens: int = 0,
          error_code: str | None = None) -> LLMCall:
    return LLMCall(role=role, backend="test", model="m", key="k", prompt=[{"role": "user", "content": prompt}],
                   response=response, data=None, error_code=error_code, prompt_tokens=prompt_tokens,
                   completion_tokens=completion_tokens)


def test_llm_tokens_by_role_sums_usage_and_estimates_what_was_not_reported():
    calls = [
        _call("descriptor", "x", "{}", 42, 17),
        _call("descriptor", "y", "{}", 10, 5),
        # a reply without usage: estimate_tokens = int(words * 4/3) + 1
        # prompt "one two three" -> int(4) + 1 = 5; reply "a b c d e f" -> int(8) + 1 = 9
        _call("router", "one two three", "a b c d e f"),
        # no reply at all (timeout): a call with no tokens
        _call("router", "one two three", None, error_code="TIMEOUT"),
    ]
    expected = {"descriptor": {"calls": 2, "prompt": 52, "completion": 22},
                "router": {"calls": 2, "prompt": 5, "completion": 9}}
    assert llm_tokens_by_role(calls) == expected
    assert list(llm_tokens_by_role(calls)) == ["descriptor", "router"]
    # the same calls as stored: dicts, or log records among records of other kinds
    assert llm_tokens_by_role([c.to_dict() for c in calls]) == expected
    records = [OpRecord(kind=OpKind.NOTE, payload={"text": "hi"})] + [
        OpRecord(kind=OpKind.LLM_CALL, payload=c.to_dict(), actor="llm") for c in calls]
    assert llm_tokens_by_role(records) == expected
    assert llm_tokens_by_role([]) == {}
    with pytest.raises(TypeError):
        llm_tokens_by_role([42])
    with pytest.raises(ValueError, match="after_seq"):
        llm_tokens_by_role(calls, after_seq=3)


def test_llm_tokens_by_role_reads_a_stores_log(make_engine):
    """A real All-Mem session on the offline backend: one descriptor call per ingested turn, logged with
    the turn; a window of the log (after_seq) counts only the calls committed in it."""
    from conftest import turn

    engine = make_engine()
    first = [turn(1, "Maya", "I adopted a kitten named Miso from the shelter."),
             turn(2, "Jon", "Nice! My sister Lena lives in Porto and works as a nurse.")]
    for t in first:
        engine.ingest(t)
    middle = engine.store.last_seq()
    engine.ingest(turn(3, "Maya", "The plumber finally fixed our leaking kitchen sink today."))

    whole = llm_tokens_by_role(engine.store)
    assert whole["descriptor"]["calls"] == 3
    assert whole["descriptor"]["prompt"] > 0 and whole["descriptor"]["completion"] > 0
    later = llm_tokens_by_role(engine.store, after_seq=middle)
    assert later["descriptor"]["calls"] == 1
    earlier = llm_tokens_by_role(engine.store, upto_seq=middle)
    assert earlier["descriptor"]["calls"] == 2
    for key in ("prompt", "completion"):
        assert earlier["descriptor"][key] + later["descriptor"][key] == whole["descriptor"][key]


# --- surface ratio -----------------------------------------------------------


def _state(turn: int, visible: list[bool]):
    from engine.core.node import Node
    from engine.core.state import MemoryState

    nodes = {i: Node(id=i, raw=f"u{i}", summary="", keywords=[], time="", kind="unit", source_ids=[f"D1:{i}"],
                     visible=v) for i, v in enumerate(visible, start=1)}
    return MemoryState(nodes=nodes, turn=turn)


def test_surface_ratio_is_visible_units_per_turn():
    from engine.eval.diagnostics import structure, surface_ratio

    # 4 turns, 5 units of which 3 on the surface (two merged away): 3/4
    state = _state(4, [True, False, True, False, True])
    assert surface_ratio(state) == 0.75
    assert structure(state)["visible_ratio"] == 0.75          # one home: structure() reports the same figure
    # Split can put more units than turns on the surface: 2 turns, 3 visible -> 1.5
    assert surface_ratio(_state(2, [True, True, True])) == 1.5
    # 3 turns -> 2/3 rounded to 4 decimals
    assert surface_ratio(_state(3, [True, True, False])) == 0.6667
    assert surface_ratio(_state(0, [])) == 0.0                # empty memory

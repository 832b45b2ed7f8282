"""Retrieval metrics against turn-level gold evidence (DESIGN §7).

Event-boundary metrics (Pk, WindowDiff, ΔB) live in `engine.segmentation`.
"""
from __future__ import annotations

import math
from typing import Sequence


def recall_at_k(ranked: Sequence[str], gold: Sequence[str], k: int) -> float:
    """Fraction of gold evidence ids found in the top-k ranked ids."""
    gold_set = set(gold)
    if not gold_set:
        raise ValueError("recall needs at least one gold evidence id")
    return len(gold_set & set(ranked[:k])) / len(gold_set)


def ndcg_at_k(ranked: Sequence[str], gold: Sequence[str], k: int) -> float:
    """Binary-relevance nDCG@k."""
    gold_set = set(gold)
    if not gold_set:
        raise ValueError("nDCG needs at least one gold evidence id")
    dcg = sum(1.0 / math.log2(i + 2) for i, sid in enumerate(ranked[:k]) if sid in gold_set)
    ideal = sum(1.0 / math.log2(i + 2) for i in range(min(k, len(gold_set))))
    return dcg / ideal


def strict_chain_recall(ranked: Sequence[str], chain: Sequence[str], k: int) -> float:
    """SCR: 1 iff every turn of the gold causal chain is in the top-k."""
    return float(set(chain) <= set(ranked[:k])) if chain else 0.0


def chain_recall(ranked: Sequence[str], chain: Sequence[str], k: int) -> float:
    """Fraction of the gold chain's turns found in the top-k: the graded companion of SCR.

    ``chain_recall == 1.0`` exactly when ``strict_chain_recall == 1.0``, so the
    gap between the two shows how close a miss was. An empty chain gives 0.0,
    as `strict_chain_recall` does.
    """
    if k < 0:
        raise ValueError(f"k must be non-negative, got {k}")
    chain_set = set(chain)
    if not chain_set:
        return 0.0
    return len(chain_set & set(ranked[:k])) / len(chain_set)

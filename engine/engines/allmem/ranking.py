"""Deterministic ranking keys and capped selection (All-Mem App. B.1).

Every pruning and rewiring decision goes through these, so the same bank and
the same edit always give the same edges, with node id as the last tie-break.
"""
from __future__ import annotations

from typing import Callable, Iterable

import numpy as np

from engine.core.node import Node as Unit


def semantic_key(z_src: np.ndarray, dst: Unit, z_dst: np.ndarray) -> tuple:
    """Key_sigma / Key_beta: (similarity, t_u, -id(u)), ranked descending."""
    return (round(float(z_src @ z_dst), 6), dst.time, -dst.id)


def temporal_key(dst: Unit) -> tuple:
    """Key_tau / Key_nu: (t_u, id(u)), ranked descending: the closest predecessor first.

    The paper breaks ties with -id; datasets such as LoCoMo stamp every turn of a
    session with the session's time, and there the later-written unit (larger
    id) is the closer predecessor, so ties go to the larger id.
    """
    return (dst.time, dst.id)


def top_cap(candidates: Iterable[int], cap: int, key: Callable[[int], tuple]) -> list[int]:
    """TopCap: the first `cap` candidates by `key`, descending."""
    return sorted(set(candidates), key=key, reverse=True)[:cap]

"""Merge-first, then the recurrence gate (§3.2-3.3), as a pure function of cosines: no LLM, no state.

For a new unit s_i: the nearest episode E* by cosine; if cos(v_i, v_E*) ≥ θ_merge the unit goes to the merge
role. Otherwise N_i is the |N_i| = factor · θ_count nearest units of the subconscious store, s_i included (it is
indexed before the store is queried), R_i those with cosine ≥ θ_sim, and at |R_i| ≥ θ_count the cluster
C_i = R_i (s_i among them) is promoted. Ingest and the threshold sweep both call `gate`, so the sweep counts
exactly the triggers a replay would make; each computes the new unit's cosines with its stores itself (ingest
from stores kept with the views, the sweep from its replay's matrix, `scored`).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from engine.retrieval.index import top_k

MERGE, CONSOLIDATE, NONE = "merge", "consolidate", "none"
DECIMALS = 9             # cosines compared at this precision, ties by id


@dataclass(frozen=True)
class GateParams:
    theta_sim: float
    theta_count: int
    theta_merge: float
    k: int                       # |N_i|, the new unit included
    merge_first: bool = True


@dataclass
class GateTrace:
    """What the gate saw and decided for one unit: the logged record of the turn that completed it."""

    unit: int
    theta_sim: float
    theta_count: int
    theta_merge: float
    k: int
    neighbours: list[tuple[int, float]] = field(default_factory=list)   # N_i \ {s_i}, nearest first
    episode: int | None = None                                          # E*, the nearest episode
    episode_cosine: float | None = None
    fired: str = NONE
    cluster: list[int] = field(default_factory=list)                    # C_i when consolidation fires

    @property
    def count(self) -> int:
        """|R_i|: the new unit plus its neighbours at cosine ≥ θ_sim."""
        return 1 + len(self.relevant)

    @property
    def relevant(self) -> list[int]:
        """R_i without the new unit: its neighbours at cosine ≥ θ_sim."""
        return [u for u, c in self.neighbours if passes(c, self.theta_sim)]

    def to_dict(self) -> dict:
        return {"unit": self.unit, "theta_sim": self.theta_sim, "theta_count": self.theta_count,
                "theta_merge": self.theta_merge, "k": self.k,
                "neighbours": [[u, round(c, 6)] for u, c in self.neighbours], "count": self.count,
                "episode": self.episode,
                "episode_cosine": None if self.episode_cosine is None else round(self.episode_cosine, 6),
                "fired": self.fired, "cluster": list(self.cluster)}


def passes(cosine: float, threshold: float) -> bool:
    return round(cosine, DECIMALS) >= threshold


def nearest(ids: np.ndarray, cosines: np.ndarray, k: int) -> list[tuple[int, float]]:
    """The k of `ids` of highest cosine (`cosines` aligned with them), highest first, ties by id."""
    if k <= 0 or len(ids) == 0:
        return []
    chosen = top_k(ids, cosines, k, DECIMALS)
    at = np.flatnonzero(np.isin(ids, chosen))
    cosine = dict(zip(ids[at].tolist(), cosines[at].tolist()))
    return [(uid, cosine[uid]) for uid in chosen]


def gate(unit: int, p: GateParams, sub_ids: np.ndarray, sub_cosines: np.ndarray, episode_ids: np.ndarray,
         episode_cosines: np.ndarray) -> GateTrace:
    """Decide for unit `unit` given the cosines of its vector with the other subconscious units and with the
    episodes it may join (each array of cosines aligned with its ids)."""
    trace = GateTrace(unit=unit, theta_sim=p.theta_sim, theta_count=p.theta_count, theta_merge=p.theta_merge, k=p.k)
    best = nearest(episode_ids, episode_cosines, 1)
    if best:
        trace.episode, trace.episode_cosine = best[0]
    others = sub_ids != unit
    trace.neighbours = nearest(sub_ids[others], sub_cosines[others], p.k - 1)
    if p.merge_first and trace.episode_cosine is not None and passes(trace.episode_cosine, p.theta_merge):
        trace.fired = MERGE
    elif trace.count >= p.theta_count:
        trace.fired = CONSOLIDATE
        trace.cluster = [unit, *trace.relevant]
    return trace


def scored(ids: list[int], matrix: np.ndarray | None, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """`ids` as an array and the cosine of `v` with each of their rows of `matrix`: a gate's input."""
    if not ids or matrix is None:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
    return np.asarray(ids, dtype=np.int64), matrix @ v

"""The threshold sweep: what each (θ_sim, θ_count) pair would do to a conversation, without any LLM.

The conversation's units are replayed through the same gate ingest uses (`gate.gate`), in order, for every pair
of the grid. A trigger takes its cluster out of the subconscious store; a merge-first hit adds the unit to its
episode. Without a model there is no episode text, so an episode's embedding is estimated as that of its latest
unit (the trigger, then each unit merged into it), and each trigger is counted as one episode. Of the estimates
tried on LoCoMo conv-26 at θ_sim 0.7, θ_count 5 (a replay there made 10 triggers and 74 merge-first hits) the
latest unit gave 11 and 76, the first unit 9 and 83, the medoid 6 and 92, the centroid 3 and 145: a centroid of
units that all carry the speakers' names and a date is near every later unit. θ_merge follows θ_sim when the engine's settings have them equal (every preset does, as the paper's
Eq. 6), else it stays at the engine's θ_merge.

Estimated LLM calls: per trigger one episode extraction and one refinement, per merge one merge and one
refinement (no refinement under `no-semantic`). Estimated prompt tokens: each role's fixed prompt
(`engine.llm.prompts`) plus the texts it would read (the cluster, the unit and its episode, `k_known` known facts
of typical length), counted with `estimate_tokens` as the offline backend counts them.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable

import numpy as np

from engine.engines.recmem.gate import CONSOLIDATE, MERGE, GateParams, gate, scored
from engine.llm.base import estimate_prompt_tokens, estimate_tokens
from engine.llm.prompts import render

EPISODE_TOKENS = 150          # an episode of 3-6 sentences
FACT_TOKENS = 30              # one fact sentence


@dataclass(frozen=True)
class SweepUnit:
    id: int
    time: str
    text: str
    vector: np.ndarray


@dataclass
class SweepCell:
    """One (θ_sim, θ_count) pair over the conversation."""

    theta_sim: float
    theta_count: int
    theta_merge: float
    units: int
    triggers: int = 0
    merges: int = 0
    cluster_sizes: list[int] = field(default_factory=list)
    consolidated: int = 0              # units that left the subconscious store
    calls: int = 0                     # estimated LLM calls
    prompt_tokens: int = 0             # estimated prompt tokens of those calls

    @property
    def mean_cluster(self) -> float:
        return float(np.mean(self.cluster_sizes)) if self.cluster_sizes else 0.0

    @property
    def max_cluster(self) -> int:
        return max(self.cluster_sizes, default=0)

    @property
    def consolidated_share(self) -> float:
        return self.consolidated / self.units if self.units else 0.0

    def to_dict(self) -> dict:
        return {"theta_sim": self.theta_sim, "theta_count": self.theta_count, "theta_merge": self.theta_merge,
                "units": self.units, "triggers": self.triggers, "merges": self.merges,
                "cluster_sizes": list(self.cluster_sizes), "mean_cluster": round(self.mean_cluster, 3),
                "max_cluster": self.max_cluster, "consolidated": self.consolidated,
                "consolidated_share": round(self.consolidated_share, 4), "calls": self.calls,
                "prompt_tokens": self.prompt_tokens}


def _template(role: str) -> int:
    return estimate_prompt_tokens(render(role, {}))


def threshold_sweep(units: list[SweepUnit], theta_sims: Iterable[float], theta_counts: Iterable[int],
                    settings) -> list[SweepCell]:
    """One cell per (θ_sim, θ_count), θ_sim outer, each a replay of `units` (in order) through the gate."""
    tied = settings.theta_merge == settings.theta_sim
    refine = not settings.has("no-semantic")
    cost = {role: _template(role) for role in ("episode_extraction", "episode_merge", "fact_refinement")}
    known = settings.k_known * FACT_TOKENS
    tokens = [estimate_tokens(u.text) for u in units]
    matrix = np.stack([u.vector for u in units]) if units else np.zeros((0, 1), np.float32)
    cells = []
    for sim in theta_sims:
        for count in theta_counts:
            p = GateParams(theta_sim=float(sim), theta_count=int(count),
                           theta_merge=float(sim) if tied else settings.theta_merge,
                           k=settings.gate_k_factor * int(count), merge_first=not settings.has("no-merge"))
            cells.append(_replay(units, matrix, tokens, p, cost, known, refine))
    return cells


def _replay(units: list[SweepUnit], matrix: np.ndarray, tokens: list[int], p: GateParams, cost: dict[str, int],
            known: int, refine: bool) -> SweepCell:
    cell = SweepCell(theta_sim=p.theta_sim, theta_count=p.theta_count, theta_merge=p.theta_merge, units=len(units))
    position = {u.id: i for i, u in enumerate(units)}
    sub: list[int] = []                       # positions of subconscious units
    episodes: list[list[int]] = []            # positions of each episode's units
    estimates: list[np.ndarray] = []          # each episode's estimated embedding: its latest unit's
    for i, u in enumerate(units):
        trace = gate(u.id, p, *scored([units[j].id for j in sub], matrix[sub] if sub else None, u.vector),
                     *scored(list(range(len(episodes))), np.stack(estimates) if estimates else None, u.vector))
        if trace.fired == MERGE:
            e = trace.episode
            episodes[e].append(i)
            estimates[e] = matrix[i]
            cell.merges += 1
            cell.consolidated += 1
            cell.calls += 1 + refine
            cell.prompt_tokens += cost["episode_merge"] + tokens[i] + EPISODE_TOKENS
            if refine:
                cell.prompt_tokens += cost["fact_refinement"] + EPISODE_TOKENS + tokens[i] + known
        elif trace.fired == CONSOLIDATE:
            members = sorted(position[c] for c in trace.cluster)
            sub = [j for j in sub if j not in set(members)]
            episodes.append(members)
            estimates.append(matrix[position[u.id]])
            cell.triggers += 1
            cell.cluster_sizes.append(len(members))
            cell.consolidated += len(members)
            read = sum(tokens[j] for j in members)
            cell.calls += 1 + refine
            cell.prompt_tokens += cost["episode_extraction"] + read
            if refine:
                cell.prompt_tokens += cost["fact_refinement"] + EPISODE_TOKENS + read + known
        else:
            sub.append(i)
    return cell

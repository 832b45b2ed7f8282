"""Whether a difference between two systems of one benchmark is more than the questions that happened to be asked.

An ablation that moves R@5 by 0.002 over 1,224 questions may have changed three answers or forty that cancel
out; a researcher reading "worse" or "better" needs to know which. `paired_difference` compares two systems
item by item on the items both were scored on (the same question at the last round, or the same meeting):
the mean difference, how many items each side won, and a 95% percentile interval of the mean difference
from a paired bootstrap over the items (Efron & Tibshirani, 1993; the usual test of IR system differences).
The resampling is seeded, so one result always gives the same interval. Items are resampled one by one,
not by conversation: questions of one conversation are not independent, so the interval is a lower bound on
the uncertainty, and a difference inside it is noise for certain.

`per_item` reads a `memwb bench` result (docs/BENCHMARK_FORMAT.md): question metrics from the question records
at the last round, boundary metrics (Pk, WindowDiff) from the per-meeting boundary records.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass

import numpy as np

SEED = 0
RESAMPLES = 2000
LEVEL = 0.95


@dataclass(frozen=True)
class PairedDifference:
    """`system` minus `reference` over the `n` items both were scored on."""

    n: int
    delta: float               # mean of the item differences
    low: float                 # the bootstrap interval of `delta` at `LEVEL`
    high: float
    gained: int                # items where the system scores higher
    lost: int                  # items where it scores lower
    tied: int

    @property
    def within_noise(self) -> bool:
        """The interval holds 0: the question sample cannot tell the two systems apart."""
        return self.low <= 0.0 <= self.high

    def verdict(self, reference: str) -> str:
        """What the comparison says, in the words every table of it uses: within noise, or which way it goes."""
        if self.within_noise:
            return "within noise"
        return f"{'lower' if self.delta < 0 else 'higher'} than {reference}"

    def to_dict(self) -> dict:
        return {**asdict(self), "within_noise": self.within_noise}


def paired_difference(system: Mapping, reference: Mapping, resamples: int = RESAMPLES, seed: int = SEED,
                      level: float = LEVEL) -> PairedDifference | None:
    """The paired comparison of two {item: value} maps over the items both hold a value for; None when they
    share none."""
    keys = sorted(k for k in system.keys() & reference.keys() if system[k] is not None and reference[k] is not None)
    if not keys:
        return None
    d = np.array([float(system[k]) - float(reference[k]) for k in keys])
    means = _bootstrap_means(d, resamples, seed)
    tail = (1.0 - level) / 2
    low, high = np.quantile(means, [tail, 1.0 - tail])
    return PairedDifference(n=len(d), delta=round(float(d.mean()), 4), low=round(float(low), 4),
                            high=round(float(high), 4), gained=int((d > 0).sum()), lost=int((d < 0).sum()),
                            tied=int((d == 0).sum()))


def _bootstrap_means(d: np.ndarray, resamples: int, seed: int, chunk: int = 250) -> np.ndarray:
    """The means of `resamples` resamples of `d` with replacement, drawn `chunk` at a time (bounded memory)."""
    rng = np.random.default_rng(seed)
    out = []
    for start in range(0, resamples, chunk):
        idx = rng.integers(0, len(d), size=(min(chunk, resamples - start), len(d)))
        out.append(d[idx].mean(axis=1))
    return np.concatenate(out)


def per_item(result: dict, system: str, metric: str) -> dict[tuple[str, str], float | None]:
    """{(conversation, question) or (meeting, ""): value} of one system's metric in a bench result: question
    records at the last round, else the per-meeting boundary records; {} when the result has neither for it."""
    last = str(result.get("rounds", 1))
    found = {(q["conversation"], q["question_id"]): q["by_round"][last].get(metric)
             for q in result.get("questions") or [] if q["system"] == system and last in q.get("by_round", {})}
    if found:
        return found
    return {(b["meeting"], ""): b.get(metric)
            for b in result.get("boundaries") or [] if b.get("system") == system and metric in b}


def compare_systems(result: dict, system: str, reference: str, metric: str) -> PairedDifference | None:
    """`system` against `reference` on `metric`, paired over the items of one bench result."""
    return paired_difference(per_item(result, system, metric), per_item(result, reference, metric))


def ablation_references(result: dict) -> dict[str, str]:
    """Each ablation system of a result -> the same engine's full system, when the run has it."""
    systems = result.get("systems", {})
    full = {s.get("engine"): label for label, s in systems.items() if s.get("engine") and not s.get("ablations")}
    return {label: full[s["engine"]] for label, s in systems.items()
            if s.get("ablations") and s.get("engine") in full}

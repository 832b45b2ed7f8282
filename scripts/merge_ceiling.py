"""How far Merge alone could take All-Mem's visible ratio, if it merged everything its coherence check admits.

All-Mem's paper gates a Merge twice: the diagnoser must call the set factually redundant at confidence θ, and
the set must pass a coherence pre-check, the mean pairwise cosine of its units at least γ_merge, with at most
`merge_max` units (App. C.2). This script drops the first gate and keeps the second: in each conversation it
merges greedily, strongest pair first, every set of turns (their bodies, as the diagnosis compares them) whose
mean pairwise cosine stays at least γ_merge, a set growing while it does, up to `merge_max` turns; `--speaker
same` merges only one speaker's turns (the offline rules compare only those). A merge of s turns leaves one
visible unit for s, so the visible ratio (visible units per turn) that remains is an optimistic bound on what
Merge could do without judging redundancy: a greedy grouping, not the best possible one. γ_merge and
`merge_max` are All-Mem's own settings. Prints the figures and writes them to --out.

    python scripts/merge_ceiling.py [--data ../shared/data/locomo/locomo-dev8.json] [--out out/merge_ceiling.json]
"""
from __future__ import annotations

import argparse
import itertools
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from results import write_json  # noqa: E402

from engine.core.text import strip_speaker  # noqa: E402
from engine.engines import settings_class  # noqa: E402
from engine.llm.embedder import Embedder  # noqa: E402
from engine.loaders import load_conversations  # noqa: E402

DEFAULT_DATA = ROOT.parent / "shared" / "data" / "locomo" / "locomo-dev8.json"


def merged_away(sims: np.ndarray, speakers: list[str], gamma: float, most: int, same_speaker: bool) -> int:
    """How many turns greedy merging takes off the surface: a set of s turns leaves one unit for them."""
    n = len(speakers)
    pairs = sorted(((float(sims[i, j]), j, i) for i in range(n) for j in range(i)
                    if sims[i, j] >= gamma and (not same_speaker or speakers[i] == speakers[j])),
                   key=lambda p: (-p[0], p[1], p[2]))
    group: dict[int, int] = {}
    sets: list[set[int]] = []
    for _, a, b in pairs:
        ga, gb = group.get(a), group.get(b)
        if ga is None and gb is None:
            group[a] = group[b] = len(sets)
            sets.append({a, b})
        elif (ga is None) != (gb is None):
            g, new = (ga, b) if ga is not None else (gb, a)
            grown = sets[g] | {new}
            if len(grown) <= most and np.mean([sims[x, y] for x, y in itertools.combinations(grown, 2)]) >= gamma:
                sets[g], group[new] = grown, g
    return sum(len(s) - 1 for s in sets)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=str(DEFAULT_DATA))
    ap.add_argument("--out", default=str(ROOT / "out" / "merge_ceiling.json"))
    args = ap.parse_args()
    s = settings_class("allmem")()
    embedder = Embedder()
    turns = 0
    away = {"same": 0, "any": 0}
    for conv in load_conversations(args.data):
        vectors = embedder.embed([strip_speaker(t.raw)[1] for t in conv.turns])
        sims = vectors @ vectors.T
        speakers = [t.speaker for t in conv.turns]
        turns += len(conv.turns)
        for who in away:
            away[who] += merged_away(sims, speakers, s.gamma_merge, s.merge_max, same_speaker=who == "same")
    ratios = {who: round(1 - n / turns, 3) for who, n in away.items()}
    print(f"{turns} turns; merging every set of at most {s.merge_max} turns with mean pairwise cosine >= "
          f"{s.gamma_merge}, redundant or not, leaves a visible ratio of {ratios['same']} (one speaker's turns) "
          f"or {ratios['any']} (any speakers')")
    write_json(args.out, {"data": args.data, "turns": turns, "gamma_merge": s.gamma_merge, "merge_max": s.merge_max,
                          "merged_away": away, "visible_ratio": ratios})
    return 0


if __name__ == "__main__":
    sys.exit(main())

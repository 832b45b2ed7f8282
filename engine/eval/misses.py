"""Where each miss was lost: every gold evidence turn of a question followed through one engine's memory.

A gold turn outside the top k of a retrieval was lost at one of four places, found generically from the
engine's state and its own `explain` (engine.retrieval.explain):

- **not stored**: no node carries the turn; the engine dropped it at ingest or extraction;
- **off the surface**: every node carrying it was moved off the retrieval surface by consolidation
  (archived, merged or grounded away) and retrieval did not recover any of them;
- **not reached**: a node carrying it is on the surface, but ranked below the seed cut and no path
  reached it within the hop limit, or the expansion's budget ran out first;
- **ranked below k**: a node carrying it was a candidate, but the turn's source rank is above k.

For the last two the record also names the signal that held it back: of the terms the ranking added up
(dense similarity, the weighted lexical signal, the off-surface penalty, a score passed down a relation
chain), the one on which the turn's best node fell furthest short of the node holding the k-th source; or
"own evidence" when that node carries the turn among others and gives it only the turn's own evidence
(`source_worth`: a merged representative, an episode), which kept it out. A multiplicative re-rank (GAM's
P_sem · Π β) is split into the logarithms of its factors, which add up the same way, so the factor named is the
one whose ratio to the cut's was smallest.
"""
from __future__ import annotations

import math
from collections import Counter
from dataclasses import asdict, dataclass
from enum import StrEnum
from typing import Iterable

from engine.retrieval.explain import ExplainingMemory, Placement, Signals, explain_sources
from engine.retrieval.result import RetrievalResult, RetrievedUnit, given, order_sources, source_standing


class Fate(StrEnum):
    FOUND = "found"
    NOT_STORED = "not_stored"
    OFF_SURFACE = "off_surface"
    NOT_REACHED = "not_reached"
    BELOW_K = "below_k"


FATE_LABELS: dict[Fate, str] = {
    Fate.FOUND: "in the top k",
    Fate.NOT_STORED: "never stored (dropped at ingest or extraction)",
    Fate.OFF_SURFACE: "consolidated off the surface, not recovered",
    Fate.NOT_REACHED: "on the surface, not reached (below the seed cut or past the budget)",
    Fate.BELOW_K: "a candidate ranked below k",
}
MISSED = (Fate.NOT_STORED, Fate.OFF_SURFACE, Fate.NOT_REACHED, Fate.BELOW_K)

# The terms a ranking score is made of (Signals): their share of the score, by name.
SIGNALS = ("dense", "lexical", "penalty", "inherited")
# A turn its best result carried at less than that result's score: the turn's own evidence (`source_worth`).
OWN_EVIDENCE = "own evidence"


@dataclass(frozen=True)
class Miss:
    """One gold turn of one question: where it was lost (or `found`), with the numbers that place it."""

    turn: str
    fate: Fate
    source_rank: int | None = None       # rank among every candidate's source ids (None: not a candidate's)
    unit: int | None = None              # the turn's best node
    drop: str | None = None              # the engine's Drop code for that node
    stage: str = ""                      # the key of the schema stage that dropped it
    signal: str | None = None            # the term that held it back (below_k, not_reached)
    gap: float | None = None             # the cut's score minus the turn's, in the ranking's units
    detail: str = ""

    def to_dict(self) -> dict:
        d = asdict(self)
        d["fate"] = str(self.fate)
        return {k: v for k, v in d.items() if v not in (None, "")}


def terms(sig: Signals) -> dict[str, float]:
    """A score split into the SIGNALS it adds up: dense (its z-value when a lexical weight fuses it, else the
    cosine), lexical (weight x z(BM25)), penalty (subtracted), inherited (what a relation chain added); a
    multiplicative re-rank's score into the logarithm of each factor (a factor rounded to 0 counts as 1e-9)."""
    if sig.factors:
        return {name: math.log(max(value, 1e-9)) for name, value in sig.factors}
    dense = sig.z_dense if sig.weight else sig.dense
    return {"dense": dense, "lexical": sig.weight * sig.z_lexical, "penalty": -sig.penalty,
            "inherited": sig.score - sig.relevance}


def held_back_by(gold: Signals | None, cut: Signals | None) -> tuple[str | None, float | None]:
    """The term on which `gold` falls furthest short of `cut`, and the whole score gap."""
    if gold is None or cut is None:
        return None, None
    g, c = terms(gold), terms(cut)
    names = [t for t in dict.fromkeys([*c, *g]) if t in c and t in g]
    name = max(names, key=lambda t: (round(c[t] - g[t], 9), -names.index(t)))
    return name, round(cut.score - gold.score, 6)


def follow_gold(engine: ExplainingMemory, res: RetrievalResult, gold: Iterable[str], k: int) -> list[Miss]:
    """Each gold turn's fate in `res`, a retrieval `engine` just made (module docstring)."""
    gold = list(dict.fromkeys(gold))
    placed = explain_sources(engine, res, gold)
    the_cut = _the_cut(res, k)
    cut = engine.explain(res, [the_cut[1].id])[the_cut[1].id].signals if the_cut else None
    out = []
    for sp in placed:
        if sp.source_rank is not None and sp.source_rank <= k:
            out.append(Miss(sp.source_id, Fate.FOUND, sp.source_rank, sp.best.uid if sp.best else None))
            continue
        p = sp.best
        if sp.units == 0 or p is None:
            out.append(Miss(sp.source_id, Fate.NOT_STORED, detail="no node carries this turn"))
            continue
        common = dict(source_rank=sp.source_rank, unit=p.uid, drop=str(p.drop) if p.drop else None, stage=p.stage,
                      detail=p.detail)
        if p.candidate:
            signal, gap = held_back_by(p.signals, cut)
            capped = _capped(res, the_cut, sp.source_id, p.uid)
            if capped is not None:
                signal, gap = capped[0] or signal, capped[1]
            out.append(Miss(sp.source_id, Fate.BELOW_K, signal=signal, gap=gap, **common))
        elif visible := [u for u in engine.state.carriers(sp.source_id) if engine.state.nodes[u].visible]:
            p = _most_relevant(engine.explain(res, visible).values())      # where its surface node fell
            signal, gap = held_back_by(p.signals, cut)
            out.append(Miss(sp.source_id, Fate.NOT_REACHED, source_rank=sp.source_rank, unit=p.uid,
                            drop=str(p.drop) if p.drop else None, stage=p.stage, detail=p.detail, signal=signal,
                            gap=gap))
        else:
            out.append(Miss(sp.source_id, Fate.OFF_SURFACE, **common))
    return out


def _capped(res: RetrievalResult, the_cut: tuple[str, RetrievedUnit, dict] | None, source_id: str, carrier: int
            ) -> tuple[str | None, float] | None:
    """When a source-worth cap placed the turn or the k-th source (a turn given less than its result's score),
    the gap between what each was given, and OWN_EVIDENCE if the turn's own cap held it back; None otherwise."""
    if the_cut is None:
        return None
    cut_sid, holder, standing = the_cut
    mine = next((r for r in res.candidates if r.id == carrier), None)
    own_capped = mine is not None and given(mine, source_id) < mine.score
    if not own_capped and given(holder, cut_sid) >= holder.score:
        return None
    gap = round(standing[cut_sid][0] - standing[source_id][0], 6)
    return (OWN_EVIDENCE if own_capped else None), gap


def _most_relevant(placements) -> Placement:
    return max(placements, key=lambda p: (p.signals.relevance if p.signals is not None else float("-inf"), -p.uid))


def _the_cut(res: RetrievalResult, k: int) -> tuple[str, RetrievedUnit, dict] | None:
    """The k-th ranked source id (the weakest the top k held), the candidate that put it in place, and every
    source id's standing; None when no candidate carries a source."""
    standing = source_standing(res.candidates)
    ranked = order_sources(standing)
    if not ranked:
        return None
    sid = ranked[min(k, len(ranked)) - 1]
    return sid, next(r for r in res.candidates if sid in r.source_ids), standing


def tally(records: Iterable[dict]) -> dict:
    """Counts of gold turns per fate, of held-back signals, and per category, over question records that carry
    `misses` (the benchmark's question records)."""
    fates: Counter = Counter()
    signals: Counter = Counter()
    drops: Counter = Counter()
    by_category: dict[str, Counter] = {}
    for rec in records:
        cat = by_category.setdefault(str(rec.get("category")), Counter())
        for m in rec.get("misses") or []:
            fates[m["fate"]] += 1
            cat[m["fate"]] += 1
            if m.get("signal"):
                signals[m["signal"]] += 1
            if m["fate"] != Fate.FOUND and m.get("drop"):
                drops[m["drop"]] += 1
    order = [str(f) for f in Fate]
    return {"fates": {f: fates.get(f, 0) for f in order},
            "signals": {s: signals[s] for s in [*SIGNALS, *sorted(set(signals) - set(SIGNALS))] if signals.get(s)},
            "drops": dict(sorted(drops.items())),
            "by_category": {c: {f: n.get(f, 0) for f in order} for c, n in sorted(by_category.items()) if n}}

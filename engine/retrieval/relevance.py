"""Query relevance of any node: z(dense cosine) + w · z(BM25), z-statistics taken over the surface (and over
the archived units an engine names as part of its reference: see `Relevance`).

DESIGN §5 measured this fusion as the strongest cheap signal on LoCoMo; every
engine that ranks by relevance (All-Mem's stages, the hybrid baseline) uses
this one definition. With w = 0 the score is the plain cosine (minus the
off-surface penalty in units of the surface's cosine spread).

The surface is scored at once: numpy arrays aligned with the visible ids in id
order (dense cosines from the index, BM25 from its posting arrays), so a query
costs a few vector operations rather than a Python call per unit. Per-unit
accessors (`dense`, `lexical`, `score`) read the same arrays, and compute the
same formula for a node off the surface. A surface of `SKETCH_FROM` units or
more is ranked from its sketch instead (`engine.retrieval.sketch`, `scan_top`):
the same rankings without reading every vector.
"""
from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass

import numpy as np

from engine.retrieval.index import cosine, position, positions, top_k
from engine.retrieval.lexical import at, hits_of
from engine.retrieval.memory import IndexedMemory
from engine.retrieval.sketch import SurfaceSketch

# Surface rankings order by the fused score rounded to this many decimals, then by id.
DECIMALS = 9
# On a sketched set: a subset this small is scored exactly row by row; a larger one, or the whole set, from an
# 8-bit scan of this many rows at first (x4 until the ranking is proved complete).
GATHER_MAX = 4096
SCAN_FIRST = 64


@dataclass(frozen=True)
class ZReference:
    """What one query's z-values are relative to: the nodes its statistics were taken over (how many, and how
    many of them off the surface) and their cosine and BM25 means and spreads. A z-value means nothing to a
    reader without the population it was taken over."""

    nodes: int
    off_surface: int
    dense_mean: float
    dense_sd: float
    lexical_mean: float
    lexical_sd: float


class ScoresById(Mapping):
    """A read-only {id: score} view of an array indexed by id, holding the ids whose score is not 0
    (BM25 is 0 exactly for a document sharing no term with the query)."""

    def __init__(self, values: np.ndarray):
        self.values = values

    def __getitem__(self, uid: int) -> float:
        if 0 <= uid < len(self.values) and self.values[uid]:
            return float(self.values[uid])
        raise KeyError(uid)

    def __iter__(self) -> Iterator[int]:
        return iter(hits_of(self.values).tolist())

    def __len__(self) -> int:
        return int(np.count_nonzero(self.values))


def sketched_moments(sketch: SurfaceSketch, query: np.ndarray, lexical_hits: np.ndarray, n: int
                     ) -> tuple[float, float, float, float]:
    """(dense mean, dense sd, BM25 mean, BM25 sd) of a sketched set of `n` ids, as the whole set's arrays give
    them: the dense ones from the rows' moments, BM25's from the scores of the ids sharing a query term (every
    other id scores 0)."""
    mean, sd = sketch.moments(query)
    lex_mu = float(lexical_hits.sum()) / n
    lex_sd = max(float((lexical_hits * lexical_hits).sum()) / n - lex_mu ** 2, 0.0) ** 0.5
    return mean, (sd if sd > 1e-12 else 0.0), lex_mu, lex_sd


def sketched_statistics(sketch: SurfaceSketch, query: np.ndarray, lexical_hits: np.ndarray, n: int
                        ) -> tuple[float, float, float, float]:
    """`sketched_moments`, an sd of 0 read as 1 (a z-value's divisor)."""
    mean, sd, lex_mu, lex_sd = sketched_moments(sketch, query, lexical_hits, n)
    return mean, sd or 1.0, lex_mu, lex_sd or 1.0


def pooled(n: int, mean: float, sd: float, more: np.ndarray) -> tuple[float, float]:
    """Mean and (population) sd of `n` values of this mean and sd together with the values `more`."""
    if not len(more):
        return mean, sd
    total = n + len(more)
    mu = (n * mean + float(more.sum())) / total
    var = (n * (sd * sd + mean * mean) + float((more * more).sum())) / total - mu * mu
    return mu, max(var, 0.0) ** 0.5


def outside(ids: np.ndarray, found: np.ndarray) -> np.ndarray:
    """Which of `ids` are not among `found`, both increasing: the few found are looked up in the many ids
    (`np.isin` would sort them all, a tenth of a millisecond a call with 30,000 hits)."""
    mask = np.ones(len(ids), dtype=bool)
    if len(ids) and len(found):
        at_ = np.minimum(np.searchsorted(ids, found), len(ids) - 1)
        mask[at_[ids[at_] == found]] = False
    return mask


def scan_top(sketch: SurfaceSketch, query: np.ndarray, row_ids: np.ndarray, among: np.ndarray | None,
             hits: np.ndarray, lexical: np.ndarray, limit: int, decimals: int,
             exact: Callable[[np.ndarray], np.ndarray], fuse: Callable[[np.ndarray, np.ndarray], np.ndarray],
             size: int) -> list[int] | None:
    """The `limit` ids of highest fused score (rounded to `decimals`, ties by id) of a sketched set, or of the
    ids `among` it (increasing), exactly as scoring the whole set would choose them.

    A row the scan leaves out has a cosine no higher than the scan's ceiling, which bounds its score (with its
    BM25 for the `hits`, the ids sharing a query term, whose `lexical` scores are given). The rows found are
    rescored by `exact` (ids -> fused), then each hit whose bound reaches the last one chosen; the scan widens
    (x4) until the last one chosen is clearly above every bound left. `row_ids[row]` is the id at a sketch row;
    `fuse(dense, lexical)` is the monotone score of the set. None once the scan would have to read all `size`
    rows (then score the whole set instead)."""
    margin = 2 * 10.0 ** -decimals
    m = max(4 * limit, SCAN_FIRST)
    known: dict[int, float] = {}
    while m < size:
        rows, ceiling = sketch.nearest(query, m)
        near = row_ids[rows]
        if among is not None:
            at_ = np.minimum(np.searchsorted(among, near), len(among) - 1)
            near = near[among[at_] == near]
        found = np.unique(near)
        known.update(zip(found.tolist(), exact(found).tolist()))
        bound = fuse(np.full(len(hits), ceiling), lexical)
        chosen = top_k(found, np.asarray([known[u] for u in found.tolist()]), limit, decimals)
        last = round(known[chosen[-1]], decimals) if len(chosen) == limit else float("-inf")
        reach = hits[(bound >= last - margin) & outside(hits, found)]
        if len(reach):
            found = np.union1d(found, reach)
            known.update(zip(reach.tolist(), exact(reach).tolist()))
            chosen = top_k(found, np.asarray([known[u] for u in found.tolist()]), limit, decimals)
            last = round(known[chosen[-1]], decimals) if len(chosen) == limit else float("-inf")
        rest = bound[outside(hits, found)]
        top = float(fuse(np.asarray([ceiling]), np.zeros(1))[0])
        if last > max(top, float(rest.max()) if len(rest) else top) + margin:
            return chosen
        m *= 4
    return None


class Relevance:
    """z(dense) + w·z(BM25) of the engine's surface for one query (the plain cosine when w = 0), and of any node
    off it.

    Below the index's `sketch_from` every visible unit is scored at once, as it always was. On a larger surface
    the z-statistics come from the surface's moments and a ranking from its 8-bit scan, rescored exactly
    (`engine.retrieval.sketch`): the same ids in the same order, without reading every float32 row.
    The whole-surface arrays (`dense_scores`, `lexical_scores`, `scores`) are then computed only when asked."""

    def __init__(self, engine: IndexedMemory, query: str, weight: float, off_surface_penalty: float = 0.0,
                 penalised: Callable[[int], bool] | None = None,
                 held: tuple[np.ndarray, np.ndarray] | None = None, archived: np.ndarray | None = None):
        """`penalised(uid)` says which off-surface nodes pay `off_surface_penalty` (default: all of them).
        `held` = (holders, parts), aligned id arrays: each holder holds its part's whole text, so its BM25 is at
        least the part's. BM25 divides by a document's length, and a Merge's representative (its parts' texts
        joined) would otherwise score below any one of its parts on the words that part alone says.
        `archived` (increasing ids off the surface) joins the surface in the z-statistics: with the whole memory
        as the reference, an edit that archives or restores a unit moves that unit's score alone, not every
        visible unit's through the surface's mean and spread."""
        self.engine = engine
        self.zq = engine.embedder.embed_one(query)
        self.weight = weight
        self.penalty = off_surface_penalty
        self.penalised = penalised
        self.sketch = engine.index.sketch()
        self.surface = engine.index.surface()
        self.ids = self.surface.ids
        self.by_id = engine.bm25.score_vector(query) if self.weight else np.zeros(0)
        self.lexical_of: dict[int, int] = {}               # holder -> the part whose BM25 it took
        if self.weight and held is not None:
            size = len(self.by_id)
            for h, p in zip(held[0].tolist(), held[1].tolist()):    # a part is archived, never itself a holder
                if h < size and p < size and self.by_id[p] > self.by_id[h]:
                    self.by_id[h] = self.by_id[p]
                    self.lexical_of[h] = p
        self.lexical = ScoresById(self.by_id)              # {id: BM25} of every node sharing a query term
        self._signals: tuple[np.ndarray, np.ndarray] | None = None
        self._fused: np.ndarray | None = None
        self._known: dict[int, tuple[float, float]] = {}   # sketched: visible id -> (dense, fused) scored so far
        n = len(self.ids)
        if self.sketch is None:
            dense, lex = self.signals()
            dense_mu, dense_sd = (float(dense.mean()), float(dense.std())) if n else (0.0, 0.0)
            lex_mu, lex_sd = (float(lex.mean()), float(lex.std())) if n else (0.0, 0.0)
        else:
            dense_mu, dense_sd, lex_mu, lex_sd = sketched_moments(self.sketch, self.zq, self.by_id[self.hits], n)
        m = 0 if archived is None else len(archived)
        if m:
            rows = engine.sketched_rows("archived", archived).matrix
            dense_mu, dense_sd = pooled(n, dense_mu, dense_sd, (rows @ self.zq).astype(np.float64))
            if self.weight:
                lex_mu, lex_sd = pooled(n, lex_mu, lex_sd, at(self.by_id, archived))
        self.dense_mu, self.dense_sd, self.lex_mu, self.lex_sd = dense_mu, dense_sd or 1.0, lex_mu, lex_sd or 1.0
        self.archived_in_reference = m

    @property
    def reference(self) -> ZReference:
        """What the z-values are relative to: the surface and the archived units taken in with it."""
        m = self.archived_in_reference
        return ZReference(len(self.ids) + m, m, self.dense_mu, self.dense_sd, self.lex_mu, self.lex_sd)

    def signals(self) -> tuple[np.ndarray, np.ndarray]:
        """The dense and lexical scores of every visible unit, aligned with `ids` (computed when first asked)."""
        if self._signals is None:
            _, dense = self.engine.index.surface_scores(self.zq)
            self._signals = dense, at(self.by_id, self.ids)
        return self._signals

    @property
    def dense_scores(self) -> np.ndarray:
        return self.signals()[0]

    @property
    def lexical_scores(self) -> np.ndarray:
        return self.signals()[1]

    @property
    def scores(self) -> np.ndarray:
        """The fused score of every visible unit, aligned with `ids`."""
        if self._fused is None:
            self._fused = self.fuse(*self.signals())
        return self._fused

    def fuse(self, dense: np.ndarray, lex: np.ndarray) -> np.ndarray:
        """The surface score of visible units with these signals."""
        if not self.weight:
            return dense
        return (dense - self.dense_mu) / self.dense_sd + self.weight * (lex - self.lex_mu) / self.lex_sd

    @functools.cached_property
    def hits(self) -> np.ndarray:
        """The visible ids sharing a term with the query, in id order."""
        hits = hits_of(self.by_id)
        return hits[positions(self.surface.where, hits) >= 0]

    def _position(self, uid: int) -> int:
        return position(self.surface.where, uid)

    @property
    def visible_dense(self) -> dict[int, float]:
        """{id: dense cosine} over the surface."""
        return dict(zip(self.ids.tolist(), self.dense_scores.tolist()))

    def dense(self, uid: int) -> float:
        pos = self._position(uid)
        if pos >= 0:
            return self._visible(uid)[0] if self._signals is None else float(self.dense_scores[pos])
        return cosine(self.engine.vector(uid), self.zq)

    def score(self, uid: int) -> float:
        pos = self._position(uid)
        if pos >= 0:
            return self._visible(uid)[1] if self._fused is None and self.sketch is not None \
                else float(self.scores[pos])
        d = self.dense(uid)
        penalty = self.penalty_of(uid)
        if not self.weight:
            return d - penalty * self.dense_sd
        return ((d - self.dense_mu) / self.dense_sd - penalty
                + self.weight * (self.lexical.get(uid, 0.0) - self.lex_mu) / self.lex_sd)

    def _visible(self, uid: int) -> tuple[float, float]:
        """(dense, fused) of a visible unit on a sketched surface, scored exactly on its own row."""
        if uid not in self._known:
            self._exact(np.asarray([uid], dtype=np.int64))
        return self._known[uid]

    def _exact(self, ids: np.ndarray) -> np.ndarray:
        """The fused scores of visible `ids`, each from its own float32 row (as the whole-surface arrays give
        it), remembered for `dense` and `score`."""
        dense = self.engine.index.dense_of(self.zq, ids)
        fused = self.fuse(dense, at(self.by_id, ids))
        self._known.update(zip(ids.tolist(), zip(dense.tolist(), fused.tolist())))
        return fused

    def penalty_of(self, uid: int) -> float:
        """The penalty `uid` pays: none on the surface; off it, the penalty unless `penalised` exempts it."""
        if self.engine.state.nodes[uid].visible or (self.penalised is not None and not self.penalised(uid)):
            return 0.0
        return self.penalty

    def ranked_surface(self, limit: int | None = None, decimals: int = DECIMALS) -> list[tuple[int, float]]:
        """The surface's best `limit` (all by default) by score rounded to `decimals`, ties by id."""
        return self.ranked_among(None, limit, decimals)

    def ranked_among(self, among: np.ndarray | None, limit: int | None = None, decimals: int = DECIMALS
                     ) -> list[tuple[int, float]]:
        """The best `limit` (all by default) of the visible ids `among` (increasing; the whole surface when
        None) by score rounded to `decimals`, ties by id, with their score."""
        if among is not None and len(among) == len(self.ids):
            among = None                                   # the whole surface
        ids = self.ids if among is None else among
        limit = len(ids) if limit is None else min(limit, len(ids))
        if self.sketch is not None and self._fused is None and limit < len(ids):
            if len(ids) <= GATHER_MAX:
                chosen = top_k(ids, self._exact(ids), limit, decimals)
                return [(uid, self._known[uid][1]) for uid in chosen]
            found = self._scanned(among, limit, decimals)
            if found is not None:
                return found
        scores = self.scores if among is None else self.scores[self.surface.where[among]]
        chosen = top_k(ids, scores, limit, decimals)
        return [(uid, float(self.scores[self.surface.where[uid]])) for uid in chosen]

    def _scanned(self, among: np.ndarray | None, limit: int, decimals: int) -> list[tuple[int, float]] | None:
        """`ranked_among` from the sketch's scan (`scan_top`); None once it would have to read every row."""
        hits = self.hits if among is None else np.intersect1d(self.hits, among, assume_unique=True)
        chosen = scan_top(self.sketch, self.zq, self.surface.stored, among, hits, self.by_id[hits], limit,
                          decimals, self._exact, self.fuse, len(self.ids))
        return None if chosen is None else [(uid, self._known[uid][1]) for uid in chosen]

    def terms(self, uid: int) -> dict[str, float]:
        """The parts `score(uid)` adds up: both raw signals (and the held part the BM25 came from, if any), their
        z-values and what those are relative to, the weight and the penalty subtracted (in z units, or cosine
        units when the weight is 0), and the fused value."""
        d = self.dense(uid)
        lex = self.lexical.get(uid, 0.0)
        off = self.penalty_of(uid)
        return {"dense": d, "lexical": lex, "lexical_of": self.lexical_of.get(uid),
                "z_dense": (d - self.dense_mu) / self.dense_sd,
                "z_lexical": (lex - self.lex_mu) / self.lex_sd if self.weight else 0.0, "reference": self.reference,
                "weight": self.weight,
                "penalty": off if self.weight else off * self.dense_sd, "relevance": self.score(uid)}

"""Every offline role's cost stays bounded on long inputs (docs/OFFLINE_COSTS.md).

No timings: each test counts the work a role does (characters embedded, neighbours fetched, pairs scored,
entries stored, exact comparisons made) through a counting wrapper on a long input, a 100 KB turn or a
10,000-unit stand-in, and checks that the bounded version gives the result of the exhaustive one.
"""
from __future__ import annotations

import random
from types import SimpleNamespace

import numpy as np
import pytest
from scipy import sparse

from engine.core.segments import boundaries_from_labels, boundaries_from_ranges
from engine.engines.memloom.curation import topic_neighbours
from engine.llm import LLM, make_backend, offline_diagnosis, offline_split, statements
from engine.llm.embedder import AHEAD_BATCH, Embedder
from engine.llm.offline_events import rewrite
from engine.loaders import load_conversation
from engine.retrieval.index import SEARCH_SLACK, VisibleIndex, rounded, top_k
from engine.retrieval.links import LINK_POOL, LinkScorer, Utterance, strongest_links_of_each
from workbench.model import DEMO_PATH


@pytest.fixture(scope="module")
def embedder():
    return Embedder()


class Counting:
    """Wraps a callable and records each call's arguments."""

    def __init__(self, inner):
        self.inner, self.calls = inner, []

    def __call__(self, *args, **kwargs):
        self.calls.append(args)
        return self.inner(*args, **kwargs)


def counted(embedder: Embedder) -> SimpleNamespace:
    """A stand-in for `embedder` whose every `embed` call is recorded, `embed_ahead`'s batches included."""
    stand_in = SimpleNamespace(embed=Counting(embedder.embed))
    stand_in.embed_ahead = lambda texts: Embedder.embed_ahead(stand_in, texts)
    return stand_in


def _unit(rows: int, dim: int, seed: int) -> np.ndarray:
    v = np.random.default_rng(seed).normal(size=(rows, dim)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


# -- All-Mem's diagnosis and split plan on a 100 KB turn -------------------------------------------------
def test_diagnosis_and_split_plan_of_a_100kb_turn_embed_a_bounded_amount(embedder):
    """A 100 KB turn used to give one cut per sentence and hundreds of millions of characters to embed; the
    diagnosis now embeds at most 32 cuts x 2 sides of 2,000 characters, the turn and its neighbours once, and
    at most 12 statement sentences of 2,000 characters of each when it compares them sentence by sentence, and
    what the update model reads: 2,000 characters of each turn and at most 12 clauses of each."""
    backend = make_backend("offline", embedder=embedder)
    backend.embedder = counted(embedder)
    embed = backend.embedder.embed
    body = " ".join(f"The river lab sample {i} was logged after the long train commute." for i in range(1500))
    raw = f"Ben: {body} Also, the kitten Miso learnt to open the fridge door."
    assert 98_000 < len(raw) <= 100_000                                  # the loaders' default turn limit
    neighbour = {"id": "2", "raw": "Ben: The river lab logs every sample.", "summary": "", "keywords": [],
                 "time": "2024-01-01T10:00:00", "speaker": "Ben"}
    target = {**neighbour, "id": "1", "raw": raw}
    llm = LLM(backend)
    assert llm.call("diagnosis", {"target": target, "context": [neighbour]}).ok
    texts = [t for args in embed.calls for t in args[0]]
    cut_texts = 2 * offline_split.MAX_CUTS
    update = 3 + 2 * statements.MAX_CLAUSES         # the statement models: both turns, the answer with its
    assert len(texts) <= cut_texts + 2 + update     # question, and the clauses they compare
    side = offline_split.SIDE_CHARS
    assert sum(map(len, texts)) <= (cut_texts + update) * side + len(raw) + len(neighbour["raw"])
    embed.calls.clear()
    assert llm.call("split_plan", {"node_id": "1", "original_text": raw, "reason": "x"}).ok
    assert sum(len(t) for args in embed.calls for t in args[0]) <= cut_texts * side


def test_prefetch_of_a_large_buffer_embeds_in_bounded_batches(embedder):
    """The diagnosis prefetch sends a buffer's cut sides to the embedder a batch at a time, every one of
    them (so the per-target calls hit the cache)."""
    backend = make_backend("offline", embedder=embedder)
    backend.embedder = counted(embedder)
    embed = backend.embedder.embed
    raws = [f"Maya: Crew {i} repaired the old kitchen sink with new copper pipes this morning. By the way, "
            f"orchestra {i} moved its spring concert rehearsal to Friday evening downtown." for i in range(150)]
    backend.prefetch("diagnosis", [{"target": {"id": str(i), "raw": raw, "speaker": "Maya"}, "context": []}
                      for i, raw in enumerate(raws)])
    sizes = [len(args[0]) for args in embed.calls]
    assert sum(sizes) == 300 and len(sizes) >= 2
    assert max(sizes) <= AHEAD_BATCH


def test_after_the_prefetch_a_diagnosis_runs_nothing_through_the_model():
    """The prefetch embeds the clauses `compare` judges (pairs of one speaker's statements) with the cuts, so
    the diagnosis that follows finds every vector in the cache; a pair of two speakers' statements, which
    diagnosis never judges, is not embedded."""
    embedder = Embedder(shared=None)
    stamp = "quokka"           # words no other test embeds: the first encoding of these texts is this test's
    target = {"id": "2", "speaker": "Maya", "time": "2024-03-01T10:00:00",
              "raw": f"Maya: The {stamp} shelter moved its adoption day to Sunday. We adopted two kittens there."}
    same = {"id": "1", "speaker": "Maya", "time": "2024-02-01T10:00:00",
            "raw": f"Maya: The {stamp} shelter holds its adoption day on Saturday. We want to adopt a kitten."}
    other = {"id": "3", "speaker": "Ben", "time": "2024-02-02T10:00:00",
             "raw": f"Ben: My {stamp} cousin repaired the garden fence. The paint dried in the afternoon sun."}
    payload = {"target": target, "context": [same, other]}
    backend = make_backend("offline", embedder=embedder)
    embedder.embed([offline_diagnosis.strip_speaker(u["raw"])[1] for u in (target, same, other)])  # ingest's
    before = embedder.encoded
    backend.prefetch("diagnosis", [payload])
    prefetched = embedder.encoded - before
    assert prefetched > 0
    assert LLM(backend).call("diagnosis", payload).ok
    assert embedder.encoded - before == prefetched                  # the diagnosis found everything cached
    bens = [c.masked for c in statements.analyse(offline_diagnosis.strip_speaker(other["raw"])[1], "Ben").clauses]
    assert bens and not any(embedder.key(t) in embedder.memory for t in bens)    # Ben's clauses were never read


def test_diagnosis_embeds_only_cuts_that_could_reach_the_proposal_floor(embedder):
    """A cut whose confidence bound (shared words, substance, opening) is under the floor is never embedded,
    and that changes no diagnosis: on every demo turn the best Split found with the floor is the best Split
    found without it whenever that one reaches the floor."""
    floor = offline_split.SPLIT_FLOOR
    raws = [f"{t.speaker}: {t.text}" for t in load_conversation(DEMO_PATH).turns]
    pruned_away = 0
    for raw in raws:
        full, pruned = offline_split.best_split(raw, embedder), offline_split.best_split(raw, embedder, floor=floor)
        if full is not None and full[0] >= floor:
            assert pruned == full, raw
        else:
            assert pruned is None or pruned[0] < floor, raw
        pruned_away += len(offline_split.scored_cuts(raw)) - len(offline_split.scored_cuts(raw, floor=floor))
    assert pruned_away > 0


def _overlaps_exhaustive(merges):
    kept, notes = [], {}
    for p in sorted(merges, key=lambda p: (-p.detail["coherence"], -p.confidence, p.targets)):
        clash = next((k for k in kept if set(k.targets) & set(p.targets)), None)
        if clash is None:
            kept.append(p)
        else:
            notes[p.id] = f"overlaps merge proposal {clash.id}, which is more coherent"
    return notes


def test_merge_overlaps_of_a_large_run_resolve_as_the_pairwise_scan_does():
    """Thousands of overlapping Merge proposals (a 10,000-unit buffer stand-in): the units index finds each
    clash directly and names the same, earliest kept merge as scanning every kept one did."""
    from engine.core.proposal import Proposal, Status
    from engine.engines.allmem.atc import _resolve_merge_overlaps

    rng = random.Random(7)
    merges = [Proposal(id=i, run_id="run-0001", op="merge", targets=sorted(rng.sample(range(10_000), 2)),
                       confidence=round(rng.uniform(0.9, 1.0), 2), reason="",
                       detail={"coherence": round(rng.uniform(0.7, 1.0), 2)}) for i in range(3_000)]
    expected = _overlaps_exhaustive(merges)
    _resolve_merge_overlaps(merges)
    assert {p.id: p.note for p in merges if p.status == Status.SKIPPED} == expected
    assert 100 < len(expected) < 3_000


# -- MemLoom's router ------------------------------------------------------------------------------------
def test_router_annotates_every_date_of_a_long_turn_once_in_place():
    """Thousands of relative dates in one 100 KB utterance: each mention gets its own date right after it
    (one pass over the text; replacing the first occurrence per mention piled every date onto the first)."""
    part = "Yesterday I fixed the sink and tomorrow I call the plumber about the kitchen leak again. "
    utterance = part * 1200
    out = rewrite(utterance, "Jon", "2024-03-09T19:45:15", [])
    assert len(utterance) > 100_000
    assert len(out["dates"]) == 2400
    assert out["rewritten"] == part.replace("Yesterday", "Yesterday (2024-03-08)").replace(
        "tomorrow", "tomorrow (2024-03-10)").replace(" I call", " Jon calls").replace(" I ", " Jon ") * 1200
    assert out["references"] == [{"mention": "I", "resolved": "Jon"}]


# -- the surface index: neighbourhoods for diagnosis, anchors ------------------------------------------
def test_search_over_10000_units_fetches_a_few_neighbours_and_ranks_exactly():
    """The diagnosis neighbourhood of each buffered unit is a search of the surface; it fetches k plus a
    small slack from FAISS (the whole surface only while ties force it) and ranks as the full sort does."""
    vecs = _unit(10_000, 32, 0)
    vecs[5000:5040] = vecs[7]                            # 41 units tie with unit 7 exactly
    index = VisibleIndex(32)
    ids = list(range(1, 10_001))
    index.add(ids, vecs)
    fetched = Counting(index.index.search)
    index.index = SimpleNamespace(search=fetched)
    asked = {}
    for q in (3, 7, 9000):
        fetched.calls.clear()
        exact = sorted(zip(ids, (vecs @ vecs[q]).tolist()), key=lambda p: (-round(p[1], 6), p[0]))[:5]
        assert [i for i, _ in index.search(vecs[q], 5)] == [i for i, _ in exact]
        asked[q] = [args[1] for args in fetched.calls]
    assert asked[3] == asked[9000] == [5 + SEARCH_SLACK]   # no tie at the 5th: one small fetch
    assert asked[7] == [5 + SEARCH_SLACK, 4 * (5 + SEARCH_SLACK)]   # 41 ties at the top widen it once


def test_top_k_equals_the_full_sort_on_ties_and_near_ties():
    rng = np.random.default_rng(1)
    scores = np.round(rng.random(10_000), 3).astype(np.float64)           # many exact ties
    scores[:50] = 0.9999995                                              # rounds to 1.0 beside ...
    scores[50:60] = 1.0
    ids = rng.permutation(10_000).tolist()
    for k in (1, 5, 55, 61, 500, 10_000, 20_000):
        full = [ids[i] for i in sorted(range(10_000), key=lambda i: (-round(float(scores[i]), 6), ids[i]))[:k]]
        assert top_k(ids, scores, k) == full


def test_rounded_is_pythons_round_of_each_value():
    rng = np.random.default_rng(2)
    halves = (np.arange(20_000) + 0.5) / 1e6                 # decimal halves at the 6th place, as doubles
    values = np.concatenate([rng.random(50_000), rng.normal(0, 50, 50_000), halves, -halves,
                             np.round(rng.random(20_000), 7), [0.0, -0.0, 1e300, np.inf, -np.inf]])
    for decimals in (6, 9):
        assert rounded(values, decimals).tolist() == [round(float(v), decimals) for v in values]
        for n in (0, 1, 5, 31, 32, 33):                       # below and at `ROUND_IN_PYTHON`
            part = values[40_000 + n * 100:40_000 + n * 101]
            assert rounded(part, decimals).tolist() == [round(float(v), decimals) for v in part]


# -- MemLoom's steward: link scoring, relation candidates, topic links ------------------------------------
def _utterances(n: int) -> list[Utterance]:
    rng = random.Random(2)
    common = "river lab train budget commute sink cello kitten".split()
    return [Utterance(i, ("Maya", "Jon")[i % 2], f"Word{i} and rare{i * 7} near the {rng.choice(common)} "
                                                 f"{rng.choice(common)} with Riverside{i % 50}", i // 100)
            for i in range(n)]


def test_link_scorer_stores_words_sparsely_for_10000_utterances():
    """Stored word and entity entries grow with the words used, not utterances x vocabulary."""
    utts = _utterances(10_000)
    scorer = LinkScorer(utts, _unit(10_000, 16, 3))
    assert sparse.issparse(scorer.tokens) and sparse.issparse(scorer.entities)
    assert scorer.tokens.shape[1] > 10_000                               # a vocabulary as large as n ...
    assert scorer.tokens.nnz == sum(len(s) for s in scorer.token_sets)   # ... but only the used entries
    assert scorer.entities.nnz == sum(len(s) for s in scorer.entity_sets)


def _strongest_exhaustive(scorer, later, groups):
    """Each later utterance's strongest link into each group, group by group in plain Python."""
    pool = [m for _, members in groups for m in members]
    logits = scorer.logits(later, pool)
    out = []
    for r, u in enumerate(later):
        best, start = {}, 0
        for gid, members in groups:
            block = logits[r, start:start + len(members)]
            best[gid] = (float(block.max()), members[int(np.argmax(block))], u)
            start += len(members)
        out.append(best)
    return out


def test_relation_candidates_score_a_bounded_window_of_10000_utterances():
    """A target's candidate causes are scored against the last LINK_POOL earlier utterances only, and the
    per-event maxima equal those of scoring each event's block on its own."""
    utts = _utterances(10_000)
    scorer = LinkScorer(utts, _unit(10_000, 16, 4))
    events = [SimpleNamespace(id=100_000 + e, members=list(range(5 * e, 5 * e + 5))) for e in range(1998)]
    later = [9990, 9991, 9992]
    logits = Counting(scorer.logits)
    scorer.logits = logits
    best = strongest_links_of_each(scorer, later, events)
    assert sum(len(a) * len(b) for a, b in logits.calls) <= len(later) * LINK_POOL
    first = 9990 - LINK_POOL                                              # the oldest utterance in the window
    window = [(e.id, [m for m in e.members if m >= first]) for e in events if e.members[-1] >= first]
    assert best == _strongest_exhaustive(scorer, later, window)
    small = events[:40]
    ties = LinkScorer([Utterance(i, "Maya", "the same words", 0) for i in range(200)], np.ones((200, 4)) / 2)
    for sc in (scorer, ties):
        assert strongest_links_of_each(sc, [199, 198], small) == _strongest_exhaustive(
            sc, [199, 198], [(e.id, e.members) for e in small])


class CountingDict(dict):
    def __init__(self, *args):
        super().__init__(*args)
        self.reads = 0

    def __getitem__(self, key):
        self.reads += 1
        return super().__getitem__(key)


def test_topic_neighbours_of_10000_events_read_a_few_vectors_each():
    """Topic-track links: one matrix product per chunk, exact dot products only near the threshold and
    the k-th best, and the result of sorting every exact pair."""
    vecs = _unit(10_000, 24, 5)
    vecs[20:30] = vecs[10]                                                  # exact ties
    vectors = CountingDict({i: vecs[i] for i in range(10_000)})
    pool, fresh = list(range(10_000)), list(range(0, 10_000, 400)) + [10, 25]
    near = topic_neighbours(vectors, fresh, pool, 0.1, 3)
    assert vectors.reads <= len(pool) + len(fresh) + 2 * len(fresh) * 12
    for e in fresh:
        exact = sorted(((float(vecs[e] @ vecs[o]), o) for o in pool if o != e), reverse=True)
        assert near[e] == [x for x in exact if x[0] >= 0.1][:3]


# -- boundary projection for the segmentation metrics ----------------------------------------------------
def _ranges_exhaustive(ranges, n):
    spans = sorted(set(map(tuple, ranges)))
    labels, current = [], spans[0]
    for i in range(n):
        covering = [s for s in spans if s[0] <= i <= s[1]]
        if covering:
            current = max(covering, key=lambda s: (s[0], -s[1]))
        labels.append(current)
    return boundaries_from_labels(labels)


def test_boundaries_from_ranges_sweep_equals_the_definition():
    rng = random.Random(6)
    for n in (1, 7, 300):
        for _ in range(30):
            ranges = []
            for _ in range(rng.randint(1, 40)):
                a = rng.randrange(n)
                ranges.append((a, min(n - 1, a + rng.randrange(max(1, n // 3)))))
            assert boundaries_from_ranges(ranges, n) == _ranges_exhaustive(ranges, n)

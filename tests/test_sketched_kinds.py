"""MemLoom over a sketched set of sentence records, and GAM over a sketched set of events, rank as they do over
the whole set.

At 20,000 records and more MemLoom's relevance reads the records' sketch (engine/retrieval/sketch.py): the
z-statistics from their moments, the seed events and the buffer's ranking from a scan rescored exactly; GAM's
re-rank reads its events' the same way. Here the threshold is lowered to 1 and the scans start small, so every
question of a replayed conversation (lookups and why-questions, after the steward has published events and with
records still buffered) goes through them.
"""
from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

import engine.engines.gam.retrieval as gam_retrieval
import engine.engines.memloom.seeds as memloom_seeds
import engine.retrieval.kind_relevance as kind_module
import engine.retrieval.relevance as relevance_module
from engine.retrieval.kind_relevance import KindRelevance, SketchedKindRelevance
import engine.retrieval.sketch as sketch_module
from engine.loaders import load_conversation, load_conversations
from engine.runtime.replay import Schedule, replay, step
from engine.session import open_session
from tests.conftest import LOCOMO, needs_data

SUITE = Path(__file__).resolve().parents[1] / "datasets" / "causal" / "validation.jsonl"


@pytest.fixture(scope="module")
def replayed(tmp_path_factory):
    from engine.llm.embedder import Embedder
    embedder = Embedder()
    full = load_conversation(needs_data(LOCOMO), "conv-26")
    sessions = set(full.sessions[:7])
    locomo = dataclasses.replace(full, turns=[t for t in full.turns if t.session in sessions],
                                 questions=[q for q in full.questions if q.category in (1, 2, 3, 4)][:40])
    out = []
    for conv in [locomo, *load_conversations(SUITE)[:2]]:
        eng = open_session(tmp_path_factory.mktemp("ml") / f"{conv.id}.sqlite", engine="memloom", embedder=embedder)
        replay(eng, conv, Schedule.parse("every-3-sessions"))
        out.append((eng, [q.question for q in conv.questions]))
        fresh = open_session(tmp_path_factory.mktemp("ml") / f"{conv.id}-mid.sqlite", engine="memloom",
                             embedder=embedder)
        schedule = Schedule.parse("every-3-sessions")
        for _ in range(len(conv.turns) * 2 // 3):            # a steward run behind, records still buffered
            if step(fresh, conv, schedule) is None:
                break
        out.append((fresh, [q.question for q in conv.questions]))
    return out


def ranked(eng, question):
    res = eng.retrieve(question, k=10)
    return [(u.id, u.score) for u in res.units], res.source_ids


def test_sketched_records_rank_as_the_whole_set(replayed, monkeypatch):
    whole = {(i, q): ranked(eng, q) for i, (eng, questions) in enumerate(replayed) for q in questions}
    monkeypatch.setattr(memloom_seeds, "SKETCH_FROM", 1)
    monkeypatch.setattr(sketch_module, "SKETCH_FROM", 1)
    monkeypatch.setattr(kind_module, "GATHER_MAX", 4)
    monkeypatch.setattr(relevance_module, "SCAN_FIRST", 4)
    monkeypatch.setattr(memloom_seeds, "SCAN_FIRST", 4)
    proved = {"scan": 0, "seeds": 0}
    for name, key, module in (("scan_top", "scan", kind_module), ("sketched_seeds", "seeds", memloom_seeds)):
        def counting(*args, _real=getattr(module, name), _key=key, **kw):
            found = _real(*args, **kw)
            proved[_key] += found is not None
            return found
        monkeypatch.setattr(module, name, counting)
    sketched = 0
    for i, (eng, questions) in enumerate(replayed):
        for q in questions:
            rel = memloom_seeds.relevance(eng, q)
            assert isinstance(rel, SketchedKindRelevance)
            sketched += 1
            units, sources = ranked(eng, q)
            want_units, want_sources = whole[(i, q)]
            assert sources == want_sources, q
            assert [u for u, _ in units] == [u for u, _ in want_units], q
            assert np.allclose([s for _, s in units], [s for _, s in want_units], rtol=0, atol=1e-5), q
            plain = KindRelevance(rel.positions, eng.stacked_vectors(rel.positions.ids) @ rel.zq,
                                                    rel.by_id, rel.weight)
            assert rel.dense_mu == pytest.approx(plain.dense_mu, abs=1e-7)
            assert rel.dense_sd == pytest.approx(plain.dense_sd, abs=1e-7)
            assert rel.lex_sd == pytest.approx(plain.lex_sd, abs=1e-9)
            assert [u for u, _ in rel.ranked(top=7)] == [u for u, _ in plain.ranked(top=7)]
    assert sketched == sum(len(questions) for _, questions in replayed)
    assert proved["scan"] > 50 and proved["seeds"] > 20, proved     # the scans, not the fallbacks, ranked


def test_a_record_whose_vector_changes_is_not_read_from_a_stale_row(replayed):
    eng, _ = replayed[0]
    ids = np.asarray(sorted(eng.vectors)[:50], dtype=np.int64)
    rows = eng.sketched_rows("probe", ids)
    assert rows.holds(int(ids[3])) and np.array_equal(rows.matrix[3], eng.vectors[int(ids[3])])
    eng._forget_rows(int(ids[3]))
    assert "probe" not in eng._sketched_rows
    again = eng.sketched_rows("probe", ids[:-1])                 # a set that shrank is built afresh
    assert np.array_equal(again.ids, ids[:-1]) and np.array_equal(again.matrix, np.stack(
        [eng.vectors[int(i)] for i in ids[:-1]]))


@pytest.fixture(scope="module")
def gam_replayed(tmp_path_factory, replayed):
    full = load_conversation(needs_data(LOCOMO), "conv-26")
    sessions = set(full.sessions[:7])
    conv = dataclasses.replace(full, turns=[t for t in full.turns if t.session in sessions],
                               questions=[q for q in full.questions if q.category in (1, 2, 3, 4)][:40])
    eng = open_session(tmp_path_factory.mktemp("gam") / "gam.sqlite", engine="gam", embedder=replayed[0][0].embedder)
    replay(eng, conv, Schedule.parse("every-3-sessions"))
    return eng, [q.question for q in conv.questions]


def test_sketched_events_rank_as_the_whole_set(gam_replayed, monkeypatch):
    eng, questions = gam_replayed
    whole = {q: ranked(eng, q) for q in questions}
    monkeypatch.setattr(gam_retrieval, "SKETCH_FROM", 1)
    monkeypatch.setattr(sketch_module, "SKETCH_FROM", 1)
    monkeypatch.setattr(kind_module, "GATHER_MAX", 4)
    monkeypatch.setattr(relevance_module, "SCAN_FIRST", 4)
    seen = []
    real = gam_retrieval.scoring

    def keeping(*args, **kw):
        seen.append(real(*args, **kw))
        return seen[-1]
    monkeypatch.setattr(gam_retrieval, "scoring", keeping)
    for q in questions:
        units, sources = ranked(eng, q)
        events = seen[-1].events
        assert isinstance(events, SketchedKindRelevance)
        assert events._scores is None        # the re-rank scored the events it reached, not every event
        want_units, want_sources = whole[q]
        assert sources == want_sources, q
        assert [u for u, _ in units] == [u for u, _ in want_units], q
        assert np.allclose([s for _, s in units], [s for _, s in want_units], rtol=0, atol=1e-5), q

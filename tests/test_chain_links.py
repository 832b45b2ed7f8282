"""How a memory holds each link of a causal chain (engine.eval.chain_links), read from real replays of one causal
suite scenario into MemLoom (real embedder, real SQLite file) and naive RAG, and from a `memwb bench` result."""
from __future__ import annotations

from pathlib import Path

import pytest

from engine.eval.chain_links import LinkFate, follow_links, tally_links
from engine.llm.embedder import Embedder
from engine.loaders import load_conversations
from engine.runtime.replay import Schedule, replay, step
from engine.session import open_session

ROOT = Path(__file__).resolve().parents[1]
CAUSAL = ROOT / "datasets" / "causal" / "validation.jsonl"
SCENARIO = "lab-freezer"


@pytest.fixture(scope="module")
def scenario():
    return next(c for c in load_conversations(CAUSAL) if c.id == SCENARIO)


@pytest.fixture(scope="module")
def embedder():
    return Embedder()


@pytest.fixture(scope="module")
def memloom(tmp_path_factory, scenario, embedder):
    engine = open_session(tmp_path_factory.mktemp("links") / "memloom.sqlite", engine="memloom", embedder=embedder)
    replay(engine, scenario, Schedule.parse("every-3-sessions"))
    return engine


def _turn_of(state, uid: int) -> str:
    (turn,) = state.nodes[uid].source_ids
    return turn


def test_a_stored_relation_is_a_cited_link_and_the_reverse_is_not(memloom):
    """Every CAUSAL_FOLLOW relation the steward stored, read as a two-turn chain (the turn of the record it cites
    as the cause, then the effect's), is a cited link naming a relation between the same two events; read the
    other way round, as the effect causing its cause, it is not."""
    state = memloom.state
    stored = [e for e in state.edges.values() if e.type == "CAUSAL_FOLLOW" and len(e.evidence) == 2]
    assert len(stored) >= 5
    for edge in stored:
        cause, effect = (_turn_of(state, r) for r in edge.evidence)
        (link,) = follow_links(state, memloom.schema, [cause, effect])
        assert link.fate == LinkFate.CITED, (cause, effect)
        found = state.edges[tuple(link.edge)]
        assert cause in state.nodes[found.src].source_ids and effect in state.nodes[found.dst].source_ids
        assert link.confidence == found.confidence >= edge.confidence
        (back,) = follow_links(state, memloom.schema, [effect, cause])
        assert back.fate not in (LinkFate.CITED, LinkFate.OTHER_RECORDS)


def test_the_suites_chains_in_memloom_and_in_naive_rag(memloom, scenario, embedder, tmp_path):
    """After the steward, no turn is pending; naive RAG stores every turn and has no causal relation, so each of its
    links is unlinked; a turn the memory never saw is named as not stored."""
    chains = [q.evidence for q in scenario.questions if q.category == 1]
    links = [link for chain in chains for link in follow_links(memloom.state, memloom.schema, chain)]
    assert len(links) == sum(len(c) - 1 for c in chains)
    assert LinkFate.PENDING not in {link.fate for link in links}
    assert any(link.fate == LinkFate.CITED for link in links)
    naive = open_session(tmp_path / "naive.sqlite", engine="naive", embedder=embedder)
    replay(naive, scenario, Schedule.parse("every-3-sessions"))
    assert {link.fate for chain in chains for link in follow_links(naive.state, naive.schema, chain)} == {
        LinkFate.UNLINKED}
    first = chains[0][0]
    assert [link.fate for link in follow_links(memloom.state, memloom.schema, [first, f"{SCENARIO}:t999"])] == [
        LinkFate.NOT_STORED]


def test_a_turn_still_in_the_buffer_is_pending(scenario, embedder, tmp_path):
    """Stepped turn by turn, the newest turns wait in MemLoom's real-time buffer until the next steward run: a link
    to one of them is pending, and once the steward has curated it the same link is no longer pending."""
    engine = open_session(tmp_path / "stream.sqlite", engine="memloom", embedder=embedder)
    schedule = Schedule.parse("every-3-sessions")
    while step(engine, scenario, schedule) is not None:
        buffered = [u for u in engine.state.nodes.values()
                    if u.kind == "turn" and u.status == engine.schema.initial_status]
        if buffered and engine.state.turn > 5:
            break
    newest = _turn_of(engine.state, max(u.id for u in buffered))
    earlier = scenario.turns[0].id
    (link,) = follow_links(engine.state, engine.schema, [earlier, newest])
    assert link.fate == LinkFate.PENDING
    replay(engine, scenario, schedule)
    (link,) = follow_links(engine.state, engine.schema, [earlier, newest])
    assert link.fate != LinkFate.PENDING


def test_the_tally_counts_links_chains_held_whole_and_those_the_ranking_kept():
    records = [{"category": "1", "chain_links": [{"fate": "cited"}, {"fate": "cited"}], "whole": False},
               {"category": "1", "chain_links": [{"fate": "cited"}], "whole": True},
               {"category": "1", "chain_links": [{"fate": "cited"}, {"fate": "unlinked"}], "whole": True},
               {"category": "4"}]
    held = tally_links(records)
    assert (held["links"], held["questions"], held["held_whole"]) == (5, 3, 2)
    assert held["fates"]["cited"] == 4 and held["fates"]["unlinked"] == 1 and held["fates"]["pending"] == 0
    assert held["by_category"] == {"1": held["fates"]}
    assert "held_whole_ranked_whole" not in held
    assert tally_links(records, lambda q: q["whole"])["held_whole_ranked_whole"] == 1


def test_only_a_file_of_the_causal_suites_format_reads_its_gold_as_a_chain(scenario):
    """LoCoMo JSON's category 1 is multi-hop: a question there whose evidence is in time order is not a chain.
    The same kind of question in the team's JSONL (the causal suite, the demo) is."""
    from conftest import LOCOMO, needs_data

    from engine.bench.datasets import chain_question

    locomo = needs_data(LOCOMO)
    conv = load_conversations(locomo)[0]
    order = {t.id: i for i, t in enumerate(conv.turns)}
    ordered = [q for q in conv.questions if q.category == 1 and len(q.evidence) > 1
               and all(e in order for e in q.evidence)
               and all(order[a] < order[b] for a, b in zip(q.evidence, q.evidence[1:]))]
    assert ordered and not any(chain_question(conv, q) for q in ordered)
    chains = [q for q in scenario.questions if q.category == 1]
    assert chains and all(chain_question(scenario, q) for q in chains)

"""The mem0 adapter (examples/memwb-mem0): the open-source mem0 library inside the workbench, offline.

The demo is replayed through the calls SmolLM2-135M made when it was recorded (the package's
recordings/demo.jsonl, one mem0 add() per session); mem0's decisions are stored as proposals carrying its
event and the memory it names, routed by mem0's own rules. On the offline rules (which answer mem0's two
prompts with no model) the demo fills mem0's store: mem0's history is the lineage, and retrieval is mem0's
search with each result's versions and turns as stored edges. A person accepts and rejects proposals through
the engine's review path, mem0 itself carries out what is accepted (its FAISS store, its history db), and undo
takes mem0 back.
"""
from __future__ import annotations

import json
from collections import Counter

import pytest

from engine.core.conversation import Conversation
from engine.core.oplog import OpKind
from engine.core.proposal import ProposalCounts, Status
from engine.engines import known_engines, register_engine
from engine.eval.decisions import judge_engine
from engine.llm.prompts import render
from engine.loaders import load_conversation
from engine.runtime.replay import Schedule, replay
from engine.session import open_session
from tests.conftest import ROOT, turn

try:
    import memwb_mem0
    from memwb_mem0.schema import FACTS_ROLE, UPDATE_ROLE, Kind, Life, Op, ReasonCode, Rel
except ImportError as exc:              # the example is its own package: scripts/install.sh installs it
    pytest.skip(f"the mem0 adapter package is not installed ({exc}); install it with "
                "`pip install -e examples/memwb-mem0` (scripts/install.sh does)", allow_module_level=True)

if "mem0" not in known_engines():       # importable but not installed (no entry point): register it by hand
    register_engine("mem0", lambda: __import__("memwb_mem0.engine", fromlist=["Mem0Engine"]).Mem0Engine)

DEMO = ROOT / "datasets" / "demo" / "demo.jsonl"
RECORDED_SCHEDULE = "every-1-sessions"          # what record_demo.py recorded with


@pytest.fixture(scope="module")
def demo_replay(tmp_path_factory):
    """The demo replayed through the recorded calls, on a real SQLite file."""
    eng = open_session(tmp_path_factory.mktemp("mem0") / "demo.db", engine="mem0", llm="recorded",
                       records=memwb_mem0.RECORDING)
    replay(eng, load_conversation(DEMO), Schedule.parse(RECORDED_SCHEDULE))
    return eng


@pytest.fixture(scope="module")
def offline_demo(tmp_path_factory):
    """The demo replayed on the offline rules (mem0's store fills), on a real SQLite file."""
    eng = open_session(tmp_path_factory.mktemp("mem0") / "offline.db", engine="mem0", llm="offline")
    replay(eng, load_conversation(DEMO), Schedule.parse(eng.schema.schedule))
    return eng


def memory_versions(state) -> dict[str, list]:
    """Each mem0 memory's versions in the workbench, oldest first (walking its version edges)."""
    chains: dict[str, list] = {}
    for node in sorted(state.nodes.values(), key=lambda n: n.id):
        if node.kind == Kind.MEMORY:
            chains.setdefault(node.attrs["mem0_id"], []).append(node)
    for mid, chain in chains.items():
        for older, newer in zip(chain, chain[1:]):
            assert (newer.id, older.id, Rel.VERSION) in state.edges, f"{mid}: no version edge u{newer.id} -> u{older.id}"
    return chains


def test_the_demo_replays_through_every_recorded_call(demo_replay):
    eng = demo_replay
    recorded = [json.loads(line) for line in open(memwb_mem0.RECORDING, encoding="utf-8")]
    made = [op.payload for op in eng.store.ops(kinds=[OpKind.LLM_CALL])]
    assert eng.llm.backend.remaining() == 0 and len(made) == len(recorded)
    assert Counter(c["role"] for c in made) == Counter(c["role"] for c in recorded)
    assert {c["role"] for c in made} == {FACTS_ROLE, UPDATE_ROLE}
    sessions = {t.session for t in load_conversation(DEMO).turns}
    assert sum(c["role"] == FACTS_ROLE for c in made) == len(sessions)     # one mem0 add() per session
    # the prompts are mem0's own, dated with the dataset's date rather than the day it runs
    facts = next(c for c in made if c["role"] == FACTS_ROLE)
    assert "Personal Information Organizer" in facts["prompt"][0]["content"]
    assert "Today's date is 2024-02-03" in facts["prompt"][0]["content"]
    update = next(c for c in made if c["role"] == UPDATE_ROLE)
    assert "smart memory manager" in update["prompt"][0]["content"]


@pytest.mark.parametrize("replayed", ["demo_replay", "offline_demo"])
def test_every_decision_is_a_proposal_with_mem0s_reasons(replayed, request):
    demo_replay = request.getfixturevalue(replayed)
    state = demo_replay.state
    proposals = list(state.proposals.values())
    assert proposals and {p.op for p in proposals} <= {Op.ADD, Op.UPDATE, Op.DELETE, Op.NONE}
    entries = [e for op in demo_replay.store.ops(kinds=[OpKind.LLM_CALL]) if op.payload["role"] == UPDATE_ROLE
               and op.payload["data"] for e in op.payload["data"]["memory"]]
    decided = [p for p in proposals if "mem0_entry" in p.detail]
    assert [p.detail["mem0_entry"] for p in decided] == entries          # one proposal per entry, in order
    for p in decided:
        entry = p.detail["mem0_entry"]
        assert p.plan["event"] == entry["event"] and p.plan["text"] == entry["text"].strip()
        assert p.reason.startswith(f"mem0 {entry['event']}")
        if p.op != Op.ADD and p.reason_code != ReasonCode.UNKNOWN_ID:
            old = state.nodes[p.targets[0]]                              # the memory mem0 showed under that id
            assert p.detail["shown"][entry["id"]] == f"u{old.id}" and p.plan["old_memory"] == old.summary
            assert old.summary[:40] in p.reason
        if p.reason_code == ReasonCode.UNKNOWN_ID:
            assert entry["id"] not in p.detail["shown"] and p.status == Status.SKIPPED
        if p.op == Op.NONE and p.reason_code == ReasonCode.NO_CHANGE:
            assert p.status == Status.SKIPPED and p.decided_by is None
    for p in (p for p in proposals if p.status == Status.APPLIED):
        if p.op in (Op.ADD, Op.UPDATE):
            node = state.nodes[p.detail["made"]]
            assert node.summary == p.plan["text"] and node.status in (Life.CURRENT, Life.SUPERSEDED, Life.DELETED)


def test_mem0s_history_is_the_lineage(offline_demo):
    eng = offline_demo
    chains = memory_versions(eng.state)
    assert chains and any(len(chain) > 1 for chain in chains.values())
    library = eng.library()
    for mid, chain in chains.items():
        history = library.history(mid)
        assert [h["new_memory"] for h in history if h["event"] in ("ADD", "UPDATE")] == [n.summary for n in chain]
        assert [h["event"] for h in history][: len(chain)] == ["ADD"] + ["UPDATE"] * (len(chain) - 1)
        assert (history[-1]["event"] == "DELETE") == (chain[-1].status == Life.DELETED)
        assert all(n.status == Life.SUPERSEDED for n in chain[:-1])
    held = {m["id"] for m in library.memory.get_all(filters={"user_id": "memwb"}, top_k=1000)["results"]}
    assert held == set(eng.current_memories())


def test_a_memory_said_word_for_word_comes_from_the_turn_that_says_it(offline_demo):
    """mem0 does not say which turn of a session a memory came from; one said word for word in a turn ("Maya: I've
    been dying to ask.", said in D5:1 after a question) is that turn's, not the turn most like it in meaning."""
    from memwb_mem0.process import _says
    from memwb_mem0.schema import Kind, Op

    state = offline_demo.state
    turns = [n for n in state.nodes.values() if n.kind == Kind.TURN]
    added = [p for p in state.proposals.values() if p.op == Op.ADD]
    word_for_word = [p for p in added if any(_says(t.raw, p.plan["text"]) for t in turns)]
    assert len(word_for_word) > 20
    for p in word_for_word:
        source = state.nodes[p.targets[0]]
        assert _says(source.raw, p.plan["text"]), (p.plan["text"], source.raw)
    assert any("dying to ask" in p.plan["text"] and state.nodes[p.targets[0]].source_ids == ["D5:1"] for p in added)


def test_retrieval_is_mem0s_search_with_provenance_over_stored_edges(offline_demo):
    eng = offline_demo
    res = eng.retrieve("How many half marathons has Jon run?")
    assert res.units and all(r.kind == Kind.MEMORY and r.status == Life.CURRENT for r in res.units)
    scores = [r.score for r in res.candidates]
    assert scores == sorted(scores, reverse=True) and len(res.units) <= eng.settings.final_k
    assert all(r.score >= eng.settings.threshold for r in res.units)     # mem0's threshold cuts what is returned
    for r in res.candidates:
        assert r.provenance and r.provenance[0].src == r.id
        for hop in r.provenance:
            assert hop.edge_key in eng.state.edges
        turns = {eng.state.nodes[h.dst].source_ids[0] for h in r.provenance if h.type == Rel.DERIVED_FROM}
        assert set(r.source_ids) == turns                  # every source turn is a stored hop away
    top = res.units[0]
    assert any(h.type == Rel.VERSION for h in top.provenance)          # the updated memory, with its old version
    placed = eng.explain(res, [top.id, *eng.state.turn_units.values()])
    assert placed[top.id].rank == 1 and placed[top.id].signals.score == top.score
    turn_node = next(iter(eng.state.turn_units.values()))
    assert placed[turn_node].drop == "filtered" and "mem0 searches its memories" in placed[turn_node].detail


def test_a_reviewer_accepts_and_rejects_and_mem0_follows_undo(make_db):
    """The review path on the offline rules: each run is proposed for a person, who decides."""
    eng = open_session(make_db(), engine="mem0", llm="offline")
    eng.ingest(turn(1, "Aiko", "I have 2 cats and they run the flat."))
    (add,) = [p for p in eng.propose(manual=True) if p.status == Status.PENDING]
    assert add.op == Op.ADD and add.reason.startswith("mem0 ADD")
    eng.apply({add.id: True}, decided_by="reviewer")
    (first,) = eng.current_memories().items()
    assert eng.library().history(first[0]) == [{"event": "ADD", "old_memory": None,
                                                "new_memory": add.plan["text"]}]

    eng.ingest(turn(2, "Aiko", "I have 3 cats and they run the flat."))
    (update,) = [p for p in eng.propose(manual=True) if p.status == Status.PENDING]
    assert update.op == Op.UPDATE and update.targets[0] == first[1]
    assert update.plan["old_memory"] == add.plan["text"] and "2 cats" in update.reason
    eng.apply({update.id: False}, decided_by="reviewer")                 # rejected: mem0 is not asked
    assert eng.state.proposals[update.id].status == Status.REJECTED
    assert [h["event"] for h in eng.library().history(first[0])] == ["ADD"]

    eng.ingest(turn(3, "Aiko", "I have 4 cats and they run the flat."))
    (update,) = [p for p in eng.propose(manual=True) if p.status == Status.PENDING]
    report = eng.apply({update.id: True}, decided_by="reviewer")
    (new,) = report.created
    assert eng.state.nodes[first[1]].status == Life.SUPERSEDED and (new, first[1], Rel.VERSION) in eng.state.edges
    assert [h["event"] for h in eng.library().history(first[0])] == ["ADD", "UPDATE"]
    assert eng.retrieve("how many cats does Aiko have").units[0].id == new

    eng.undo_last_run(actor="reviewer")                                   # mem0's store follows the log back
    assert eng.state.nodes[first[1]].status == Life.CURRENT and new not in eng.state.nodes
    assert [h["event"] for h in eng.library().history(first[0])] == ["ADD"]
    assert eng.retrieve("how many cats does Aiko have").units[0].id == first[1]
    assert ProposalCounts.of(eng.state.proposals.values()).rejected == 1


def test_a_failed_call_is_a_failed_proposal_and_loses_nothing(tmp_path):
    """A recording that does not hold the call asked (strict=False: it fails closed) changes nothing."""
    from engine.engines import engine_class
    from engine.llm import LLM, make_backend
    from engine.llm.embedder import Embedder
    from engine.store.log_store import Store

    cls = engine_class("mem0")
    store = Store(str(tmp_path / "failing.db"))
    store.set_meta(engine="mem0", settings=cls.Settings().to_dict(), llm="recorded")
    eng = cls(store, LLM(make_backend("recorded", calls=[], strict=False)), Embedder())
    eng.ingest(turn(1, "Aiko", "I have 2 cats."))
    (p,) = eng.propose(manual=True)
    assert p.status == Status.FAILED and p.reason_code == "LLM_FAIL" and "fact extraction failed" in p.reason
    assert "no recorded call" in p.note and eng.open_run() is None
    assert eng.current_memories() == {} and eng.state.turn == 1


def test_mem0s_prompt_is_dated_by_the_dataset():
    messages = render(FACTS_ROLE, {"today": "2024-05-11", "conversation": "user: Maya: hi\n"})
    assert "Today's date is 2024-05-11" in messages[0]["content"] and messages[1]["content"].endswith("Maya: hi\n")


def test_the_decision_set_scores_mem0s_updates(make_db):
    conv = load_conversation(ROOT / "datasets" / "decisions" / "test" / "ta01.jsonl")
    eng = open_session(make_db(), engine="mem0")
    replay(eng, Conversation(conv.id, conv.turns, [], conv.speakers, conv.source), Schedule.parse("every-1-turns"))
    verdicts, _ = judge_engine(eng, conv)
    assert verdicts and {v.decision.kind for v in verdicts} >= {"update"}
    updates = [p for p in eng.state.proposals.values() if p.op in (Op.UPDATE, Op.DELETE)]
    assert all(len(p.targets) in (1, 2) for p in updates)


def test_the_consolidation_page_reviews_mem0s_decisions_and_mem0_carries_them_out():
    """A person on the Consolidation page: diagnosis asks mem0, one ADD is rejected and the UPDATE accepted with the
    cards' controls; the session database holds the decisions, mem0's history the update, and undo takes it back."""
    from engine.core.access import local_identity
    from tests.apptest import open_app_page
    from workbench.review import decisions as review_decisions

    at, wb = open_app_page("../pages/3_consolidation.py", engine="mem0")
    wb.jump(next(i for i, t in enumerate(wb.conversation.turns, 1) if t.id == "D5:4"))   # Jon: 4 half marathons
    at.run()
    at.button(key="run_diagnosis").click().run()
    assert not at.exception
    state = wb.engine.state
    run_id = wb.engine.open_run()
    pending = [p for p in state.proposals.values() if p.run_id == run_id and p.status == Status.PENDING]
    update = next(p for p in pending if p.op == Op.UPDATE)
    add = next(p for p in pending if p.op == Op.ADD)
    old = state.nodes[update.targets[0]]
    assert "3 half marathons" in old.summary and "4 half marathons" in update.plan["text"]
    assert f"#{update.id} · UPDATE" in "\n".join(m.value for m in at.markdown)
    run_key = review_decisions.run_key(wb.db_path.name, run_id)
    at.radio(key=review_decisions.widget_key(run_key, update.id)).set_value(review_decisions.ACCEPT).run()
    at.radio(key=review_decisions.widget_key(run_key, add.id)).set_value(review_decisions.REJECT).run()
    at.button(key="apply_defer").click().run()
    assert not at.exception

    stored = wb.engine.store.load_state()                  # folded afresh from the session's file
    who = local_identity().name
    assert (stored.proposals[update.id].status, stored.proposals[update.id].decided_by) == (Status.APPLIED, who)
    assert (stored.proposals[add.id].status, stored.proposals[add.id].decided_by) == (Status.REJECTED, who)
    new = stored.proposals[update.id].detail["made"]
    assert stored.nodes[old.id].status == Life.SUPERSEDED and (new, old.id, Rel.VERSION) in stored.edges
    history = wb.engine.library().history(old.attrs["mem0_id"])
    assert [h["event"] for h in history] == ["ADD", "UPDATE"] and history[-1]["new_memory"] == update.plan["text"]
    assert add.plan["text"] not in {n.summary for n in stored.nodes.values() if n.kind == Kind.MEMORY}

    at.button(key="undo_start").click().run()
    at.button(key="undo_confirm").click().run()
    assert not at.exception
    assert wb.engine.state.nodes[old.id].status == Life.CURRENT and new not in wb.engine.state.nodes
    assert [h["event"] for h in wb.engine.library().history(old.attrs["mem0_id"])] == ["ADD"]


def test_an_installed_engine_cannot_take_over_a_workbench_role():
    from engine.llm.roles import Role, register_role
    from engine.llm.schemas import SCHEMAS

    before = SCHEMAS["descriptor"]
    with pytest.raises(ValueError, match="already exists"):
        register_role(Role("descriptor", {"type": "object"}, lambda payload: []))
    assert SCHEMAS["descriptor"] is before


def test_an_accepted_delete_leaves_mem0s_history_and_a_reachable_memory(make_db):
    eng = open_session(make_db(), engine="mem0", llm="offline")
    eng.ingest(turn(1, "Aiko", "I eat meat every day at lunch."))
    eng.consolidate()                                                      # the gate decides: ADD applied
    ((memory_id, memory),) = eng.current_memories().items()
    eng.ingest(turn(2, "Aiko", "I don't eat meat every day at lunch."))
    (delete,) = [p for p in eng.propose(manual=True) if p.op == Op.DELETE]
    assert delete.targets[0] == memory and delete.reason.startswith(f"mem0 DELETE u{memory}")
    eng.apply({delete.id: True}, decided_by="reviewer")
    state = eng.state
    source = state.turn_units["D1:2"]
    assert state.nodes[memory].status == Life.DELETED and (source, memory, Rel.DELETES) in state.edges
    assert [h["event"] for h in eng.library().history(memory_id)] == ["ADD", "DELETE"]
    assert memory not in {r.id for r in eng.retrieve("what does Aiko eat at lunch").candidates}
    reopened = open_session(eng.store.url, engine="mem0", llm="offline")  # mem0 rebuilt from the log alone
    assert [h["event"] for h in reopened.library().history(memory_id)] == ["ADD", "DELETE"]
    assert reopened.retrieve("what does Aiko eat at lunch").candidates == []
    placed = reopened.explain(reopened.retrieve("lunch"), [memory])[memory]
    assert placed.drop == "off_surface" and "mem0 deleted this memory" in placed.detail

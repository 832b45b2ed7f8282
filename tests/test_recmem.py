"""RecMem: the pairing rule, the recurrence gate on the paper's worked example, consolidation under review,
faults that fail closed, provenance across merges, three-layer retrieval and the threshold sweep.

Everything runs on the real embedder (all-MiniLM-L6-v2) and real SQLite files, with the offline LLM backend.
"""
from __future__ import annotations

import json

import numpy as np
import pytest

from engine.core.conversation import Conversation, Turn
from engine.engines import engine_class
from engine.retrieval.explain import Drop
from engine.loaders import load_conversation
from engine.core.oplog import OpKind
from engine.core.proposal import Status
from engine.engines.recmem.consolidation import BUFFER
from engine.runtime.replay import Schedule, replay
from engine.session import open_session
from tests.conftest import ROOT
from tests.test_operators import ScriptedBackend

DEMO = ROOT / "datasets" / "demo" / "demo.jsonl"

# seeds/recmem.txt App. B: a birthday cake for a sister with a peanut allergy, an unrelated turn (dark jeans),
# the cake again. One session per day, user and assistant.
APP_B = [
    ("user", "I want to order a birthday cake for my sister Mia. She is allergic to peanuts, so it has to be "
             "completely nut-free. Any suggestions?"),
    ("assistant", "For a peanut allergy, order from a dedicated nut-free bakery and tell them about Mia's allergy "
                  "when you order. A vanilla sponge with strawberry filling is a safe classic."),
    ("user", "How should I wash dark jeans so they don't fade?"),
    ("assistant", "Turn them inside out, wash them in cold water with a mild detergent, and hang them to dry out "
                  "of direct sunlight."),
    ("user", "I'm going to place the birthday cake order for Mia at SweetLeaf. Can they write Happy Birthday Mia "
             "on the cake?"),
    ("assistant", "Yes, SweetLeaf can pipe Happy Birthday Mia on top. Remind them the cake must be peanut-free "
                  "because of Mia's allergy."),
]


def app_b() -> Conversation:
    turns = [Turn(id=f"D{i // 2 + 1}:{i % 2 + 1}", speaker=spk, text=text,
                  time=f"2024-05-0{i // 2 + 1}T10:0{i % 2}:00", session=str(i // 2 + 1), index=i)
             for i, (spk, text) in enumerate(APP_B)]
    return Conversation("app-b", turns, [], ("user", "assistant"), "recmem App. B")


def gate_of(eng, turn_no: int) -> list[dict]:
    """The gate traces the turn's turn_ingested record holds."""
    op = next(op for op in eng.store.ops(kinds=[OpKind.TURN_INGESTED]) if op.turn == turn_no)
    return op.payload["gate"]


def calls(eng, **kw) -> list[dict]:
    return [op.payload for op in eng.store.ops(kinds=[OpKind.LLM_CALL], **kw)]


def test_app_b_worked_example(tmp_path):
    """θ_count 2 (App. B; θ_sim 0.5, which App. B leaves open): no trigger on units 1-2, a trigger on unit 3 whose
    cluster holds units 1 and 3 and not 2, one episode, facts that cite it; no LLM call before the trigger."""
    eng = open_session(tmp_path / "b.sqlite", engine="recmem",
                       settings={"theta_sim": 0.5, "theta_count": 2, "theta_merge": 0.5})
    replay(eng, app_b(), Schedule.parse("every-1-turns"))
    st = eng.state
    units = sorted(n.id for n in st.nodes.values() if n.kind == "unit")
    assert len(units) == 3
    u1, u2, u3 = units
    assert [st.nodes[u].source_ids for u in units] == [["D1:1", "D1:2"], ["D2:1", "D2:2"], ["D3:1", "D3:2"]]
    assert [gate_of(eng, t) for t in (1, 3, 5)] == [[], [], []]           # a message waits for its reply
    g1, g2, g3 = (gate_of(eng, t)[0] for t in (2, 4, 6))
    assert (g1["unit"], g1["count"], g1["fired"], g1["neighbours"]) == (u1, 1, "none", [])
    assert (g2["unit"], g2["count"], g2["fired"]) == (u2, 1, "none")
    assert g2["neighbours"][0][0] == u1 and g2["neighbours"][0][1] < 0.5
    assert (g3["unit"], g3["count"], g3["fired"]) == (u3, 2, "consolidate")
    assert g3["cluster"] == [u1, u3] and u2 not in g3["cluster"]
    cosines = dict((u, c) for u, c in g3["neighbours"])
    assert cosines[u1] >= 0.5 > cosines[u2]
    first_call = min(op.turn for op in eng.store.ops(kinds=[OpKind.LLM_CALL]))
    assert first_call == 6                                                   # nothing before the trigger

    episodes = [n for n in st.nodes.values() if n.kind == "episode"]
    assert len(episodes) == 1
    ep = episodes[0]
    assert ep.members == [u1, u3] and ep.status == "episodic"
    assert ep.source_ids == ["D1:1", "D1:2", "D3:1", "D3:2"]
    assert {(ep.id, u1, "derived_from"), (ep.id, u3, "derived_from")} <= set(st.edges)
    assert (st.nodes[u1].status, st.nodes[u2].status, st.nodes[u3].status) == \
        ("consolidated", "subconscious", "consolidated")
    facts = [n for n in st.nodes.values() if n.kind == "fact"]
    assert facts
    for f in facts:
        edge = st.edges[(f.id, ep.id, "derived_from")]                     # every fact cites the episode ...
        assert edge.evidence and set(edge.evidence) <= {u1, u3}              # ... and the units it rests on
        assert set(f.source_ids) <= {"D1:1", "D1:2", "D3:1", "D3:2"}
    said = " ".join(f.summary for f in facts)
    assert "Mia" in said and "peanut" in said and "SweetLeaf" in said
    assert sorted(c["role"] for c in calls(eng)) == ["episode_extraction", "fact_refinement"]


def test_pairing_rule_streaming_and_batch_agree(tmp_path):
    """Within a session an exchange is a message and the next one; a leftover at a session end and an assistant
    opening stand alone; ingest forms exactly the exchanges `exchanges` computes."""
    from engine.engines.recmem.units import exchanges       # noqa: PLC0415  (the engine's own module, in its test)

    rows = [("A", "1", "hi"), ("B", "1", "hello"), ("A", "1", "one"), ("A", "1", "two"), ("B", "1", "three"),
            ("A", "2", "new day"), ("assistant", "3", "welcome back"), ("user", "3", "thanks"),
            ("assistant", "3", "sure")]
    turns = [Turn(id=f"t{i}", speaker=spk, text=text, time=f"2024-01-0{int(s)}T10:{i:02d}:00", session=s, index=i)
             for i, (spk, s, text) in enumerate(rows)]
    groups = [[t.id for t in ex] for ex in exchanges(turns)]
    assert groups == [["t0", "t1"], ["t2", "t3"], ["t4"], ["t5"], ["t6"], ["t7", "t8"]]
    eng = open_session(tmp_path / "p.sqlite", engine="recmem")
    replay(eng, Conversation("p", turns, [], (), ""), Schedule.parse("manual"))
    made = sorted((n for n in eng.state.nodes.values() if n.kind == "unit"), key=lambda n: n.id)
    assert [n.source_ids for n in made] == groups
    assert all(eng.state.nodes[m].status == "paired" for n in made for m in n.members)
    closed = [n.attrs["closed_by"] for n in made]
    assert closed == ["reply", "reply", "session end", "session end", "assistant opens", "reply"]
    for n in made:
        assert n.raw == "\n".join(t.raw for t in turns if t.id in n.source_ids)


def test_last_message_waits_on_the_surface(tmp_path):
    eng = open_session(tmp_path / "w.sqlite", engine="recmem")
    conv = app_b()
    replay(eng, Conversation("w", conv.turns[:5], [], (), ""), Schedule.parse("manual"))
    waiting = eng.state.nodes[eng.state.turn_units["D3:1"]]
    assert waiting.status == "waiting" and waiting.visible
    res = eng.retrieve("SweetLeaf birthday cake order", k=3)
    assert any(r.id == waiting.id and r.layer == "subconscious" for r in res.units)


@pytest.fixture
def reviewed(tmp_path):
    """App. B replayed with the manual schedule: the trigger's work waits in the buffer for review."""
    eng = open_session(tmp_path / "r.sqlite", engine="recmem",
                       settings={"theta_sim": 0.5, "theta_count": 2, "theta_merge": 0.5})
    replay(eng, app_b(), Schedule.parse("manual"))
    return eng


def check_gate_stores(eng) -> None:
    """The stores the gate scores, kept record by record, against the state: S_sub's units that no buffer entry
    claims and S_epi's episodes, each with its node's vector."""
    buf = eng.state.buffer(BUFFER)
    claimed = set(buf) | {a for anchors in buf.values() for a in anchors}
    assert set(eng.claims) == claimed
    for status, rows in eng.stores.items():
        want = {n.id for n in eng.state.nodes.values() if n.status == status
                and (status != "subconscious" or n.id not in claimed)}
        ids, _ = rows.dots(np.zeros(384, dtype=np.float32))
        assert sorted(ids.tolist()) == sorted(want)
        assert all(np.array_equal(rows.matrix[rows.row[u]], eng.vectors[u]) for u in want)


def test_review_reject_then_accept_and_undo(reviewed):
    eng = reviewed
    check_gate_stores(eng)
    assert eng.pending() == 1 and not calls(eng)
    before = eng.export()
    props = eng.propose(manual=True)
    assert [p.op for p in props] == ["consolidate", "refine"]
    consolidate, refine = props
    rows = consolidate.detail["cluster"]
    assert [r["unit"] for r in rows] == [f"u{u}" for u in consolidate.targets] and len(rows) == 2
    assert rows[0]["cosine"] >= 0.5 and consolidate.confidence == pytest.approx(rows[0]["cosine"], abs=1e-3)
    assert not calls(eng)                              # diagnosis asks no model
    eng.apply({consolidate.id: False, refine.id: True}, decided_by="ana")
    check_gate_stores(eng)
    st = eng.state
    assert st.proposals[consolidate.id].status == Status.REJECTED
    assert st.proposals[refine.id].status == Status.SKIPPED
    assert st.proposals[refine.id].reason_code == "PARENT_NOT_APPLIED"
    assert eng.export()["units"] == before["units"] and not calls(eng)
    units = [n.id for n in st.nodes.values() if n.kind == "unit"]
    assert all(st.nodes[u].status == "subconscious" for u in units)

    eng.ingest(Turn("D4:1", "user", "Did SweetLeaf confirm the peanut-free birthday cake for Mia?",
                    "2024-05-04T10:00:00", "4", 6))
    eng.ingest(Turn("D4:2", "assistant", "Yes, the nut-free cake for Mia is confirmed at SweetLeaf.",
                    "2024-05-04T10:01:00", "4", 7))
    assert eng.pending() == 1                          # the rejected cluster recurs and triggers again
    check_gate_stores(eng)
    consolidate, refine = eng.propose(manual=True)
    report = eng.apply({consolidate.id: True, refine.id: True}, decided_by="ana")
    check_gate_stores(eng)
    st = eng.state
    assert st.proposals[consolidate.id].status == st.proposals[refine.id].status == Status.APPLIED
    assert st.proposals[consolidate.id].decided_by == "ana"
    episodes = [n for n in st.nodes.values() if n.kind == "episode"]
    assert len(episodes) == 1 and set(report.archived) == set(episodes[0].members)
    assert sorted(c["role"] for c in calls(eng)) == ["episode_extraction", "fact_refinement"]
    undone = eng.undo_last_run()
    assert undone == report.run_id
    assert not [n for n in eng.state.nodes.values() if n.kind in ("episode", "fact")]
    assert all(eng.state.nodes[u].status == "subconscious" for u in units)
    check_gate_stores(eng)


def test_merge_role_garbage_fails_closed_and_the_replay_goes_on(tmp_path):
    """A unit near the episode goes to the merge role; garbage from it is JSON_PARSE_FAIL on the proposal, the
    episode and the unit are untouched, the run commits, and ingest goes on."""
    eng = open_session(tmp_path / "g.sqlite", engine="recmem",
                       settings={"theta_sim": 0.5, "theta_count": 2, "theta_merge": 0.5})
    replay(eng, app_b(), Schedule.parse("every-1-turns"))
    episode = next(n for n in eng.state.nodes.values() if n.kind == "episode").copy()
    eng.llm.backend = ScriptedBackend(eng.llm.backend, {"episode_merge": "yes, merge them!! {"})
    follow = [Turn("D4:1", "user", "I picked up Mia's peanut-free birthday cake from SweetLeaf today.",
                   "2024-05-04T10:00:00", "4", 6),
              Turn("D4:2", "assistant", "Wonderful, I hope Mia loves her nut-free birthday cake!",
                   "2024-05-04T10:01:00", "4", 7)]
    conv = Conversation("app-b", app_b().turns + follow, [], (), "")
    summary = replay(eng, conv, Schedule.parse("every-1-turns"))
    assert summary.turns == 8
    trace = gate_of(eng, 8)[0]
    assert trace["fired"] == "merge" and trace["episode"] == episode.id and trace["episode_cosine"] >= 0.5
    merge = next(p for p in eng.state.proposals.values() if p.op == "merge")
    assert (merge.status, merge.reason_code) == (Status.FAILED, "JSON_PARSE_FAIL")
    refine = next(p for p in eng.state.proposals.values() if p.detail.get("after") == [merge.id])
    assert refine.reason_code == "PARENT_NOT_APPLIED"
    assert eng.state.nodes[episode.id].summary == episode.summary
    assert eng.state.nodes[episode.id].members == episode.members
    assert eng.state.nodes[trace["unit"]].status == "subconscious"
    assert eng.open_run() is None and eng.state.runs[merge.run_id].status == "committed"
    eng.ingest(Turn("D5:1", "user", "Thanks for all the help!", "2024-05-05T10:00:00", "5", 8))
    assert eng.state.turn == 9


def test_provenance_of_a_fact_survives_later_merges(tmp_path):
    eng = open_session(tmp_path / "m.sqlite", engine="recmem",
                       settings={"theta_sim": 0.5, "theta_count": 2, "theta_merge": 0.4})
    replay(eng, app_b(), Schedule.parse("every-1-turns"))
    st = eng.state
    episode = next(n for n in st.nodes.values() if n.kind == "episode").copy()
    facts = {n.id: (list(n.source_ids), list(st.edges[(n.id, episode.id, "derived_from")].evidence))
             for n in st.nodes.values() if n.kind == "fact"}
    follow = [Turn("D4:1", "user", "I picked up Mia's peanut-free birthday cake from SweetLeaf today.",
                   "2024-05-04T10:00:00", "4", 6),
              Turn("D4:2", "assistant", "Wonderful, I hope Mia loves her nut-free birthday cake from SweetLeaf!",
                   "2024-05-04T10:01:00", "4", 7)]
    replay(eng, Conversation("app-b", app_b().turns + follow, [], (), ""), Schedule.parse("every-1-turns"))
    st = eng.state
    merged = st.nodes[episode.id]
    assert len(merged.members) == 3 and merged.summary != episode.summary          # the episode absorbed a unit
    for fid, (sources, cited) in facts.items():
        assert st.nodes[fid].source_ids == sources
        assert st.edges[(fid, episode.id, "derived_from")].evidence == cited
    res = eng.retrieve("What is Mia allergic to?", k=5)
    for r in res.units:
        for hop in r.provenance:                         # each hop a stored edge, walked from the result down
            assert hop.edge_key in st.edges and hop.type == "derived_from"
        if r.kind == "fact":
            assert [st.nodes[h.dst].kind for h in r.provenance][:2] == ["episode", "unit"]
            cited = set(st.edges[(r.id, episode.id, "derived_from")].evidence)
            assert {h.dst for h in r.provenance if st.nodes[h.dst].kind == "unit"} == cited
            messages = {s for h in r.provenance if st.nodes[h.dst].kind == "turn"
                        for s in st.nodes[h.dst].source_ids}
            assert messages == set(r.source_ids)
    layers = {r.layer for r in res.units}
    assert layers == {"subconscious", "episodic", "semantic"}


def test_explain_names_the_layer_that_left_a_node_out(tmp_path):
    eng = open_session(tmp_path / "x.sqlite", engine="recmem",
                       settings={"theta_sim": 0.5, "theta_count": 2, "theta_merge": 0.5, "k_sub": 0})
    replay(eng, app_b(), Schedule.parse("every-1-turns"))
    st = eng.state
    res = eng.retrieve("How do I wash dark jeans?", k=5)
    consolidated = [n.id for n in st.nodes.values() if n.status == "consolidated"]
    jeans = next(n.id for n in st.nodes.values() if n.status == "subconscious")
    message = st.turn_units["D1:1"]
    placed = eng.explain(res, [*consolidated, jeans, message, res.units[0].id])
    assert all(placed[u].drop == Drop.OFF_SURFACE and "consolidated into episode" in placed[u].detail
               for u in consolidated)
    assert placed[jeans].drop == Drop.BELOW_SEED_CUT and "k_sub 0" in placed[jeans].detail
    assert placed[message].drop == Drop.FILTERED
    assert placed[res.units[0].id].returned


def test_threshold_sweep_counts_what_a_replay_does(tmp_path):
    """Without merge-first, every trigger consolidated at once (every-1-turns) and the offline episodes citing
    every unit of their cluster, a replay's triggers and cluster sizes are exactly the sweep's cell."""
    conv = load_conversation(DEMO)
    for sim, count in [(0.6, 4)]:
        eng = open_session(tmp_path / f"s{sim}-{count}.sqlite", engine="recmem",
                           settings={"theta_sim": sim, "theta_count": count, "theta_merge": sim,
                                     "ablations": ["no-merge"]})
        replay(eng, conv, Schedule.parse("every-1-turns"))
        traces = [t for op in eng.store.ops(kinds=[OpKind.TURN_INGESTED]) for t in op.payload["gate"]]
        fired = [len(t["cluster"]) for t in traces if t["fired"] == "consolidate"]
        cell = next(c for c in eng.threshold_sweep([sim], [count]))
        assert fired and cell.cluster_sizes == fired and cell.triggers == len(fired) and cell.merges == 0
        roles = [c["role"] for c in calls(eng)]                  # the sweep counts one episode per trigger
        assert roles.count("episode_extraction") == len(fired) and cell.calls == 2 * len(fired)
        assert roles.count("fact_refinement") >= len(fired)
    cells = eng.threshold_sweep([0.5, 0.6, 0.7], [2, 3, 4, 5])
    assert [(c.theta_sim, c.theta_count) for c in cells][:5] == [(0.5, 2), (0.5, 3), (0.5, 4), (0.5, 5), (0.6, 2)]
    by = {(c.theta_sim, c.theta_count): c for c in cells}
    assert by[(0.5, 2)].triggers >= by[(0.7, 5)].triggers
    assert all(c.units == by[(0.5, 2)].units for c in cells)
    assert by[(0.7, 5)].calls <= by[(0.5, 2)].calls and json.dumps([c.to_dict() for c in cells])


def test_presets_and_bounds():
    settings = engine_class("recmem").Settings
    s = settings.from_dict({"preset": "longmemeval"})
    assert (s.theta_sim, s.theta_count, s.theta_merge) == (0.6, 4, 0.6)
    assert settings.from_dict(s.to_dict()).to_dict() == s.to_dict()
    with pytest.raises(ValueError, match="preset longmemeval sets theta_sim=0.6.*conflicts with theta_sim=0.65"):
        settings.from_dict({"preset": "longmemeval", "theta_sim": 0.65})
    with pytest.raises(ValueError, match="theta_sim=1.5 is out of range: it takes 0.0 to 1.0"):
        settings.from_dict({"theta_sim": 1.5})


def test_an_episodes_turns_rank_by_their_own_exchange(tmp_path):
    """A turn of an episode takes a source slot at no more than the relevance of the unit it is in (the result's
    `source_worth`), and the episode's turns are ordered by it, then by id, not by id alone."""
    from engine.retrieval.result import RetrievedUnit, rank_sources

    def unit(uid, score, sources, scores=None):
        return RetrievedUnit(id=uid, visible=True, score=score, dense=0.0, lexical=0.0, anchor=uid, hop=0, path=[],
                             source_ids=sources, time="", raw="", kind="episode", source_worth=scores or {})

    plain = [unit(1, 2.0, ["D1:2", "D1:10"]), unit(2, 1.0, ["D3:1"])]
    assert rank_sources(plain) == ["D1:10", "D1:2", "D3:1"]                    # All-Mem's key: ids break ties
    scored = [unit(1, 2.0, ["D1:2", "D1:10"], {"D1:2": 0.9, "D1:10": -0.3}), unit(2, 1.0, ["D3:1"])]
    assert rank_sources(scored) == ["D3:1", "D1:2", "D1:10"]                   # D1:10's own exchange is weak
    above = [unit(1, 0.5, ["D1:2", "D1:10"], {"D1:2": 0.9, "D1:10": 0.7}), unit(2, 0.4, ["D3:1"])]
    assert rank_sources(above) == ["D1:2", "D1:10", "D3:1"]                    # both at the episode's 0.5

    eng = open_session(tmp_path / "e.sqlite", engine="recmem",
                       settings={"theta_sim": 0.5, "theta_count": 2, "theta_merge": 0.5})
    replay(eng, app_b(), Schedule.parse("every-1-turns"))
    res = eng.retrieve("Which bakery writes Happy Birthday Mia on the cake?", k=8)
    episode = next(r for r in res.units if r.kind == "episode")
    assert set(episode.source_worth) == set(episode.source_ids)
    order = [s for s in res.source_ids if s in episode.source_ids]
    assert order == sorted(episode.source_ids, key=lambda s: (-episode.source_worth[s], s))[:len(order)]
    assert episode.source_worth["D3:1"] > episode.source_worth["D1:1"]       # the SweetLeaf exchange first


def test_fact_refinement_reads_a_new_value_from_the_statements_structure():
    """RecMem's offline refiner decides that a new fact updates a known one with the calibrated update model, from
    who holds each fact and what changed, not from shared words: a count said in other words updates the known
    fact, the same count about someone else does not, and the same fact said again is dropped as known."""
    from engine.llm.embedder import Embedder
    from engine.llm.offline_recmem import refine_facts

    known = [{"id": "u7", "time": "2024-03-01T10:00:00", "text": "On 1 March 2024, Tom: I've got two cats, Pepper and Salt."}]

    def refined(speaker: str, text: str) -> dict:
        unit = {"id": "u9", "time": "2024-03-20T10:00:00", "messages": [{"speaker": speaker, "text": text}]}
        return refine_facts({"episode": {"id": "episode 1", "text": ""}, "units": [unit], "known": known}, Embedder())

    mine = refined("Tom", "We adopted a kitten last weekend, so now it's three cats in the flat.")["facts"]
    assert [(f["updates"], f["type"]) for f in mine] == [("u7", "TIME_ANCHORED_UPDATE")]
    theirs = refined("Ana", "My sister has got three cats in her flat now, all of them ginger.")["facts"]
    assert theirs and all(f["updates"] == "" for f in theirs)
    # said again, compared without the known fact's date and name: known, neither a new fact nor an update
    again = refined("Tom", "I have got two cats, Pepper and Salt.")
    assert again["facts"] == [] and [d["known"] for d in again["dropped"]] == ["u7"]

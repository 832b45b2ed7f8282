"""GAM: the two-state machine and its sparse triggers, the detector's validation, topic linking as reviewed
proposals (accept, reject, undo read back from the database, on SQLite and PostgreSQL), faults that fail
closed, and graph-guided retrieval with its factors and provenance."""
from __future__ import annotations

import json
import math
import subprocess
import sys

import pytest

from engine.core.oplog import OpKind
from engine.core.proposal import GateVerdict, Status
from engine.core.schema import SettingError
from engine.core.tiling import depth_scores, texttiling
from engine.engines.gam.buffering import plan_trigger, validate
from engine.engines.gam.schema import EPISODIC_BUFFER, LINKING, Kind, Life, Op, ReasonCode, Rel
from engine.engines.gam.settings import MEETING_DETECTOR, GamSettings
from engine.engines.gam.tokens import counter
from engine.loaders import load_conversation
from engine.session import open_session
from engine.store.log_store import Store
from tests.conftest import BACKENDS, ROOT, turn
from tests.test_operators import ScriptedBackend as Scripted  # answers the named roles with fixed text

DEMO = ROOT / "datasets" / "demo" / "demo.jsonl"

RUNNING = [("Jon", "I ran my third half marathon along the river course on Sunday."),
           ("Maya", "Amazing! How long did the half marathon take you this time?"),
           ("Jon", "One hour fifty, my best half marathon time so far, the river path was flat."),
           ("Maya", "Are you training for a full marathon next spring?"),
           ("Jon", "Yes, the Bridges marathon in April, I run five mornings a week now."),
           ("Maya", "Five runs a week sounds brutal for your knees.")]
KITTEN = [("Maya", "Totally different news: I adopted a grey kitten from the shelter."),
          ("Jon", "A kitten! What did you name the kitten?"),
          ("Maya", "Her name is Miso, she sleeps on my keyboard all day."),
          ("Jon", "Does Miso get along with the neighbour's old cat?"),
          ("Maya", "Miso hisses at the old cat but steals his food bowl."),
          ("Jon", "Classic kitten behaviour, she will rule the house soon.")]
RACE = [("Maya", "Which half marathon was it, the river one again?"),
        ("Jon", "Yes, the river half marathon, the same course as last year."),
        ("Maya", "Was the river course crowded this year?"),
        ("Jon", "Very crowded at the start of the half marathon, then the runners spread out along the river."),
        ("Maya", "Will you run the river half marathon again next year?"),
        ("Jon", "Definitely, I want to beat one hour forty-five on that river course.")]
MOVING = [("Jon", "Our landlord sold the building so we must move out by March."),
          ("Maya", "Oh no, where are you going to look for a flat?"),
          ("Jon", "Probably Riverside, the rent there is lower but the train is slow.")]


def conversation(*sessions):
    out, i = [], 0
    for s, lines in enumerate(sessions, 1):
        for speaker, text in lines:
            i += 1
            out.append(turn(i, speaker, text, str(s), s))
    return out


def gam(make_db, **settings):
    return open_session(make_db(), engine="gam", settings=settings or None)


def records(eng, key: str) -> list[dict]:
    return [op.payload["value"] for op in eng.store.ops(kinds=[OpKind.ENGINE_STATE_SET]) if op.payload["key"] == key]


# -- the two-state machine ------------------------------------------------------------------------------
def test_buffering_never_writes_the_topic_network_and_a_session_end_triggers_consolidation(make_db):
    eng = gam(make_db)
    turns = conversation(RUNNING + KITTEN, MOVING)
    for t in turns[:12]:
        eng.ingest(t)
    assert {n.kind for n in eng.state.nodes.values()} == {Kind.EVENT}
    assert all(n.status == Life.BUFFERED for n in eng.state.nodes.values())
    assert set(eng.state.buffer(EPISODIC_BUFFER)) == set(eng.state.nodes)
    assert eng.state.edge_counts() == {Rel.SEQUENTIAL: 11}
    assert not records(eng, "phase") and not eng.state.runs
    report = eng.ingest(turns[12])                        # the first utterance of session 2
    [trigger] = report.details["triggers"]
    assert trigger["trigger"] == "session_end" and "session 1 ended" in trigger["cause"]
    phases = records(eng, "phase")
    assert [p["phase"] for p in phases] == ["consolidating", "episodic"]
    assert phases[0]["trigger"] == "session_end" and phases[0]["cause"] == trigger["cause"]
    state = eng.state
    topics = [n for n in state.nodes.values() if n.kind == Kind.TOPIC]
    assert topics and sorted(m for t in topics for m in t.members) == list(range(1, 13))
    for t in topics:
        assert t.raw == "\n".join(state.nodes[m].raw for m in t.members)          # c_raw
        assert t.summary and t.keywords                                             # c_sum
        assert t.source_ids == [sid for m in t.members for sid in state.nodes[m].source_ids]
        assert {(t.id, m, Rel.CROSS) for m in t.members} <= set(state.edges)
        assert all(state.nodes[m].status == Life.ARCHIVED for m in t.members)
    assert list(state.buffer(EPISODIC_BUFFER)) == [report.unit_id]
    assert state.nodes[report.unit_id].status == Life.BUFFERED and report.unit_id > max(t.id for t in topics)
    # every record that wrote a topic node or a topic edge lies inside a consolidating phase
    inside = False
    for op in eng.store.ops():
        if op.kind == OpKind.ENGINE_STATE_SET and op.payload["key"] == "phase":
            inside = op.payload["value"]["phase"] == "consolidating"
        elif op.kind == OpKind.NODE_CREATED and op.payload["node"]["kind"] == Kind.TOPIC or \
                op.kind == OpKind.EDGE_ADDED and op.payload["edge"]["type"] in (*Rel.TOPIC, Rel.CROSS):
            assert inside, f"topic network written while buffering at seq {op.seq}"


def test_overflow_triggers_at_t_max_tokens_of_the_named_tokenizer(make_db):
    eng = gam(make_db, t_max=80, min_segment=2, tiling_window=2)
    count = counter("minilm-wordpiece")
    total = 0
    for t in conversation(RUNNING + KITTEN):
        before = total + count(t.raw)
        report = eng.ingest(t)
        assert report.details["buffer"]["tokens"] == before            # counted by the MiniLM WordPiece tokenizer
        if before > 80:
            [trigger] = report.details["triggers"]
            assert trigger["trigger"] == "overflow" and f"{before} tokens > T_max 80" in trigger["cause"]
            kept = eng.state.buffer(EPISODIC_BUFFER)
            total = sum(eng.state.nodes[i].attrs["tokens"] for i in kept)
            assert eng.state.engine_state["buffer_tokens"] == total <= 0.75 * 80
        else:
            assert not report.details["triggers"]
            total = before
    overflows = [r for r in records(eng, "trigger") if r["trigger"] == "overflow"]
    assert len(overflows) >= 2
    assert all(r["tokens"] > 80 and r["tokenizer"] == "minilm-wordpiece" for r in overflows)


def test_tail_policies():
    s = GamSettings(t_max=100)
    tokens = [10] * 10
    assert plan_trigger(10, [4, 7], "session_end", tokens, s).consolidate == ((0, 3), (4, 6), (7, 9))
    keep = plan_trigger(10, [4, 7], "session_end", tokens, GamSettings(session_end_tail="keep"))
    assert keep.consolidate == ((0, 3), (4, 6)) and keep.kept == (7, 9)
    over = plan_trigger(10, [4, 7], "overflow", tokens, s)
    assert over.consolidate == ((0, 3), (4, 6)) and over.kept == (7, 9) and "kept" in over.policy
    assert plan_trigger(10, [], "overflow", tokens, s).consolidate == ((0, 9),)                 # forced cut
    long_tail = plan_trigger(10, [2], "overflow", tokens, s)                                    # 80 > 0.5 * 100
    assert long_tail.consolidate == ((0, 1), (2, 9)) and long_tail.kept is None and "forced cut" in long_tail.policy
    assert plan_trigger(10, [4], "overflow", tokens, GamSettings(overflow_tail="cut")).kept is None
    assert plan_trigger(10, [4], "manual", tokens, GamSettings(manual_tail="keep")).kept == (4, 9)


# -- the detector -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("answer, code", [([3, 1], ReasonCode.BOUNDARY_ORDER), ([11], ReasonCode.BOUNDARY_RANGE),
                                          ([-1], ReasonCode.BOUNDARY_RANGE),
                                          ([4, 4], ReasonCode.BOUNDARY_DUPLICATE)])
def test_a_bad_detector_answer_is_refused_whole_and_the_replay_goes_on(make_db, answer, code):
    assert validate(answer, 12).code == code
    eng = gam(make_db)
    eng.llm.backend = Scripted(eng.llm.backend, {"boundary_detection": json.dumps({"boundaries": answer})})
    turns = conversation(RUNNING + KITTEN, MOVING)
    for t in turns:
        eng.ingest(t)
    [trigger] = records(eng, "trigger")
    assert trigger["reason_code"] == code and trigger["answer"] == answer and trigger["boundaries"] == []
    [topic] = [n for n in eng.state.nodes.values() if n.kind == Kind.TOPIC]      # nothing of it used: one segment
    assert topic.members == list(range(1, 13))
    [p] = [p for p in eng.state.proposals.values() if p.op == Op.TOPIC]
    assert code in p.note and p.status == Status.APPLIED
    assert eng.state.turn == len(turns)


def test_a_good_detector_answer_cuts_the_buffer_where_it_says(make_db):
    assert validate([5], 12).indices == [5] and validate([5], 12).starts == (6,)
    eng = gam(make_db)
    eng.llm.backend = Scripted(eng.llm.backend, {"boundary_detection": '{"boundaries": [5]}'})
    for t in conversation(RUNNING + KITTEN, MOVING[:1]):
        eng.ingest(t)
    [trigger] = records(eng, "trigger")
    assert trigger["reason_code"] is None and trigger["boundaries"] == [5]
    assert trigger["segments"] == [[1, 6], [7, 12]]
    topics = sorted((n for n in eng.state.nodes.values() if n.kind == Kind.TOPIC), key=lambda n: n.id)
    assert [t.members for t in topics] == [[1, 2, 3, 4, 5, 6], [7, 8, 9, 10, 11, 12]]
    assert (6, 7, Rel.SEQUENTIAL) not in eng.state.edges            # each archived event graph is its own
    assert (5, 6, Rel.SEQUENTIAL) in eng.state.edges


def test_the_offline_detector_finds_the_change_of_topic(make_db):
    eng = gam(make_db)
    turns = conversation(RUNNING + KITTEN)
    vectors = eng.embedder.embed([t.text for t in turns])
    depth = depth_scores(vectors, 3)
    assert int(depth.argmax()) == 5                       # the gap between utterances 5 and 6 is the deepest
    assert texttiling(vectors, 3, float(depth[5]), 3) == [6]
    assert texttiling(vectors, 3, float(depth[5]) + 0.01, 3) == []


def test_a_chat_session_is_cut_where_its_subject_changes_and_not_where_it_keeps_it(make_db):
    """The default detector (the chat calibration) consolidates a session of running talk then kitten talk as two
    topics, cut at the change; a session whose talk stays on the race throughout (two strands of it, interleaved)
    stays one topic. At the meeting fit (a least segment of 10 utterances) the first session would be one topic
    too: GAM would partition by session, the paper's baseline."""
    def session_topics(sessions, **settings) -> list[list[int]]:
        eng = gam(make_db, **settings)
        turns = conversation(*sessions)
        for t in turns[:len(sessions[0]) + 1]:                  # session 1, then the turn that ends it
            eng.ingest(t)
        return sorted(n.members for n in eng.state.nodes.values() if n.kind == Kind.TOPIC)

    assert session_topics([RUNNING + KITTEN, MOVING]) == [list(range(1, 7)), list(range(7, 13))]
    assert session_topics([[t for pair in zip(RUNNING, RACE) for t in pair], MOVING]) == [list(range(1, 13))]
    assert session_topics([RUNNING + KITTEN, MOVING], **MEETING_DETECTOR) == [list(range(1, 13))]


# -- topic linking -----------------------------------------------------------------------------------------
@pytest.fixture(scope="module", params=BACKENDS)
def backend(request):
    return request.param


def linked_demo(make_db, **settings):
    """The demo's first four sessions with topic edges left for a person."""
    conv = load_conversation(DEMO)
    eng = open_session(make_db(), engine="gam", settings={"link_review": "person", **settings})
    for t in [t for t in conv.turns if t.session in ("1", "2", "3", "4")]:
        eng.ingest(t)
    return eng


def stored_edges(url: str) -> set[tuple[int, int, str]]:
    """The edges as a fresh reader of the database sees them."""
    store = Store(url)
    return {(r["src"], r["dst"], r["type"]) for r in store.table_rows()["edge"]}


def test_topic_edges_are_proposals_a_person_accepts_rejects_and_undoes(make_db):
    eng = linked_demo(make_db)
    url = eng.store.url
    topics = [u for u in eng.state.nodes.values() if u.kind == "topic"]
    assert len(topics) > 3                # three sessions ended (the fourth is buffered), cut inside too
    assert eng.process(LINKING).pending() == len(topics)           # every topic waits to be linked
    assert not any(t in Rel.TOPIC for t in eng.state.edge_counts())
    props = eng.propose(manual=True, process=LINKING)
    assert props and all(p.op == Op.RELATE for p in props)
    passing = [p for p in props if p.status == Status.PENDING and p.gate == GateVerdict.PASS]
    assert passing
    chosen = passing[0]
    new, old = chosen.targets
    assert chosen.plan["segment"] == [str(m) for m in eng.state.nodes[new].members]      # its inputs
    assert records(eng, "phase")[-1]["phase"] == "consolidating"
    edge = (new, old, chosen.plan["relation"])
    eng.apply({chosen.id: True}, decided_by="ana", defer_rest=True)
    assert edge in stored_edges(url)
    fresh = open_session(url, create=False)
    assert fresh.state.proposals[chosen.id].status == Status.APPLIED
    assert fresh.state.proposals[chosen.id].decided_by == "ana"
    assert fresh.state.edges[edge].confidence == chosen.confidence
    assert fresh.state.engine_state["phase"]["phase"] == "episodic"
    eng.undo_last_run()
    assert edge not in stored_edges(url)
    assert eng.process(LINKING).pending() == len(topics)            # the topics wait again
    again = eng.propose(manual=True, process=LINKING)
    same = next(p for p in again if p.targets == chosen.targets)
    eng.apply({same.id: False}, decided_by="ana", defer_rest=True)
    assert edge not in stored_edges(url)
    assert open_session(url, create=False).state.proposals[same.id].status == Status.REJECTED


def test_the_gate_links_only_above_tau_and_never_unrelated(make_db):
    eng = linked_demo(make_db)
    props = eng.process(LINKING).run().proposals
    edges = {k: e for k, e in eng.state.edges.items() if e.type in Rel.TOPIC}
    assert edges
    for p in props:
        label = (p.plan or {}).get("relation")
        key = (p.targets[0], p.targets[1], label)
        if p.status == Status.APPLIED:
            assert label in Rel.TOPIC and p.confidence > 0.5 and edges[key].confidence == p.confidence
        else:
            assert key not in edges
            assert p.reason_code in (ReasonCode.LOW_CONF, ReasonCode.UNRELATED, ReasonCode.DUPLICATE)
    assert all(e.src > e.dst for e in edges.values())               # new topic -> earlier topic


def test_a_relation_label_outside_the_set_is_refused(make_db):
    eng = linked_demo(make_db)
    eng.llm.backend = Scripted(eng.llm.backend, {"topic_relation": '{"relation": "friendship", "confidence": 0.97}'})
    before = dict(eng.state.edges)
    props = eng.process(LINKING).run().proposals
    assert props and {p.reason_code for p in props} == {ReasonCode.LABEL_FAIL}
    assert all(p.status == Status.SKIPPED for p in props) and eng.state.edges == before


def test_garbage_from_the_relation_role_fails_closed(make_db):
    eng = linked_demo(make_db)
    eng.llm.backend = Scripted(eng.llm.backend, {"topic_relation": "a strong support, 0.9"})
    before = dict(eng.state.edges)
    props = eng.process(LINKING).run().proposals
    assert {p.reason_code for p in props} == {ReasonCode.JSON_PARSE_FAIL} and eng.state.edges == before


def test_a_setting_out_of_range_is_refused_with_its_reason_code(make_db):
    for bad in ({"t_max": 10}, {"tau": 1.5}, {"overflow_tail": "maybe"}, {"k": "ten"}):
        with pytest.raises(SettingError, match=ReasonCode.SETTING_OUT_OF_RANGE):
            GamSettings.from_dict(bad)
    with pytest.raises(SettingError, match=r"depth_threshold=3.0 is out of range: it takes 0.0 to 2.0"):
        open_session(make_db(), engine="gam", settings={"depth_threshold": 3.0})


# -- retrieval -------------------------------------------------------------------------------------------
def test_retrieval_anchors_on_topics_drills_down_and_shows_each_factor(make_db):
    conv = load_conversation(DEMO)
    eng = gam(make_db)
    for t in conv.turns[:60]:
        eng.ingest(t)
    eng.end_of_stream()
    state = eng.state
    res = eng.retrieve("When did Jon run the Bridges half marathon?", k=5)
    assert res.anchors and all(state.nodes[a].kind == Kind.TOPIC for a, _ in res.anchors)
    for r in res.candidates:
        assert state.nodes[r.id].kind == Kind.EVENT
        assert math.isclose(r.score, math.prod(r.factors.values()), rel_tol=1e-4, abs_tol=1e-5)
        assert set(r.factors) == {"P_sem", "β_time", "β_role", "β_conf"}
        if r.path:
            assert state.nodes[r.anchor].kind == Kind.TOPIC and r.path[-1].type == Rel.CROSS
            assert all(h.type in Rel.TOPIC for h in r.path[:-1]) and len(r.path) <= 2
            at = r.anchor
            for h in r.path:
                assert h.src == at and h.edge_key in state.edges
                at = h.dst
    top = res.units[0]
    assert top.factors["β_time"] == 1.4 and top.factors["β_role"] == 1.4     # "when" + Jon named
    placements = eng.explain(res, [top.id, res.candidates[-1].id])
    assert placements[top.id].returned and dict(placements[top.id].signals.factors) == top.factors
    assert any(r.factors["β_conf"] == 1.2 for r in res.candidates)


def test_memwb_replays_the_demo_with_gam_and_exports_retrieves_and_checks_it(tmp_path):
    """The command line as a user runs it: replay offline, then the schema, the export (event and topic nodes, a
    topic's source_ids the turns of its segment, archived events, cross edges), retrieve --json (every hop of a
    path an exported edge) and check."""
    db = tmp_path / "gam.sqlite"

    def memwb(*args) -> str:
        proc = subprocess.run([sys.executable, "-m", "engine.cli", *map(str, args)], cwd=ROOT, capture_output=True,
                              text=True, timeout=1200)
        assert proc.returncode == 0, f"memwb {args} failed ({proc.returncode}):\n{proc.stderr}"
        return proc.stdout

    assert memwb("replay", DEMO, "--db", db, "--engine", "gam", "--quiet").startswith("turns=102 ")
    schema = json.loads(memwb("schema", "--engine", "gam"))
    assert {k["name"] for k in schema["node_kinds"]} == {Kind.EVENT, Kind.TOPIC}
    export = json.loads(memwb("export", "--db", db, "--json"))
    units = {u["id"]: u for u in export["units"]}
    events = [u for u in units.values() if u["kind"] == Kind.EVENT]
    topics = [u for u in units.values() if u["kind"] == Kind.TOPIC]
    assert len(events) == 102 and topics and all(u["status"] == Life.ARCHIVED for u in events)
    edges = {(e["src"], e["dst"], e["type"]) for e in export["edges"]}
    for t in topics:
        members = [units[m] for m in t["members"]]
        assert t["source_ids"] == [sid for m in members for sid in m["source_ids"]]
        assert all((t["id"], m["id"], Rel.CROSS) in edges for m in members)
    res = json.loads(memwb("retrieve", "--db", db, "--query", "Where does Maya work now?", "--json"))
    assert res["units"] and any(u["path"] for u in res["units"])
    for u in res["units"]:
        at = u["anchor"]
        for hop in u["path"]:
            assert hop["from"] == at and ((hop["from"], hop["to"], hop["type"]) in edges
                                          or (hop["to"], hop["from"], hop["type"]) in edges)
            at = hop["to"]
        assert set(u["factors"]) == {"P_sem", "β_time", "β_role", "β_conf"}
    assert memwb("check", "--db", db).startswith("ok: ")

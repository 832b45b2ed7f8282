"""The helpers behind the MemLoom views, on hand-made log records and states (no Streamlit, no model):
lifecycle lanes and the swimlane figure, causes, routing tables, reverse hops in provenance paths, and
cited evidence on review cards."""
from __future__ import annotations

import pandas as pd

from engine.core.edge import Edge
from engine.core.node import Node
from engine.core.oplog import OpKind, OpRecord
from engine.core.ops import apply
from engine.core.proposal import Proposal
from engine.core.state import MemoryState
from engine.engines import engine_schema
from engine.retrieval.result import Hop, RetrievalResult, RetrievedUnit
from workbench import retrieval_view as rv
from workbench.graph import lifecycle as lv
from workbench.review import audit as audit_view
from workbench.review import proposal_text
from workbench.review import queue as review_view
from workbench.text import MISSING

SCHEMA = engine_schema("memloom")
XSS = "<script>alert(1)</script>"


def _node(uid: int, kind: str, status: str, session: str = "1", members=(), raw: str = "", summary: str = "",
          turn: int = 1) -> Node:
    return Node(id=uid, raw=raw, summary=summary or f"node {uid}", keywords=[], time=f"2024-01-0{session}T10:{uid:02d}",
                kind=kind, source_ids=[f"D{session}:{uid}"] if kind == "turn" else [], speakers=["Ana"],
                session=session, status=status, created_turn=turn, members=list(members))


def _created(node: Node, turn: int, run: str | None = None, seq: int = 0) -> OpRecord:
    return OpRecord(OpKind.NODE_CREATED, {"node": node.payload()}, turn=turn, run_id=run, actor="online",
                    seq=seq)


def _status(uid: int, was: str, status: str, turn: int, cause: dict, run: str | None = None,
            seq: int = 0) -> OpRecord:
    return OpRecord(OpKind.STATUS_CHANGED, {"node": uid, "status": status, "was": was, "cause": cause}, turn=turn,
                    run_id=run, actor="steward" if run else "online", seq=seq)


MATURITY = {"rule": "maturity", "M": 1.2083, "tau": 1.2, "n": 1, "H": -0.0, "V": 16}
SHIFT = {"rule": "session_shift", "from_session": "1", "to_session": "2"}


def _log() -> list[OpRecord]:
    """Two events and a sentence: e2 provisional → active (turn 1) → closed (turn 4, session shift); e6 stays
    provisional; e9 is made by a run after turn 5 and retracted (undone) after turn 6."""
    return [
        _created(_node(1, "turn", "buffered"), 1, seq=1),
        _created(_node(2, "event", "provisional", members=[1]), 1, seq=2),
        _status(2, "provisional", "active", 1, MATURITY, seq=3),
        _created(_node(6, "event", "provisional", session="2", turn=3), 3, seq=4),
        _status(2, "active", "closed", 4, SHIFT, seq=5),
        _status(1, "buffered", "grounded", 5, {"rule": "curated", "event": 2}, run="run-0001", seq=6),
        _created(_node(9, "event", "provisional", session="2", turn=5), 5, run="run-0001", seq=7),
        OpRecord(OpKind.NODE_RETRACTED, {"node": 9, "was": {}}, turn=6, run_id="undo-0001", actor="human", seq=8),
    ]


def _state() -> MemoryState:
    state = MemoryState(schema=SCHEMA)
    for op in _log():
        if op.kind != OpKind.NODE_RETRACTED:
            apply(state, op)
    return state


# -- causes -------------------------------------------------------------------------------------------------
def test_cause_text_reads_the_rule_and_its_figures():
    assert lv.cause_text(MATURITY) == "maturity · M 1.208 ≥ τ 1.2 · n 1 · H 0 · V 16"
    assert lv.cause_text(SHIFT) == "session shift · from session 1 · to session 2"
    assert lv.cause_text({"rule": "timeline_repair", "of": [3, 5]}) == "timeline repair · of u3, u5"
    assert lv.cause_text({"rule": "maturity", "M": 0.9, "tau": 1.2}) == "maturity · M 0.9 < τ 1.2"
    assert lv.cause_text({}) == MISSING and lv.cause_text(None) == MISSING


# -- lanes --------------------------------------------------------------------------------------------------
def test_lanes_fold_creation_transitions_and_retraction():
    lanes = lv.lifecycle_lanes(_log())
    assert set(lanes) == {1, 2, 6, 9}
    e2 = lanes[2]
    assert (e2.kind, e2.first_status, e2.created) == ("event", "provisional", 1)
    assert [(t.was, t.status, t.x, t.cause.get("rule")) for t in e2.transitions] == [
        ("provisional", "active", 1, "maturity"), ("active", "closed", 4, "session_shift")]
    assert e2.segments(now=6) == [(1, 1, "provisional"), (1, 4, "active"), (4, 6, "closed")]
    assert e2.status_at(3) == "active" and e2.status_at(4) == "closed"
    assert lanes[1].transitions[0].x == 5.5 and "run-0001 (after turn 5)" == lanes[1].transitions[0].who
    assert lanes[2].transitions[0].who == "online ingest of turn 1"
    assert lanes[9].created == 5.5 and lanes[9].ended == 6.5
    assert lanes[9].segments(now=8) == [(5.5, 6.5, "provisional")]          # a retracted node's lane stops
    assert set(lv.lifecycle_lanes(_log(), kinds=["event"])) == {2, 6, 9}
    assert lv.kinds_with_transitions(lanes) == ["turn", "event"]           # most transitions per node first
    assert lv.default_kind(_state(), lv.kinds_with_transitions(lanes)) == "event"   # the kind with members


def test_select_lanes_caps_to_the_most_recent_and_keeps_the_pinned_one():
    lanes = {i: lv.Lane(i, "event", float(i), "provisional") for i in range(1, 11)}
    chosen = lv.select_lanes(lanes, range(1, 11), max_lanes=3)
    assert [ln.node for ln in chosen.lanes] == [8, 9, 10] and chosen.matched == 10 and chosen.hidden == 7
    chosen = lv.select_lanes(lanes, range(1, 11), max_lanes=3, pinned=[2])
    assert [ln.node for ln in chosen.lanes] == [2, 9, 10]
    assert [ln.node for ln in lv.select_lanes(lanes, [4, 99, 2], 40).lanes] == [2, 4]     # filters, then order


def test_lifecycle_figure_draws_a_lane_per_node_in_schema_colours_with_cause_markers():
    state = _state()
    lanes = lv.lifecycle_lanes(_log(), kinds=["event"])
    shown = [lanes[2], lanes[6]]
    fig = lv.lifecycle_figure(state, shown, now=6)
    bars = [t for t in fig.data if t.type == "bar"]
    assert {t.name: t.marker.color for t in bars} == {
        SCHEMA.status(s).label: SCHEMA.status(s).color for s in ("provisional", "active", "closed")}
    assert {y for t in bars for y in t.y} == {"u2 · s1", "u6 · s2"}
    closed = next(t for t in bars if t.name == "closed")
    assert list(closed.base) == [4] and list(closed.x) == [2]
    markers = next(t for t in fig.data if t.type == "scatter")
    assert list(markers.x) == [1, 4] and list(markers.y) == ["u2 · s1", "u2 · s1"]
    assert "M 1.208 ≥ τ 1.2" in markers.hovertext[0] and "session shift" in markers.hovertext[1]
    assert list(fig.layout.yaxis.categoryarray) == ["u6 · s2", "u2 · s1"]    # first created on top
    assert fig.layout.height == 110 + lv.LANE_PX * 2
    frame = lv.transitions_frame(shown, SCHEMA)
    assert list(frame["node"]) == ["u2", "u2"] and list(frame["to"]) == ["active", "closed"]
    assert frame["cause"].iloc[0] == lv.cause_text(MATURITY)


def test_lifecycle_figure_escapes_summaries():
    state = _state()
    state.nodes[2].summary = XSS
    fig = lv.lifecycle_figure(state, [lv.lifecycle_lanes(_log())[2]], now=6)
    text = " ".join(h for t in fig.data if t.type == "bar" for h in t.hovertext)
    assert "<script>" not in text and "&lt;script&gt;" in text


def test_status_colours_fall_back_to_a_palette():
    colours = lv.status_colors(engine_schema("allmem"), ["visible", "archived"])
    assert colours["visible"] != colours["archived"] and all(c.startswith("#") for c in colours.values())
    assert lv.status_colors(SCHEMA, ["active"]) == {"active": SCHEMA.status("active").color}


def test_no_two_statuses_share_a_colour_in_the_lifecycle_chart():
    """MemLoom declares colours for its event statuses only; its records' buffered and grounded took the palette's
    first two, which are closed's blue and archived's grey, so a buffered record was drawn as a closed event."""
    for name in ("memloom", "allmem", "gam", "recmem"):
        schema = engine_schema(name)
        statuses = [s.name for s in schema.statuses]
        colours = lv.status_colors(schema, statuses)
        assert len(set(colours.values())) == len(statuses), (name, colours)
        assert all(colours[s.name] == s.color for s in schema.statuses if s.color)


def test_the_lifecycle_legend_sits_above_the_plot_clear_of_the_turn_axis_title():
    fig = lv.lifecycle_figure(_state(), [lv.lifecycle_lanes(_log())[2]], now=6)
    assert fig.layout.xaxis.title.text == "turn number"
    assert fig.layout.legend.y > 1 and fig.layout.legend.yanchor == "bottom"


# -- routing ----------------------------------------------------------------------------------------------------
ROUTING = {"decision": "CONTINUE", "tau_new": 0.3, "chosen": 6,
           "candidates": [{"event": 6, "cosine": 0.39, "delta_days": 0.002, "b_sw": 1, "score": 0.42},
                          {"event": 2, "cosine": 0.25, "delta_days": 0.001, "b_sw": 0, "score": 0.21}]}


def test_routing_frame_lists_every_candidate_against_the_threshold():
    frame = lv.routing_frame(ROUTING, _state())
    assert list(frame.columns[:5]) == ["rank", "event", "chosen", "score S_j", "vs τ_new"]
    assert list(frame["event"]) == ["u6", "u2"] and list(frame["score S_j"]) == [0.42, 0.21]
    assert list(frame["vs τ_new"]) == ["≥ 0.3", "< 0.3"] and list(frame["chosen"]) == ["◀ chosen", ""]
    assert list(frame["Δ days"]) == [0.002, 0.001] and list(frame["B_sw"]) == [1, 0]
    assert list(frame["status now"]) == ["provisional", "closed"]
    extra = lv.routing_frame({**ROUTING, "candidates": [{"event": 6, "score": 0.5, "novelty": 0.1}]}, _state())
    assert "novelty" in extra.columns                                  # unknown figures keep their name
    assert lv.routing_frame({"decision": "NEW_EVENT", "candidates": []}, _state()).empty


def test_routing_sentence_follows_the_figures():
    assert lv.routing_sentence(ROUTING) == ("CONTINUE: best score 0.420 ≥ τ_new 0.30; the record joined u6 "
                                            "(score 0.420).")
    new = {**ROUTING, "decision": "NEW_EVENT", "chosen": 12,
           "candidates": [{**c, "score": 0.2} for c in ROUTING["candidates"]]}
    assert lv.routing_sentence(new) == "NEW_EVENT: best score 0.200 < τ_new 0.30; a new event u12 was opened."
    first = {"decision": "NEW_EVENT", "tau_new": 0.3, "candidates": [], "chosen": 2}
    assert lv.routing_sentence(first) == "NEW_EVENT: no joinable candidate; a new event u2 was opened."
    gated = {**new, "decision": "GATED", "chosen": 2}                  # joined below τ by another rule
    assert lv.routing_sentence(gated).startswith("GATED: best score 0.200 < τ_new 0.30; the record joined u2")
    assert lv.joined_candidate(gated) and not lv.joined_candidate(new)


def test_routing_figure_marks_the_threshold_and_the_chosen_event():
    fig = lv.routing_figure(ROUTING)
    bar = fig.data[0]
    assert list(bar.y) == ["u6", "u2"] and list(bar.x) == [0.42, 0.21]
    assert bar.marker.color[0] != bar.marker.color[1]
    assert any(s.x0 == 0.3 and s.x1 == 0.3 for s in fig.layout.shapes)
    assert any("τ_new = 0.3" in a.text for a in fig.layout.annotations)
    assert "orange: the event the record joined" in fig.layout.xaxis.title.text
    opened = lv.routing_figure({**ROUTING, "decision": "NEW_EVENT", "chosen": 12,
                                "candidates": [{**c, "score": 0.2} for c in ROUTING["candidates"]]})
    assert len(set(opened.data[0].marker.color)) == 1                 # no bar is orange: none was taken
    assert opened.layout.xaxis.title.text == "routing score S_j (no candidate taken: the record opened u12)"


def test_attrs_frame_labels_the_event_figures():
    frame = lv.attrs_frame({"n": 2, "p": {"Jon": 0.5, "Maya": 0.5}, "V": 39, "last_turn": 2})
    assert list(frame["figure"]) == ["n (evidence count)", "p (participant distribution)", "V (token mass)",
                                     "last evidence at turn"]
    assert list(frame["value"]) == ["2", "Jon 0.5, Maya 0.5", "39", "2"]


# -- provenance with reverse hops -----------------------------------------------------------------------------
def _path_state() -> MemoryState:
    state = MemoryState(schema=SCHEMA)
    for n in (_node(3, "turn", "grounded", raw="Ana: the landlord sold the building"),
              _node(7, "event", "closed", members=[3]), _node(12, "event", "active", members=[13]),
              _node(13, "turn", "grounded", raw="Ana: I missed two deadlines")):
        apply(state, OpRecord(OpKind.NODE_CREATED, {"node": n.payload()}))
    for e in (Edge(7, 12, "CAUSAL_FOLLOW", "run-0001", 0.8, 5, evidence=[3, 13]), Edge(7, 3, "evidence"),
              Edge(12, 13, "evidence")):
        apply(state, OpRecord(OpKind.EDGE_ADDED, {"edge": e.to_dict()}))
    return state


def _result() -> RetrievedUnit:
    return RetrievedUnit(id=3, visible=False, score=1.0, dense=0.1, lexical=0.0, anchor=12, hop=2,
                         path=[Hop(12, 7, "CAUSAL_FOLLOW", reverse=True), Hop(7, 3, "evidence")],
                         source_ids=["D1:3"], time="t", raw="Ana: the landlord sold the building", kind="turn",
                         status="grounded")


def test_reverse_hops_are_named_and_highlight_the_stored_edge():
    state = _path_state()
    r = _result()
    assert rv.path_text(state, r, "seed") == "seed u12 —CAUSAL_FOLLOW (reverse)→ u7 —evidence→ u3 [grounded]"
    assert rv.path_text(state, r, "seed", seeds=[99]).startswith("direct u12")
    assert rv.path_edges([r]) == [(7, 12, "CAUSAL_FOLLOW"), (7, 3, "evidence")]
    assert all(k in state.edges for k in rv.path_edges([r]))
    assert rv.path_edge_labels(r) == {(7, 12, "CAUSAL_FOLLOW"): "hop 1 (reverse)", (7, 3, "evidence"): "hop 2"}
    hops = rv.hops_frame(state, r)
    assert list(hops["stored edge"]) == ["u7 —CAUSAL_FOLLOW→ u12", "u7 —evidence→ u3"]
    assert list(hops["direction"]) == ["reverse (against the stored edge)", "forward"]
    assert hops["cites"].iloc[0] == "u3, u13" and hops["confidence"].iloc[0] == "0.80"
    block = rv.paths_block(state, [r], ["D1:3"], "seed", [12])
    assert "seed u12 —CAUSAL_FOLLOW (reverse)→ u7" in block and "[D1:3*]" in block


def test_a_query_time_hop_is_shown_as_found_not_stored():
    """A logic link (MemLoom's freshness failsafe) walked no stored edge: the hop table says so."""
    state = _path_state()
    r = RetrievedUnit(id=3, visible=False, score=1.0, dense=0.1, lexical=0.0, anchor=13, hop=2,
                      path=[Hop(13, 7, "logic_link", reverse=True), Hop(7, 3, "evidence")], source_ids=["D1:3"],
                      time="t", raw="Ana: the landlord sold the building", kind="turn", status="grounded")
    hops = rv.hops_frame(state, r)
    assert list(hops["stored edge"]) == ["none: found at query time", "u7 —evidence→ u3"]
    assert list(hops["direction"]) == ["back to an earlier cause", "forward"]
    assert hops["confidence"].isna().iloc[0] and hops["cites"].iloc[0] == ""


def test_seed_word_comes_from_the_seeds_stage():
    assert rv.seed_word(SCHEMA) == "seed"
    assert rv.seed_word(engine_schema("allmem")) == "anchor"
    assert rv.seed_word(engine_schema("naive")) == "anchor"          # no seeds stage


def test_seed_and_expansion_tables_show_events_with_their_text():
    state = _path_state()
    res = RetrievalResult(query="q", anchors=[(12, 2.5)], candidates=[_result()], units=[_result()],
                          expansion=[{"id": 7, "parent": 12, "type": "CAUSAL_FOLLOW", "hop": 1, "reverse": True}],
                          source_ids=["D1:3"], context="")
    seeds = rv.anchors_frame(state, res)
    assert seeds.iloc[0].to_dict() == {"rank": 1, "unit": "u12", "score": 2.5, "kind": "event", "state": "● active",
                                       "records": 1, "source ids": "", "text": "node 12"}
    exp = rv.expansion_frame(state, res)
    assert exp["direction"].iloc[0] == "reverse" and exp["text"].iloc[0] == "node 7"
    tree = rv.expansion_tree(state, res, "seed")
    assert tree.splitlines()[0].startswith("seed #1 u12") and "—CAUSAL_FOLLOW (reverse)→ u7" in tree


# -- review cards ----------------------------------------------------------------------------------------------
def _relation(evidence: list) -> Proposal:
    return Proposal(id=4, run_id="run-0001", op="relation", targets=[7, 12], confidence=0.8, reason="cause",
                    plan={"type": "CAUSAL_FOLLOW", "evidence": evidence, "rationale": "because"},
                    detail={"type": "CAUSAL_FOLLOW", "threshold": 0.5})


def test_cited_evidence_resolves_to_records_of_either_event():
    state = _path_state()
    assert review_view.cited_nodes(state, _relation(["3", "13"])) == [3, 13]
    assert review_view.cited_nodes(state, _relation(["u13"])) == [13]
    assert review_view.cited_nodes(state, _relation(["3", "404"])) == []          # not every item is a node
    repair = Proposal(id=5, run_id="run-0001", op="repair", targets=[7, 12], confidence=0.9, reason="",
                      plan={"summary": "s", "keywords": ["3", "landlord"], "rationale": "r"})
    assert review_view.cited_nodes(state, repair) == []                            # keywords are words
    assert proposal_text.detail_text(_relation([])) == "CAUSAL_FOLLOW"
    assert proposal_text.detail_labels(_relation([])) == ["CAUSAL_FOLLOW"]
    frame = review_view.queue_frame(SCHEMA, [_relation(["3"])], {}, False)
    assert frame["detail"].iloc[0] == "CAUSAL_FOLLOW" and frame["targets"].iloc[0] == "u7 → u12"


def test_event_cards_show_cited_records_text_escaped():
    state = _path_state()
    state.nodes[3].raw = f"Ana: {XSS}"
    block = review_view.unit_html(state, 7, "source event", cited=[3, 13])
    assert "&lt;script&gt;" in block and "<script>" not in block and "★ cited" in block
    assert "<b>u3</b>" in block and "1 record(s); 1 cited shown" in block
    assert "u13" not in block                                                  # the other event's record
    plain = review_view.unit_html(state, 12, "target event")
    assert "1 first shown" in plain and "★ cited" not in plain and "I missed two deadlines" in plain
    assert proposal_text.sources_text([f"D1:{i}" for i in range(1, 15)]) == "D1:1, D1:2, D1:3, D1:4, … D1:14 (14)"
    assert isinstance(audit_view.reason_breakdown([_relation([])], SCHEMA), pd.DataFrame)

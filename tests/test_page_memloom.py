"""The pages on a MemLoom session (AppTest, the bundled demo, the real embedder): the routing decision on Replay,
event FSM shapes and the lifecycle timeline on the graph, steward relations reviewed and applied, causal paths
on Retrieval. Everything shown is checked against what the engine stored (its op log and state)."""
from __future__ import annotations

import html
import json
import re

import pytest
from apptest import start_app

from engine.core.oplog import OpKind
from engine.core.proposal import GateVerdict, Status
from engine.engines import engine_schema
from engine.engines.memloom.seeds import relevance
from workbench import retrieval_view as rv
from workbench.graph.groups import FOLD_ABOVE
from workbench.graph.lifecycle import cause_text
from workbench.review import decisions as review_decisions
from workbench.review import queue as review_view

pytestmark = pytest.mark.slow

SCHEMA = engine_schema("memloom")
EVENT = "event"
REPLAY, GRAPH = "../pages/1_replay.py", "../pages/2_memory_graph.py"
CONSOLIDATION, RETRIEVAL = "../pages/3_consolidation.py", "../pages/4_retrieval.py"


def _routing(wb, turn: int) -> dict:
    """The routing payload the engine stored on turn `turn`'s turn_ingested record."""
    op = next(wb.engine.store.ops(kinds=[OpKind.TURN_INGESTED], turns=(turn, turn)))
    return op.payload["routing"]


def _status_changes(wb, turn: int) -> list[dict]:
    return [op.payload for op in wb.engine.store.ops(kinds=[OpKind.STATUS_CHANGED], turns=(turn, turn))
            if op.actor == "online" and not op.run_id]


def _frame(at, column: str):
    return next(d.value for d in at.dataframe if column in d.value.columns)


def _graph_html(at) -> str:
    """The graph document of the page: the graph page's clickable component, or another page's iframe."""
    canvases, frames = at.get("bidi_component"), at.get("iframe")
    assert len(canvases) + len(frames) == 1
    return json.loads(canvases[0].proto.json)["html"] if canvases else frames[0].proto.srcdoc


def _graph_data(doc: str) -> tuple[list[dict], list[dict]]:
    m = re.search(r"var nodeData = (.*?), edgeData = (.*?);\n", doc, re.DOTALL)
    return json.loads(m.group(1)), json.loads(m.group(2))


def _timeline(at) -> dict:
    charts = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    return next(c for c in charts if any(t.get("name", "").startswith("transition") for t in c["data"])
                or c["layout"].get("xaxis", {}).get("title", {}).get("text") == "turn number")


@pytest.fixture(scope="module")
def replayed():
    """The demo in MemLoom through session 3 (events opened, matured, closed on session shifts)."""
    at, wb = start_app("memloom")
    wb.jump(next(i for i, t in enumerate(wb.conversation.turns) if t.session == "4"))
    at.switch_page(REPLAY).run()
    assert not at.exception
    return at, wb


# -- Replay ------------------------------------------------------------------------------------------------
def test_routing_table_shows_the_candidates_of_the_stored_record(replayed):
    at, wb = replayed
    head = wb.head
    turn = max(t for t in range(1, head + 1) if len(_routing(wb, t)["candidates"]) >= 2)
    wb.jump(turn)                                              # behind the head: a fold of the log
    at.run()
    assert not at.exception and wb.last_ingest is None
    routing = _routing(wb, turn)
    table = _frame(at, "score S_j")
    assert list(table["event"]) == [f"u{c['event']}" for c in routing["candidates"]]
    assert list(table["score S_j"]) == [c["score"] for c in routing["candidates"]]
    assert list(table["cosine"]) == [c["cosine"] for c in routing["candidates"]]
    assert list(table["Δ days"]) == [c["delta_days"] for c in routing["candidates"]]
    tau = routing["tau_new"]
    assert list(table["vs τ_new"]) == [f"≥ {tau:g}" if c["score"] >= tau else f"< {tau:g}"
                                       for c in routing["candidates"]]
    chosen = [e for e, mark in zip(table["event"], table["chosen"]) if mark]
    assert chosen == ([f"u{routing['chosen']}"] if any(c["event"] == routing["chosen"]
                                                       for c in routing["candidates"]) else [])
    sentence = next(s.value for s in [*at.success, *at.info] if str(s.value).startswith(routing["decision"]))
    assert f"u{routing['chosen']}" in sentence and f"τ_new {tau:.2f}" in sentence
    charts = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    bars = next(c for c in charts if c["data"][0].get("name") == "score S_j")
    assert list(bars["data"][0]["y"]) == [f"u{c['event']}" for c in routing["candidates"]]
    assert any(s.get("x0") == tau for s in bars["layout"].get("shapes", [])), "τ_new drawn as a line"
    wb.jump(head)
    at.run()


def test_transitions_with_their_causes_including_session_shift_closes(replayed):
    at, wb = replayed
    head = wb.head
    shift = next(t for t in range(1, head + 1) if any(c["cause"].get("rule") == "session_shift"
                                                       for c in _status_changes(wb, t)))
    wb.jump(shift)
    at.run()
    assert not at.exception
    changes = _status_changes(wb, shift)
    table = _frame(at, "cause")
    assert list(table["node"]) == [f"u{c['node']}" for c in changes]
    assert "session shift" in set(table["rule"])
    matured = next((t for t in range(1, head + 1) if any(c["cause"].get("rule") == "maturity"
                                                          for c in _status_changes(wb, t))), None)
    if matured is not None:
        wb.jump(matured)
        at.run()
        cause = next(c["cause"] for c in _status_changes(wb, matured) if c["cause"].get("rule") == "maturity")
        table = _frame(at, "cause")
        assert cause_text(cause) in set(table["cause"])
        assert "M " in cause_text(cause) and "≥ τ" in cause_text(cause) and f"V {cause['V']}" in cause_text(cause)
        figures = _frame(at, "figure")
        assert "n (evidence count)" in set(figures["figure"])
    wb.jump(head)
    at.run()


# -- Memory graph --------------------------------------------------------------------------------------------
def test_event_nodes_are_drawn_by_fsm_status_with_a_legend(replayed):
    at, wb = replayed
    at.switch_page(GRAPH).run()
    assert not at.exception
    doc = _graph_html(at)
    nodes, _ = _graph_data(doc)
    state = wb.engine.state
    by_id = {n["id"]: n for n in nodes if isinstance(n["id"], int)}
    events = [n for n in state.nodes.values() if n.kind == EVENT]
    assert events
    for e in events:
        spec = SCHEMA.status(e.status)
        assert by_id[e.id]["shape"] == spec.shape and by_id[e.id]["color"]["background"] == spec.color
        assert by_id[e.id]["label"].endswith(f"[{e.status}]") == (not e.visible)
    drawn = {state.nodes[n["id"]].status for n in nodes if isinstance(n["id"], int)}
    for s in SCHEMA.statuses:
        if s.shape:
            assert (f"event · {s.label} ({s.shape}," in doc) == (s.name in drawn)     # the legend: what is drawn
    at.switch_page(REPLAY).run()


def _drawn_units(at) -> dict[int, dict]:
    return {n["id"]: n for n in _graph_data(_graph_html(at))[0] if isinstance(n["id"], int)}


def test_events_fold_their_records_and_open_from_the_picker_the_inspector_and_the_fold_mode(replayed):
    at, wb = replayed
    at.switch_page(GRAPH).run()
    assert not at.exception
    state = wb.engine.state
    events = [n for n in state.nodes.values() if n.kind == EVENT]
    assert len(state.nodes) > FOLD_ABOVE                         # above the threshold: events fold by default
    drawn = _drawn_units(at)
    assert {e.id for e in events} <= set(drawn) and not {m for e in events for m in e.members} & set(drawn)
    for e in events:
        assert drawn[e.id]["label"].startswith(f"u{e.id} ▸ {len(e.members)}")
    assert any("marked ▸ n hold their n members" in c.value for c in at.caption)
    big = max(events, key=lambda e: (len(e.members), -e.id))
    at.multiselect(key="graph_open").set_value([big.id]).run()  # open one event from the picker
    opened = _drawn_units(at)
    assert set(opened) == set(drawn) | set(big.members) and len(opened) == len(drawn) + len(big.members)
    assert opened[big.id]["label"].startswith(f"u{big.id} ▾ {len(big.members)}")
    other = next(e for e in events if e.id != big.id and e.members)
    at.selectbox(key="graph_unit").set_value(other.members[0]).run()      # inspecting a record opens its event
    assert other.id in at.multiselect(key="graph_open").value
    assert other.members[0] in _drawn_units(at)
    at.selectbox(key="graph_fold").set_value("never").run()               # nothing folded: every node drawn
    assert set(_drawn_units(at)) == set(state.nodes)
    at.selectbox(key="graph_fold").set_value("auto")
    at.multiselect(key="graph_open").set_value([]).run()
    assert set(_drawn_units(at)) == set(drawn)
    at.switch_page(REPLAY).run()


def test_lifecycle_timeline_has_a_lane_per_event_and_the_logged_transitions(replayed):
    at, wb = replayed
    at.switch_page(GRAPH).run()
    state = wb.engine.state
    fig = _timeline(at)
    events = sorted(n.id for n in state.nodes.values() if n.kind == EVENT)
    lanes = {y for t in fig["data"] if t["type"] == "bar" for y in t["y"]}
    assert len(lanes) == min(len(events), 40) and all(re.match(r"u\d+ · s", y) for y in lanes)
    logged = [op for op in wb.engine.store.ops(kinds=[OpKind.STATUS_CHANGED])
              if state.nodes.get(op.payload["node"]) is not None and state.nodes[op.payload["node"]].kind == EVENT]
    markers = next(t for t in fig["data"] if t["type"] == "scatter")
    assert len(markers["x"]) == len(logged)
    assert sorted(markers["x"]) == sorted(op.turn + (0.5 if op.run_id else 0) for op in logged)
    hover = " ".join(markers["hovertext"])
    assert all(op.payload["cause"]["rule"].replace("_", " ") in hover for op in logged)
    colours = {t["name"]: t["marker"]["color"] for t in fig["data"] if t["type"] == "bar"}
    assert all(colours[SCHEMA.status(s).label] == SCHEMA.status(s).color for s in
               {n.status for n in state.nodes.values() if n.kind == EVENT})
    table = _frame(at, "by")
    assert len(table) == len(logged)

    pills = next(p for p in at.get("button_group") if p.label == "Statuses")     # the lanes follow the filters
    everything = list(pills.value)
    pills.set_value(["closed"]).run()
    assert not at.exception
    lanes = {y for t in _timeline(at)["data"] if t["type"] == "bar" for y in t["y"]}
    assert lanes == {f"u{n.id} · s{n.session}" for n in state.nodes.values()
                     if n.kind == EVENT and n.status == "closed"}
    next(p for p in at.get("button_group") if p.label == "Statuses").set_value(everything).run()
    at.text_input(key="graph_search").input(state.nodes[events[0]].summary[-25:]).run()
    lanes = {y for t in _timeline(at)["data"] if t["type"] == "bar" for y in t["y"]}
    assert f"u{events[0]} · s{state.nodes[events[0]].session}" in lanes and len(lanes) < len(events)
    at.text_input(key="graph_search").input("").run()

    turn = next(i for i, t in enumerate(wb.conversation.turns) if t.session == "2")     # time travel
    at.slider(key="graph_turn").set_value(turn).run()
    past = wb.engine.at(upto_turn=turn).state
    lanes = {y for t in _timeline(at)["data"] if t["type"] == "bar" for y in t["y"]}
    assert lanes == {f"u{n.id} · s{n.session}" for n in past.nodes.values() if n.kind == EVENT}
    at.slider(key="graph_turn").set_value(wb.head).run()
    cap = max(1, len(events) - 1)                               # the cap keeps the most recent events
    at.number_input(key="graph_max_lanes").set_value(cap).run()
    lanes = {y for t in _timeline(at)["data"] if t["type"] == "bar" for y in t["y"]}
    newest = sorted(events, key=lambda i: (state.nodes[i].created_turn, i))[-cap:]
    assert lanes == {f"u{i} · s{state.nodes[i].session}" for i in newest}
    assert any(f"Showing {cap} of {len(events)}" in w.value for w in at.warning)
    at.number_input(key="graph_max_lanes").set_value(40).run()
    at.switch_page(REPLAY).run()


# -- Consolidation ---------------------------------------------------------------------------------------------
def test_accept_one_relation_apply_and_undo(replayed):
    at, wb = replayed
    at.switch_page(CONSOLIDATION).run()
    at.button(key="run_diagnosis").click().run()
    assert not at.exception
    state = wb.engine.state
    run_id = wb.engine.open_run()
    pending = [p for p in state.proposals.values() if p.run_id == run_id and p.status == Status.PENDING
               and p.op == "relation" and p.gate == GateVerdict.PASS]
    assert pending, "the steward proposes relations between the closed events"
    rel = max(pending, key=lambda p: (p.detail.get("type") != "TEMPORAL_NEXT", p.confidence, -p.id))
    queue = at.dataframe[0].value
    assert queue[queue["#"] == rel.id].iloc[0]["detail"] == rel.detail["type"]
    at.multiselect(key="queue_types").set_value([rel.detail["type"]]).run()
    shown = [p for p in state.proposals.values() if p.run_id == run_id and p.status == Status.PENDING
             and p.detail.get("type") == rel.detail["type"]]
    assert set(at.dataframe[0].value["#"]) == {p.id for p in shown}
    page = 1 + review_view.sort_queue(shown).index(rel) // 10
    if page > 1:
        at.selectbox(key="queue_page").set_value(page).run()
    text = "\n".join(m.value for m in at.markdown)
    card = text[text.index(f"#{rel.id} · Relation"):]
    card = card[: card.find("\n**#") if "\n**#" in card else None]
    cited = [int(x) for x in rel.plan["evidence"]]
    for t in rel.targets:                                     # evidence text on both sides, under its event
        event = state.nodes[t]
        mine = [c for c in cited if c in event.members]
        assert mine
        block = card[card.index(f"<b>u{t}</b>"):]
        for c in mine:
            assert html.escape(state.nodes[c].raw) in block and f"<b>u{c}</b>" in block
    assert "★ cited" in card
    plain = re.sub(r"<[^>]+>", "", card)                     # the plan names the evidence as ids, not numbers
    assert f"Evidence cited: {', '.join(f'u{c}' for c in cited)}" in plain
    key = review_decisions.run_key(wb.db_path.name, run_id)
    at.radio(key=review_decisions.widget_key(key, rel.id)).set_value(review_decisions.ACCEPT).run()
    at.button(key="apply_defer").click().run()               # accept it, defer the rest: the run closes
    assert not at.exception
    src, dst = rel.targets
    edge = wb.engine.state.edges[(src, dst, rel.detail["type"])]
    assert edge.made_by == run_id and sorted(edge.evidence) == sorted(cited)
    assert wb.engine.state.proposals[rel.id].status == Status.APPLIED
    added = _frame(at, "cites")                               # the run diff: the relation with its evidence
    row = added[added["edge"] == f"u{src} —{rel.detail['type']}→ u{dst}"].iloc[0]
    assert row["cites"] == ", ".join(f"u{c}" for c in edge.evidence) and row["confidence"] == f"{rel.confidence:.2f}"
    assert all(wb.engine.state.proposals[p.id].status == Status.SKIPPED for p in pending if p.id != rel.id)
    at.button(key="undo_start").click().run()
    at.button(key="undo_confirm").click().run()
    assert not at.exception
    assert (src, dst, rel.detail["type"]) not in wb.engine.state.edges
    assert wb.engine.state.runs[run_id].status == "undone"
    at.switch_page(REPLAY).run()


# -- Retrieval ---------------------------------------------------------------------------------------------------
def test_causal_question_paths_hop_by_hop_on_the_graph():
    at, wb = start_app("memloom")
    wb.jump(next(i for i, t in enumerate(wb.conversation.turns) if t.id == "D6:6") + 1)
    wb.engine.consolidate()
    wb.reload()
    at.switch_page(RETRIEVAL).run()
    question = next(q for q in wb.conversation.questions if q.id.endswith("q7"))
    at.selectbox(key="retrieval_question").set_value(question).run()
    assert not at.exception
    res = wb.view.retrieve(question.question, 5)
    state = wb.view.state
    code = "\n".join(c.value for c in at.code)
    seeds = [a for a, _ in res.anchors]
    for r in res.units:
        assert rv.path_text(state, r, "seed", seeds) in code
    if any(h.reverse for r in res.units for h in r.path):
        assert "(reverse)→" in code
    r = max(res.units, key=lambda u: (sum(h.reverse for h in u.path), len(u.path)))
    assert r.path
    at.selectbox(key="retrieval_highlight").set_value(r.id).run()
    assert not at.exception
    _, edges = _graph_data(_graph_html(at))
    for i, h in enumerate(r.path, 1):
        src, dst, etype = h.edge_key
        assert h.edge_key in state.edges
        label = SCHEMA.edge_type(etype).label
        drawn = next(e for e in edges if (e["from"], e["to"]) == (src, dst) and f"<b>{label}</b>" in e["title"])
        assert drawn["width"] == 5
        assert drawn["label"] == f"hop {i}" + (" (reverse)" if h.reverse else "")
    hops = _frame(at, "stored edge")
    assert list(hops["stored edge"]) == [f"u{s} —{t}→ u{d}" for s, d, t in (h.edge_key for h in r.path)]
    at.session_state["retrieval_tab"] = "Seeds"
    at.run()
    seeds_table = _frame(at, "records")
    assert list(seeds_table["unit"]) == [rv.unit_ref(state, a) for a in seeds]
    assert list(seeds_table["score"]) == [round(s, 3) for _, s in res.anchors]
    assert set(seeds_table["kind"]) == {"event"}


def test_the_page_says_how_the_query_was_read_and_the_walk_follows_that_reading():
    """A why-question taken for a lookup walks no chain; the page says which reading MemLoom took and which words
    decided it, and the naive peer (which does not route) says nothing."""
    at, wb = start_app("memloom")
    wb.jump(next(i for i, t in enumerate(wb.conversation.turns) if t.id == "D6:6") + 1)
    wb.engine.consolidate()
    wb.reload()
    at.switch_page(RETRIEVAL).run()
    at.radio(key="retrieval_source").set_value(rv.FREE_SOURCE).run()
    for query, reading, cue in (("What set off Maya missing her deadlines?", "a why-question", "what set off"),
                                ("Why has Maya been missing deadlines?", "a why-question", "why"),
                                ("Which breed is Jon's dog Pepper?", "a lookup", None)):
        at.text_input(key="retrieval_query").set_value(query).run()
        assert not at.exception
        captions = [c.value for c in at.caption if "read the query as" in c.value]
        assert len(captions) == 1 and captions[0].startswith(f"{SCHEMA.label} read the query as {reading}")
        assert cue is None or f"“{cue}”" in captions[0]
        fused = relevance(wb.view, query).fused
        inherited = [u for u in wb.view.retrieve(query, 5).candidates if u.score > fused[u.id] + 1e-5]
        assert bool(inherited) == (cue is not None), "the walk did not follow the reading shown"


def test_structural_links_are_one_decision_and_the_cards_are_the_consequential_proposals():
    """TEMPORAL_NEXT links between consecutive events follow from the timeline: the queue puts them under one
    decision (Accept all / Reject all) and lists only the other proposals; accepting them all and deferring the
    rest stores each link as applied by the local user."""
    from engine.core.access import local_identity

    at, wb = start_app("memloom")
    wb.jump(next(i for i, t in enumerate(wb.conversation.turns) if t.session == "4"))
    at.switch_page(CONSOLIDATION).run()
    at.button(key="run_diagnosis").click().run()
    assert not at.exception
    run_id = wb.engine.open_run()
    pending = [p for p in wb.engine.state.proposals.values() if p.run_id == run_id and p.status == Status.PENDING]
    temporal = {p.id for p in pending if p.detail.get("type") == "TEMPORAL_NEXT"}
    assert temporal and len(temporal) < len(pending), "the steward proposes both kinds"
    said = "\n".join(m.value for m in at.markdown)
    assert f"**{len(temporal)} structural link(s)** (TEMPORAL\\_NEXT)" in said
    assert set(at.dataframe[0].value["#"]) == {p.id for p in pending} - temporal     # the rest, one card each
    at.checkbox(key="queue_structural").check().run()
    assert set(at.dataframe[0].value["#"]) == {p.id for p in pending}
    at.checkbox(key="queue_structural").uncheck().run()
    at.button(key="structural_accept").click().run()
    assert "Chosen: " + f"{len(temporal)} accept, 0 reject." in "\n".join(m.value for m in at.markdown)
    at.button(key="apply_defer").click().run()
    assert not at.exception
    stored = wb.engine.store.load_state()
    for pid in temporal:
        assert stored.proposals[pid].status not in (Status.PENDING, Status.REJECTED, Status.SKIPPED)
        assert stored.proposals[pid].decided_by == local_identity().name
    assert all(stored.proposals[p.id].status == Status.SKIPPED for p in pending if p.id not in temporal)
    assert stored.runs[run_id].status == "committed"

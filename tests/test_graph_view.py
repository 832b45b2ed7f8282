"""graph_view: filters, escaping, aggregation above max_nodes, lineage and diffs, on states folded from ops.

Styles, kinds and statuses come from an engine schema read through the registry (All-Mem's here, naive
RAG's for an engine without edges)."""
from __future__ import annotations

import json
import re

from engine.core.diff import diff_states
from engine.core.edge import Edge
from engine.core.node import Node as Unit
from engine.core.oplog import OpKind, OpRecord
from engine.core.ops import apply
from engine.core.payloads import DescriptorChanged, EdgeRemoved
from engine.core.state import MemoryState
from engine.core.walks import lineage, neighbourhood
from engine.engines import engine_schema
from workbench.graph.groups import FOLD_ABOVE, GROUP_ABOVE
from workbench.graph.layout import date_text, node_box
from workbench.graph.legend import Seen, legend_html
from workbench.graph.select import select_units, session_order
from workbench.graph.style import edge_style, node_label, visibility_text
from workbench.graph.tables import diff_rows, edge_rows
from workbench.graph.view import SUMMARY_PER_GROUP, build_graph_html

XSS = "<script>alert(1)</script>"
SCHEMA = engine_schema("allmem")
EDGE_STYLE = {t.name: edge_style(t.name, SCHEMA) for t in SCHEMA.edge_types}


def _state(schema=SCHEMA) -> MemoryState:
    return MemoryState(schema=schema)


def _unit(uid: int, raw: str, session: str = "1", kind: str = "turn", keywords=("alpha",)) -> Unit:
    return Unit(id=uid, raw=raw, summary=f"summary of {raw}", keywords=list(keywords),
                time=f"2024-0{min(int(session) if session.isdigit() else 1, 9)}-01T10:{uid % 60:02d}:00",
                kind=kind, source_ids=[f"D{session}:{uid}"], speakers=["Ana"], session=session, created_turn=uid)


def _add(state: MemoryState, *items) -> MemoryState:
    """Apply nodes and edges through the same op handlers the engine's log uses."""
    for item in items:
        if isinstance(item, Unit):
            apply(state, OpRecord(OpKind.NODE_CREATED, {"node": item.payload()}))
        else:
            apply(state, OpRecord(OpKind.EDGE_ADDED, {"edge": item.to_dict()}))
    return state


def _set_status(state: MemoryState, uid: int, status: str, cause: dict | None = None) -> None:
    was = state.nodes[uid].status
    apply(state, OpRecord(OpKind.STATUS_CHANGED, {"node": uid, "status": status, "was": was, "cause": cause or {}}))


def _archive(state: MemoryState, uid: int) -> None:
    _set_status(state, uid, "archived")


def _graph(html: str) -> tuple[list[dict], list[dict]]:
    """The node and edge data embedded in a built document."""
    m = re.search(r"var nodeData = (.*?), edgeData = (.*?);\n", html, re.DOTALL)
    return json.loads(m.group(1)), json.loads(m.group(2))


def _unit_ids(nodes: list[dict]) -> set[int]:
    return {n["id"] for n in nodes if isinstance(n["id"], int)}


def small_state() -> MemoryState:
    """Two sessions: 1-2-3 in session 1, 4-5 in session 2; 3 is archived and superseded by 5."""
    s = _add(_state(),
             _unit(1, "Jon: I run half marathons"), _unit(2, "Maya: corals bleach"), _unit(3, "Jon: 3 races"),
             _unit(4, "Maya: Lena lives in Porto", "2"), _unit(5, "Jon: 4 races", "2", kind="merged"),
             Edge(2, 1, "temporal"), Edge(3, 2, "temporal"), Edge(5, 4, "temporal"),
             Edge(4, 2, "semantic", confidence=0.5), Edge(5, 3, "version", made_by="run-0001"),
             Edge(4, 1, "sibling"))
    _archive(s, 3)
    return s


def _legend(html: str) -> str:
    """The legend fragment of a built document (above the graph's canvas)."""
    return re.search(r'<div class="mw-legend">(.*?)<div id="graph">', html, re.DOTALL).group(1)


def test_document_has_legend_nodes_and_no_physics():
    html = build_graph_html(small_state())
    assert html.startswith("<!DOCTYPE html>") and "vis.Network" in html
    legend = _legend(html)
    assert all(style["label"] in legend for style in EDGE_STYLE.values())        # every type is drawn here
    drawn = {k for k in SCHEMA.node_kinds if k.name in {"turn", "merged"}}        # small_state's kinds
    assert all(f"{k.label} · " in legend and k.color in legend for k in drawn)
    assert all(f"{k.label} · " not in legend for k in set(SCHEMA.node_kinds) - drawn)   # not drawn: not listed
    nodes, edges = _graph(html)
    assert _unit_ids(nodes) == {1, 2, 3, 4, 5}
    assert len(edges) == 6
    assert '"physics": {"enabled": false}' in html


def test_archived_and_visible_differ_by_shape_border_and_label():
    nodes, _ = _graph(build_graph_html(small_state()))
    by_id = {n["id"]: n for n in nodes}
    archived, visible = by_id[3], by_id[1]
    assert archived["label"] == "u3 [archived]" and archived["shape"] == "square"
    assert archived["shapeProperties"]["borderDashes"]
    assert visible["label"] == "u1" and visible["shape"] == "dot" and "shapeProperties" not in visible


def test_edge_colour_dash_width_and_opacity_follow_the_schema():
    _, edges = _graph(build_graph_html(small_state()))
    for e in edges:
        spec = next(t for t in SCHEMA.edge_types if t.color == e["color"]["color"])
        assert bool(e["dashes"]) == spec.dashes
        assert e["width"] == spec.width and e["color"]["opacity"] == spec.opacity


def test_node_colour_follows_the_schema_kind():
    nodes, _ = _graph(build_graph_html(small_state()))
    by_id = {n["id"]: n for n in nodes}
    assert by_id[1]["color"]["background"] == SCHEMA.kind("turn").color
    assert by_id[5]["color"]["background"] == SCHEMA.kind("merged").color


def test_legend_names_what_is_drawn_every_edge_type_kind_and_status():
    legend = _legend(build_graph_html(small_state()))
    assert all(s["label"] in legend and s["color"] in legend for s in EDGE_STYLE.values())
    assert all(s.label in legend for s in SCHEMA.statuses)
    assert "turn · archived (hollow dashed square, off the surface: dashed, “[archived]”)" in legend
    assert "turn · visible (filled dot, on the surface)" in legend and "stroke-dasharray" in legend
    legend = _legend(build_graph_html(small_state(), visible_only=True, edge_types={"temporal"}))
    assert "archived" not in legend and EDGE_STYLE["version"]["label"] not in legend      # neither is drawn
    assert EDGE_STYLE["temporal"]["label"] in legend
    assert "none drawn" in legend_html(SCHEMA, Seen()) and "highlighted" not in legend_html(SCHEMA, Seen())


MEMLOOM = engine_schema("memloom")


def memloom_state() -> MemoryState:
    """Sentence records under events in each FSM status, one relation between two events."""
    s = _state(MEMLOOM)
    items = [_unit(1, "Ana: the landlord sold the building"), _unit(3, "Ana: I missed deadlines"),
             _unit(5, "Ana: ok"), _unit(7, "Ana: bye")]
    for uid, status in ((2, "provisional"), (4, "active"), (6, "closed"), (8, "archived")):
        e = _unit(uid, "", kind="event")
        e.raw, e.members, e.status = "", [uid - 1], status
        items.append(e)
    _add(s, *items, Edge(4, 6, "CAUSAL_FOLLOW", "run-0001", 0.8, evidence=[3, 5]), Edge(6, 5, "evidence"))
    for uid in (1, 3, 5, 7):
        _set_status(s, uid, "buffered")
    return s


def test_event_nodes_take_their_fsm_status_colour_and_shape():
    state = memloom_state()
    nodes, _ = _graph(build_graph_html(state))
    by_id = {n["id"]: n for n in nodes}
    for uid in (2, 4, 6, 8):
        spec = MEMLOOM.status(state.nodes[uid].status)
        assert by_id[uid]["shape"] == spec.shape and by_id[uid]["color"]["background"] == spec.color
        off = not spec.surface
        assert by_id[uid]["label"] == f"u{uid}" + (f" [{spec.name}]" if off else "")      # not by colour alone
        assert ("shapeProperties" in by_id[uid]) == off
    assert by_id[1]["shape"] == "dot" and by_id[1]["color"]["background"] == MEMLOOM.kind("turn").color


def test_legend_draws_each_fsm_status_in_its_shape_and_colour():
    state = memloom_state()
    legend = _legend(build_graph_html(state))
    for s in MEMLOOM.statuses:
        if s.name in {u.status for u in state.nodes.values()}:
            assert f"{s.label} (" in legend
        if s.shape and s.name in {u.status for u in state.nodes.values()}:
            assert f"event · {s.label} ({s.shape}," in legend and s.color in legend
    assert "<polygon" in legend                       # triangle and diamond are drawn, not named only
    assert "provisional (triangle, off the surface" in legend and "active (diamond, on the surface)" in legend
    assert "grounded" not in legend                   # no grounded record in this state
    assert MEMLOOM.kind("event").color not in legend  # events are drawn by status, never as a dot of their kind


def test_a_reverse_hop_highlights_and_labels_the_stored_edge():
    state = memloom_state()
    html = build_graph_html(state, highlight_edges=[(6, 4, "CAUSAL_FOLLOW")],      # given against its direction
                            edge_labels={(6, 4, "CAUSAL_FOLLOW"): "hop 1 (reverse)"})
    _, edges = _graph(html)
    causal = next(e for e in edges if (e["from"], e["to"]) == (4, 6))
    assert causal["width"] == 5 and causal["label"] == "hop 1 (reverse)"
    assert "cites u3, u5" in causal["title"] and "confidence 0.80" in causal["title"]
    assert all(e["color"]["opacity"] == 0.2 for e in edges if e is not causal)
    assert "label" not in next(e for e in edges if (e["from"], e["to"]) == (6, 5))


def test_a_hop_found_at_query_time_is_drawn_on_the_path():
    """A logic link (MemLoom's freshness failsafe) is no stored edge; the path draws it anyway, in its type's
    style, between the buffered record and its cause, titled as found at query time, and the legend names it."""
    state = memloom_state()
    assert (1, 3, "logic_link") not in state.edges and (3, 1, "logic_link") not in state.edges
    html = build_graph_html(state, highlight_edges=[(1, 3, "logic_link"), (6, 4, "CAUSAL_FOLLOW")],
                            edge_labels={(1, 3, "logic_link"): "hop 1 (reverse)"})
    _, edges = _graph(html)
    logic = [e for e in edges if (e["from"], e["to"]) == (1, 3)]
    assert len(logic) == 1 and logic[0]["width"] == 5 and logic[0]["label"] == "hop 1 (reverse)"
    assert "found at query time, not stored" in logic[0]["title"]
    assert logic[0]["color"]["color"] == edge_style("logic_link", MEMLOOM)["color"]
    assert "logic link" in _legend(html)
    _, plain = _graph(build_graph_html(state))
    assert not [e for e in plain if (e["from"], e["to"]) == (1, 3)]        # never drawn off a path


def test_a_path_label_on_a_level_edge_is_set_horizontally():
    """vis-network draws a "top"-aligned label of a level edge pointing left at the canvas origin, far from its
    edge (seen on the Retrieval page: "hop 4" beside Session 1); labels of level edges are set horizontally."""
    state = memloom_state()
    keys = [(4, 6, "CAUSAL_FOLLOW"), (6, 5, "evidence"), (1, 3, "logic_link")]
    nodes, edges = _graph(build_graph_html(state, highlight_edges=keys, edge_labels={k: "hop" for k in keys}))
    at = {n["id"]: (n["x"], n["y"]) for n in nodes}
    labelled = [e for e in edges if "label" in e]
    assert len(labelled) == 3 and any(at[e["from"]][1] == at[e["to"]][1] for e in labelled)
    for e in labelled:
        level = at[e["from"]][1] == at[e["to"]][1]
        assert e["font"]["align"] == ("horizontal" if level else "top")


def test_an_engine_without_edges_draws_nodes_only():
    naive = engine_schema("naive")
    s = _add(_state(naive), _unit(1, "Ana: hi"), _unit(2, "Ben: hello"))
    for uid in (1, 2):
        _set_status(s, uid, "stored")
    html = build_graph_html(s)
    nodes, edges = _graph(html)
    assert _unit_ids(nodes) == {1, 2} and edges == []
    assert "none (this engine keeps no links)" in html and "stored" in html
    assert all(n["shape"] == "dot" for n in nodes if isinstance(n["id"], int))
    assert diff_states(s, s)["rewired"] == [] and lineage(s, 1) == {"supersedes": [], "superseded_by": []}


def test_an_off_surface_status_is_named_in_the_label():
    s = small_state()
    assert node_label(s.nodes[3]) == "u3 [archived]" and visibility_text(s.nodes[3]) == "◌ archived"
    assert node_label(s.nodes[1]) == "u1" and visibility_text(s.nodes[1]) == "● visible"


def test_status_filter():
    s = small_state()
    assert select_units(s, statuses={"archived"}).shown == [3]
    assert select_units(s, statuses={"visible"}).shown == [1, 2, 4, 5]
    nodes, _ = _graph(build_graph_html(s, statuses={"visible"}))
    assert 3 not in _unit_ids(nodes)


def test_conversation_text_is_escaped_everywhere():
    s = _add(_state(), Unit(id=1, raw=XSS, summary=XSS, keywords=[XSS], time="2024-01-01T10:00:00", kind="turn",
                                 source_ids=[XSS], speakers=[XSS], session="1", made_by=XSS))
    html = build_graph_html(s, search="alert")
    assert XSS not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "</script>alert" not in html.lower()


def test_edge_type_filter():
    _, edges = _graph(build_graph_html(small_state(), edge_types={"temporal"}))
    assert {e["color"]["color"] for e in edges} == {EDGE_STYLE["temporal"]["color"]}
    assert len(edges) == 3


def test_visible_only_hides_archived_units():
    nodes, edges = _graph(build_graph_html(small_state(), visible_only=True))
    assert 3 not in _unit_ids(nodes)
    assert all(3 not in (e["from"], e["to"]) for e in edges)


def test_session_range_and_search_and_focus():
    s = small_state()
    assert select_units(s, sessions=(2, 2)).shown == [4, 5]
    assert select_units(s, search="PORTO").shown == [4]
    assert select_units(s, search="d2:5").shown == [5]
    assert select_units(s, focus={4}).shown == [1, 2, 4, 5]
    assert select_units(s, focus={4}, edge_types={"semantic"}).shown == [2, 4]


def test_highlighted_units_and_path_are_drawn_even_when_filtered_out():
    html = build_graph_html(small_state(), visible_only=True, highlight_units=[3],
                            highlight_edges=[(3, 5, "version")])     # hop walked against the edge's direction
    nodes, edges = _graph(html)
    assert 3 in _unit_ids(nodes)
    ringed = next(n for n in nodes if n["id"] == 3)
    assert ringed["borderWidth"] > 2
    path = [e for e in edges if (e["from"], e["to"]) == (5, 3)]
    assert path and path[0]["width"] == 5
    assert all(e["color"]["opacity"] < 0.5 for e in edges if (e["from"], e["to"]) != (5, 3))


DENSE_BACKS = (7, 3, 11, 97, 173)


def big_state(n: int, dense: bool = False) -> MemoryState:
    """n turns in sessions of 40, a temporal chain, a semantic edge 7 back (and, `dense`, 3, 11, 97 and 173 back
    too: five per unit, some reaching sessions away)."""
    s = _state()
    for i in range(1, n + 1):
        _add(s, _unit(i, f"turn number {i}", session=str(1 + i // 40)))
        if i > 1:
            _add(s, Edge(i, i - 1, "temporal"))
        for back in DENSE_BACKS if dense else (7,):
            if i > back:
                _add(s, Edge(i, i - back, "semantic", confidence=0.4))
    return s


def test_ungrouped_keeps_max_nodes_and_says_how_many_are_hidden():
    s = big_state(1200)
    html = build_graph_html(s, max_nodes=400, highlight_units=[3], group=False)
    nodes, edges = _graph(html)
    shown = _unit_ids(nodes)
    assert len(shown) == 400 and 3 in shown
    assert set(range(1200 - 398, 1201)) <= shown           # the most recent, plus the pinned unit
    assert "800 hidden" in html and "narrow the session range" in html
    assert all(e["from"] in shown and e["to"] in shown for e in edges)
    assert '"smooth": false' in html


def test_aggregation_keeps_focus_and_search_within_the_limit():
    s = big_state(1200)
    sel = select_units(s, search="turn number 5", max_nodes=50)
    assert sel.matched == 111 and len(sel.shown) == 50 and sel.hidden == 61
    sel = select_units(s, focus={10}, max_nodes=3)
    assert 10 in sel.shown and len(sel.shown) == 3


def test_layout_rows_by_session_and_columns_by_time():
    nodes, _ = _graph(build_graph_html(small_state()))
    pos = {n["id"]: (n["x"], n["y"]) for n in nodes if isinstance(n["id"], int)}
    assert pos[1][1] == pos[2][1] == pos[3][1] < pos[4][1]
    assert pos[1][0] < pos[2][0] < pos[3][0]
    labels = [n["label"] for n in nodes if not isinstance(n["id"], int)]
    assert labels == ["Session 1", "Session 2"]


def test_session_order_numbers_named_sessions_by_time():
    s = _add(_state(), Unit(1, "a", "a", [], "2024-02-01T00:00:00", "turn", ["x"], session="later"),
             Unit(2, "b", "b", [], "2024-01-01T00:00:00", "turn", ["y"], session="earlier"))
    assert session_order(s) == {"earlier": 1, "later": 2}
    assert session_order(small_state()) == {"1": 1, "2": 2}


def test_lineage_walks_version_edges_both_ways():
    s = small_state()
    _add(s, _unit(6, "Jon: 5 races", "2"), Edge(6, 5, "version"))
    assert lineage(s, 3) == {"supersedes": [], "superseded_by": [(1, 5), (2, 6)]}
    assert lineage(s, 6) == {"supersedes": [(1, 5), (2, 3)], "superseded_by": []}
    rows = edge_rows(s, 5)
    assert {(r["direction"], r["other unit"]) for r in rows} == {("out →", "u3"), ("out →", "u4"), ("← in", "u6")}


def test_diff_states_reports_added_archived_restored_edges_and_rewiring():
    old = small_state()
    _add(old, _unit(6, "Maya: Lena is a nurse", "2"), Edge(6, 4, "semantic", confidence=0.8))
    new = old.clone()
    _add(new, _unit(7, "Maya: Lena, a nurse in Porto", "2", kind="merged"), Edge(7, 4, "version"))
    _archive(new, 4)
    _set_status(new, 3, "visible", cause={"undo_of": 1})          # back on the surface (an undo)
    apply(new, EdgeRemoved(6, 4, "semantic", edge=new.edges[(6, 4, "semantic")].to_dict()).record())
    _add(new, Edge(6, 7, "semantic", confidence=0.9))
    apply(new, DescriptorChanged(node=1, summary="updated", keywords=["x"], prev_summary=new.nodes[1].summary,
                                 prev_keywords=new.nodes[1].keywords).record())
    d = diff_states(old, new)
    assert d["added_units"] == [7]
    assert d["archived_units"] == [4]
    assert d["restored_units"] == [3]
    assert d["removed_units"] == []
    assert d["redescribed_units"] == [1]
    assert d["added_edges"] == [(6, 7, "semantic"), (7, 4, "version")]
    assert d["removed_edges"] == [(6, 4, "semantic")]
    assert d["rewired"] == [(6, 4, 7)]
    assert d["status_changes"] == [(3, "archived", "visible"), (4, "visible", "archived")]
    rows = diff_rows(d, old, new)
    assert rows["archived"][0]["superseded by"] == "u7"
    assert [(r["unit"], r["from"], r["to"]) for r in rows["status changes"]] == [("u3", "archived", "visible"),
                                                                                ("u4", "visible", "archived")]
    assert {r["type"] for r in rows["edges added"]} == {EDGE_STYLE["semantic"]["label"], EDGE_STYLE["version"]["label"]}
    assert diff_states(new, new) == {k: [] for k in d}


# -- sessions grouped at scale -------------------------------------------------------------------
def _by_id(nodes: list[dict]) -> dict:
    return {n["id"]: n for n in nodes}


def _accounted(html: str) -> int:
    """Every edge a grouped document stands for: drawn one by one, summarised, inside a collapsed session or a
    folded group node, or thinned."""
    nodes, edges = _graph(html)
    summary = re.search(r"Showing [\d,]+ nodes and ([\d,]+) edges(?:; [\d,]+ sessions collapsed into group nodes "
                        r"hold [\d,]+ more nodes, their ([\d,]+) edges to other sessions drawn as ([\d,]+) summary "
                        r"edges \(width by count\) and ([\d,]+) edges inside them)?", html)
    one_by_one, summarised, summary_edges, inner = (int((g or "0").replace(",", "")) for g in summary.groups())
    folded = re.search(r"; [\d,]+ events drawn folded hold [\d,]+ more nodes, their ([\d,]+) edges to other nodes "
                       r"drawn as ([\d,]+) summary edges and ([\d,]+) edges inside them", html)   # group nodes
    fold_summarised, fold_summary_edges, fold_inner = (int(g.replace(",", "")) for g in folded.groups()) \
        if folded else (0, 0, 0)
    assert one_by_one == sum("count" not in e for e in edges)
    assert summary_edges + fold_summary_edges == sum("count" in e for e in edges)
    assert summarised + fold_summarised == sum(e["count"] for e in edges if "count" in e)
    thinned = sum(int(n.replace(",", "")) for n in re.findall(r"; ([\d,]+) \w+ edges not drawn", html))
    return one_by_one + summarised + inner + fold_summarised + fold_inner + thinned


def test_grouped_sessions_count_their_units_and_summarise_the_edges_between_them():
    s = small_state()
    nodes, edges = _graph(build_graph_html(s, group=True))
    groups = {n["id"]: n for n in nodes if str(n["id"]).startswith("group:")}
    assert set(groups) == {"group:1", "group:2"} and not _unit_ids(nodes)
    assert groups["group:1"]["count"] == 3 and groups["group:2"]["count"] == 2
    assert groups["group:1"]["label"].startswith("Session 1\n3 units (1 archived)\n")
    assert groups["group:2"]["label"] == "Session 2\n2 units\n1 Feb 2024"
    summary = {e["title"].split("</b>")[0].removeprefix("<b>"): e["count"] for e in edges}
    assert summary == {EDGE_STYLE[t]["label"]: 1 for t in ("semantic", "version", "sibling")}   # 4-2, 5-3, 4-1
    assert all({e["from"], e["to"]} == {"group:1", "group:2"} and e["arrows"]["to"]["enabled"] is False
               for e in edges)
    assert _accounted(build_graph_html(s, group=True)) == len(s.edges)


def test_an_expanded_session_draws_its_units_in_place_and_links_to_the_other_group():
    s = small_state()
    html = build_graph_html(s, group=True, expand=["2"])
    nodes, edges = _graph(html)
    assert _unit_ids(nodes) == {4, 5} and "group:1" in _by_id(nodes) and "group:2" not in _by_id(nodes)
    assert _by_id(nodes)["session:2"]["label"].startswith("▾ Session 2 · 2 units")
    unit_edges = {(e["from"], e["to"]) for e in edges if "count" not in e}
    assert unit_edges == {(5, 4)}                                   # temporal inside session 2
    to_group = {(min(e["from"], e["to"], key=str), e["count"]) for e in edges if "count" in e}
    assert to_group == {(4, 1), (5, 1)} and len([e for e in edges if "count" in e]) == 3     # 4: σ and β, 5: ν
    assert _accounted(html) == len(s.edges)


def test_sessions_group_above_the_threshold_with_counts_equal_to_the_state():
    s = big_state(GROUP_ABOVE)
    assert not any(str(n["id"]).startswith("group:") for n in _graph(build_graph_html(s, max_nodes=5000))[0])
    s = big_state(1200)
    html = build_graph_html(s, max_nodes=5000)
    nodes, edges = _graph(html)
    groups = {n["id"]: n["count"] for n in nodes if str(n["id"]).startswith("group:")}
    per_session = {}
    for u in s.units.values():
        per_session[f"group:{u.session}"] = per_session.get(f"group:{u.session}", 0) + 1
    assert groups == per_session and not _unit_ids(nodes)
    assert _accounted(html) == len(s.edges)
    assert "semantic edges not drawn" not in html            # one σ edge per unit: not a hairball
    html = build_graph_html(s, max_nodes=5000, expand=sorted({u.session for u in s.units.values()}))
    nodes, edges = _graph(html)
    assert len(_unit_ids(nodes)) == 1200 and _accounted(html) == len(s.edges) == len(edges)   # a σ per unit: drawn


def test_a_dense_similarity_type_is_thinned_and_every_edge_accounted_for():
    s = big_state(1200, dense=True)
    sessions = sorted({u.session for u in s.units.values()})
    html = build_graph_html(s, max_nodes=5000, expand=sessions, highlight_units=[600])
    _, edges = _graph(html)
    semantic = [e for e in edges if e["color"]["color"] == EDGE_STYLE["semantic"]["color"]]
    assert sorted((e["from"], e["to"]) for e in semantic) == sorted(
        [(600, 600 - b) for b in DENSE_BACKS] + [(600 + b, 600) for b in DENSE_BACKS])      # the ringed unit's own
    assert len([e for e in edges if e["color"]["color"] == EDGE_STYLE["temporal"]["color"]]) == 1199   # a chain
    thinned = sum(1200 - b for b in DENSE_BACKS) - 2 * len(DENSE_BACKS)
    assert f"; {thinned:,} semantic edges not drawn" in html and _accounted(html) == len(s.edges)
    html = build_graph_html(s, max_nodes=5000)                 # grouped: each session keeps its strongest links
    _, edges = _graph(html)
    assert "semantic edges not drawn" in html and _accounted(html) == len(s.edges)
    pairs: dict[frozenset, int] = {}                           # the real σ edges between two sessions
    for e in s.edges.values():
        ends = frozenset(f"group:{s.units[u].session}" for u in (e.src, e.dst))
        if e.type == "semantic" and len(ends) == 2:
            pairs[ends] = pairs.get(ends, 0) + 1
    second = {g: sorted((n for p, n in pairs.items() if g in p), reverse=True)[SUMMARY_PER_GROUP - 1]
              for g in {g for p in pairs for g in p}}
    drawn = {frozenset((e["from"], e["to"])): e["count"] for e in edges
             if e["color"]["color"] == EDGE_STYLE["semantic"]["color"]}
    assert all(pairs[p] == n and any(n >= second[g] for g in p) for p, n in drawn.items())
    assert len(drawn) < len(pairs) and {g for p in drawn for g in p} == set(second)


def test_a_highlighted_unit_opens_its_session_or_rings_its_group():
    s = big_state(1200)
    nodes, _ = _graph(build_graph_html(s, highlight_units=[3]))
    assert 3 in _unit_ids(nodes) and _by_id(nodes)["session:1"]
    nodes, _ = _graph(build_graph_html(s, highlight_units=[3], expand_highlighted=False))
    assert not _unit_ids(nodes) and _by_id(nodes)["group:1"]["borderWidth"] == 5


def test_neighbourhood_reaches_k_hops_and_is_drawn_ungrouped():
    s = big_state(1200)
    assert neighbourhood(s, {600}, 1) == {599, 600, 601, 593, 607}
    two = neighbourhood(s, {600}, 2)
    assert {598, 602, 586, 614, 592, 608, 594, 606} <= two and len(two) == 13
    nodes, _ = _graph(build_graph_html(s, focus={600}, hops=2))
    assert _unit_ids(nodes) == two


def test_labels_carry_a_halo_and_an_off_surface_label_sits_above_its_node():
    nodes, _ = _graph(build_graph_html(small_state()))
    by_id = _by_id(nodes)
    assert by_id[3]["font"]["vadjust"] < -30 and by_id[3]["font"]["strokeWidth"] >= 3
    assert "vadjust" not in by_id[1]["font"] and by_id[1]["font"]["strokeColor"] == "#ffffff"
    # a white ground behind each label under or above its node: an edge crossing it (MemLoom's causal curves
    # through "u5 [grounded]": issue 53.2) passes behind the text
    assert all(n["font"]["background"].startswith("rgba(255,255,255,") for n in by_id.values()
               if n["shape"] not in ("box", "ellipse", "circle", "database", "text"))
    assert date_text("2023-05-08T13:56:00") == "8 May 2023" and date_text("someday") == "someday"


# -- group nodes (MemLoom's events) folded like sessions ---------------------------------------------------
def event_state(sessions: int = 3, events: int = 4, members: int = 5) -> MemoryState:
    """`sessions` sessions of `events` events, each with `members` sentence records (grounded, the last event's
    buffered), an evidence edge from each event to each record, a CAUSAL_FOLLOW from each event to the next and
    a topic link from each record to the first record of the event before (crossing events)."""
    s = _state(MEMLOOM)
    uid, first_record, previous_event = 0, None, None
    for session in range(1, sessions + 1):
        for e in range(events):
            records = []
            for _ in range(members):
                uid += 1
                records.append(uid)
                _add(s, _unit(uid, f"Ana: record {uid}", str(session)))
                if first_record is not None:
                    _add(s, Edge(uid, first_record, "topic", confidence=0.3))
            uid += 1
            event = _unit(uid, "", str(session), kind="event")
            event.raw, event.members = "", records
            event.source_ids = [s.units[r].source_ids[0] for r in records]
            event.status = ("closed", "active", "provisional", "archived")[e % 4]
            _add(s, event, *(Edge(uid, r, "evidence") for r in records))
            if previous_event is not None:
                _add(s, Edge(previous_event, uid, "CAUSAL_FOLLOW", "run-0001", 0.9, evidence=[records[0]]))
            for r in records:
                _set_status(s, r, "buffered")
                if e != events - 1:
                    _set_status(s, r, "grounded")
            first_record, previous_event = records[0], uid
    return s


def test_events_fold_their_records_and_every_edge_is_accounted_for():
    s = event_state()
    events = [u for u in s.units.values() if u.kind == "event"]
    html = build_graph_html(s, fold=True)
    nodes, edges = _graph(html)
    assert _unit_ids(nodes) == {e.id for e in events}                     # records are folded into their events
    by_id = _by_id(nodes)
    for e in events:
        assert by_id[e.id]["label"].startswith(f"u{e.id} ▸ {len(e.members)}")
        assert by_id[e.id]["label"].endswith("" if e.visible else f"[{e.status}]")
        assert "Click it to open it" in by_id[e.id]["title"]
    causal = [e for e in edges if "count" not in e]
    assert len(causal) == len(events) - 1                                # the relations, one by one
    between = [e for e in edges if "count" in e]                           # topic links from record to record
    assert between and all(isinstance(e["from"], int) and isinstance(e["to"], int) for e in between)
    assert f"; {len(events)} events drawn folded hold {len(s.units) - len(events)} more nodes" in html
    assert _accounted(html) == len(s.edges)
    assert "on an event: its n sentence records folded into it" in html


def test_an_opened_event_draws_its_records_and_a_click_target_folds_it_again():
    s = event_state()
    event = next(u for u in s.units.values() if u.kind == "event" and u.visible)
    html = build_graph_html(s, fold=True, expand=[event.id])
    nodes, edges = _graph(html)
    assert set(event.members) <= _unit_ids(nodes)
    assert _by_id(nodes)[event.id]["label"] == f"u{event.id} ▾ {len(event.members)}"
    assert "click it to fold them" in _by_id(nodes)[event.id]["title"]
    evidence = {(e["from"], e["to"]) for e in edges if "count" not in e and e["color"]["color"] == MEMLOOM.edge_type(
        "evidence").color}
    assert evidence == {(event.id, m) for m in event.members}
    assert _accounted(html) == len(s.edges)
    assert len(_unit_ids(nodes)) == len(_unit_ids(_graph(build_graph_html(s, fold=True))[0])) + len(event.members)


def test_a_highlighted_record_opens_its_event_or_rings_it():
    s = event_state()
    event = next(u for u in s.units.values() if u.kind == "event" and u.visible)
    record = event.members[2]
    nodes, _ = _graph(build_graph_html(s, fold=True, highlight_units=[record]))
    assert record in _unit_ids(nodes) and "▾" in _by_id(nodes)[event.id]["label"]
    nodes, _ = _graph(build_graph_html(s, fold=True, highlight_units=[record], expand_highlighted=False))
    assert record not in _unit_ids(nodes) and _by_id(nodes)[event.id]["borderWidth"] == 5


def test_events_fold_above_the_threshold_unless_a_neighbourhood_is_drawn():
    small = event_state(sessions=1, events=2, members=3)                    # 8 nodes: drawn open
    assert not any("▸" in n["label"] for n in _graph(build_graph_html(small))[0] if isinstance(n["id"], int))
    s = event_state()                                                         # 72 nodes > FOLD_ABOVE
    assert len(s.units) > FOLD_ABOVE
    nodes, _ = _graph(build_graph_html(s))
    assert {n["id"] for n in nodes if "▸" in n.get("label", "")} == {u.id for u in s.units.values()
                                                                        if u.kind == "event"}
    event = next(u for u in s.units.values() if u.kind == "event")
    nodes, _ = _graph(build_graph_html(s, focus={event.id}))
    assert set(event.members) <= _unit_ids(nodes) and not any("▸" in n["label"] for n in nodes)
    nodes, _ = _graph(build_graph_html(s, fold=False))
    assert _unit_ids(nodes) == set(s.units)


def test_an_engine_without_group_kinds_never_folds():
    s = big_state(200)
    html = build_graph_html(s, fold=True)
    assert _unit_ids(_graph(html)[0]) == set(s.units) and "drawn folded" not in html


def _boxes(html: str) -> list[tuple[float, float, float, float]]:
    """Each drawn node's room (left, top, right, bottom) as the layout reserved it."""
    out = []
    for n in _graph(html)[0]:
        b = node_box(n)
        out.append((n["x"] - b.half, n["y"] - b.up, n["x"] + b.half, n["y"] + b.down))
    return out


def _overlaps(boxes) -> list:
    return [(a, b) for i, a in enumerate(boxes) for b in boxes[i + 1:]
            if min(a[2], b[2]) > max(a[0], b[0]) and min(a[3], b[3]) > max(a[1], b[1])]


def test_no_two_nodes_and_their_labels_are_laid_out_over_each_other():
    s = event_state()
    for options in ({"fold": True}, {"fold": False}, {"fold": True, "expand": [6, 12]}, {"group": True, "expand": ["2"]}):
        assert not _overlaps(_boxes(build_graph_html(s, **options))), options
    assert not _overlaps(_boxes(build_graph_html(small_state())))
    html = build_graph_html(big_state(1200), max_nodes=5000, expand=["3", "7"])
    assert not _overlaps(_boxes(html))


def test_a_box_label_carries_no_halo_and_reads_against_its_fill():
    s = event_state()
    closed = next(u for u in s.units.values() if u.status == "closed")
    node = _by_id(_graph(build_graph_html(s, fold=True))[0])[closed.id]
    assert node["shape"] == "box" and node["font"]["strokeWidth"] == 0 and node["font"]["color"] == "#ffffff"
    assert "background" not in node["font"]
    assert node["label"].startswith(f"u{closed.id}") and node["font"]["size"] >= 16

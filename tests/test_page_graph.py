"""Memory graph page through Streamlit's AppTest: the embedded graph, archived units, time travel, details, diff."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from apptest import ENGINES, start_app
from streamlit.testing.v1 import AppTest

from engine.core.walks import neighbourhood
from engine.engines import engine_schema
from workbench.graph.tables import diff_default

ROOT = Path(__file__).resolve().parents[1]
APP = str(ROOT / "workbench" / "app.py")
PAGE = "../pages/2_memory_graph.py"      # relative to the main script's folder


def _open_graph(prepare=None, engine: str = "allmem") -> AppTest:
    """Run the app on the demo in `engine`, let `prepare(workbench)` set memory up, then open the graph page."""
    at, wb = start_app(engine)
    if prepare is not None:
        prepare(wb)
    at.switch_page(PAGE)
    at.run()
    assert not at.exception
    return at


def _graph_html(at: AppTest) -> str:
    """The document the page hands its clickable graph component."""
    canvases = at.get("bidi_component")
    assert len(canvases) == 1
    return json.loads(canvases[0].proto.json)["html"]


def _archived_nodes(html: str) -> list[str]:
    return re.findall(r'"label": "(u\d+) \[archived\]"', html)


def _through_d5_4_and_consolidate(wb) -> None:
    wb.jump(next(i for i, t in enumerate(wb.conversation.turns) if t.id == "D5:4") + 1)
    wb.ensure_head()
    wb.engine.consolidate()
    wb.reload()


@pytest.fixture(scope="module")
def consolidated() -> AppTest:
    return _open_graph(_through_d5_4_and_consolidate)


def test_empty_memory_points_to_replay():
    at = _open_graph()
    assert any("Replay" in i.value for i in at.info)
    assert not at.get("bidi_component")


@pytest.mark.parametrize("engine", ENGINES)
def test_graph_renders_with_the_schema_legend(engine):
    schema = engine_schema(engine)
    at = _open_graph(lambda wb: wb.jump(6), engine)
    html = _graph_html(at)
    wb = at.session_state["workbench"]
    state = wb.engine.state
    legend = re.search(r'<div class="mw-legend">(.*?)<div id="graph">', html, re.DOTALL).group(1)
    nodes, edges = (json.loads(m) for m in re.search(r"var nodeData = (.*?), edgeData = (.*?);\n", html,
                                                      re.DOTALL).groups())
    drawn = [state.nodes[n["id"]] for n in nodes if isinstance(n["id"], int)]
    for u in drawn:                                              # the legend lists what is drawn, as drawn
        assert f"{schema.kind(u.kind).label} · {schema.status(u.status).label} (" in legend
    for s in schema.statuses:
        assert (f"· {s.label} (" in legend) == any(u.status == s.name for u in drawn)
    drawn_types = {re.match(r"<b>(.*?)</b>", e["title"]).group(1) for e in edges}
    assert all(label in legend for label in drawn_types)
    assert ("none (this engine keeps no links)" in legend) == (not schema.edge_types)
    assert f"Showing {len(state.nodes)} nodes" in html and len(state.nodes) >= 6
    styled = {s.name: s.shape for s in schema.statuses if s.shape}      # a status may declare its own shape
    plain_visible = [u for u in state.visible_ids if state.nodes[u].status not in styled]
    assert len(re.findall(r'"shape": "dot"', html)) == len(plain_visible) + sum(
        styled[n.status] == "dot" for n in state.nodes.values() if n.status in styled)
    for n in state.nodes.values():
        if n.status in styled:
            assert re.search(rf'"id": {n.id}, "label": "[^"]*", "shape": "{styled[n.status]}"', html)
    for uid in state.archived_ids:                               # off the surface: named by status
        assert f'"label": "u{uid} [{state.nodes[uid].status}]"' in html
    pills = {p.label: p for p in at.get("button_group")}
    assert "Statuses" in pills
    assert ("Edge types" in pills) == bool(schema.edge_types)
    if not schema.edge_types:
        assert any("keeps no edges" in c.value for c in at.caption)
    assert not at.exception


def test_archived_units_are_distinguished_after_consolidation(consolidated):
    wb = consolidated.session_state["workbench"]
    archived = wb.engine.state.archived_ids
    assert archived
    html = _graph_html(consolidated)
    assert sorted(_archived_nodes(html)) == sorted(f"u{uid}" for uid in archived)
    assert '"shape": "square"' in html and '"borderDashes"' in html
    assert len(re.findall(r'"shape": "dot"', html)) == len(wb.engine.state.visible_ids)


def test_time_travel_before_the_run_has_no_archived_units(consolidated):
    wb = consolidated.session_state["workbench"]
    consolidated.slider(key="graph_turn").set_value(wb.cursor - 1).run()
    assert not consolidated.exception
    html = _graph_html(consolidated)
    assert not _archived_nodes(html)
    assert f"Showing {wb.cursor - 1} nodes" in html
    assert any("as of turn" in c.value for c in consolidated.caption)
    consolidated.slider(key="graph_turn").set_value(wb.cursor).run()
    assert _archived_nodes(_graph_html(consolidated))


def test_unit_detail_shows_lineage_of_an_archived_unit(consolidated):
    wb = consolidated.session_state["workbench"]
    uid = wb.engine.state.archived_ids[0]
    consolidated.selectbox(key="graph_unit").set_value(uid).run()
    assert not consolidated.exception
    assert any(m.value.startswith(f"#### u{uid} · ◌ archived") for m in consolidated.markdown)
    tables = [t.value for t in consolidated.dataframe]
    lineage = next(t for t in tables if "relation" in t.columns)
    assert (lineage["relation"] == "superseded by (newer)").any()
    assert any("direction" in t.columns for t in tables)


def test_diff_between_turns_lists_archived_and_added(consolidated):
    wb = consolidated.session_state["workbench"]
    consolidated.slider(key="graph_diff").set_value((wb.cursor - 1, wb.cursor)).run()
    assert not consolidated.exception
    tables = [t.value for t in consolidated.dataframe]
    archived = next(t for t in tables if "superseded by" in t.columns)
    assert set(archived["unit"]) == {f"u{u}" for u in wb.engine.state.archived_ids}
    metrics = {m.label: m.value for m in consolidated.metric}
    assert int(metrics["Archived"]) == len(wb.engine.state.archived_ids)


def test_filters_visible_only_and_search(consolidated):
    wb = consolidated.session_state["workbench"]
    consolidated.selectbox(key="graph_unit").set_value(wb.engine.state.visible_ids[0])
    consolidated.toggle(key="graph_visible_only").set_value(True).run()
    assert not _archived_nodes(_graph_html(consolidated))
    archived = wb.engine.state.archived_ids[0]
    consolidated.selectbox(key="graph_unit").set_value(archived).run()
    assert _archived_nodes(_graph_html(consolidated)) == [f"u{archived}"], "the inspected unit is always drawn"
    consolidated.toggle(key="graph_visible_only").set_value(False)
    consolidated.text_input(key="graph_search").input("half marathons").run()
    html = _graph_html(consolidated)
    assert not consolidated.exception
    assert re.search(r"Showing [1-9] nodes", html)
    consolidated.text_input(key="graph_search").input("").run()


def test_status_filter_keeps_only_the_chosen_statuses(consolidated):
    wb = consolidated.session_state["workbench"]
    pills = next(p for p in consolidated.get("button_group") if p.label == "Statuses")
    pills.set_value(["archived"]).run()
    assert not consolidated.exception
    html = _graph_html(consolidated)
    inspected = consolidated.selectbox(key="graph_unit").value
    shown = set(_archived_nodes(html))
    assert {f"u{u}" for u in wb.engine.state.archived_ids} <= shown
    assert f"Showing {len(set(wb.engine.state.archived_ids) | {inspected})} nodes" in html
    consolidated.get("button_group")[[p.label for p in consolidated.get("button_group")].index("Statuses")] \
        .set_value(["visible", "archived"]).run()


def test_focus_and_diff_rings(consolidated):
    wb = consolidated.session_state["workbench"]
    uid = wb.engine.state.archived_ids[0]
    consolidated.selectbox(key="graph_unit").set_value(uid)
    consolidated.toggle(key="graph_visible_only").set_value(False)
    consolidated.toggle(key="graph_focus").set_value(True).run()
    assert not consolidated.exception
    neighbours = {e.dst for e in wb.engine.state.out_edges(uid)} | {e.src for e in wb.engine.state.in_edges(uid)}
    assert f"Showing {len(neighbours | {uid})} nodes" in _graph_html(consolidated)
    consolidated.toggle(key="graph_focus").set_value(False)
    consolidated.slider(key="graph_diff").set_value((wb.cursor - 1, wb.cursor))
    consolidated.toggle(key="graph_ring_diff").set_value(True).run()
    assert not consolidated.exception
    assert _graph_html(consolidated).count('"borderWidth": 5') > 1


def _drawn_ids(html: str) -> list:
    return [n["id"] for n in json.loads(re.search(r"var nodeData = (.*?), edgeData = ", html, re.DOTALL).group(1))]


def test_grouped_sessions_follow_the_expanded_sessions_picker(consolidated):
    wb = consolidated.session_state["workbench"]
    state = wb.engine.state
    sessions = sorted({u.session for u in state.units.values()}, key=int)
    current = state.units[state.turn_units[wb.current_turn.id]].session
    assert current in consolidated.multiselect(key="graph_expand").value        # the cursor's session is open
    consolidated.multiselect(key="graph_expand").set_value([current])
    consolidated.selectbox(key="graph_grouping").set_value("always").run()
    assert not consolidated.exception
    drawn = _drawn_ids(_graph_html(consolidated))
    assert sorted(n for n in drawn if str(n).startswith("group:")) == sorted(
        f"group:{s}" for s in sessions if s != current)
    assert {state.units[n].session for n in drawn if isinstance(n, int)} == {current}
    consolidated.multiselect(key="graph_expand").set_value([]).run()
    html = _graph_html(consolidated)
    drawn = _drawn_ids(html)
    assert not [n for n in drawn if isinstance(n, int)]
    counts = {n["id"]: n["count"] for n in json.loads(re.search(r"var nodeData = (.*?), edgeData = ", html,
                                                                  re.DOTALL).group(1))}
    assert counts == {f"group:{s}": sum(u.session == s for u in state.units.values()) for s in sessions}
    assert any("Sessions are drawn as groups" in c.value for c in consolidated.caption)
    consolidated.selectbox(key="graph_grouping").set_value("auto").run()
    assert all(isinstance(n, int) or n.startswith("session:")        # the demo is far below GROUP_ABOVE
               for n in _drawn_ids(_graph_html(consolidated)))


def test_neighbourhood_reaches_the_chosen_number_of_hops(consolidated):
    wb = consolidated.session_state["workbench"]
    state = wb.engine.state
    uid = state.visible_ids[len(state.visible_ids) // 2]
    consolidated.selectbox(key="graph_unit").set_value(uid)
    consolidated.toggle(key="graph_ring_diff").set_value(False)         # rings would be drawn beside the focus
    consolidated.toggle(key="graph_focus").set_value(True).run()       # (Hops is enabled with it)
    consolidated.number_input(key="graph_hops").set_value(2).run()
    assert not consolidated.exception
    assert sorted(n for n in _drawn_ids(_graph_html(consolidated)) if isinstance(n, int)) == sorted(
        neighbourhood(state, {uid}, 2))
    consolidated.number_input(key="graph_hops").set_value(1)
    consolidated.toggle(key="graph_focus").set_value(False).run()


def test_the_diff_slider_starts_on_two_distinct_turns():
    at = _open_graph(lambda wb: wb.jump(40))
    first, last = at.slider(key="graph_diff").value
    wb = at.session_state["workbench"]
    assert first < last == wb.cursor and last - first == max(1, wb.head // 10)
    assert diff_default(0, 40) == (0, 4) and diff_default(1, 1) == (0, 1)

"""The pages on a RecMem session (AppTest, the bundled demo, the real embedder): the recurrence gate's trace and
the threshold sweep on Replay, the three layers on the graph, a consolidation reviewed with its cluster and
applied on Consolidation, provenance chains on Retrieval. Everything shown is checked against what the engine
stored (its op log and state)."""
from __future__ import annotations

import json

import pytest
from apptest import DEMO_SETTINGS, shown_text, start_app

from engine.core.oplog import OpKind
from engine.core.proposal import Status
from workbench.review.gate import gate_sentence

pytestmark = pytest.mark.slow

REPLAY, GRAPH = "../pages/1_replay.py", "../pages/2_memory_graph.py"
CONSOLIDATION, RETRIEVAL = "../pages/3_consolidation.py", "../pages/4_retrieval.py"


def gate_of(wb, turn: int) -> list[dict]:
    op = next(wb.engine.store.ops(kinds=[OpKind.TURN_INGESTED], turns=(turn, turn)))
    return op.payload["gate"]


def charts(at) -> list[dict]:
    return [json.loads(c.proto.spec) for c in at.get("plotly_chart")]


@pytest.fixture(scope="module")
def session():
    """The demo in RecMem (θ_sim 0.6, θ_count 3: `DEMO_SETTINGS`), stepped by hand (manual schedule) to turn 48."""
    at, wb = start_app("recmem")
    assert wb.engine.settings.theta_count == DEMO_SETTINGS["recmem"]["theta_count"]
    wb.jump(48)
    at.switch_page(REPLAY).run()
    assert not at.exception
    return at, wb


def test_replay_shows_the_stored_gate_trace(session):
    at, wb = session
    trigger = next(t for t in range(1, 49) if any(g["fired"] == "consolidate" for g in gate_of(wb, t)))
    wb.jump(trigger)
    at.run()
    assert not at.exception
    trace = next(g for g in gate_of(wb, trigger) if g["fired"] == "consolidate")
    shown = [shown_text(i.value)[0] for i in [*at.success, *at.info]]
    assert gate_sentence(trace) in shown and "Recurrence trigger" in gate_sentence(trace)
    frame = next(d.value for d in at.dataframe if "vs θ_sim" in d.value.columns)
    assert list(frame["unit"]) == [f"u{u}" for u, _ in trace["neighbours"]]
    assert list(frame["cosine"]) == [round(c, 4) for _, c in trace["neighbours"]]
    assert (frame["in cluster"] == "◀ cluster").sum() == len(trace["cluster"]) - 1 == trace["count"] - 1
    metric = next(m for m in at.metric if m.label == "|R| vs θ_count")
    assert metric.value == f"{trace['count']} / {trace['theta_count']}"
    gate_chart = next(c for c in charts(at) if c["layout"].get("title", {}) == {} and len(c["data"]) >= 1
                      and c["data"][0].get("name") == "neighbour cosine")
    assert gate_chart["data"][0]["y"] == pytest.approx([c for _, c in trace["neighbours"]])

    waiting = next(t for t in range(1, trigger) if not gate_of(wb, t))          # a message without its reply
    wb.jump(waiting)
    at.run()
    assert any("waits for its reply" in i.value for i in at.info)


def test_threshold_sweep_heatmap_is_the_engines(session):
    at, wb = session
    at.run()
    heat = next(c for c in charts(at) if c["data"] and c["data"][0]["type"] == "heatmap")
    cells = wb.engine.threshold_sweep(sorted(at.multiselect(key="sweep_sims").value),
                                      sorted(at.multiselect(key="sweep_counts").value), turns=wb.conversation.turns)
    by = {(c.theta_sim, c.theta_count): c for c in cells}
    z, xs, ys = heat["data"][0]["z"], heat["data"][0]["x"], heat["data"][0]["y"]
    assert all(z[i][j] == by[(float(y), int(x))].calls for i, y in enumerate(ys) for j, x in enumerate(xs))
    at.selectbox(key="sweep_metric").set_value("triggers").run()
    heat = next(c for c in charts(at) if c["data"] and c["data"][0]["type"] == "heatmap")
    assert heat["data"][0]["z"][0][0] == by[(float(ys[0]), int(xs[0]))].triggers


def test_consolidation_card_shows_the_cluster_then_applies_it(session):
    at, wb = session
    wb.jump(48)
    at.switch_page(CONSOLIDATION).run()
    assert not at.exception and not at.button(key="run_diagnosis").disabled
    at.button(key="run_diagnosis").click().run()
    run_id = wb.engine.open_run()
    props = [p for p in wb.engine.state.proposals.values() if p.run_id == run_id]
    cluster = next(p for p in props if p.op == "consolidate")
    frame = next(d.value for d in at.dataframe if "role" in d.value.columns and "cosine" in d.value.columns)
    assert list(frame["unit"]) == [r["unit"] for r in cluster.detail["cluster"]]
    assert list(frame["cosine"]) == [r["cosine"] for r in cluster.detail["cluster"]]
    at.radio(key="decision_mode").set_value("Let the gate decide").run()
    at.button(key="apply_run").click().run()
    assert not at.exception
    st = wb.engine.state
    assert st.proposals[cluster.id].status == Status.APPLIED
    episodes = st.proposals[cluster.id].detail["episodes"]
    assert episodes and all(st.nodes[e].kind == "episode" for e in episodes)
    assert all(st.nodes[u].status == "consolidated" for e in episodes for u in st.nodes[e].members)


def test_graph_layers_tab_draws_the_three_layers(session):
    at, wb = session
    if not any(n.kind == "fact" for n in wb.engine.state.nodes.values()):     # run alone: consolidate here
        wb.engine.consolidate()
        wb.reload()
    at.switch_page(GRAPH).run()
    assert not at.exception
    assert [t.label for t in at.tabs][-1] == "Layers"
    assert not any("group nodes" in c.value for c in at.caption)          # no topic network: RecMem has none
    layers = next(c for c in charts(at) if c["layout"].get("title", {}).get("text", "").startswith("Layers"))
    st = wb.engine.state
    assert layers["layout"]["yaxis"]["ticktext"] == ["fact", "episode", "interaction unit", "message"]
    for kinds in (("fact", "episode", "unit", "turn"), ("fact", "episode", "unit")):
        drawn = {i for t in layers["data"] if t.get("mode") == "markers" for i in t["customdata"]}
        assert drawn == {n.id for n in st.nodes.values() if n.kind in kinds}
        links = [t for t in layers["data"] if t.get("mode") == "lines"]
        assert sum(t["x"].count(None) for t in links) == sum(
            1 for (s, d, t) in st.edges if t == "derived_from" and st.nodes[d].kind in kinds)
        at.toggle(key="graph_layers_bottom").set_value(False).run()          # leave the message band out
        layers = next(c for c in charts(at) if c["layout"].get("title", {}).get("text", "").startswith("Layers"))


def test_retrieval_shows_layers_and_provenance(session):
    at, wb = session
    at.switch_page(RETRIEVAL).run()
    at.radio(key="retrieval_source").set_value("Free query").run()
    at.text_input(key="retrieval_query").input("How many half marathons has Jon run?").run()
    assert not at.exception
    res = wb.view.retrieve("How many half marathons has Jon run?", 5)
    text = "\n".join(c.value for c in at.code)
    for r in res.units[:5]:
        assert f"u{r.id}" in text and f"{r.layer} layer" in text
    derived = [r for r in res.units if r.provenance]
    assert derived and "derives from" in text

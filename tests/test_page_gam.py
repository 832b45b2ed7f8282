"""GAM on the pages (AppTest): the Replay page's phase, buffer gauge and detector boundaries; the Graph page's
topic network; the Consolidation page's topic edges with their segment, accepted, undone and rejected, read
back from the database."""
from __future__ import annotations

import json
import re

from engine.core.access import local_identity
from engine.core.proposal import GateVerdict, Status
from engine.store.log_store import Store
from tests.apptest import open_app_page, start_app
from workbench.graph.topics import build_network_html, groups
from workbench.model import DEMO_PATH, Workbench
from workbench.review import decisions as rd
from workbench.review import queue as rv

SESSION_ONE = 14            # the demo's first session; turn 15 opens session 2 and ends session 1


def drawn_ids(document: str) -> set:
    """The node ids a vis-network document draws."""
    nodes = re.search(r"var nodeData = (\[.*?\]), edgeData", document, re.S).group(1)
    return {n["id"] for n in json.loads(nodes)}


def apply(at) -> None:
    """Apply the decisions made, deferring any proposal left undecided (which closes the run)."""
    keys = {b.key for b in at.button}
    at.button(key="apply_defer" if "apply_defer" in keys else "apply_run").click().run()


def markdown_text(at) -> str:
    return "\n".join(m.value for m in at.markdown) + "\n".join(i.value for i in at.info)


def test_replay_shows_the_phase_the_buffer_gauge_and_the_detector_boundaries():
    at, wb = open_app_page("../pages/1_replay.py", turn=SESSION_ONE + 1, engine="gam")
    text = markdown_text(at)
    assert "**Phase** after this turn: **episodic buffering**" in text
    assert "→ **semantic consolidation** (before the turn, trigger **session end**): session 1 ended" in text
    assert "→ **episodic buffering** (before the turn)" in text
    assert "**Session end** trigger" in text and f"over {SESSION_ONE} utterances" in text
    titles = [c.proto.spec for c in at.get("plotly_chart")]
    assert any("Episodic buffer (minilm-wordpiece)" in spec for spec in titles)
    assert any(f"Detector boundaries over the {SESSION_ONE}-utterance buffer" in spec for spec in titles)
    buffered = [m for m in at.metric if m.label == "Events in the active graph"]
    assert buffered and buffered[0].value == "1"


def test_replay_shows_the_gauge_while_buffering():
    at, wb = open_app_page("../pages/1_replay.py", turn=5, engine="gam")
    text = markdown_text(at)
    assert "**Phase** after this turn: **episodic buffering**" in text and "trigger" not in text
    tokens = wb.engine.state.engine_state["buffer_tokens"]
    assert [m.value for m in at.metric if m.label == "Tokens now"] == [str(tokens)]


def test_graph_page_draws_the_topic_network_and_expands_a_topic():
    at, wb = open_app_page("../pages/2_memory_graph.py", turn=64, engine="gam")
    assert not at.exception
    tabs = [t.label for t in at.tabs]
    assert "Topic network" in tabs
    state = wb.engine.state
    topics = groups(state)
    assert len(topics) == sum(1 for u in state.nodes.values() if u.kind == "topic") > 4    # four sessions, cut inside
    folded = build_network_html(state)
    opened = build_network_html(state, {topics[0]})
    first = state.nodes[topics[0]]
    assert drawn_ids(folded) == set(topics)
    assert drawn_ids(opened) == set(topics) | set(first.members)
    assert "Edge width grows with confidence" in folded


def test_consolidation_reviews_a_topic_edge_with_its_segment_accept_undo_reject():
    at, wb0 = start_app()
    wb = Workbench.open(DEMO_PATH, None, engine="gam", settings={"link_review": "person"},
                        embedder=wb0.engine.embedder)
    wb.jump(64)
    at.session_state["workbench"] = wb
    at.switch_page("../pages/3_consolidation.py").run()
    assert not at.exception
    at.selectbox(key="consolidation_process").set_value("linking").run()
    at.button(key="run_diagnosis").click().run()
    assert not at.exception
    db = wb.db_path
    state = Store(db).load_state()
    run_id = next(r.run_id for r in state.open_runs())
    pending = rv.sort_queue(p for p in state.proposals.values() if p.run_id == run_id and p.status == Status.PENDING)
    chosen = next(p for p in pending if p.gate == GateVerdict.PASS)
    text = markdown_text(at)
    assert f"#{chosen.id} · Topic relation" in text and "new topic" in text and "earlier topic" in text
    assert "New topic's segment" in text or "★ cited" in text            # its inputs: the segment's utterances
    at.radio(key=rd.widget_key(rd.run_key(db.name, run_id), chosen.id)).set_value("Accept").run()
    apply(at)
    assert not at.exception
    edge = (chosen.targets[0], chosen.targets[1], chosen.plan["relation"])
    stored = Store(db).load_state()
    assert edge in stored.edges and stored.proposals[chosen.id].status == Status.APPLIED
    assert stored.proposals[chosen.id].decided_by == local_identity().name      # the person at the keyboard
    at.button(key="undo_start").click().run()
    at.button(key="undo_confirm").click().run()
    assert not at.exception
    stored = Store(db).load_state()
    assert edge not in stored.edges and stored.runs[run_id].status == "undone"
    at.button(key="run_diagnosis").click().run()
    stored = Store(db).load_state()
    again = next(r.run_id for r in stored.open_runs())
    same = next(p for p in stored.proposals.values() if p.run_id == again and p.targets == chosen.targets)
    at.radio(key=rd.widget_key(rd.run_key(db.name, again), same.id)).set_value("Reject").run()
    apply(at)
    stored = Store(db).load_state()
    assert edge not in stored.edges and stored.proposals[same.id].status == Status.REJECTED

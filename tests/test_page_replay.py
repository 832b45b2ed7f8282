"""Replay page through Streamlit's AppTest: stepping, jumping, loading, and loader errors."""
from __future__ import annotations

from pathlib import Path

import pytest
from apptest import ENGINES, WITHOUT_PROCESS, shown_text, start_app
from streamlit.testing.v1 import AppTest

from engine.engines import engine_schema, known_engines
from engine.store.data_paths import DATA_DIRS_ENV
from tests.conftest import SHARED_DATA, needs_data
from workbench.driver import demo_turn_after
from workbench.model import DEMO_PATH, Workbench
from workbench.replay.settings_form import settings_key
from workbench.session_link import NEW_PARAM

ROOT = Path(__file__).resolve().parents[1]
APP = str(ROOT / "workbench" / "app.py")


@pytest.fixture
def at() -> AppTest:
    app = AppTest.from_file(APP, default_timeout=180)
    app.query_params[NEW_PARAM] = "demo"             # a new demo session, not the last one a test left behind
    app.run()
    assert not app.exception
    return app


def _wb(at: AppTest):
    return at.session_state["workbench"]


def _texts(at: AppTest) -> str:
    return " ".join(str(e.value) for kind in ("markdown", "info", "success", "error", "subheader", "caption")
                    for e in getattr(at, kind))


def test_page_runs_on_the_demo(at):
    assert _wb(at).conversation.id == "demo"
    assert {"replay_next", "replay_back", "replay_play", "replay_go_turn", "replay_go_session", "replay_load"} <= {
        b.key for b in at.button}
    assert "Nothing ingested yet" in _texts(at)


@pytest.mark.parametrize("engine", ENGINES)
def test_next_adds_a_node_and_explains_it(engine):
    at, wb = start_app(engine)
    assert len(wb.engine.state.nodes) == 0
    at.button(key="replay_next").click().run()
    assert not at.exception
    wb = _wb(at)
    assert wb.engine_name == engine and wb.cursor == 1
    first = wb.last_ingest.created
    assert first and len(wb.engine.state.nodes) == len(first)          # the ingest made the turn's node(s)
    at.button(key="replay_next").click().run()
    report = _wb(at).last_ingest
    assert len(wb.engine.state.nodes) >= len(first) + 1 and "D1:2" in wb.engine.state.turn_units
    assert any(s.value == "What turn D1:2 caused" for s in at.subheader)
    html = " ".join(h.proto.body for h in at.get("html"))
    assert "▶ current turn" in html and "D1:2" in html
    assert "Node created" in html and f"u{wb.engine.state.turn_units['D1:2']}" in html
    assert all(f"<code>u{uid}</code>" in html for uid in report.created)
    schema = engine_schema(engine)
    for uid in report.created:                  # the kind as the schema labels it and as JSON stores it
        kind = wb.engine.state.units[uid].kind
        label = schema.kind(kind).label
        assert f"kind {label} ({kind}) · " in html if label != kind else f"kind {kind} · " in html
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Nodes created"] == str(len(report.created))
    assert metrics["Edges added"] == str(len(report.edges))
    header = " ".join(m.value for m in at.markdown)
    assert f"**Engine** · {engine_schema(engine).label}" in header
    assert all(f"{s.label} " in header for s in engine_schema(engine).statuses)
    if report.anchors or report.edges:
        assert at.dataframe, "anchors / edges tables"
    if engine_schema(engine).processes:       # one word and one count per process's buffer: the header's and the metric's
        for p in engine_schema(engine).processes:
            queued = len(wb.engine.state.buffer(p.buffer))
            assert f"**Queued for {p.label}** · {queued}" in header
            assert metrics[f"Queued for {p.label}"] == str(queued)
        assert "**Buffered**" not in header
    else:
        assert not [m for m in metrics if m.startswith("Queued")] and "Offline process** · none" in header


def test_back_moves_the_cursor_without_changing_the_log(at):
    for _ in range(3):
        at.button(key="replay_next").click().run()
    wb = _wb(at)
    seq, head, units = wb.engine.store.last_seq(), wb.head, len(wb.engine.state.units)
    at.button(key="replay_back").click().run()
    assert not at.exception
    wb = _wb(at)
    assert wb.cursor == 2 and wb.head == head == 3
    assert wb.engine.store.last_seq() == seq and len(wb.engine.state.units) == units
    assert len(wb.view.state.units) == units - 1
    assert "fold of the log" in _texts(at)
    assert any(s.value == "What turn D1:2 caused" for s in at.subheader)
    at.button(key="replay_next").click().run()
    assert _wb(at).cursor == 3 and _wb(at).engine.store.last_seq() == seq


def test_jump_to_session_and_turn_and_play(at):
    at.selectbox(key="replay_session_target").set_value("3")
    at.button(key="replay_go_session").click().run()
    assert not at.exception
    wb = _wb(at)
    first = next(i for i, t in enumerate(wb.conversation.turns) if t.session == "3")
    assert wb.cursor == first + 1 and wb.current_turn.session == "3"
    assert at.number_input(key="replay_turn_target").value == wb.cursor

    at.button(key="replay_play").click().run()
    wb = _wb(at)
    assert wb.current_turn.session == "3" and wb.conversation.turns[wb.cursor].session == "4"

    at.number_input(key="replay_turn_target").set_value(5)
    at.button(key="replay_go_turn").click().run()
    assert _wb(at).cursor == 5 and not _wb(at).at_head


def test_scheduled_consolidation_is_reported(at):
    at.selectbox(key="replay_schedule").set_value("every-3-sessions")
    at.button(key="replay_load").click().run()
    assert not at.exception
    assert _wb(at).schedule.kind == "sessions"
    at.selectbox(key="replay_session_target").set_value("4")
    at.button(key="replay_go_session").click().run()
    assert not at.exception
    assert any("run-0001 ran before this turn was ingested, on schedule" in s.value for s in at.success)


@pytest.mark.parametrize("schedule, choice, every", [("every-3-sessions", "every-3-sessions", None),
                                                     ("every-2-sessions", "every-N-sessions", 2),
                                                     ("every-5-turns", "every-N-turns", 5)])
def test_the_settings_panel_shows_the_sessions_own_schedule(at, schedule, choice, every):
    """The schedule picker shows the open session's schedule (its meta), also after a visit to another page,
    which drops the picker's own state, and for a schedule that is not one of the presets."""
    wb = Workbench.open(DEMO_PATH, schedule=schedule, embedder=_wb(at).engine.embedder)
    assert wb.engine.store.meta()["schedule"] == schedule
    at.session_state["workbench"] = wb
    at.run()
    at.switch_page("../pages/3_consolidation.py").run()
    at.switch_page("../pages/1_replay.py").run()
    assert not at.exception
    assert at.selectbox(key="replay_schedule").value == choice
    if every is not None:
        assert at.number_input(key=f"replay_every_{wb.schedule.kind}").value == every
    assert f"**Schedule** · `{schedule.replace('-', ' ')}`" in " ".join(m.value for m in at.markdown)


def test_load_a_jsonl_file_with_settings(at):
    at.radio(key="replay_source").set_value("JSONL file").run()
    at.text_input(key="replay_path_JSONL file").input(str(ROOT / "datasets" / "fixtures" / "tiny.jsonl")).run()
    assert not at.error
    at.multiselect(key=settings_key("replay", "allmem", "ablations")).set_value(["no-merge"])
    at.number_input(key=settings_key("replay", "allmem", "theta", "update")).set_value(0.75)
    at.number_input(key=settings_key("replay", "allmem", "k")).set_value(7)
    at.button(key="replay_load").click().run()
    assert not at.exception
    wb = _wb(at)
    assert wb.source_label == "tiny.jsonl" and wb.engine.settings.ablations == ["no-merge"]
    assert wb.engine.settings.theta["update"] == 0.75 and wb.engine.settings.k == 7
    assert wb.engine.store.meta()["settings"]["theta"]["update"] == 0.75       # stored with the session
    header = " ".join(m.value for m in at.markdown)
    assert "Ablations · no-merge" in shown_text(header)[0] and "k=7" in header


def test_a_meeting_loaded_on_the_page_runs_with_the_engines_fit_for_meetings(monkeypatch):
    """A QMSum meeting loaded into GAM from the Replay page gets GAM's fit for meetings and the meeting schedule,
    as `memwb replay` and `memwb bench --dataset qmsum` give it (issue 53.9), a changed field still winning; the
    page says so before Load and the header after, and the session stores it."""
    from engine.bench.datasets import DATASETS

    meeting = needs_data(SHARED_DATA / "qmsum" / "test" / "IS1003a.json")
    monkeypatch.setenv(DATA_DIRS_ENV, str(meeting.parent))
    at = AppTest.from_file(APP, default_timeout=180)
    at.query_params[NEW_PARAM] = "demo"
    at.run()
    at.radio(key="replay_source").set_value("QMSum meeting").run()
    at.text_input(key="replay_path_QMSum meeting").input(str(meeting)).run()
    at.selectbox(key="replay_engine").set_value("gam").run()
    note = shown_text(" ".join(i.value for i in at.info))[0]
    assert "This file holds meetings: GAM's fit for meetings (fits.meetings: " in note and "fits.meetings" in note and "every-200-turns" in note
    assert at.checkbox(key="replay_apply_fit").value                      # applied unless unticked
    at.number_input(key=settings_key("replay", "gam", "min_segment")).set_value(7)
    at.button(key="replay_load").click().run()
    assert not at.exception
    wb = _wb(at)
    fit = engine_schema("gam").fits["meetings"]
    stored = wb.engine.store.meta()
    assert stored["fit"] == "meetings" and stored["schedule"] == DATASETS["qmsum"].schedule
    assert stored["settings"]["min_segment"] == 7 and all(stored["settings"][k] == v for k, v in fit.items()
                                                          if k != "min_segment")
    header = " ".join(m.value for m in at.markdown)
    assert "Fit · meetings (fits.meetings of GAM's schema)" in shown_text(header)[0]


def test_settings_form_follows_the_engine_schema(at):
    """Every Settings field gets a widget with its bounds and help; advanced ones sit in an expander."""
    import dataclasses

    from engine.engines import settings_class

    labels = {e.label for e in at.expander}
    assert any(label.startswith("Advanced settings") for label in labels)
    for f in dataclasses.fields(settings_class("allmem")):
        default = getattr(settings_class("allmem")(), f.name)
        if isinstance(default, dict):
            for item in default:
                w = at.number_input(key=settings_key("replay", "allmem", f.name, item))
                assert w.min == f.metadata["min"] and w.max == f.metadata["max"] and w.step == f.metadata["step"]
        elif isinstance(default, list):
            assert set(at.multiselect(key=settings_key("replay", "allmem", f.name)).options) == \
                set(f.metadata["choices"])
        else:
            w = at.number_input(key=settings_key("replay", "allmem", f.name))
            assert w.value == default and w.min == f.metadata["min"] and w.max == f.metadata["max"]
            assert w.help == f.metadata["help"]
    assert at.selectbox(key="replay_schedule")


@pytest.mark.parametrize("engine", WITHOUT_PROCESS)
def test_the_engine_picker_loads_an_engine_without_a_process(at, engine):
    """Picking another engine swaps the settings form to its fields and Load opens that engine."""
    assert set(at.selectbox(key="replay_engine").options) == {engine_schema(n).label for n in known_engines()}
    at.selectbox(key="replay_engine").set_value(engine).run()
    assert not at.exception
    assert not [s for s in at.selectbox if s.key == "replay_schedule"], "no offline process: no schedule"
    assert any("no offline process" in c.value for c in at.caption)
    at.number_input(key=settings_key("replay", engine, "final_k")).set_value(9)
    at.button(key="replay_load").click().run()
    assert not at.exception
    wb = _wb(at)
    assert wb.engine_name == engine and wb.engine.settings.final_k == 9 and wb.schedule.kind == "manual"
    assert wb.engine.store.meta()["engine"] == engine
    at.button(key="replay_next").click().run()
    assert not at.exception and wb.engine.state.turn == 1 and len(wb.engine.state.nodes) == 1


def test_malformed_file_is_rejected_and_nothing_is_lost(at, tmp_path, monkeypatch):
    monkeypatch.setenv(DATA_DIRS_ENV, str(tmp_path))          # a data folder the path box may read from
    at.button(key="replay_next").click().run()
    loaded = _wb(at)
    bad = tmp_path / "broken.jsonl"
    bad.write_text('{"id": "t1", "speaker": "Ana", "text": "hi", "time": "2024-01-01T10:00:00", "session": "1"}\n'
                   '{"id": "t2", "speaker": "Ana", "time": "2024-01-01T10:01:00", "session": "1"}\n')
    at.radio(key="replay_source").set_value("JSONL file").run()
    at.text_input(key="replay_path_JSONL file").input(str(bad)).run()
    assert not at.exception
    message = " ".join(shown_text(e.value)[0] for e in at.error)
    assert "broken.jsonl" in message and "text" in message and "line 2" in message
    assert at.button(key="replay_load").disabled
    assert _wb(at) is loaded and loaded.cursor == 1


def test_missing_path_is_reported(at, tmp_path, monkeypatch):
    monkeypatch.setenv(DATA_DIRS_ENV, str(tmp_path))
    at.radio(key="replay_source").set_value("LoCoMo file").run()
    at.text_input(key="replay_path_LoCoMo file").input(str(tmp_path / "nope.json")).run()
    assert any("No file at" in e.value for e in at.error)


def test_every_path_box_refuses_files_outside_the_data_folders(at, tmp_path, monkeypatch):
    """Traversal, absolute paths and symbolic links out of a data folder, in both path boxes: each refused with
    the allowed folders named, and nothing read (the outside file's conversation id never shows)."""
    data, outside = tmp_path / "data", tmp_path / "private"
    data.mkdir()
    outside.mkdir()
    monkeypatch.setenv(DATA_DIRS_ENV, str(data))
    secret = '{"id": "t1", "speaker": "Ana", "text": "my diagnosis", "time": "2024-01-01T10:00:00", "session": "1"}\n'
    (outside / "PRIVATE-conv.jsonl").write_text(secret)
    (outside / "PRIVATE-conv.json").write_text('[{"sample_id": "PRIVATE-conv", "conversation": {}}]')
    (data / "link.jsonl").symlink_to(outside / "PRIVATE-conv.jsonl")
    (data / "away").symlink_to(outside)
    wb = _wb(at)
    for kind, name in (("JSONL file", "PRIVATE-conv.jsonl"), ("LoCoMo file", "PRIVATE-conv.json")):
        at.radio(key="replay_source").set_value(kind).run()
        for attempt in (str(outside / name), f"{data}/../private/{name}", f"../private/{name}",
                        str(data / "link.jsonl"), str(data / "away" / name), "/etc/passwd"):
            at.text_input(key=f"replay_path_{kind}").input(attempt).run()
            assert not at.exception
            shown = " ".join(shown_text(e.value)[0] for e in at.error)
            assert "is outside the folders the workbench reads from" in shown and str(data) in shown, (attempt, shown)
            box = next(b for b in at.selectbox if b.label == "Conversation")
            assert box.disabled and not box.options, attempt
            assert at.button(key="replay_load").disabled and _wb(at) is wb


# -- the helpers behind the page ---------------------------------------------------------------------------
def test_transcript_escapes_text_and_marks_the_cursor():
    from engine.core.conversation import Turn
    from engine.core.state import MemoryState
    from workbench.replay.transcript import transcript_html

    turns = [Turn(f"D1:{i}", "<b>Ana</b>", f"<script>alert({i})</script>", f"2024-01-01T10:0{i}:00", "1", i)
             for i in range(1, 6)]
    html = transcript_html(turns, cursor=2, head=3, state=MemoryState(), before=1, after=2)
    assert "<script>" not in html and "&lt;script&gt;alert(2)&lt;/script&gt;" in html
    assert "&lt;b&gt;Ana&lt;/b&gt;" in html
    assert html.count("▶ current turn") == 1
    assert "in the log, ahead of the cursor" in html and "not yet ingested" in html
    assert "alert(5)" not in html                     # outside the window


def test_turn_effects_read_from_the_log_match_the_ingest_report():
    from workbench.model import Workbench
    from workbench.replay.turn_effects import turn_effects

    wb = Workbench.demo()
    wb.jump(6)
    report = wb.last_ingest
    at_head = turn_effects(wb.view, 6, report)
    assert at_head.unit_id == report.unit_id and at_head.created == report.created
    assert at_head.anchors == [(a, float(c)) for a, c in report.anchors]
    assert [e.key for e in at_head.edges] == [e.key for e in report.edges]
    assert at_head.buffer_size == report.buffer_size
    wb.back()
    wb.back()
    behind = turn_effects(wb.engine.at(upto_turn=6), 6)
    assert behind.unit_id == report.unit_id and [e.key for e in behind.edges] == [e.key for e in report.edges]
    assert [a for a, _ in behind.anchors] == [a for a, _ in report.anchors]
    assert all(abs(c - float(r)) < 1e-4 for (_, c), (_, r) in zip(behind.anchors, report.anchors))


def test_a_long_jump_runs_in_the_page_with_its_progress_and_lands_on_the_target(at):
    """A jump that ingests more than a few turns is carried out by the page body (progress bar, Cancel button)
    and leaves the cursor, the header and the jump box on the target; a short one runs at once."""
    at.number_input(key="replay_turn_target").set_value(3)
    at.button(key="replay_go_turn").click().run()
    assert _wb(at).cursor == 3 and "replay_jump" not in at.session_state
    at.number_input(key="replay_turn_target").set_value(25)
    at.button(key="replay_go_turn").click().run()
    assert not at.exception
    wb = _wb(at)
    assert wb.cursor == wb.head == 25 and "replay_jump" not in at.session_state
    assert at.number_input(key="replay_turn_target").value == 25
    assert f"**Turn** · 25 / {wb.total_turns}" in " ".join(m.value for m in at.markdown)
    assert not [b for b in at.button if b.key == "replay_cancel"]            # gone once the jump is done


def test_jump_clock_times_each_phase():
    from workbench.model import JumpProgress
    from workbench.replay.progress import JumpClock

    now = [100.0]
    clock = JumpClock(every=1.0, now=lambda: now[0])
    now[0] = 102.0
    first = JumpProgress("embedding", 64, 128, 0, 128)
    assert clock.due(first) and clock.left(first) == 2.0
    assert clock.text(first) == ("Jump to turn 128: embedding its turn texts 64 / 128 · 2 s elapsed · "
                                 "about 2 s left for the texts")
    now[0] = 104.0
    assert clock.due(JumpProgress("embedding", 128, 128, 0, 128))          # a phase's end is always drawn
    now[0] = 104.5
    step = JumpProgress("ingesting", 1, 128, 1, 128)
    assert clock.due(step) and clock.left(step) == 0.5 * 127                # the rate of this phase only
    now[0] = 104.9
    assert not clock.due(JumpProgress("ingesting", 2, 128, 2, 128))        # within `every` of the last draw
    assert clock.text(JumpProgress("ingesting", 2, 128, 2, 128)) == \
        "Turn 2 / 128 · 2 of 128 turns ingested · 5 s elapsed · about 57 s left"      # 0.45 s a turn


def test_the_current_turn_is_last_in_the_scrolling_box_and_upcoming_turns_sit_below_it():
    from engine.core.conversation import Turn
    from engine.core.state import MemoryState
    from workbench.replay.transcript import transcript_html

    turns = [Turn(f"D1:{i}", "Ana", "long " * 400, f"2024-01-01T10:0{i}:00", "1", i) for i in range(1, 9)]
    html = transcript_html(turns, cursor=4, head=4, state=MemoryState(), before=2, after=3)
    box, below = html.split('<div class="mw-tr">')[1].split('<div class="mw-next">')
    assert box.rindex("#4 · D1:4") > box.rindex("#3 · D1:3") and "▶ current turn" in box and "#5 ·" not in box
    assert "#5 · D1:5" in below and "not yet ingested" in below and "current turn" not in below


def test_a_long_jump_refused_by_an_open_run_says_why_and_a_stale_one_is_dropped(at):
    wb = _wb(at)
    turn = demo_turn_after("D3:4")                  # the demo's intended Split waits for a decision there
    wb.jump(turn)
    assert wb.engine.propose(manual=True)
    at.number_input(key="replay_turn_target").set_value(turn + 20)
    at.button(key="replay_go_turn").click().run()
    assert not at.exception and _wb(at).head == turn
    assert any("waiting for a decision" in e.value for e in at.error)
    at.session_state["replay_jump"] = ("/elsewhere/another-session.sqlite", turn + 30)  # pending for a replaced session
    at.run()
    assert _wb(at).head == turn and "replay_jump" not in at.session_state


def test_memloom_settings_read_as_the_paper_writes_them(at):
    """MemLoom's form labels each knob with the paper's symbol and a plain name from the schema's declaration
    (no "lam", "tau new", "w1", "theta s", "k sem"), and its group headings as declared ("HDRA", not "Hdra")."""
    import dataclasses

    from engine.engines import settings_class

    at.selectbox(key="replay_engine").set_value("memloom").run()
    assert not at.exception
    fields = dataclasses.fields(settings_class("memloom"))
    labels = {f.name: at.number_input(key=settings_key("replay", "memloom", f.name)).label for f in fields
              if isinstance(getattr(settings_class("memloom")(), f.name), (int, float))
              and not isinstance(getattr(settings_class("memloom")(), f.name), bool)}
    assert labels["lam"] == "λ — recency decay (per day)" and labels["tau_new"] == "τ_new — new-event threshold"
    assert labels["w1"] == "w₁ — evidence-count weight" and labels["theta_s"] == "θ_s — topic-link margin"
    assert labels["k_sem"] == "k_sem — topic links per event" and labels["theta_rel"] == "θ_rel — relation gate"
    assert labels["seeds"] == "seeds"                                          # a plain name stays itself
    raw = {"lam", "tau new", "w1", "w2", "w3", "theta s", "k sem", "theta rel", "alpha", "beta", "gamma"}
    assert not raw & set(labels.values())
    headings = {m.value for m in at.markdown}
    assert "**HDRA**" in headings and "**Hdra**" not in headings

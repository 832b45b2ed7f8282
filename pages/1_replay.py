"""Replay: load a conversation, step it into any registered engine turn by turn, and see what each turn caused."""
from __future__ import annotations

from pathlib import Path

import streamlit as st

from engine.bench.datasets import DATASETS
from engine.bench.talk import TalkFit, dataset_fit, dataset_of_file, with_fit
from engine.core.access import AccessDenied
from engine.engines import broken_engines, engine_schema, known_engines
from engine.loaders import LoaderError
from engine.store.data_paths import PathRefused, is_allowed, resolve_data_path
from engine.store.log_store import StoreError
from engine.store.workspace import workspace_dir
from workbench import access
from workbench.benchmark.llm_costs import session_costs_panel
from workbench.model import (
    DEMO_PATH,
    LOCOMO_PATH,
    UPLOAD_LIMIT_BYTES,
    JumpCancelled,
    JumpProgress,
    Workbench,
    list_conversations,
)
from workbench.replay.effects import render_effects
from workbench.replay.progress import JumpClock
from workbench.replay.session_picker import session_picker
from workbench.replay.settings_form import defaults, settings_class, settings_form
from workbench.replay.transcript import transcript_html
from workbench.replay.turn_effects import turn_effects
from workbench.state import get_workbench, live_header, new_embedder, set_workbench
from workbench.text import md_code, md_escape

SOURCES = ("Bundled demo", "LoCoMo file", "JSONL file", "QMSum meeting", "Upload")
SCHEDULES = {"manual": "Manual (Consolidation page)", "every-3-sessions": "Every 3 sessions (default)",
             "every-N-sessions": "Every N sessions", "every-N-turns": "Every N turns"}
EVERY_N = {"sessions": "every-N-sessions", "turns": "every-N-turns"}


@st.cache_data(show_spinner=False, max_entries=16)
def _conversation_ids(path: str, mtime: float, size: int) -> list[str]:
    """Conversation ids in a file; keyed by mtime and size so an edited file is read again."""
    return list_conversations(Path(path))


@st.cache_data(show_spinner=False, max_entries=16)
def _dataset_name(path: str, mtime: float, size: int) -> str | None:
    """The dataset whose format the file is in (its kind of talk), read once per version of the file."""
    spec = dataset_of_file(Path(path))
    return spec.name if spec else None


def _talk_fit(engine: str, path: Path) -> TalkFit | None:
    """What a Load of this file into `engine` runs with for the talk it holds (`engine.bench.talk`)."""
    stat = path.stat()
    return dataset_fit(engine, DATASETS.get(_dataset_name(str(path), stat.st_mtime, stat.st_size)))


def _show_loader_error(err: LoaderError) -> None:
    where = ", ".join(part for part in (f"record {err.record}" if err.record else "",
                                        f"field '{err.field}'" if err.field else "") if part)
    st.error(f"Could not load **{md_escape(Path(err.path).name)}**{f' ({md_escape(where)})' if where else ''}: "
             f"{md_escape(err.message)}. "
             "Nothing was changed: the conversation already loaded is still there.", icon=":material/error:")


def _saved_upload(upload) -> Path:
    """Uploaded bytes on disk under their own name (the loaders recognise the format by suffix), in the workspace
    so a session replayed from an upload can be reopened later."""
    target = workspace_dir() / "uploads" / upload.file_id / Path(upload.name).name
    if not target.exists():
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(upload.getvalue())
    return target


def _source_path(kind: str) -> tuple[Path | None, str]:
    """The file the chosen source points at (None if not usable yet) and a label for the header."""
    if kind == "Bundled demo":
        return DEMO_PATH, "bundled demo"
    if kind == "Upload":
        upload = st.file_uploader("Dataset file (LoCoMo / LongMemEval JSON or JSONL)", type=["json", "jsonl", "ndjson"],
                                  key="replay_upload")
        if upload is None:
            return None, ""
        if upload.size > UPLOAD_LIMIT_BYTES:
            st.error(f"**{md_escape(upload.name)}** is {upload.size / 2**20:.1f} MB; uploads are limited to "
                     f"{UPLOAD_LIMIT_BYTES / 2**20:.0f} MB. Put the file on disk and use a path source instead.",
                     icon=":material/error:")
            return None, ""
        return _saved_upload(upload), f"upload: {upload.name}"
    default = str(LOCOMO_PATH) if kind == "LoCoMo file" and is_allowed(LOCOMO_PATH) and LOCOMO_PATH.exists() else ""
    text = st.text_input(f"{kind.split()[0]} file path", value=default, key=f"replay_path_{kind}",
                         placeholder="/path/to/file.jsonl" if kind == "JSONL file" else "/path/to/file.json",
                         help="A file in the workspace, the bundled datasets or a folder of MEMWB_DATA_DIRS "
                              "(memwb ui --data-dir); anything else: upload it.")
    if not text.strip():
        return None, ""
    try:
        path = resolve_data_path(text, "dataset file")
    except PathRefused as exc:
        st.error(md_escape(exc), icon=":material/block:")
        return None, ""
    if not path.is_file():
        st.error(f"No file at {md_code(path)}.", icon=":material/error:")
        return None, ""
    return path, path.name


def _follow_session(wb: Workbench) -> None:
    """Point the engine and schedule pickers at the open session's own engine and schedule (its meta) when the
    session changes, or when a picker lost its state (Streamlit drops it on a run that does not draw it, such as
    a visit to another page): they never show a default the session does not use."""
    engines = known_engines()
    follows = st.session_state.get("replay_follows") == str(wb.db_path)
    st.session_state["replay_follows"] = str(wb.db_path)
    if not follows or st.session_state.get("replay_engine") not in engines:
        st.session_state["replay_engine"] = wb.engine_name if wb.engine_name in engines else engines[0]
    if not follows or "replay_schedule" not in st.session_state:
        name = wb.schedule_name
        st.session_state["replay_schedule"] = name if name in SCHEDULES else EVERY_N[wb.schedule.kind]
        if name not in SCHEDULES:
            st.session_state[f"replay_every_{wb.schedule.kind}"] = wb.schedule.every


def _engine_and_settings(wb: Workbench) -> tuple[str, str, dict]:
    """Engine name, schedule string and engine settings from the widgets (the form follows the engine)."""
    _follow_session(wb)
    engines = known_engines()
    c1, c2 = st.columns([2, 3])
    name = c1.selectbox("Engine", engines, key="replay_engine", format_func=lambda n: engine_schema(n).label,
                        help="The engine the conversation is replayed into (every registered engine).")
    for broken in broken_engines():
        st.warning(f"Engine plugin {md_code(broken.name)} from {md_escape(broken.describe())} cannot be used: "
                   f"{md_escape(broken.error)}", icon=":material/extension_off:")
    schema = engine_schema(name)
    schedule = "manual"
    if schema.processes:
        names = ", ".join(p.label for p in schema.processes)
        choice = c2.selectbox(f"Schedule of {names}", list(SCHEDULES), format_func=SCHEDULES.get,
                              key="replay_schedule", help="When the engine's offline processes run during replay.")
        schedule = choice
        kind = next((k for k, option in EVERY_N.items() if option == choice), None)
        if kind is not None:
            st.session_state.setdefault(f"replay_every_{kind}", 10 if kind == "turns" else 3)
            n = c2.number_input(f"N ({kind} between runs)", min_value=1, max_value=500, key=f"replay_every_{kind}")
            schedule = f"every-{int(n)}-{kind}"
    else:
        c2.caption(f"{schema.label} has no offline process: nothing to schedule.")
    st.caption(schema.description)
    return name, schedule, settings_form(name, prefix="replay")


def loader() -> None:
    """Source, conversation, engine and settings; Load replaces the session's workbench only on success."""
    kind = st.radio("Source", SOURCES, horizontal=True, key="replay_source")
    path, label = _source_path(kind)
    ids: list[str] = []
    if path is not None:
        try:
            stat = path.stat()
            ids = _conversation_ids(str(path), stat.st_mtime, stat.st_size)
        except LoaderError as err:
            _show_loader_error(err)
    conversation = st.selectbox("Conversation", ids, key=f"replay_conversation:{path}", disabled=not ids,
                                placeholder="choose a readable source first")
    engine, schedule, settings = _engine_and_settings(get_workbench())
    fit = _talk_fit(engine, path) if path is not None and ids else None
    if fit is not None:
        st.info(f"This file holds **{fit.talk}**: {md_escape(fit.text())}.", icon=":material/tune:")
        if st.checkbox(f"Apply the fit for {fit.talk}", value=True, key="replay_apply_fit",
                       help="Its settings under any you changed above, and its schedule instead of the one above."):
            settings = with_fit(fit, {k: v for k, v in settings.items() if v != defaults(settings_class(engine))[k]})
            schedule = fit.schedule
        else:
            fit = None
    if st.button("Load", type="primary", disabled=conversation is None, key="replay_load"):
        try:
            with st.spinner(f"Opening {conversation}…"):
                wb = Workbench.open(path, conversation, engine=engine, label=label, schedule=schedule,
                                    settings=settings, embedder=new_embedder(), owner=access.who(),
                                    fit=fit.talk if fit else None)
        except LoaderError as err:
            _show_loader_error(err)
            return
        except ValueError as err:            # settings the engine refuses (say, an unknown ablation)
            st.error(f"Could not open the {engine_schema(engine).label} engine: {md_escape(err)}",
                     icon=":material/error:")
            return
        set_workbench(wb)
        _sync_targets()
        st.session_state["replay_flash"] = (f"Loaded {md_escape(conversation)} from {md_escape(label)} into "
                                            f"{wb.schema.label}: "
                                            f"{wb.total_turns} turns.")
        st.rerun()


# -- stepping (callbacks run before the page is drawn, so the header shows the new turn) ---------------------
def _sync_targets() -> None:
    """Point the jump widgets at the cursor (after a step, or a new conversation with other bounds)."""
    wb = get_workbench()
    st.session_state["replay_turn_target"] = wb.cursor
    st.session_state["replay_session_target"] = (wb.current_turn or wb.conversation.turns[0]).session


JUMPS = ("play", "turn", "session")
FEW_TURNS = 5          # a jump ingesting more turns than this runs in the page with a progress bar and Cancel


def _jump_target(wb: Workbench, action: str) -> int:
    """The cursor a jump action goes to; its target is read from the widget when the button is pressed."""
    if action == "play":
        return wb.session_end()
    if action == "turn":
        return int(st.session_state["replay_turn_target"])
    return wb.session_start(st.session_state["replay_session_target"])


def _guarded(wb: Workbench, run) -> None:
    """Run a stepping action, turning a refusal into the page's error and noting other writers' records.

    Streamlit's own stop and rerun signals are BaseExceptions and pass through untouched."""
    others = wb.engine.others_records
    try:
        run()
    except (RuntimeError, ValueError, StoreError) as exc:
        st.session_state["replay_error"] = md_escape(exc)
    if wb.engine.others_records > others:
        st.session_state["replay_info"] = (f"Another process wrote {wb.engine.others_records - others} records "
                                           "to this session's database meanwhile; stepping went on from the "
                                           "stored log.")


def _do(action: str) -> None:
    """Run a stepping action; a jump that ingests more than a few turns is left to the page body
    (`run_pending_jump`), which shows its progress."""
    wb = get_workbench()
    target = _jump_target(wb, action) if action in JUMPS else None
    ingests = wb.turns_to_ingest(target) if target is not None else action == "next" and wb.at_head
    if ingests and wb.head < wb.total_turns:
        try:
            moved = access.own_session_before_ingest(wb)
        except AccessDenied as exc:
            st.session_state["replay_error"] = md_escape(exc)
            return
        if moved:
            st.session_state["replay_info"] = md_escape(moved)
    if action in JUMPS:
        if wb.turns_to_ingest(target) > FEW_TURNS:
            st.session_state["replay_jump"] = (str(wb.db_path), target)
            return
        run = lambda: wb.jump(target)        # noqa: E731
    else:
        run = {"next": wb.next, "back": wb.back}[action]
    with st.spinner("Stepping through the conversation…"):
        _guarded(wb, run)
    _sync_targets()


def _cancel_jump() -> None:
    """Stop the running jump: the click interrupts that run between two committed steps, so every turn
    ingested so far is kept and the cursor is on the last of them."""
    _, target = st.session_state.pop("replay_jump", (None, None))
    wb = get_workbench()
    wb.cancel()                 # the interrupted run may still be inside a step: wait for it to end
    if target is not None:
        st.session_state["replay_info"] = (f"Jump to turn {target} cancelled at turn {wb.cursor} of "
                                           f"{wb.total_turns}: every turn ingested so far is kept (each is "
                                           "committed as it is ingested).")
    _sync_targets()


def run_pending_jump(wb: Workbench, redraw_header) -> None:
    """Carry out the pending long jump with a live progress bar, ETA, header and a Cancel button.

    The cursor is on the workbench in the session state and follows every committed step, so a run that a
    click interrupts (Cancel, or any other widget: the jump then resumes on the next run) leaves a
    consistent model."""
    box = st.empty()           # in every run, so the elements below keep their place while a jump redraws
    db, target = st.session_state.get("replay_jump", (None, None))
    if db != str(wb.db_path):             # none pending, or one for a session since replaced (Load)
        st.session_state.pop("replay_jump", None)
        return
    with box.container(border=True):
        bar = st.progress(0.0, text=f"Jump to turn {target}: embedding the turn texts…")
        st.button("Cancel", key="replay_cancel", on_click=_cancel_jump, icon=":material/stop_circle:",
                  help="Stop after the turn being ingested; every turn ingested so far is kept.")
    clock = JumpClock()

    def show(progress: JumpProgress) -> None:
        if clock.due(progress):
            bar.progress(progress.done / max(progress.total, 1), text=clock.text(progress))
            redraw_header()

    try:
        _guarded(wb, lambda: wb.jump(target, show))
    except JumpCancelled:       # Cancel was clicked: its run shows where the jump stopped
        return
    st.session_state.pop("replay_jump", None)
    box.empty()
    if "replay_error" in st.session_state:            # a refusal (say, an open run) shows at once
        st.error(st.session_state.pop("replay_error"))
    _sync_targets()


def stepping(wb: Workbench) -> None:
    sessions = wb.conversation.sessions
    turns = wb.conversation.turns
    upcoming = turns[wb.cursor].session if wb.cursor < wb.total_turns else None
    # one flowing row: each control as wide as its label, wrapping onto a second line on a narrow screen
    with st.container(horizontal=True, vertical_alignment="bottom", gap="small"):
        st.button("◀ Back", key="replay_back", on_click=_do, args=("back",), disabled=wb.cursor == 0,
                  width="content", help="Cursor one turn back; the log is kept (the view becomes a fold of it).")
        st.button("Next ▶", key="replay_next", on_click=_do, args=("next",), type="primary",
                  disabled=wb.cursor >= wb.total_turns, width="content",
                  help="Ingest the next turn (or, behind the log head, move the cursor forward through the log).")
        st.button(f"▶▶ Play to end of session {md_escape(upcoming)}" if upcoming else "▶▶ Play to end of session",
                  key="replay_play", on_click=_do, args=("play",), disabled=upcoming is None, width="content")
        if not 0 <= st.session_state.get("replay_turn_target", -1) <= wb.total_turns:
            st.session_state["replay_turn_target"] = wb.cursor
        with st.container(horizontal=True, vertical_alignment="bottom", gap="small", width="content", wrap=False):
            st.number_input("Jump to turn", 0, wb.total_turns, key="replay_turn_target", width=150,
                            help="Turns seen after the jump (0 = before the first turn).")
            st.button("Go", key="replay_go_turn", on_click=_do, args=("turn",), width="content")
        first = {s: next(t for t in turns if t.session == s) for s in sessions}
        count = {s: sum(t.session == s for t in turns) for s in sessions}
        if st.session_state.get("replay_session_target") not in sessions:
            st.session_state["replay_session_target"] = (wb.current_turn or turns[0]).session
        with st.container(horizontal=True, vertical_alignment="bottom", gap="small", width="content", wrap=False):
            st.selectbox("Jump to session", sessions, key="replay_session_target", width=300,
                         format_func=lambda s: f"Session {s} ({first[s].time[:10]}, {count[s]} turns)")
            st.button("Go", key="replay_go_session", on_click=_do, args=("session",), width="content")


wb = get_workbench()
redraw_header = live_header(wb)
if "replay_flash" in st.session_state:
    st.success(st.session_state.pop("replay_flash"))
if "replay_error" in st.session_state:
    st.error(st.session_state.pop("replay_error"))
if "replay_info" in st.session_state:
    st.info(st.session_state.pop("replay_info"))
with st.expander("Source, conversation, engine and settings", expanded=False):
    loader()
sessions_box = st.expander("Sessions in the workspace and the data folders", key="replay_sessions_open", on_change="rerun")
with sessions_box:                  # the listing reads every database: only while the box is open
    opened = session_picker(wb, new_embedder) if sessions_box.open else None
    if opened is not None:
        set_workbench(opened)
        _sync_targets()
        st.session_state["replay_flash"] = (f"Opened {md_code(opened.db_path.name)} at turn {opened.cursor} of "
                                            f"{opened.total_turns} ({opened.schema.label}).")
        st.rerun()
run_pending_jump(wb, redraw_header)
stepping(wb)

left, right = st.columns([5, 6], gap="large")
with left:
    st.subheader("Transcript")
    st.caption(f"Encoder · {md_escape(wb.engine.embedder.encoder_description())}")
    st.html(transcript_html(wb.conversation.turns, wb.cursor, wb.head, wb.view.state))
with right:
    render_effects(wb, turn_effects(wb.view, wb.cursor, wb.last_ingest))
session_costs_panel(wb)

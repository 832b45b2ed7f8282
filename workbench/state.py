"""Streamlit glue: one `Workbench` per browser session, shared by every page."""
from __future__ import annotations

import os

import streamlit as st

from engine.llm.embedder import Embedder
from engine.store.catalog import DB_ENV
from workbench import access
from workbench.model import Workbench
from workbench.session_link import NEW_PARAM, SESSION_PARAM, TURN_PARAM, first_workbench, url_params
from workbench.text import MISSING, md_code, md_escape

_KEY = "workbench"
_NOTES = "workbench_link_notes"       # what the URL asked for that could not be done, shown once


def queued_label(process) -> str:
    """What a process's buffer holds, said one way on every page: "Queued for Off-peak steward" (an engine's
    status may be called "buffered": MemLoom's real-time buffer of sentence records is another thing)."""
    return f"Queued for {process.label}"


@st.cache_resource(show_spinner="Loading the embedding model…")
def shared_embedder() -> Embedder:
    """One model per server process; each session's embedder caches into its own database and the
    workspace's shared cache, so no text is embedded twice across sessions or restarts."""
    emb = Embedder()
    emb.warm()
    return emb


def get_workbench() -> Workbench:
    """The session's workbench; on first use the session and turn the URL names, else the database
    `memwb ui --db` named, else the bundled demo."""
    if _KEY not in st.session_state:
        wb, notes = first_workbench(st.query_params.to_dict(), os.environ.get(DB_ENV), _session_embedder,
                                    owner=access.who())
        st.session_state[_KEY] = wb
        st.session_state[_NOTES] = notes
    return st.session_state[_KEY]


def sync_url(wb: Workbench) -> None:
    """Keep the URL's session and turn at the workbench's, so a reload or a shared link comes back here."""
    wanted = url_params(wb)
    params = st.query_params
    for key in (SESSION_PARAM, TURN_PARAM, NEW_PARAM):
        if key not in wanted and key in params:
            del params[key]
        elif key in wanted and params.get(key) != wanted[key]:
            params[key] = wanted[key]


def set_workbench(wb: Workbench) -> None:
    st.session_state[_KEY] = wb


def _session_embedder() -> Embedder:
    return shared_embedder().sibling()     # share vectors already computed in this process


def new_embedder() -> Embedder:
    return _session_embedder()


def status_counts_text(state) -> str:
    """Node counts per lifecycle status of the engine's schema, e.g. 'visible 20 · archived 1'."""
    counts = state.status_counts()
    schema = state.schema
    names = [st_.name for st_ in schema.statuses] if schema else []
    names += sorted(set(counts) - set(names))
    labels = {st_.name: st_.label for st_ in schema.statuses} if schema else {}
    return " · ".join(f"{md_escape(labels.get(n, n or 'no status'))} {counts.get(n, 0)}" for n in names)


def settings_text(engine) -> str:
    """Ablations (when the engine has any) and the settings that differ from the engine's defaults."""
    changed = engine.settings.changed()
    ablations = changed.pop("ablations", None)
    parts = []
    if engine.schema.ablations:
        parts.append(f"**Ablations** · {md_escape(', '.join(ablations or [])) or 'none'}")
    shown = ", ".join(f"{k}={v}" for k, v in changed.items())
    parts.append(f"**Settings** · {md_escape(shown) if shown else 'defaults'}")
    return " · ".join(parts)


def live_header(wb: Workbench):
    """Draw the header into a placeholder and return a function that redraws it in place (a long jump calls it
    as it goes, so the strip shows the turn reached so far)."""
    slot = st.empty()

    def redraw() -> None:
        with slot.container():
            header(wb)

    redraw()
    return redraw


def header(wb: Workbench) -> None:
    """The strip every page shows: dataset, conversation, engine, settings, current turn, node counts."""
    st.session_state.setdefault("page_header_seen", True)
    sync_url(wb)
    for note in st.session_state.pop(_NOTES, []):
        st.warning(md_escape(note), icon=":material/link_off:")
    state = wb.view.state
    turn = wb.current_turn
    schema = wb.schema
    cols = st.columns([2, 2, 2, 3])
    cols[0].markdown(f"**Source** · {md_escape(wb.source_label)}  \n**Conversation** · "
                     f"{md_code(wb.conversation.id)}  \n**Database** · {md_code(wb.db_path.name)}")
    process = f"**Schedule** · {md_code(wb.schedule_text)}" if wb.has_processes else "**Offline process** · none"
    if wb.fit:                       # settings and schedule fit for the talk the file holds, as the benchmark runs it
        process += f"  \n**Fit** · {md_escape(wb.fit)} (`fits.{md_escape(wb.fit)}` of {schema.label}'s schema)" \
            if wb.fit in schema.fits else f"  \n**Fit** · {md_escape(wb.fit)} schedule ({schema.label} has no fit)"
    llm = f" · LLM {md_code(wb.engine.llm.backend.name)}" if schema.llm_roles else ""
    cols[1].markdown(f"**Engine** · {schema.label}{llm}  \n{process}")
    cols[2].markdown(f"**Turn** · {wb.cursor} / {wb.total_turns}"
                     f"{'' if wb.at_head else f' (log head {wb.head})'}  \n"
                     f"**Session** · {md_escape(turn.session) if turn else MISSING}")
    queued = "".join(f" · **{queued_label(p)}** · {len(state.buffer(p.buffer))}" for p in schema.processes)
    cols[3].markdown(f"**Nodes** · {len(state.nodes)} ({status_counts_text(state)}){queued}  \n"
                     f"{settings_text(wb.engine)}")
    st.divider()

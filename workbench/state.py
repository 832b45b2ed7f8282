"""Streamlit glue: one `Workbench` per browser session, shared by every page."""
from __future__ import annotations

import streamlit as st

from engine.embedder import Embedder
from workbench.model import Workbench
from workbench.settings_form import changed_settings
from workbench.text import MISSING, md_code, md_escape

_KEY = "workbench"


@st.cache_resource(show_spinner="Loading the embedding model…")
def shared_embedder() -> Embedder:
    """One model per server process; each session's embedder caches into its own database."""
    emb = Embedder()
    emb.warm()
    return emb


def get_workbench() -> Workbench:
    """The session's workbench; the bundled demo on first use."""
    if _KEY not in st.session_state:
        st.session_state[_KEY] = Workbench.demo(embedder=_session_embedder())
    return st.session_state[_KEY]


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
    changed = changed_settings(engine.settings)
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
    state = wb.view.state
    turn = wb.current_turn
    schema = wb.schema
    cols = st.columns([2, 2, 2, 3])
    cols[0].markdown(f"**Source** · {md_escape(wb.source_label)}  \n**Conversation** · "
                     f"{md_code(wb.conversation.id)}")
    process = f"**Schedule** · {md_code(wb.schedule_text)}" if wb.has_processes else "**Offline process** · none"
    llm = f" · LLM {md_code(wb.engine.llm.backend.name)}" if schema.llm_roles else ""
    cols[1].markdown(f"**Engine** · {schema.label}{llm}  \n{process}")
    cols[2].markdown(f"**Turn** · {wb.cursor} / {wb.total_turns}"
                     f"{'' if wb.at_head else f' (log head {wb.head})'}  \n"
                     f"**Session** · {md_escape(turn.session) if turn else MISSING}")
    buffered = f" · **Buffered** · {state.buffered()}" if wb.has_processes else ""
    cols[3].markdown(f"**Nodes** · {len(state.nodes)} ({status_counts_text(state)}){buffered}  \n"
                     f"{settings_text(wb.engine)}")
    st.divider()

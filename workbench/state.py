"""Streamlit glue: one `Workbench` per browser session, shared by every page."""
from __future__ import annotations

import html

import streamlit as st

from engine.embedder import Embedder
from workbench.model import Workbench

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
    shared = shared_embedder()
    emb = Embedder(model_path=shared.model_path)
    emb.memory = shared.memory        # share vectors already computed in this process
    return emb


def new_embedder() -> Embedder:
    return _session_embedder()


def header(wb: Workbench) -> None:
    """The strip every page shows: dataset, conversation, engine, settings, current turn."""
    st.session_state.setdefault("page_header_seen", True)
    state = wb.view.state
    turn = wb.current_turn
    settings = wb.engine.settings
    cols = st.columns([2, 2, 2, 3])
    cols[0].markdown(f"**Source** · {html.escape(wb.source_label)}  \n**Conversation** · "
                     f"`{html.escape(wb.conversation.id)}`")
    cols[1].markdown(f"**Engine** · All-Mem · LLM `{html.escape(wb.engine.llm.backend.name)}`  \n"
                     f"**Schedule** · `{wb.schedule.kind}{'' if wb.schedule.kind == 'manual' else f' / {wb.schedule.every}'}`")
    cols[2].markdown(f"**Turn** · {wb.cursor} / {wb.total_turns}"
                     f"{'' if wb.at_head else f' (log head {wb.head})'}  \n"
                     f"**Session** · {html.escape(turn.session) if turn else '—'}")
    cols[3].markdown(f"**Units** · {len(state.units)} (visible {len(state.visible_ids)}, archived "
                     f"{len(state.archived_ids)}) · **Buffer** · {len(state.buffer)}  \n"
                     f"**Ablations** · {', '.join(settings.ablations) or 'none'}")
    st.divider()

"""Retrieval: one query through the three stages, each result's provenance path, and naive RAG beside it."""
from __future__ import annotations

import streamlit as st

from engine.baselines import NaiveRAG
from engine.metrics import recall_at_k
from workbench import retrieval_view as rv
from workbench.graph_view import build_graph_html
from workbench.review_view import text_html
from workbench.state import get_workbench, header

QUESTION, FREE = "Dataset question", "Free query"
ALL_RESULTS = "all results"

wb = get_workbench()
header(wb)
st.subheader("Retrieval")


def naive_rag() -> NaiveRAG:
    """Naive RAG over the turns seen so far; cached per conversation and cursor (embedding is the cost)."""
    key = (str(wb.source_path), wb.conversation.id, wb.cursor)
    cached = st.session_state.get("naive_rag")
    if cached is None or cached[0] != key:
        cached = (key, NaiveRAG(wb.engine.embedder, wb.conversation.turns[: wb.cursor]))
        st.session_state["naive_rag"] = cached
    return cached[1]


view = wb.view
state = view.state
questions = wb.conversation.questions
seen = set(state.turn_ids)
source = st.radio("Query", [QUESTION, FREE] if questions else [FREE], horizontal=True, key="retrieval_source")
ask, knob = st.columns([4, 1])
k = knob.number_input("k (source ids scored)", 1, 50, 5, key="retrieval_k",
                      help="How many ranked source ids (and naive-RAG turns) count for R@k.")
gold: tuple[str, ...] = ()
if source == QUESTION:
    question = ask.selectbox("Question", questions, key="retrieval_question",
                             format_func=lambda q: f"{q.id.split(':')[-1]} · {q.question}")
    query = question.question
    gold = tuple(question.evidence)
    unseen = [g for g in gold if g not in seen]
    st.markdown(text_html("Gold answer:", question.answer or "—") +
                text_html("Gold evidence:", ", ".join(gold) or "none given") +
                (text_html("Not ingested yet at this turn:", ", ".join(unseen)) if unseen else ""),
                unsafe_allow_html=True)
else:
    query = ask.text_input("Query", key="retrieval_query", placeholder="Ask about the conversation so far")

if not query.strip():
    st.info("Type a query or pick a dataset question.")
    st.stop()
if not state.units:
    st.info("Memory is empty: step the replay forward first.")
    st.stop()

res = view.retrieve(query, k)
naive_hits = naive_rag().retrieve(query, k)
naive_ids = [t.id for t, _ in naive_hits]

m = st.columns(6)
m[0].metric("Stage 1 anchors (ms)", f"{res.stages['stage1_ms']:.1f}")
m[1].metric("Stage 2 expansion (ms)", f"{res.stages['stage2_ms']:.1f}")
m[2].metric("Stage 3 ranking (ms)", f"{res.stages['stage3_ms']:.1f}")
m[3].metric("Total (ms)", f"{res.stages['total_ms']:.1f}")
if gold:
    m[4].metric(f"All-Mem R@{k}", f"{recall_at_k(res.source_ids, gold, k):.2f}")
    m[5].metric(f"Naive RAG R@{k}", f"{recall_at_k(naive_ids, gold, k):.2f}")

left, right = st.columns(2)
with left:
    st.markdown(f"**All-Mem** · ranked source ids (top {k})")
    st.dataframe(rv.sources_frame(res.source_ids, gold), hide_index=True, width="stretch")
    if gold:
        st.dataframe(rv.gold_frame(res.source_ids, gold, k, seen), hide_index=True,
                     width="stretch")
with right:
    st.markdown(f"**Naive RAG** · dense cosine over the {wb.cursor} raw turns seen (top {k})")
    st.dataframe(rv.naive_frame(naive_hits, gold), hide_index=True, width="stretch")
    if gold:
        st.dataframe(rv.gold_frame(naive_ids, gold, k, seen), hide_index=True,
                     width="stretch")


def provenance(res) -> None:
    st.caption(f"The {len(res.units)} returned units, ranked, each with the path Stage 2 took from its anchor. "
               "Units marked [archived] are off the visible surface and were reached only through links.")
    st.code(rv.paths_block(state, res.units, gold), language=None)
    by_id = {r.id: r for r in res.units}
    pick = st.selectbox("Highlight on the graph", [ALL_RESULTS, *by_id], key="retrieval_highlight",
                        format_func=lambda o: o if o == ALL_RESULTS else rv.path_text(state, by_id[o]))
    chosen = res.units if pick == ALL_RESULTS else [by_id[pick]]
    st.iframe(build_graph_html(state, highlight_edges=rv.path_edges(chosen), highlight_units=[r.id for r in chosen],
                               focus=rv.path_units(chosen), height_px=560), height=580)


def stage1(res) -> None:
    st.caption(f"Exact top-{len(res.anchors)} on the visible surface; score = z(dense cosine) + "
               f"{settings.lexical_weight} · z(BM25).")
    st.dataframe(rv.anchors_frame(state, res), hide_index=True, width="stretch")


def stage2(res) -> None:
    st.caption(f"Breadth-first over outgoing typed links: hop limit {settings.hops}, candidate budget "
               f"{settings.budget}, priority sibling < version < temporal < semantic, then id.")
    st.code(rv.expansion_tree(state, res), language=None)
    st.dataframe(rv.expansion_frame(state, res), hide_index=True, width="stretch")


def stage3(res) -> None:
    st.caption(f"All {len(res.candidates)} candidates re-ranked; the top {len(res.units)} are returned.")
    st.dataframe(rv.ranking_frame(res, gold), hide_index=True, width="stretch",
                 height=min(35 * (len(res.candidates) + 1) + 3, 640))


def context(res) -> None:
    st.caption("The returned units' raw evidence ordered by time: what an answering model would read.")
    st.text(res.context)


settings = view.settings
sections = {"Provenance paths": provenance, "Stage 1 · anchors": stage1, "Stage 2 · expansion": stage2,
            "Stage 3 · ranking": stage3, "Materialized context": context}
for tab, draw in zip(st.tabs(list(sections), key="retrieval_tab", on_change="rerun"), sections.values()):
    if tab.open:
        with tab:
            draw(res)

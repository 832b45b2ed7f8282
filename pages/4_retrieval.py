"""Retrieval: one query through the engine's stages, each result's provenance path, and a peer engine beside it.

The stage tabs, their captions and timings come from the engine schema's stages; the peer is any other
registered engine holding the same turns (naive RAG by default)."""
from __future__ import annotations

import streamlit as st

from engine.bench.datasets import chain_question
from engine.engines import engine_schema, known_engines
from engine.eval.chain_links import follow_links
from engine.eval.metrics import recall_at_k
from engine.retrieval.explain import explain_sources
from engine.retrieval.result import rank_sources
from workbench import retrieval_view as rv
from workbench.graph.view import build_graph_html
from workbench.replay.progress import peer_with_progress
from workbench.state import get_workbench, header
from workbench.text import table, text_html

QUESTION, FREE = rv.QUESTION_SOURCE, rv.FREE_SOURCE
ALL_RESULTS = "all results"
PROVENANCE, CONTEXT = "Provenance paths", "Materialized context"

wb = get_workbench()
header(wb)
st.subheader("Retrieval")

view = wb.view
state = view.state
schema = wb.schema
questions = wb.conversation.questions
seen = set(state.turn_ids)
source = st.radio("Query", [QUESTION, FREE] if questions else [FREE], horizontal=True, key="retrieval_source")
ask, knob, other = st.columns([4, 1, 2])
k = knob.number_input("k (source ids scored)", 1, 50, 5, key="retrieval_k",
                      help="How many ranked source ids count for R@k, for both engines.")
engines = known_engines()
if st.session_state.get("retrieval_peer") not in engines:
    st.session_state["retrieval_peer"] = wb.default_peer()
peer_name = other.selectbox("Compare with", engines, key="retrieval_peer",
                            format_func=lambda n: engine_schema(n).label,
                            help="A peer engine built in a scratch database over the same turns (up to the cursor).")
gold: tuple[str, ...] = ()
chained = False                  # a causal chain question: its links are tabled under each engine's gold
if source == QUESTION:
    question = ask.selectbox("Question", questions, key="retrieval_question",
                             format_func=lambda q: f"{q.id.split(':')[-1]} · {q.question}")
    query = question.question
    gold = tuple(question.evidence)
    chained = chain_question(wb.conversation, question)
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
peer_schema = engine_schema(peer_name)
peer = peer_with_progress(wb, peer_name)
peer_res = peer.retrieve(query, k) if peer is not None else None

if res.reading:
    st.caption(f"{schema.label} read the query as {res.reading}.")
timings = rv.stage_timings(schema, res.stages)
recalls = []
if gold:
    recalls.append((f"{schema.label} R@{k}", recall_at_k(res.source_ids, gold, k)))
    if peer_res is not None:
        label = f"{peer_schema.label} R@{k}" + (" (peer)" if peer_name == wb.engine_name else "")
        recalls.append((label, recall_at_k(peer_res.source_ids, gold, k)))
with st.container(horizontal=True):               # each label whole: a metric as wide as its label
    for label, ms in timings:
        st.metric(label, f"{ms:.1f}", width="content")
    for label, value in recalls:
        st.metric(label, f"{value:.2f}", width="content")
st.caption(rv.TIMING_NOTE)

def missed(engine, result, spec) -> None:
    """Each gold turn outside the top k: its best unit's rank and scores, or the stage that dropped it."""
    lines = rv.missed_gold_lines(explain_sources(engine, result, gold), k, spec, seen)
    if lines:
        st.markdown(f"**Missed gold evidence** (outside the top {k}):\n\n" + "\n".join(f"- {line}" for line in lines))


def chain_links(engine, spec) -> None:
    """The gold evidence read as a chain, each turn to the next, as this engine's memory holds it at the cursor
    (engine.eval.chain_links); only for an engine whose schema has causal relations."""
    if chained and any(e.cause_end for e in spec.edge_types):
        st.caption("The gold evidence read as a causal chain (root cause first), each turn to the next, in this "
                   "memory now: a relation a why-question walks back, one citing other records, both turns in one "
                   "node, a turn not yet consolidated, or none.")
        st.dataframe(table(rv.chain_links_frame(follow_links(engine.state, spec, gold))), hide_index=True,
                     width="stretch")


def why(engine, result, spec) -> None:
    """The signals behind each returned result's rank, in an expander under its engine's table."""
    with st.expander(f"Why this rank · the {len(result.units)} returned results' signals"):
        placements = engine.explain(result, [r.id for r in result.units])
        st.caption("fused = z(dense cosine) + weight × z(BM25) − penalty (with weight 0: the cosine − penalty); "
                   "score is what the ranking used: the fused value, or more when a relation chain passed a "
                   "score down (inherited). Admitted by: the stage that made it a candidate, at hop/edge. "
                   + rv.reference_text(placements))
        st.dataframe(table(rv.why_frame(result, placements, spec)), hide_index=True, width="stretch")


TEXT_FIRST = {"text": st.column_config.TextColumn("text", width="medium")}     # the ids stay in view
left, right = st.columns(2)
with left:
    st.markdown(f"**{schema.label}** · top {k} source ids: the text of the best node carrying each")
    st.dataframe(table(rv.sources_frame(res, gold, k, state)), hide_index=True, width="stretch",
                 column_config=TEXT_FIRST)
    if gold:
        st.dataframe(table(rv.gold_frame(rank_sources(res.candidates), gold, k, seen)), hide_index=True,
                     width="stretch")                     # ranks past k too, as the missed-gold lines give them
        missed(view, res, schema)
        chain_links(view, schema)
    why(view, res, schema)
with right:
    st.markdown(f"**{peer_schema.label}** · the same {wb.cursor} turns in a scratch database (top {k})")
    if peer_res is None:
        st.caption("Nothing ingested yet.")
    else:
        st.dataframe(table(rv.sources_frame(peer_res, gold, k, peer.state)), hide_index=True, width="stretch",
                     column_config=TEXT_FIRST)
        if gold:
            st.dataframe(table(rv.gold_frame(rank_sources(peer_res.candidates), gold, k, seen)), hide_index=True,
                         width="stretch")
            missed(peer, peer_res, peer_schema)
            chain_links(peer, peer_schema)
        why(peer, peer_res, peer_schema)
        st.caption("Timings: " + " · ".join(f"{label.removesuffix(' (ms)')} {ms:.1f} ms"
                                             for label, ms in rv.stage_timings(peer_schema, peer_res.stages)))


SEED = rv.seed_word(schema)


def provenance(res) -> None:
    off = " or ".join(f"[{s.name}]" for s in schema.statuses if not s.surface)
    seed_ids = [uid for uid, _ in res.anchors]
    reverse = any(getattr(h, "reverse", False) for r in res.units for h in r.path)
    st.caption(f"The {len(res.units)} returned nodes, ranked, each with the path retrieval took from its {SEED}."
               + (f" Nodes marked {off} are off the retrieval surface and were reached only through links."
                  if off else "")
               + (" A “(reverse)” hop walks a stored edge against its direction (e.g. from an effect back to its "
                  "cause)." if reverse else "")
               + (" “direct” results were not reached from a seed (taken straight from their own stream)."
                  if any(r.anchor not in seed_ids for r in res.units) else ""))
    st.code(rv.paths_block(state, res.units, gold, SEED, seed_ids), language=None, wrap_lines=True)
    by_id = {r.id: r for r in res.units}
    if st.session_state.get("retrieval_highlight") not in (ALL_RESULTS, *by_id):
        st.session_state["retrieval_highlight"] = ALL_RESULTS          # a result of another query
    pick = st.selectbox("Highlight on the graph", [ALL_RESULTS, *by_id], key="retrieval_highlight",
                        format_func=lambda o: o if o == ALL_RESULTS else
                        f"u{o} ({', '.join(by_id[o].source_ids)}) · " + rv.path_text(state, by_id[o], SEED, seed_ids))
    chosen = res.units if pick == ALL_RESULTS else [by_id[pick]]
    labels = rv.path_edge_labels(chosen[0]) if len(chosen) == 1 else None
    if len(chosen) == 1 and chosen[0].path:
        st.dataframe(table(rv.hops_frame(state, chosen[0])), hide_index=True, width="stretch")
    st.iframe(build_graph_html(state, highlight_edges=rv.path_edges(chosen), highlight_units=[r.id for r in chosen],
                               focus=rv.path_units(chosen), height_px=560, edge_labels=labels), height=580)


def seeds(res, caption: str) -> None:
    st.caption(caption)
    st.dataframe(table(rv.anchors_frame(state, res)), hide_index=True, width="stretch",
                 column_config={"score": st.column_config.NumberColumn("score", format="%.3f",
                                                                       help="The seed's retrieval score")})


def expansion(res, caption: str) -> None:
    st.caption(caption)
    if not res.expansion:
        st.caption(f"Nothing admitted beyond the {SEED}s.")
    st.code(rv.expansion_tree(state, res, SEED), language=None)
    if res.expansion:
        st.dataframe(table(rv.expansion_frame(state, res)), hide_index=True, width="stretch")


def ranking(res, caption: str) -> None:
    st.caption(f"{caption} All {len(res.candidates)} candidates ranked; the top {len(res.units)} are returned. "
               "A turn marked (≤ x) takes a source slot at no more than x, its own evidence in a merged unit.")
    st.dataframe(table(rv.ranking_frame(res, gold)), hide_index=True, width="stretch",
                 height=min(35 * (len(res.candidates) + 1) + 3, 640))


def context(res, caption: str = "") -> None:
    st.caption(caption or "The returned nodes' raw evidence ordered by time: what an answering model would read.")
    st.text(res.context)


DRAW = {"seeds": seeds, "expansion": expansion, "ranking": ranking, "context": context}
sections = {PROVENANCE: lambda r: provenance(r)}
for stage in schema.stages:
    draw = DRAW.get(stage.shows)
    if draw is not None:
        sections[stage.label] = (lambda r, d=draw, c=rv.stage_caption(stage.help, view.settings): d(r, c))
if not any(s.shows == "context" for s in schema.stages):
    sections[CONTEXT] = lambda r: context(r)
if st.session_state.get("retrieval_tab") not in (None, *sections):
    del st.session_state["retrieval_tab"]          # a tab of another engine's stages
for tab, draw in zip(st.tabs(list(sections), key="retrieval_tab", on_change="rerun"), sections.values()):
    if tab.open:
        with tab:
            draw(res)

"""The panels under the Memory graph: one node in detail, its lifecycle lane among its kind's, and what changed
between two turns.

Each panel lays out what the engine library computes (`engine.core.walks.lineage`, `engine.core.diff.diff_states`, the
lifecycle lanes read from the log) in tables and a chart; the lanes follow the graph's own filters.
"""
from __future__ import annotations

import pandas as pd
import streamlit as st

from engine.core.diff import diff_states
from engine.core.state import MemoryState
from engine.core.walks import lineage
from workbench.graph.controls import GraphChoice, in_range, keep_valid, state_at
from workbench.graph.lifecycle import (
    LIFECYCLE_KINDS,
    MAX_LANES,
    attrs_frame,
    default_kind,
    kinds_with_transitions,
    lifecycle_figure,
    lifecycle_lanes,
    select_lanes,
    transitions_frame,
)
from workbench.graph.select import select_units
from workbench.graph.style import (
    edge_style,
    kind_field,
    kind_label,
    moved_edges_word,
    off_surface_word,
    visibility_text,
)
from workbench.graph.tables import diff_default, diff_rows, edge_rows
from workbench.model import Workbench
from workbench.text import MISSING, md_code, table


def unit_detail(state: MemoryState, uid: int) -> None:
    schema = state.schema
    u = state.units[uid]
    status = schema.status(u.status) if schema else None
    st.markdown(f"#### {u.label} · {visibility_text(u)}")
    if status is not None and status.description:
        st.caption(f"Status **{status.label}**: {status.description}")
    st.dataframe(table(pd.DataFrame([{"kind": kind_field(schema, u.kind), "status": u.status, "time": u.time,
                                      "session": u.session, "source ids": ", ".join(u.source_ids),
                                      "speakers": ", ".join(u.speakers), "made by": u.made_by,
                                      "created at turn": u.created_turn,
                                      **({"members": ", ".join(f"u{m}" for m in u.members)} if u.members else {})}])),
                 hide_index=True, width="stretch")
    if u.raw or not u.members:
        st.markdown("**Raw evidence** (never changes)")
        st.code(u.raw, language=None, wrap_lines=True)
    if u.members:
        st.markdown(f"**Records** · {len(u.members)} member(s), each an immutable record with its raw evidence")
        st.dataframe(table(pd.DataFrame([{"record": state.units[m].label, "is": visibility_text(state.units[m]),
                                          "source ids": ", ".join(state.units[m].source_ids),
                                          "raw evidence": state.units[m].raw}
                                         for m in u.members if m in state.units])), hide_index=True, width="stretch")
    if u.attrs:
        st.markdown("**Figures** (the engine's statistics of this node)")
        st.dataframe(table(attrs_frame(u.attrs)), hide_index=True, width="stretch")
    st.markdown("**Summary** (regenerable descriptor)")
    st.code(u.summary, language=None, wrap_lines=True)
    st.markdown("**Keywords** · " + (", ".join(md_code(k) for k in u.keywords) or MISSING))
    lineage_names = [edge_style(t, schema)["label"] for t in (schema.lineage_types if schema else ())]
    if lineage_names:
        lin = lineage(state, uid)
        st.markdown(f"**Version lineage** (along {', '.join(lineage_names)} edges)")
        rows = [{"relation": "supersedes (older)" if rel == "supersedes" else "superseded by (newer)", "steps": d,
                 "unit": state.units[n].label, "is": visibility_text(state.units[n]),
                 "summary": state.units[n].summary}
                for rel in ("superseded_by", "supersedes") for d, n in lin[rel]]
        if rows:
            st.dataframe(table(pd.DataFrame(rows)), hide_index=True, width="stretch")
        else:
            st.caption("No lineage edges: nothing supersedes this node and it supersedes nothing.")
    edges = edge_rows(state, uid)
    st.markdown(f"**Edges** · {sum(r['direction'] == 'out →' for r in edges)} out, "
                f"{sum(r['direction'] == '← in' for r in edges)} in")
    if edges:
        st.dataframe(table(pd.DataFrame(edges)), hide_index=True, width="stretch")


def diff_panel(wb: Workbench) -> None:
    keep_valid("graph_diff", in_range(0, wb.head), diff_default(wb.cursor, wb.head))
    first, last = st.slider("Diff between turns", 0, wb.head, key="graph_diff",
                            help="What changed in memory from the first turn to the second (ingests and runs).")
    st.toggle("Ring the nodes added or taken off the surface in this diff", key="graph_ring_diff")
    old, new = state_at(wb, first), state_at(wb, last)
    diff = diff_states(old, new)
    rows = diff_rows(diff, old, new)
    off = off_surface_word(new.schema)
    moved = moved_edges_word(new.schema)
    labels = {"added": "Nodes added", "archived": off.capitalize(), "restored": "Back on the surface",
              "removed": "Removed", "redescribed": "Re-described", "status changes": "Status changes",
              **({"rewired": moved} if moved else {}), "edges added": "Edges added", "edges removed": "Edges removed"}
    cols = st.columns(len(labels))
    for col, (key, label) in zip(cols, labels.items()):
        col.metric(label, len(rows[key]))
    for key, label in labels.items():
        if rows[key]:
            st.markdown(f"**{label}** (turn {first} → {last})")
            st.dataframe(table(pd.DataFrame(rows[key])), hide_index=True, width="stretch")
    if not any(rows.values()):
        st.caption(f"Nothing changed between turn {first} and turn {last}.")


def lifecycle_panel(wb: Workbench, state: MemoryState, choice: GraphChoice) -> None:
    """A swimlane per node of one kind over turns, from the log's status changes up to the drawn turn; the
    lanes follow the graph's filters (sessions, statuses, search, surface only, focus)."""
    schema = state.schema
    lanes = lifecycle_lanes(wb.engine.store.ops(upto_seq=state.seq, kinds=LIFECYCLE_KINDS))
    kinds = kinds_with_transitions(lanes)
    if not kinds:
        st.caption("No node has changed status up to this turn: nothing to draw yet.")
        return

    keep_valid("graph_lane_kind", kinds.__contains__, default_kind(state, kinds))
    c = st.columns([3, 2], vertical_alignment="bottom")
    kind = c[0].selectbox("Lanes for", kinds, key="graph_lane_kind",
                          format_func=lambda k: f"{kind_label(schema, k)} · "
                                                f"{sum(ln.kind == k for ln in lanes.values())}",
                          help="One lane per node of this kind (kinds whose nodes change status).")
    cap = c[1].number_input("Max lanes drawn", 1, 500, MAX_LANES, 5, key="graph_max_lanes",
                            help="Above this, the most recently created nodes are drawn (plus the inspected one).")
    keep = select_units(state, focus=choice.focus, **{**choice.filters, "max_nodes": max(1, len(state.units))}).shown
    chosen = select_lanes({i: ln for i, ln in lanes.items() if ln.kind == kind}, keep, int(cap),
                          pinned=[choice.inspected] if choice.inspected is not None else [])
    noun = f"{kind_label(schema, kind)}s"
    if chosen.hidden:
        st.warning(f"Showing {len(chosen.lanes)} of {chosen.matched} {noun} that pass the filters (the most "
                   "recent, plus the inspected node): narrow by session, status or search to see the others.")
    else:
        st.caption(f"Showing {len(chosen.lanes)} of {chosen.matched} {noun} that pass the filters. Colour = status "
                   "(the graph's colour where the status has one of its own), ◆ = a transition: hover it for its "
                   "cause and figures. Transitions an offline run made sit half a turn after the turn it ran at.")
    if not chosen.lanes:
        return
    now = max([float(state.turn)] + [t.x for ln in chosen.lanes for t in ln.transitions])
    st.plotly_chart(lifecycle_figure(state, chosen.lanes, now), width="stretch", key="graph_lifecycle")
    with st.expander(f"Transitions of these {noun} (table)"):
        st.dataframe(table(transitions_frame(chosen.lanes, schema)), hide_index=True, width="stretch")

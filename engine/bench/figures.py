"""The figures a benchmark task reads off a memory at a checkpoint: its size by kind, status and edge type, its
structure (visible ratio, Cov(H)), its growth session by session, and for a meeting its events' boundaries
against the gold topics."""
from __future__ import annotations

from engine.core.conversation import Conversation
from engine.core.segments import boundaries_from_labels
from engine.eval.diagnostics import structure
from engine.eval.segmentation import evaluate, turn_labels


def memory_size(state) -> dict:
    """Nodes by kind and status, edges by type."""
    nodes: dict[str, dict[str, int]] = {}
    for n in state.nodes.values():
        by_status = nodes.setdefault(n.kind, {})
        by_status[n.status] = by_status.get(n.status, 0) + 1
    return {"nodes": {kind: dict(sorted(s.items())) for kind, s in sorted(nodes.items())},
            "edges": dict(sorted(state.edge_counts().items()))}


def memory_through(state, turn_ids: set[str]) -> dict:
    """The part of a memory made from the given turns: nodes by kind whose every source turn is among them, and
    the edges between those nodes. Read as the next session opens, it is the memory of the sessions before it
    once their end has been consolidated, without the turn that opened the next one (GAM Table 10's growth)."""
    kept = {n.id: n.kind for n in state.nodes.values() if n.source_ids and set(n.source_ids) <= turn_ids}
    nodes: dict[str, int] = {}
    for kind in kept.values():
        nodes[kind] = nodes.get(kind, 0) + 1
    edges = sum(1 for src, dst, _ in state.edges if src in kept and dst in kept)
    return {"nodes": dict(sorted(nodes.items())), "edges": edges}


def structure_figures(state) -> dict:
    s = structure(state)
    return {"visible_ratio": s["visible_ratio"], "cov": {str(h): c for h, c in s["coverage"].items()},
            "h95": s["h95"]}


def boundary_row(source: str, system: str, conv: Conversation, state) -> dict:
    """Pk, WindowDiff and ΔB of the engine's events against the meeting's gold topic segmentation."""
    n = len(conv.turns)
    hyp = boundaries_from_labels(turn_labels(state))
    return boundary_figures(source, conv.id, system, n, hyp)


def boundary_figures(source: str, meeting: str, system: str, n: int, hyp: list[int]) -> dict:
    from engine.loaders.qmsum import gold_boundaries

    gold = gold_boundaries(source, n)
    figures = evaluate(gold, hyp, n)
    return {"meeting": meeting, "system": system, "turns": n, "boundaries": len(hyp), "gold_boundaries": len(gold),
            "pk": figures["pk"], "window_diff": figures["window_diff"], "delta_b": figures["delta_b"],
            "delta_b_rate": figures.get("delta_b_rate")}

"""Structure diagnostics of a memory bank (All-Mem §4.5, App. H.4).

Visible ratio, hop distance h(v) of archived units from the visible surface,
budgeted coverage Cov(H), H0.95, unreachable fraction and per-type out-degree
distributions; computed from state alone so any past fold can be measured.
"""
from __future__ import annotations

from collections import Counter, deque
from collections.abc import Iterable

from engine.core.state import MemoryState


def hop_distances(state: MemoryState, edge_types: tuple[str, ...] | None = None) -> dict[int, float]:
    """h(v) for every archived unit: directed multi-source BFS from the visible surface."""
    dist = _distances(state, state.visible_ids, edge_types)
    return {v: float(dist.get(v, float("inf"))) for v in state.archived_ids}


def _distances(state: MemoryState, roots: Iterable[int], edge_types: tuple[str, ...] | None) -> dict[int, int]:
    """Hops from the nearest root along directed edges (of `edge_types` only, when given)."""
    dist: dict[int, int] = {u: 0 for u in roots}
    queue = deque(dist)
    while queue:
        u = queue.popleft()
        for e in state.out_edges(u):
            if edge_types and e.type not in edge_types:
                continue
            if e.dst not in dist:
                dist[e.dst] = dist[u] + 1
                queue.append(e.dst)
    return dist


def coverage(h: dict[int, float], hops: int) -> float:
    return sum(1 for d in h.values() if d <= hops) / len(h) if h else 1.0


def degree_distribution(state: MemoryState) -> dict[str, dict[int, int]]:
    """Out-degree histogram per edge type of the engine's schema, over visible units."""
    out: dict[str, dict[int, int]] = {}
    types = [e.name for e in state.schema.edge_types] if state.schema else sorted({t for _, _, t in state.edges})
    for etype in types:
        hist = Counter(len(state.out(u, etype)) for u in state.visible_ids)
        out[etype] = dict(sorted(hist.items()))
    return out


def surface_ratio(state: MemoryState) -> float:
    """|V+| / N: units on the searchable surface per ingested turn (All-Mem's visible ratio, Table 11).

    An append-only memory has 1.0; consolidation moves it below (Merge, Update) or above (Split). Cheap
    (no graph walk), so a benchmark can take it at every round. Empty memory: 0.0."""
    return round(len(state.visible_ids) / max(state.turn, 1), 4)


def structure(state: MemoryState, max_hops: int = 8) -> dict:
    h = hop_distances(state)
    finite = sorted(d for d in h.values() if d != float("inf"))
    cov = {H: round(coverage(h, H), 4) for H in range(1, max_hops + 1)}
    h95 = next((H for H, c in cov.items() if c >= 0.95), None)
    return {
        "turns": state.turn,
        "units": len(state.units),
        "visible": len(state.visible_ids),
        "archived": len(state.archived_ids),
        "statuses": state.status_counts(),
        "visible_ratio": surface_ratio(state),
        "median_hop": finite[len(finite) // 2] if finite else None,
        "coverage": cov,
        "h95": h95,
        "unreachable_fraction": round(sum(1 for d in h.values() if d == float("inf")) / len(h), 4) if h else 0.0,
        "version_orphans": len(version_orphans(state)),
        "edges": state.edge_counts(),
        "degree": degree_distribution(state),
    }


def version_orphans(state: MemoryState) -> list[int]:
    """Off-surface nodes not reachable from the surface along the schema's lineage edges (must be empty).
    An engine without lineage edges (the baselines) has nothing to check."""
    lineage = state.schema.lineage_types if state.schema else ()
    if not lineage:
        return []
    h = hop_distances(state, lineage)
    return sorted(v for v, d in h.items() if d == float("inf"))


def retired_orphans(state: MemoryState, retired: Iterable[int]) -> list[int]:
    """Retired nodes (moved off the surface by a status change) that no path along the schema's recovery
    links reaches from a live node. Live: on the surface, or off it in the status it was created with and
    never retired (MemLoom's provisional events wait to mature, their sentences stay on the surface).
    Engine-neutral where `version_orphans` follows lineage only: MemLoom's grounded sentences hang off
    their events by evidence pointers, All-Mem's archived units off the surface by version links."""
    off = {u for u in retired if u in state.nodes and not state.nodes[u].visible}
    types = state.schema.recovery_types if state.schema else ()
    reached = _distances(state, (u for u in state.nodes if u not in off), types) if types else {}
    return sorted(u for u in off if u not in reached)

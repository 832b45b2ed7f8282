"""Walks over a memory state's typed edges: a node's neighbourhood and its version lineage.

Pages draw these (the graph's *Neighbourhood only*, the node inspector's lineage table) and the diff between
two states finds rewiring along the same lineage types, so the walks live here in the library, beside the
state they read, rather than in a view. Lineage types come from the engine's schema (All-Mem: version;
MemLoom: lineage).
"""
from __future__ import annotations

from collections.abc import Iterable

from engine.core.state import MemoryState


def lineage_types(state: MemoryState) -> tuple[str, ...]:
    """The edge types the state's schema marks as lineage (none without a schema)."""
    return state.schema.lineage_types if state.schema else ()


def _neighbours(state: MemoryState, uid: int, edge_types: set[str] | None) -> set[int]:
    edges = state.out_edges(uid) + state.in_edges(uid)
    return {e.dst if e.src == uid else e.src for e in edges if edge_types is None or e.type in edge_types}


def neighbourhood(state: MemoryState, start: Iterable[int], hops: int = 1,
                  edge_types: set[str] | None = None) -> set[int]:
    """`start` and every node at most `hops` edges away (either direction, of the given types)."""
    seen = set(start)
    frontier = set(seen)
    for _ in range(max(0, hops)):
        frontier = {n for u in frontier for n in _neighbours(state, u, edge_types)} - seen
        seen |= frontier
    return seen


def lineage(state: MemoryState, uid: int) -> dict[str, list[tuple[int, int]]]:
    """Lineage edges (All-Mem: version) walked both ways: (depth, node) it supersedes (older) and that
    superseded it (newer)."""
    return {"supersedes": _lineage_walk(state, uid, state.out), "superseded_by": _lineage_walk(state, uid, state.inc)}


def supersedes(state: MemoryState, uid: int) -> list[tuple[int, int]]:
    """(depth, node) of every older version behind `uid` along lineage edges: what it regrouped or replaced."""
    return _lineage_walk(state, uid, state.out)


def _lineage_walk(state: MemoryState, uid: int, step) -> list[tuple[int, int]]:
    types = lineage_types(state)
    seen, frontier, out = {uid}, [uid], []
    depth = 0
    while frontier:
        depth += 1
        nxt = sorted({n for f in frontier for t in types for n in step(f, t)} - seen)
        seen.update(nxt)
        out += [(depth, n) for n in nxt]
        frontier = nxt
    return out

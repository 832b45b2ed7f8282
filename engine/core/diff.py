"""What changed in memory between two states (two turns of one log, or before and after a run).

The Memory graph page's diff tab, its "ring what changed" option and the Consolidation page's run diff all
read this one comparison; it is computed over the folded states alone, so it lives in the library and the
pages only lay its result out as tables.
"""
from __future__ import annotations

from engine.core.state import MemoryState
from engine.core.walks import lineage_types


def diff_states(old_state: MemoryState, new_state: MemoryState) -> dict:
    """What changed between two states: nodes added/removed/taken off or put back on the surface,
    re-described, status changes, edges, and rewiring.

    A rewired edge is one redirected to a representative: p -> x removed, p -> r of the same type added,
    where r now has a lineage edge (All-Mem: version) to x (redirect-to-representative).
    """
    old_u, new_u = old_state.units, new_state.units
    common = old_u.keys() & new_u.keys()
    added_edges = sorted(new_state.edges.keys() - old_state.edges.keys())
    removed_edges = sorted(old_state.edges.keys() - new_state.edges.keys())
    added = set(added_edges)
    lineage = lineage_types(new_state)
    rewired = sorted({(s, x, r) for s, x, t in removed_edges for lt in lineage
                      for r in new_state.inc(x, lt) if (s, r, t) in added and r != s})
    return {
        "added_units": sorted(new_u.keys() - old_u.keys()),
        "removed_units": sorted(old_u.keys() - new_u.keys()),
        "archived_units": sorted(u for u in common if old_u[u].visible and not new_u[u].visible),
        "restored_units": sorted(u for u in common if not old_u[u].visible and new_u[u].visible),
        "redescribed_units": sorted(u for u in common if (old_u[u].summary, old_u[u].keywords)
                                    != (new_u[u].summary, new_u[u].keywords)),
        "status_changes": sorted((u, old_u[u].status, new_u[u].status) for u in common
                                 if old_u[u].status != new_u[u].status),
        "added_edges": added_edges,
        "removed_edges": removed_edges,
        "rewired": rewired,
    }

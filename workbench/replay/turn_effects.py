"""What one ingested turn caused, read back from the op log: the nodes, anchors, edges, status changes,
routing and gate traces, figures and buffers of one ingest, and the runs around it.

Its own module, without Streamlit, because reading the log is not drawing it: the Replay page renders a
`TurnEffects` (`workbench.replay.effects`, `workbench.review.gate`, `workbench.replay.phases`), and the same reading
serves whether the cursor is at the head of the log (just ingested) or behind it (after Back or a jump): the
log is the truth, the view at the cursor is a fold of it.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from engine.core.edge import Edge
from engine.core.oplog import OpKind

_EFFECT_KINDS = (OpKind.TURN_INGESTED, OpKind.NODE_CREATED, OpKind.NODE_UPDATED, OpKind.EDGE_ADDED,
                 OpKind.STATUS_CHANGED, OpKind.BUFFER_PUSHED, OpKind.BUFFER_FLUSHED, OpKind.NODE_RETRACTED,
                 OpKind.RUN_STARTED, OpKind.ENGINE_STATE_SET)
_BUFFER_KINDS = (OpKind.BUFFER_PUSHED, OpKind.BUFFER_FLUSHED, OpKind.NODE_RETRACTED)


@dataclass
class TurnEffects:
    """One ingested turn as the log tells it; nodes are looked up in the view at the cursor."""

    turn_no: int
    turn_id: str
    unit_id: int | None = None                               # the turn's own node
    created: list[int] = field(default_factory=list)         # every node the ingest made, the turn's first
    anchors: list[tuple[int, float | None]] = field(default_factory=list)
    edges: list[Edge] = field(default_factory=list)
    transitions: list[dict] = field(default_factory=list)    # online status changes: node, was, status, cause
    routing: dict | None = None                              # the turn_ingested record's `routing`, if any
    gate: list[dict] | None = None                           # its `gate` traces (RecMem's recurrence gate), if any
    attrs: dict[int, dict] = field(default_factory=dict)     # node -> figures (attrs) the ingest wrote
    buffers: dict[str, int] = field(default_factory=dict)    # buffer name -> size right after the ingest
    buffer_size: int = 0                                     # nodes waiting in any buffer right after it
    runs_before: list[str] = field(default_factory=list)    # started after the previous turn's ingest
    runs_after: list[str] = field(default_factory=list)     # started after this turn's ingest
    buffer: dict | None = None                               # the turn_ingested record's `buffer` (GAM's tokens)
    variables: list[dict] = field(default_factory=list)      # engine variables set around it: key, value, seq, when


def turn_effects(view, turn_no: int, report=None) -> TurnEffects | None:
    """What ingesting turn number `turn_no` (1-based) did, read from the op log of `view`'s store.

    Works for any engine: it reads node_created, node_updated, edge_added, status_changed and
    buffer_pushed records the ingest wrote (actor "online"), and the `routing` payload of the
    turn_ingested record when the engine writes one (MemLoom's event routing), which comes first.
    Anchor cosines come from `report` (an IngestReport of that turn) when it names the same anchors as
    the log, else they are recomputed from the view's vectors, which are the same unless a later run
    re-described an anchor.
    """
    if turn_no < 1:
        return None
    effects, runs_before, turn_node, pushed_at = None, [], False, None
    turn_kind = view.state.turn_kind
    variables_before: list[dict] = []
    for op in view.store.ops(kinds=_EFFECT_KINDS, turns=(turn_no - 1, turn_no)):   # only this turn's window
        if op.turn > turn_no:
            break
        p = op.payload
        online = effects is not None and op.actor == "online"
        if op.kind == OpKind.TURN_INGESTED:
            if op.turn == turn_no:
                effects = TurnEffects(turn_no=turn_no, turn_id=p["turn_id"], runs_before=runs_before,
                                      routing=p.get("routing"), gate=p.get("gate"), buffer=p.get("buffer"),
                                      variables=variables_before)
        elif op.kind == OpKind.ENGINE_STATE_SET:
            if op.actor != "online":
                record = {"key": p["key"], "value": p["value"], "seq": op.seq,
                          "when": "after" if effects is not None else "before"}
                if effects is not None:
                    effects.variables.append(record)
                elif op.turn == turn_no - 1:
                    variables_before.append(record)
        elif op.kind == OpKind.RUN_STARTED:
            if effects is not None:
                effects.runs_after.append(op.run_id)
            elif op.turn == turn_no - 1:       # state.turn is turn_no - 1 only after that turn's ingest
                runs_before.append(op.run_id)
        elif online and op.kind == OpKind.BUFFER_PUSHED:
            pushed_at = op.seq
            for uid, anchors in p["entries"]:      # (a gate's queued cluster is shown with the gate instead)
                if uid in effects.created and not effects.anchors and effects.gate is None:
                    effects.anchors = [(a, None) for a in anchors]
        elif online and op.kind == OpKind.NODE_CREATED:
            node = p["node"]
            effects.created.append(node["id"])
            if node.get("attrs"):
                effects.attrs[node["id"]] = dict(node["attrs"])
            if effects.unit_id is None or (node.get("kind") == turn_kind and not turn_node):
                effects.unit_id, turn_node = node["id"], node.get("kind") == turn_kind
        elif online and op.kind == OpKind.EDGE_ADDED:
            effects.edges.append(Edge(**p["edge"]))
        elif online and op.kind == OpKind.NODE_UPDATED and isinstance(p.get("changes", {}).get("attrs"), dict):
            effects.attrs[p["node"]] = dict(p["changes"]["attrs"])
        elif online and op.kind == OpKind.STATUS_CHANGED:
            effects.transitions.append(_transition(p))
    if effects is not None and pushed_at is not None:
        effects.buffers = _buffers_at(view.store, pushed_at)
    if effects is not None:
        effects.buffer_size = sum(effects.buffers.values())
        if effects.unit_id in effects.created:
            effects.created.remove(effects.unit_id)
            effects.created.insert(0, effects.unit_id)
        effects.anchors = _cosines(view, effects, report)
    return effects


def _buffers_at(store, seq: int) -> dict[str, int]:
    """Each buffer's size right after record `seq`: a forward scan of the buffer records alone (small ones)."""
    buffers: dict[str, set[int]] = {}
    for op in store.ops(kinds=_BUFFER_KINDS, upto_seq=seq):
        p = op.payload
        if op.kind == OpKind.BUFFER_PUSHED:
            buffers.setdefault(p["buffer"], set()).update(uid for uid, _ in p["entries"])
        elif op.kind == OpKind.BUFFER_FLUSHED:
            buffers.setdefault(p["buffer"], set()).difference_update(uid for uid, _ in p["entries"])
        else:
            for ids in buffers.values():
                ids.discard(p["node"])
    return {name: len(ids) for name, ids in buffers.items()}


def _transition(p: dict) -> dict:
    return {"node": p["node"], "was": p.get("was", ""), "status": p["status"], "cause": dict(p.get("cause") or {})}


def _cosines(view, effects: TurnEffects, report) -> list[tuple[int, float | None]]:
    if report is not None and report.unit_id == effects.unit_id and \
            [a for a, _ in report.anchors] == [a for a, _ in effects.anchors]:
        return [(a, float(c)) for a, c in report.anchors]
    vecs = view.vectors
    own = vecs.get(effects.unit_id)
    return [(a, None if own is None or a not in vecs else float(own @ vecs[a])) for a, _ in effects.anchors]

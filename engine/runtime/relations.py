"""What `memwb export` prints: every node, and every edge with where it came from.

An edge an offline run wrote carries the proposal that wrote it (its id, operator, confidence, gate verdict,
reason code and reason, who decided) and the records it cites, so an export keeps what the review queue showed.
The log is the link: when a run applies a proposal, the records that execute it come first and the record
marking it applied closes them, so an edge added in a run belongs to the next proposal of that run marked
applied.
"""
from __future__ import annotations

from collections import Counter

from engine.core.node import node_label
from engine.core.oplog import OpKind
from engine.core.proposal import Proposal, Status
from engine.core.state import MemoryState
from engine.runtime.engine import BaseEngine, export_state

TEXT_CHARS = 160          # a cited record's text in the export, at most (the whole text is in its node)


def edge_proposals(engine: BaseEngine) -> dict[tuple[int, int, str], Proposal]:
    """The applied proposal that wrote each edge an offline run added (the latest, when a later run wrote the
    same edge again)."""
    state = engine.state
    out: dict[tuple[int, int, str], Proposal] = {}
    waiting: dict[str, list[tuple[int, int, str]]] = {}
    for op in engine.store.ops(kinds=(OpKind.EDGE_ADDED, OpKind.PROPOSAL_UPDATED)):
        if op.run_id is None:
            continue
        p = op.payload
        if op.kind == OpKind.EDGE_ADDED:
            e = p["edge"]
            waiting.setdefault(op.run_id, []).append((e["src"], e["dst"], e["type"]))
        elif p["changes"].get("status") == Status.APPLIED and p["id"] in state.proposals:
            for key in waiting.pop(op.run_id, []):
                out[key] = state.proposals[p["id"]]
    return out


def cited_record(state: MemoryState, uid: int) -> dict:
    """A record an edge cites: its id, the turns it holds and the start of its text."""
    node = state.nodes.get(uid)
    if node is None:
        return {"id": node_label(uid), "gone": True}
    text = node.raw or node.summary
    return {"id": node_label(uid), "source_ids": list(node.source_ids),
            "text": text if len(text) <= TEXT_CHARS else text[: TEXT_CHARS - 1] + "…"}


def proposal_record(p: Proposal) -> dict:
    return {"id": p.id, "run": p.run_id, "op": p.op, "confidence": p.confidence, "gate": p.gate,
            "threshold": p.detail.get("threshold"), "reason_code": p.reason_code, "reason": p.reason,
            "decided_by": p.decided_by, "status": p.status}


def export_relations(engine: BaseEngine) -> dict:
    """`export_state` with ids written u4, each edge also carrying who made it, its confidence, the records it
    cites and, for one an offline run wrote, the proposal behind it."""
    state = engine.state
    data = export_state(state, labels=True)
    made = edge_proposals(engine)
    edges = []
    for e in sorted(state.edges.values(), key=lambda e: e.key):
        p = made.get(e.key)
        edges.append({"src": node_label(e.src), "dst": node_label(e.dst), "type": e.type, "made_by": e.made_by,
                      "created_turn": e.created_turn, "confidence": e.confidence,
                      "evidence": [cited_record(state, c) for c in e.evidence],
                      "proposal": proposal_record(p) if p is not None else None})
    return {**data, "edges": edges}


def export_text(engine: BaseEngine, data: dict) -> str:
    """A readable summary of an export: node and edge counts, then every relation an offline run wrote with its
    proposal, confidence, reason and the records it cites (`--json` holds every node and edge)."""
    schema = engine.schema
    label = {t.name: t.label for t in schema.edge_types}
    units, edges = data["units"], data["edges"]
    kinds = Counter(u["kind"] for u in units)
    statuses = Counter(u["status"] for u in units)
    online = Counter(e["type"] for e in edges if e["proposal"] is None)
    from_runs = [e for e in edges if e["proposal"] is not None]
    lines = [f"{schema.label}: {len(units)} nodes ({_counts(kinds)}; {_counts(statuses)}), {len(edges)} edges",
             f"edges made online or by a run without a proposal: {_counts(online, label) or 'none'}",
             f"relations offline runs wrote through a proposal: {len(from_runs)}"]
    for e in from_runs:
        p = e["proposal"]
        theta = f" (gate θ {p['threshold']:.2f})" if isinstance(p["threshold"], (int, float)) else ""
        lines.append(f"  {e['src']} —{label.get(e['type'], e['type'])}→ {e['dst']}  {p['run']} proposal #{p['id']} "
                     f"{p['op']}, confidence {p['confidence']:.2f}{theta}, decided by {p['decided_by'] or 'nobody'}")
        code = f"[{p['reason_code']}] " if p["reason_code"] else ""
        lines.append(f"      reason: {code}{p['reason'] or '—'}")
        for c in e["evidence"]:
            where = ", ".join(c.get("source_ids") or []) or "no source turn"
            lines.append(f"      cites {c['id']} ({where}): gone" if c.get("gone") else
                         f"      cites {c['id']} ({where}): {c['text']}")
    lines.append("(memwb export --json: every node and edge with these fields)")
    return "\n".join(lines)


def _counts(counter: Counter, names: dict | None = None) -> str:
    return ", ".join(f"{(names or {}).get(k, k or 'none')} {n}" for k, n in sorted(counter.items(), key=lambda kv: str(kv[0])))

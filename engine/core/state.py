"""In-memory memory state, changed only by applying operation records.

Engines never mutate nodes or edges directly: they build `OpRecord`s, and
`engine.core.ops` applies them to a state (`apply`, `fold`) through the op
specs. That keeps the log the single truth and makes the state at any point a
pure fold; this module holds the state's data and the queries on it, and
knows nothing of how a record changes it.
The state knows its engine's schema only for two things: which statuses are on
the retrieval surface (`visible`), and which transitions are legal.
"""
from __future__ import annotations

import copy
from collections import defaultdict
from dataclasses import dataclass, field, replace
from typing import Any

from engine.core.edge import Edge
from engine.core.node import TURN_KIND, Node, json_copy
from engine.core.oplog import RunInfo, RunStatus
from engine.core.proposal import Proposal
from engine.core.schema import EngineSchema

CHECKPOINT_FORMAT = 1


@dataclass
class MemoryState:
    schema: EngineSchema | None = None
    nodes: dict[int, Node] = field(default_factory=dict)
    edges: dict[tuple[int, int, str], Edge] = field(default_factory=dict)
    out_adj: dict[int, dict[str, set[int]]] = field(default_factory=lambda: defaultdict(lambda: defaultdict(set)))
    in_adj: dict[int, dict[str, set[int]]] = field(default_factory=lambda: defaultdict(lambda: defaultdict(set)))
    proposals: dict[int, Proposal] = field(default_factory=dict)
    buffers: dict[str, dict[int, list[int]]] = field(default_factory=dict)   # name -> node id -> anchor ids
    engine_state: dict[str, Any] = field(default_factory=dict)              # an engine's own variables
    runs: dict[str, RunInfo] = field(default_factory=dict)
    turn: int = 0
    turn_ids: list[str] = field(default_factory=list)
    turn_units: dict[str, int] = field(default_factory=dict)       # dataset turn id -> turn node id
    seq: int = 0
    next_node_id: int = 1
    next_proposal_id: int = 1
    # What a clone has made its own so far (copy on write); None for a state that owns all it holds.
    owned: "Owned | None" = field(default=None, repr=False, compare=False)

    # -- the schema's part --------------------------------------------------------
    def on_surface(self, status: str) -> bool:
        return self.schema is None or status in self.schema.surface_statuses

    def legal(self, old: str, new: str) -> bool:
        return self.schema is None or self.schema.legal(old, new)

    @property
    def initial_status(self) -> str:
        return self.schema.initial_status if self.schema else ""

    @property
    def turn_kind(self) -> str:
        """The node kind a dataset turn becomes, which `turn_units` maps turn ids to."""
        return self.schema.turn_kind if self.schema else TURN_KIND

    # -- reading -----------------------------------------------------------
    @property
    def units(self) -> dict[int, Node]:
        """All nodes (the All-Mem paper calls them units)."""
        return self.nodes

    @property
    def visible_ids(self) -> list[int]:
        """Nodes on the retrieval surface."""
        return sorted(uid for uid, u in self.nodes.items() if u.visible)

    @property
    def archived_ids(self) -> list[int]:
        """Nodes off the retrieval surface."""
        return sorted(uid for uid, u in self.nodes.items() if not u.visible)

    @property
    def next_unit_id(self) -> int:
        return self.next_node_id

    def buffer(self, name: str) -> dict[int, list[int]]:
        return self.buffers.get(name, {})

    def buffered(self) -> int:
        """Nodes waiting in any buffer."""
        return sum(len(b) for b in self.buffers.values())

    def status_counts(self) -> dict[str, int]:
        counts: dict[str, int] = defaultdict(int)
        for u in self.nodes.values():
            counts[u.status] += 1
        return dict(sorted(counts.items()))

    def carriers(self, source_id: str) -> list[int]:
        """The nodes that carry a dataset turn (its id among their `source_ids`), in the order they were made."""
        return [u.id for u in self.nodes.values() if source_id in u.source_ids]

    def out(self, uid: int, etype: str) -> set[int]:
        return self.out_adj.get(uid, {}).get(etype, set())

    def inc(self, uid: int, etype: str) -> set[int]:
        return self.in_adj.get(uid, {}).get(etype, set())

    def out_edges(self, uid: int) -> list[Edge]:
        adj = self.out_adj.get(uid, {})
        return [self.edges[(uid, dst, t)] for t, dsts in adj.items() for dst in dsts]

    def in_edges(self, uid: int) -> list[Edge]:
        adj = self.in_adj.get(uid, {})
        return [self.edges[(src, uid, t)] for t, srcs in adj.items() for src in srcs]

    def edge_counts(self) -> dict[str, int]:
        counts: dict[str, int] = defaultdict(int)
        for (_, _, t) in self.edges:
            counts[t] += 1
        return dict(sorted(counts.items()))

    def open_runs(self) -> list[RunInfo]:
        return [r for r in self.runs.values() if r.status == RunStatus.OPEN]

    def last_committed_run(self) -> RunInfo | None:
        committed = [r for r in self.runs.values() if r.status == RunStatus.COMMITTED]
        return max(committed, key=lambda r: r.last_seq) if committed else None

    # -- changing (what the op specs use) -------------------------------------
    # A clone shares every node, proposal, run and adjacency row with the state it was cloned from until it
    # changes one: the op specs change a held object only through these, which copy it first in a clone. So a
    # node read from a clone before the clone changes it is the original's, and does not show the change.
    def put_node(self, node: Node) -> None:
        self._put(self.nodes, "nodes", node.id, node)

    def node_to_change(self, uid: int) -> Node:
        return self._own(self.nodes, "nodes", uid, Node.copy)

    def put_proposal(self, proposal: Proposal) -> None:
        self._put(self.proposals, "proposals", proposal.id, proposal)

    def proposal_to_change(self, pid: int) -> Proposal:
        return self._own(self.proposals, "proposals", pid, Proposal.copy)

    def put_run(self, run: RunInfo) -> None:
        self._put(self.runs, "runs", run.run_id, run)

    def run_to_change(self, run_id: str) -> RunInfo:
        return self._own(self.runs, "runs", run_id, _copy_run)

    def put_edge(self, e: Edge) -> None:
        self.edges[e.key] = e
        self._row(self.out_adj, "out", e.src)[e.type].add(e.dst)
        self._row(self.in_adj, "inc", e.dst)[e.type].add(e.src)

    def drop_edge(self, key: tuple[int, int, str]) -> None:
        if self.edges.pop(key, None) is None:
            return
        src, dst, etype = key
        self._row(self.out_adj, "out", src)[etype].discard(dst)
        self._row(self.in_adj, "inc", dst)[etype].discard(src)

    def _owned(self, part: str) -> set | None:
        """The keys of `part` this clone has made its own; None for a state that owns everything."""
        return None if self.owned is None else getattr(self.owned, part)

    def _put(self, table: dict, part: str, key, item) -> None:
        """A new object: this clone's own from the start."""
        table[key] = item
        owned = self._owned(part)
        if owned is not None:
            owned.add(key)

    def _own(self, table: dict, part: str, key, copy_of):
        """`table[key]`, first replaced by a copy of its own when this clone still shares it."""
        item = table[key]
        owned = self._owned(part)
        if owned is not None and key not in owned:
            item = table[key] = copy_of(item)
            owned.add(key)
        return item

    def _row(self, adj: dict[int, dict[str, set[int]]], part: str, uid: int) -> dict[str, set[int]]:
        """`adj[uid]`, copied first when this clone still shares it (`part`: "out" or "inc")."""
        owned = self._owned(part)
        if owned is not None and uid not in owned:
            owned.add(uid)
            shared = adj.get(uid)
            adj[uid] = defaultdict(set, {t: set(ids) for t, ids in shared.items()} if shared else {})
        return adj[uid]

    def clone(self) -> "MemoryState":
        """An independent copy sharing only the schema, made in time linear in the containers only: nodes,
        proposals, runs and adjacency rows are shared until the copy changes one (it copies it first), edges are
        never changed in place; buffers and engine state are copied as the JSON they are, scalars by deepcopy.
        An offline run works on a clone at every session end, so copying every node made a 100,000-turn GAM
        ingest quadratic."""
        own = ("schema", "nodes", "edges", "out_adj", "in_adj", "proposals", "runs", "buffers", "engine_state",
               "turn_ids", "turn_units", "owned")
        twin = copy.copy(self)
        twin.__dict__.update(copy.deepcopy({name: value for name, value in vars(self).items() if name not in own}))
        twin.owned = Owned()
        twin.nodes, twin.edges = dict(self.nodes), dict(self.edges)
        twin.out_adj, twin.in_adj = _adjacency(self.out_adj), _adjacency(self.in_adj)
        twin.proposals, twin.runs = dict(self.proposals), dict(self.runs)
        twin.buffers = {name: {u: list(a) for u, a in buf.items()} for name, buf in self.buffers.items()}
        twin.engine_state = json_copy(self.engine_state)
        twin.turn_ids, twin.turn_units = list(self.turn_ids), dict(self.turn_units)
        return twin

    # -- checkpoints ---------------------------------------------------------
    def to_dict(self) -> dict:
        """A plain snapshot of the fold (nodes, edges, proposals, buffers, runs, counters)."""
        return {
            "format": CHECKPOINT_FORMAT,
            "nodes": [n.payload() for n in self.nodes.values()],
            "edges": [e.to_dict() for e in self.edges.values()],
            "proposals": [p.to_dict() for p in self.proposals.values()],
            "buffers": {name: [[u, a] for u, a in buf.items()] for name, buf in self.buffers.items()},
            "engine_state": self.engine_state,
            "runs": [vars(r) for r in self.runs.values()],
            "turn": self.turn, "turn_ids": self.turn_ids, "turn_units": self.turn_units, "seq": self.seq,
            "next_node_id": self.next_node_id, "next_proposal_id": self.next_proposal_id,
        }

    @classmethod
    def from_dict(cls, data: dict, schema: EngineSchema | None = None) -> "MemoryState":
        if data.get("format") != CHECKPOINT_FORMAT:
            raise ValueError(f"checkpoint format {data.get('format')!r} is not {CHECKPOINT_FORMAT}")
        s = cls(schema=schema)
        for raw in data["nodes"]:
            n = Node.from_dict(raw)
            n.visible = s.on_surface(n.status)
            s.nodes[n.id] = n
        for e in data["edges"]:
            s.put_edge(Edge(**e))
        s.proposals = {p["id"]: Proposal.from_dict(p) for p in data["proposals"]}
        s.buffers = {name: {u: list(a) for u, a in entries} for name, entries in data["buffers"].items()}
        s.engine_state = copy.deepcopy(data["engine_state"])
        s.runs = {r["run_id"]: RunInfo.from_dict(r) for r in data["runs"]}
        s.turn, s.turn_ids, s.seq = data["turn"], list(data["turn_ids"]), data["seq"]
        s.turn_units = dict(data["turn_units"])
        s.next_node_id, s.next_proposal_id = data["next_node_id"], data["next_proposal_id"]
        return s


@dataclass
class Owned:
    """The nodes, proposals, runs and adjacency rows (by node id, each side) a clone has copied for itself."""

    nodes: set[int] = field(default_factory=set)
    proposals: set[int] = field(default_factory=set)
    runs: set[str] = field(default_factory=set)
    out: set[int] = field(default_factory=set)
    inc: set[int] = field(default_factory=set)


def _adjacency(shared: dict[int, dict[str, set[int]]]) -> dict[int, dict[str, set[int]]]:
    """A new outer table over the same rows (a clone copies a row before it changes it)."""
    return defaultdict(lambda: defaultdict(set), shared)


def _copy_run(run: RunInfo) -> RunInfo:
    return replace(run, summary=json_copy(run.summary))

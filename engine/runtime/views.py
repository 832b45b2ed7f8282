"""The views an engine derives from its fold: node vectors, the FAISS index of the retrieval surface, BM25,
each session's turn nodes, and the nodes of each kind in each status.

They are caches, never the truth: rebuilt from the state on open, kept in step
with every committed record (`sync`), and thrown away with the engine. An
engine chooses what text each node is embedded and indexed by (`embed_text`,
`lexical_text`, `embed_node`); the rest is shared.
"""
from __future__ import annotations

import numpy as np

from engine.core.node import Node
from engine.core.oplog import OpRecord
from engine.core.ops import payload_of
from engine.core.payloads import DescriptorChanged, NodeCreated, NodeRetracted, NodeUpdated, StatusChanged
from engine.core.state import MemoryState
from engine.llm.embedder import Embedder
from engine.retrieval.index import VisibleIndex
from engine.retrieval.lexical import BM25
from engine.retrieval.sketch import SketchedRows


class DerivedViews:
    """Mixin of `BaseEngine`: `vectors`, `index` (the surface) and `bm25`, derived from `state`."""

    state: MemoryState
    embedder: Embedder

    def embed_text(self, node: Node) -> str:
        return node.embed_text

    def lexical_text(self, node: Node) -> str | None:
        """The text BM25 indexes for a node; None keeps the node out of the lexical index."""
        return f"{node.raw} {' '.join(node.keywords)}"

    def embed_nodes(self, nodes: list[Node]) -> dict[int, np.ndarray]:
        """Vectors of many nodes at once (one batch through the embedder)."""
        vecs = self.embedder.embed([self.embed_text(u) for u in nodes]) if nodes else \
            np.zeros((0, self.embedder.dim), np.float32)
        return {u.id: v for u, v in zip(nodes, vecs)}

    def _rebuild_views(self) -> None:
        self._views_version = getattr(self, "_views_version", 0) + 1
        self._stacked: tuple[int, list[int], np.ndarray] | None = None
        self._sketched_rows: dict[str, SketchedRows] = {}
        nodes = list(self.state.nodes.values())
        self.vectors: dict[int, np.ndarray] = self.embed_nodes(nodes)
        self.index = VisibleIndex(self.embedder.dim)
        visible = [u.id for u in nodes if u.visible]
        if visible:
            self.index.add(visible, np.stack([self.vectors[i] for i in visible]))
        self.bm25 = BM25()
        self.session_turns: dict[str, set[int]] = {}
        self.status_nodes: dict[tuple[str, str], set[int]] = {}
        self._status_key: dict[int, tuple[str, str]] = {}
        for u in nodes:
            self._index_lexical(u)
            self._index_session(u)
            self._index_status(u)

    def _index_session(self, u: Node) -> None:
        if u.kind == self.state.turn_kind:
            self.session_turns.setdefault(u.session, set()).add(u.id)

    def turns_of_session(self, session: str) -> list[Node]:
        """The turn nodes of one session, in id order: what an ingest looks for its predecessor among without a
        pass over every node (at 100,000 turns that pass was most of an All-Mem ingest)."""
        nodes = self.state.nodes
        return [nodes[i] for i in sorted(self.session_turns.get(session, ()))
                if i in nodes and nodes[i].session == session]

    def _index_status(self, u: Node) -> None:
        key = (u.kind, u.status)
        old = self._status_key.get(u.id)
        if old == key:
            return
        if old is not None:
            self.status_nodes[old].discard(u.id)
        self.status_nodes.setdefault(key, set()).add(u.id)
        self._status_key[u.id] = key

    def nodes_in_status(self, kind: str, statuses: tuple[str, ...]) -> list[Node]:
        """The nodes of `kind` in any of `statuses`, in id order: what a per-turn rule (MemLoom's open events)
        looks among without a pass over every node, which made a long memory's ingest quadratic."""
        nodes = self.state.nodes
        ids = sorted(i for status in statuses for i in self.status_nodes.get((kind, status), ()))
        return [nodes[i] for i in ids if i in nodes and nodes[i].kind == kind and nodes[i].status in statuses]

    def _index_lexical(self, u: Node) -> None:
        text = self.lexical_text(u)
        if text is not None:
            self.bm25.add(u.id, text)

    def _sync(self, ops: list[OpRecord]) -> None:
        """Keep vectors, the surface index and BM25 in step with applied ops.

        A created node, a new descriptor or new members (a group node's centroid) re-derive the node's
        vector, its lexical entry and its place on the surface index."""
        self._views_version += 1
        for op in ops:
            p = payload_of(op)
            if isinstance(p, (NodeCreated, DescriptorChanged, NodeUpdated)):
                u = self.state.nodes.get(p.node_id)
                if u is None:
                    continue
                vector = self.embed_node(u)
                old = self.vectors.get(u.id)
                if old is not None and not np.array_equal(old, vector):
                    self._forget_rows(u.id)
                self.vectors[u.id] = vector
                self._index_lexical(u)
                self._index_session(u)
                self._index_status(u)
                if u.visible:
                    self.index.add([u.id], self.vectors[u.id][None, :])
            elif isinstance(p, StatusChanged) and p.node in self.state.nodes:
                uid = p.node
                self._index_status(self.state.nodes[uid])
                if self.state.nodes[uid].visible:
                    self.index.add([uid], self.vectors[uid][None, :])
                else:
                    self.index.remove([uid])
            elif isinstance(p, NodeRetracted):
                self._forget_rows(p.node)
                self.index.remove([p.node])
                self.bm25.remove(p.node)
                self.vectors.pop(p.node, None)
                for turns in self.session_turns.values():
                    turns.discard(p.node)
                key = self._status_key.pop(p.node, None)
                if key is not None:
                    self.status_nodes[key].discard(p.node)

    def sketched_rows(self, name: str, ids: np.ndarray) -> SketchedRows:
        """The vectors of `ids` (increasing; a set that only grows, such as an engine's records of one kind)
        kept across states under `name`, with their sketch once large (`engine.retrieval.sketch`): a query
        over a large set reads the sketch instead of every vector."""
        rows = self._sketched_rows.setdefault(name, SketchedRows(self.embedder.dim))
        rows.sync(ids, self.vectors.__getitem__)
        return rows

    def _forget_rows(self, uid: int) -> None:
        """Drop the kept row sets holding `uid`, whose vector changed or left (built afresh when next asked)."""
        for name in [n for n, rows in self._sketched_rows.items() if rows.holds(uid)]:
            del self._sketched_rows[name]

    def embed_node(self, node: Node) -> np.ndarray:
        return self.embedder.embed_one(self.embed_text(node))

    def vector(self, uid: int) -> np.ndarray:
        return self.vectors[uid]

    def derived(self, name: str, build):
        """`build()`, computed once until the views change (the next applied record): what retrieval derives
        from the state alone (an engine's node lists, its per-node facts), asked query after query."""
        memo = self.__dict__.setdefault("_derived", {})
        hit = memo.get(name)
        if hit is None or hit[0] != self._views_version:
            hit = memo[name] = (self._views_version, build())
        return hit[1]

    def stacked_vectors(self, ids: list[int]) -> np.ndarray:
        """`np.stack` of the vectors of `ids`, in that order; the last one asked for is kept until the views
        change, so query after query over one memory does not copy every vector again (same array, same
        products)."""
        cached = self._stacked
        if cached is None or cached[0] != self._views_version or cached[1] != ids:
            matrix = np.stack([self.vectors[i] for i in ids]) if ids else np.zeros((0, self.embedder.dim), np.float32)
            cached = self._stacked = (self._views_version, list(ids), matrix)
        return cached[2]

    def visible_neighbours(self, uid: int, k: int) -> list[tuple[int, float]]:
        return [(i, s) for i, s in self.index.search(self.vectors[uid], k + 1) if i != uid][:k]

"""Why a RecMem node ranked where it did, or why the three-layer retrieval left it out.

A result's signals are its own fused relevance (every result is a pick of its layer, ranked by it). Any other
node is placed by re-asking the layers: a message inside a unit is not searched (its unit is), a consolidated
unit left the subconscious store (its episode stands for it), a layer switched off by an ablation searched
nothing, and any other node on the surface ranked below its layer's budget.
"""
from __future__ import annotations

from typing import Iterable

from engine.core.node import Node
from engine.engines.recmem.context import RecMemContext
from engine.engines.recmem.retrieval import ABLATION, budgets, layer_ranks, relevance
from engine.engines.recmem.schema import SCHEMA, Kind, Life, Rel
from engine.retrieval.explain import Drop, Placement, Signals, place_each
from engine.retrieval.result import RetrievalResult

LAYERS_STAGE, _, RANK_STAGE = (s.key for s in SCHEMA.stages)
BUDGET_NAME = {"subconscious": "k_sub", "episodic": "k_epi", "semantic": "k_sem"}


def explain(engine: RecMemContext, res: RetrievalResult, uids: Iterable[int]) -> dict[int, Placement]:
    state = engine.state
    rel = relevance(engine, res.query)
    quota = budgets(engine)
    cache: dict[str, dict] = {}

    def dropped(node: Node) -> Placement:
        uid = node.id
        if node.status == Life.PAIRED:
            unit = min(state.inc(uid, Rel.DERIVED_FROM), default=None)
            return Placement(uid, None, False, None, Drop.FILTERED, LAYERS_STAGE,
                             f"a message inside unit u{unit}: the subconscious layer ranks exchanges")
        signals = Signals(**rel.terms(uid), score=rel.score(uid))
        if node.status == Life.CONSOLIDATED:
            episodes = sorted(e for e in state.inc(uid, Rel.DERIVED_FROM) if state.nodes[e].kind == Kind.EPISODE)
            into = ", ".join(f"u{e}" for e in episodes) or "an episode"
            return Placement(uid, None, False, signals, Drop.OFF_SURFACE, LAYERS_STAGE,
                             f"consolidated into episode {into}: it left the subconscious store, and reaches an "
                             f"answer only through that episode and its facts")
        if "layers" not in cache:
            cache["layers"] = layer_ranks(engine, rel)
        layer, rank, _ = cache["layers"][uid]
        if engine.settings.has(ABLATION[layer]):
            return Placement(uid, None, False, signals, Drop.EXPANSION_OFF, LAYERS_STAGE,
                             f"the {ABLATION[layer]} ablation leaves the {layer} layer out")
        return Placement(uid, None, False, signals, Drop.BELOW_SEED_CUT, LAYERS_STAGE,
                         f"{layer} rank {rank} > {BUDGET_NAME[layer]} {quota[layer]}")

    return place_each(state, res, uids, first_stage=LAYERS_STAGE, ranking_stage=RANK_STAGE,
                      ranked=lambda r: Signals(**rel.terms(r.id), score=r.score, admitted=LAYERS_STAGE),
                      dropped=dropped)

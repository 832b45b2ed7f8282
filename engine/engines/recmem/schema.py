"""What RecMem declares: messages, exchange units, episodes and facts in three layers, the recurrence
consolidation process and its operators, the three-layer retrieval."""
from __future__ import annotations

from engine.core.proposal import SharedReasons
from engine.core.schema import (DecisionSpec, EdgeTypeSpec, EngineSchema, KindSpec, OperatorSpec, PlanField, ProcessSpec,
                           ReasonSpec, StageSpec, StatusSpec, llm_reasons)


class Kind:
    MESSAGE = "turn"           # one dataset message, raw (the node every engine makes for a turn)
    UNIT = "unit"              # an interaction unit u_i: a message and its reply, embedded with its date
    EPISODE = "episode"        # an episodic memory: a narrative over recurring units
    FACT = "fact"              # a semantic memory: one atomic fact refined from an episode and its units


class Life:
    WAITING = "waiting"            # message: its exchange is not complete yet (searched as subconscious)
    PAIRED = "paired"              # message: inside its exchange unit
    SUBCONSCIOUS = "subconscious"  # unit: in the subconscious store S_sub
    CONSOLIDATED = "consolidated"  # unit: promoted into an episode, left S_sub
    EPISODIC = "episodic"          # episode: in S_epi
    SEMANTIC = "semantic"          # fact: in S_sem


class Rel:
    DERIVED_FROM = "derived_from"  # fact -> episode -> unit -> message: the provenance chain
    UPDATES = "updates"            # a time-anchored fact -> the older fact whose value it changes


class Op:
    CONSOLIDATE = "consolidate"    # a recurrence cluster -> 1-3 new episodes (LLM_epi)
    MERGE = "merge"                # a unit -> the nearest episode, rewritten in place (LLM_merge)
    REFINE = "refine"              # each new or merged episode -> atomic facts (LLM_refine)
    EPISODIC = (CONSOLIDATE, MERGE)


class Layer:
    """The three stores retrieval reads (§3.5), by the stage key that searches them."""

    SUB, EPI, SEM = "subconscious", "episodic", "semantic"


class ReasonCode(SharedReasons):
    MERGE_DECLINED = "MERGE_DECLINED"
    NO_EPISODE = "NO_EPISODE"
    CITATION_FAIL = "CITATION_FAIL"
    PARENT_NOT_APPLIED = "PARENT_NOT_APPLIED"


ABLATIONS = {
    "no-merge": "no merge-first: a unit near an episode still waits for the recurrence trigger (§3.3)",
    "no-subconscious": "retrieval leaves out the subconscious layer (§4.3, w/o subconscious)",
    "no-episodic": "retrieval leaves out the episodic layer (§4.3, w/o episodic)",
    "no-semantic": "retrieval leaves out the semantic layer; no refinement runs (§4.3, w/o semantic)",
    "no-lexical": "dense cosine only in every layer (no BM25 fusion), as the paper retrieves",
}

SCHEMA = EngineSchema(
    name="recmem",
    label="RecMem",
    description="Every exchange waits in a subconscious store (embedding only, no LLM); only recurrence "
                "(θ_count units above θ_sim cosine) or a near episode (merge-first) calls the LLM, which writes "
                "episodes and refines them into atomic facts with provenance; retrieval reads the three layers "
                "(seeds/recmem.txt §3).",
    node_kinds=(
        KindSpec(Kind.MESSAGE, "message", "#9c9c9c", "one dataset message, raw; paired into an exchange unit"),
        KindSpec(Kind.UNIT, "interaction unit", "#4e79a7", "one exchange (a message and its reply) with its date: "
                                                           "the subconscious record s_i = (v_i, u_i)"),
        KindSpec(Kind.EPISODE, "episode", "#e15759", "a narrative of how one topic evolved over recurring units"),
        KindSpec(Kind.FACT, "fact", "#59a14f", "one atomic fact recovered from an episode's units"),
    ),
    statuses=(
        StatusSpec(Life.WAITING, "waiting", True, "a message whose reply has not come: searched as subconscious"),
        StatusSpec(Life.PAIRED, "paired", False, "a message inside its exchange unit: reached from the unit"),
        StatusSpec(Life.SUBCONSCIOUS, "subconscious", True, "an exchange in the subconscious store S_sub"),
        StatusSpec(Life.CONSOLIDATED, "consolidated", False, "promoted into an episode: left S_sub, reached by "
                                                             "its episode's derived_from link", "#8c8c8c",
                   "square"),
        StatusSpec(Life.EPISODIC, "episodic", True, "an episode in the episodic store S_epi", "#e15759",
                   "diamond"),
        StatusSpec(Life.SEMANTIC, "semantic", True, "a fact in the semantic store S_sem", "#59a14f", "triangle"),
    ),
    initial_status=Life.WAITING,
    transitions=((Life.WAITING, Life.PAIRED), (Life.SUBCONSCIOUS, Life.CONSOLIDATED)),
    edge_types=(
        EdgeTypeSpec(Rel.DERIVED_FROM, "derived from", "#2ca02c", False, 1.5, 0.8, 0, recovery=True, lineage=True,
                     description="fact -> episode (citing its units) -> unit -> message: provenance"),
        EdgeTypeSpec(Rel.UPDATES, "updates", "#9467bd", True, 2.0, 1.0, 1,
                     description="a time-anchored fact -> the older fact whose state it changes"),
    ),
    processes=(ProcessSpec("consolidation", "Recurrence consolidation", "recurrence",
                           "each recurrence trigger → 1–3 episodes, each unit near an episode → merged into it "
                           "(merge-first), each new or merged episode → atomic facts (semantic refinement)"),),
    operators=(
        OperatorSpec(Op.CONSOLIDATE, "Episodic consolidation", "consolidation",
                     ("cluster unit (leaves the subconscious store)",), ordered_targets=True,
                     plan_fields=(PlanField("episodes", "Episodes", "segments",
                                            (("text", "episode"), ("units", "cites units"))),),
                     description="a recurrence cluster, in time order, is written into 1-3 episodes (LLM_epi)"),
        OperatorSpec(Op.MERGE, "Merge into episode", "consolidation",
                     ("episode (rewritten in place)", "unit (absorbed)"), ordered_targets=True,
                     plan_fields=(PlanField("should_merge", "Same ongoing episode"),
                                  PlanField("merged_memory", "Merged episode"),
                                  PlanField("past_memory", "Episode before the merge"),
                                  PlanField("keywords", "Keywords", "list")),
                     description="merge-first: a unit close to its nearest episode is written into it (LLM_merge)"),
        OperatorSpec(Op.REFINE, "Semantic refinement", "consolidation", ("source unit",), ordered_targets=True,
                     plan_fields=(PlanField("facts", "New facts", "segments",
                                            (("episode", "episode"), ("text", "fact"), ("type", "type"),
                                             ("units", "cites units"), ("updates", "updates fact"))),
                                  PlanField("dropped", "Dropped as known", "segments",
                                            (("episode", "episode"), ("text", "candidate"),
                                             ("known", "known fact"), ("similarity", "similarity"))),
                                  PlanField("known", "Known facts it was checked against", "list"),
                                  PlanField("refined", "Episode text it refined", "list")),
                     description="detail recovery and fact maintenance against the top-k known facts (LLM_refine)"),
    ),
    reason_codes=llm_reasons() + (
        ReasonSpec(ReasonCode.LOW_CONF, "confidence below the process's gate θ"),
        ReasonSpec(ReasonCode.MERGE_DECLINED, "the merge role found the unit is not part of the episode: it stays "
                                              "subconscious"),
        ReasonSpec(ReasonCode.NO_EPISODE, "the episode role formed no episode from the cluster: it stays "
                                          "subconscious"),
        ReasonSpec(ReasonCode.CITATION_FAIL, "an episode or fact cites a unit outside its input"),
        ReasonSpec(ReasonCode.APPLICABLE_FAIL, "a target changed earlier in this run (consolidated, or gone)"),
        ReasonSpec(ReasonCode.PARENT_NOT_APPLIED, "the consolidation or merge this refinement follows was not "
                                                  "applied"),
    ),
    stages=(
        StageSpec("layers", "Three layers · seeds", "seeds",
                  "Each layer ranked by z(dense) + {lexical_weight} · z(BM25) (z over the retrieval surface): the "
                  "top {k_sub} subconscious units, {k_epi} episodes and {k_sem} facts."),
        StageSpec("provenance", "Provenance", "expansion",
                  "Every episode and fact traced down its derived_from links: fact → episode (the units it cites) "
                  "→ unit → message. Nothing is added to the ranking here."),
        StageSpec("rank", "Merged ranking", "ranking",
                  "The layers' picks in one ranking by the same score; each result keeps its layer and its "
                  "provenance chain."),
    ),
    llm_roles=("episode_extraction", "episode_merge", "fact_refinement"),
    ablations=ABLATIONS,
    retrieval_ablations=("no-episodic", "no-lexical", "no-subconscious"),
    schedule="every-1-turns",       # consolidation right at the trigger (§3.2): a run after every turn that queued
    decisions=(DecisionSpec("update", edge=Rel.UPDATES),),
)

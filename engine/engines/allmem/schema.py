"""What All-Mem declares: kinds, the visible/archived lifecycle, τ σ ν β edges, ATC's operators and codes."""
from __future__ import annotations

from engine.core.proposal import SharedReasons
from engine.core.schema import (
    DecisionSpec,
    EdgeTypeSpec,
    EngineSchema,
    KindSpec,
    OperatorSpec,
    PlanField,
    ProcessSpec,
    ReasonSpec,
    StageSpec,
    StatusSpec,
    llm_reasons,
)


class Kind:
    TURN = "turn"
    MERGED = "merged"
    SPLIT_PART = "split-part"


class Life:
    VISIBLE = "visible"
    ARCHIVED = "archived"


class EdgeType:
    TEMPORAL = "temporal"     # tau: new -> session-local predecessor (cap 1)
    SEMANTIC = "semantic"     # sigma: degree-capped association
    VERSION = "version"       # nu: new/representative -> old/archived, never pruned by default
    SIBLING = "sibling"       # beta: among Split siblings (capped)


class Op:
    SPLIT = "split"
    MERGE = "merge"
    UPDATE = "update"
    ORDER = (SPLIT, MERGE, UPDATE)   # fixed execution order (All-Mem Alg. 1)


class ReasonCode(SharedReasons):
    """The fail-closed taxonomy of All-Mem App. C.5: one code per drop or skip (the shared ones inherited:
    LOW_CONF, DUPLICATE for lost intra-queue de-duplication, APPLICABLE_FAIL, the LLM boundary's)."""

    NORM_FILTER = "NORM_FILTER"
    COH_FAIL = "COH_FAIL"
    PLAN_VALIDATION_FAIL = "PLAN_VALIDATION_FAIL"
    OVERLAP = "OVERLAP"              # lost merge overlap resolution


ABLATIONS = {
    "no-visibility": "never archive: every unit stays on the visible surface",
    "no-split": "consolidation without the Split operator",
    "no-merge": "consolidation without the Merge operator",
    "no-update": "consolidation without the Update operator",
    "anchors-only": "retrieval re-ranks Stage-1 anchors only (no Stage-2 expansion)",
    "no-recovery-links": "Stage-2 expansion does not follow version or sibling links",
    "no-type-priority": "Stage-2 expansion ignores link-type priority (id order only)",
    "no-lexical": "dense cosine only, as in the paper (no BM25 fusion)",
}

_DESCRIPTOR = (PlanField("summary", "Summary"), PlanField("keywords", "Keywords", "list"))

SCHEMA = EngineSchema(
    name="allmem",
    label="All-Mem",
    description="Visible-surface memory with agentic topology consolidation (Split / Merge / Update) and "
                "three-stage topology-aware retrieval (seeds/all-mem.txt §3).",
    node_kinds=(
        KindSpec(Kind.TURN, "turn", "#4e79a7", "one dataset turn, as ingested"),
        KindSpec(Kind.MERGED, "merged", "#f28e2b", "representative of merged units"),
        KindSpec(Kind.SPLIT_PART, "split part", "#9467bd", "one topic segment of a split unit"),
    ),
    statuses=(
        StatusSpec(Life.VISIBLE, "visible", True, "on the visible surface: Stage-1 anchors and online writes"),
        StatusSpec(Life.ARCHIVED, "archived", False, "off the surface, reachable through version/sibling links"),
    ),
    initial_status=Life.VISIBLE,
    transitions=((Life.VISIBLE, Life.ARCHIVED),),
    edge_types=(
        EdgeTypeSpec(EdgeType.SIBLING, "sibling (β)", "#2ca02c", True, 2.5, 1.0, 0, recovery=True,
                     description="among the parts of one split"),
        EdgeTypeSpec(EdgeType.VERSION, "version (ν)", "#d62728", False, 2.5, 1.0, 1, recovery=True, lineage=True,
                     description="new or representative -> archived predecessor; never pruned"),
        EdgeTypeSpec(EdgeType.TEMPORAL, "temporal (τ)", "#7f7f7f", False, 1.5, 0.9, 2,
                     description="new turn -> its session-local predecessor (cap 1)"),
        EdgeTypeSpec(EdgeType.SEMANTIC, "semantic (σ)", "#1f77b4", True, 1.0, 0.45, 3,
                     description="degree-capped association to the nearest visible units"),
    ),
    processes=(ProcessSpec("atc", "Consolidation (ATC)", "atc",
                           "diagnosis → gate θ → Norm → queues → plans → deterministic executor"),),
    operators=(
        OperatorSpec(Op.SPLIT, "Split", "atc", ("to split (archived behind its parts)",),
                     plan_fields=(PlanField("segments", "Segments", "segments",
                                            (("segment_text", "Text (exact substring)"),
                                             ("segment_summary", "Summary"), ("segment_keywords", "Keywords"),
                                             ("topic_label", "Topic"))),
                                  PlanField("split_rationale", "Rationale")),
                     description="one mixed-topic unit becomes sibling parts"),
        OperatorSpec(Op.MERGE, "Merge", "atc", ("source (archived behind the merged unit)",),
                     plan_fields=_DESCRIPTOR + (PlanField("salient_points", "Salient points", "list"),),
                     description="2-4 near-duplicate units become one representative"),
        OperatorSpec(Op.UPDATE, "Update", "atc", ("current (kept, descriptor refreshed)",
                                                  "superseded (archived on apply)"), ordered_targets=True,
                     plan_fields=(PlanField("updated_summary", "Refreshed summary"),
                                  PlanField("updated_keywords", "Refreshed keywords", "list"),
                                  PlanField("deprecations", "Deprecated facts", "list"),
                                  PlanField("alignment_note", "Alignment note")),
                     description="a newer statement supersedes an older one"),
    ),
    reason_codes=llm_reasons()[:-1] + (
        ReasonSpec(ReasonCode.LOW_CONF, "confidence below the operator's gate θ"),
        ReasonSpec(ReasonCode.NORM_FILTER, "Norm dropped it: unknown ids, wrong arity or archived targets"),
        ReasonSpec(ReasonCode.COH_FAIL, "merge coherence below γ"),
        ReasonSpec(ReasonCode.APPLICABLE_FAIL, "a target was already edited in this run, or is gone"),
        ReasonSpec(ReasonCode.PLAN_VALIDATION_FAIL, "the plan broke an executor-side rule"),
        ReasonSpec(ReasonCode.DUPLICATE, "same targets as a more confident proposal"),
        ReasonSpec(ReasonCode.OVERLAP, "overlaps a more coherent merge"),
    ) + llm_reasons()[-1:],
    stages=(
        StageSpec("stage1", "Stage 1 · anchors", "seeds",
                  "Exact top-{k} on the visible surface; score = z(dense cosine) + {lexical_weight} · z(BM25)."),
        StageSpec("stage2", "Stage 2 · expansion", "expansion",
                  "Breadth-first over outgoing typed links: hop limit {hops}, candidate budget {budget}. First the "
                  "recovery links alone (sibling, version) hop by hop, then every link hop by hop; each hop admits "
                  "every sibling, then version, then temporal, then semantic link of its frontier, each in "
                  "frontier order, then id."),
        StageSpec("stage3", "Stage 3 · ranking", "ranking",
                  "Every candidate re-ranked (units an Update superseded lose {archived_penalty} z); the top "
                  "{final_k} are returned."),
    ),
    llm_roles=("descriptor", "diagnosis", "split_plan", "merge_plan", "update_plan"),
    ablations=ABLATIONS,
    retrieval_ablations=("anchors-only", "no-lexical", "no-recovery-links", "no-type-priority"),
    decisions=(DecisionSpec("update", Op.UPDATE), DecisionSpec("merge", Op.MERGE), DecisionSpec("split", Op.SPLIT)),
)

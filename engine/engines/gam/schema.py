"""What GAM declares: utterance events and topic nodes, the two-phase buffer, topic relations, cross links.

GAM (seeds/gam.txt §3) keeps the ongoing dialogue in an event progression graph (each utterance an `event`
node, `sequential` edges between them) and writes its topic associative network only in the semantic
consolidation phase: a boundary detector cuts the buffer into segments, each becomes a `topic` node, the
segment's events are archived and linked to it by `cross` edges, and typed relation edges join the topic to
its nearest earlier topics.
"""
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
from engine.engines.gam.settings import ABLATIONS, MEETING_DETECTOR


class Kind:
    EVENT = "event"            # e_t: one utterance of the dialogue (a dataset turn)
    TOPIC = "topic"            # v_new: one consolidated segment, {c_sum, c_raw}


class Life:
    BUFFERED = "buffered"      # event in the active event graph (the episodic buffer)
    ARCHIVED = "archived"      # event of an archived event graph (S_arch), reached through a cross edge
    TOPIC = "consolidated"     # topic node of the topic associative network


class Phase:
    EPISODIC = "episodic"            # episodic buffering state: utterances appended, topic network untouched
    CONSOLIDATING = "consolidating"  # semantic consolidation state, entered only on a sparse trigger


class Trigger:
    SESSION_END = "session_end"      # the session of the buffered utterances ended
    OVERFLOW = "overflow"            # the buffer passed T_max tokens
    MANUAL = "manual"                # a person (or `memwb consolidate`) asked for a consolidation now
    ALL = (SESSION_END, OVERFLOW, MANUAL)


class Rel:
    SUPPORT = "support"
    CONTRADICT = "contradict"
    COREFERENCE = "coreference"
    CAUSAL = "causal"
    SEMANTIC = "semantic"
    UNRELATED = "unrelated"
    LABELS = (SUPPORT, CONTRADICT, COREFERENCE, CAUSAL, SEMANTIC, UNRELATED)   # what the relation role may say
    TOPIC = (SUPPORT, CONTRADICT, COREFERENCE, CAUSAL, SEMANTIC)               # the ones that become edges
    SEQUENTIAL = "sequential"  # E_temp: event -> the next event of the active graph
    CROSS = "cross"            # E_cross: topic -> an event of its archived event graph


class Op:
    TOPIC = "topic"            # consolidate one segment into a topic node
    RELATE = "relate"          # a typed relation edge between a new topic and an earlier one


class ReasonCode(SharedReasons):
    """GAM's own codes; LOW_CONF (relation confidence not above τ), DUPLICATE (the two topics are already
    related) and APPLICABLE_FAIL (a target is gone or no longer what the proposal saw) are the shared ones."""

    BOUNDARY_RANGE = "BOUNDARY_RANGE"          # a detector index outside 0..n-2 of the buffer
    BOUNDARY_ORDER = "BOUNDARY_ORDER"          # detector indices not in increasing order
    BOUNDARY_DUPLICATE = "BOUNDARY_DUPLICATE"  # a detector index given twice
    LABEL_FAIL = "LABEL_FAIL"                  # a relation label outside the six the role may say
    UNRELATED = "UNRELATED"                    # the relation role said the topics are unrelated
    SETTING_OUT_OF_RANGE = "SETTING_OUT_OF_RANGE"
    DETECTOR = (BOUNDARY_RANGE, BOUNDARY_ORDER, BOUNDARY_DUPLICATE)


CONSOLIDATION, LINKING = "consolidation", "linking"          # the two processes (and their buffers)
EPISODIC_BUFFER = "episodic"                                 # the consolidation process reads this buffer

SCHEMA = EngineSchema(
    name="gam",
    label="GAM",
    description="Hierarchical graph memory: utterances buffered in an event progression graph, consolidated into "
                "a topic associative network only on a sparse trigger (session end, buffer overflow), with typed "
                "topic relations and cross links to the archived events; graph-guided multi-factor retrieval "
                "(seeds/gam.txt §3).",
    node_kinds=(
        KindSpec(Kind.EVENT, "event", "#4e79a7", "one utterance (e_t), immutable, addressed by its turn id"),
        KindSpec(Kind.TOPIC, "topic", "#e15759", "one consolidated segment: keywords and summary (c_sum) and "
                                                 "the segment's raw text (c_raw)"),
    ),
    statuses=(
        StatusSpec(Life.BUFFERED, "buffered", True, "event of the active event graph: searched directly",
                   "#f2c14e", "dot"),
        StatusSpec(Life.ARCHIVED, "archived", False, "event of an archived event graph, reached through its "
                                                     "topic's cross edge", "#8c8c8c", "square"),
        StatusSpec(Life.TOPIC, "topic", True, "topic node of the topic associative network", "#e15759",
                   "diamond"),
    ),
    initial_status=Life.BUFFERED,
    transitions=((Life.BUFFERED, Life.ARCHIVED),),
    edge_types=(
        EdgeTypeSpec(Rel.CAUSAL, "causal", "#d62728", False, 2.5, 1.0, 0,
                     description="new topic -> earlier topic that led to it (asymmetric)", weighted=True,
                     cause_end="dst"),
        EdgeTypeSpec(Rel.CONTRADICT, "contradict", "#9467bd", False, 2.5, 1.0, 1,
                     description="new topic -> earlier topic it contradicts (asymmetric)", weighted=True),
        EdgeTypeSpec(Rel.SUPPORT, "support", "#2ca02c", False, 2.0, 1.0, 2,
                     description="new topic -> earlier topic it supports (asymmetric)", weighted=True),
        EdgeTypeSpec(Rel.COREFERENCE, "coreference", "#ff7f0e", True, 2.0, 1.0, 3,
                     description="the same entity or event (symmetric; stored new -> earlier)", weighted=True),
        EdgeTypeSpec(Rel.SEMANTIC, "semantic", "#1f77b4", True, 1.5, 0.8, 4,
                     description="similar meaning (symmetric; stored new -> earlier)", weighted=True),
        EdgeTypeSpec(Rel.CROSS, "cross", "#8c8c8c", True, 1.0, 0.6, 5, recovery=True, lineage=True,
                     description="topic -> an event of its archived event graph (grounded evidence)"),
        EdgeTypeSpec(Rel.SEQUENTIAL, "sequential", "#7f7f7f", False, 1.0, 0.7, 6,
                     description="event -> the next event of the same event graph (E_temp)"),
    ),
    processes=(
        ProcessSpec(CONSOLIDATION, "Semantic consolidation", EPISODIC_BUFFER,
                    "boundary detection over the episodic buffer → one topic node per complete segment (keywords, "
                    "summary, raw text) → the segment's events archived behind cross edges; entered on a session "
                    "end or a buffer overflow", scheduled=False),
        ProcessSpec(LINKING, "Topic linking", LINKING,
                    "coarse-to-fine: each new topic's top-5 topics by vector similarity, then the relation role; "
                    "an edge only above τ and never for unrelated"),
    ),
    operators=(
        OperatorSpec(Op.TOPIC, "Consolidate segment", CONSOLIDATION, ("event of the segment (archived on apply)",),
                     ordered_targets=True,
                     plan_fields=(PlanField("summary", "Summary (c_sum)"), PlanField("keywords", "Keywords", "list"),
                                  PlanField("boundaries", "Detector boundaries over the buffer", "list"),
                                  PlanField("trigger", "Trigger"), PlanField("tail", "Tail policy")),
                     description="a complete segment of the buffer becomes a topic node; its events are archived"),
        OperatorSpec(Op.RELATE, "Topic relation", LINKING, ("new topic", "earlier topic"), ordered_targets=True,
                     plan_fields=(PlanField("relation", "Relation"), PlanField("segment", "New topic's segment",
                                                                                "list"),
                                  PlanField("rationale", "Rationale")),
                     description="a typed, confidence-weighted edge new topic -> earlier topic"),
    ),
    reason_codes=llm_reasons() + (
        ReasonSpec(ReasonCode.BOUNDARY_RANGE, "a detector boundary index outside 0..n-2 of the buffer"),
        ReasonSpec(ReasonCode.BOUNDARY_ORDER, "detector boundary indices not in increasing order"),
        ReasonSpec(ReasonCode.BOUNDARY_DUPLICATE, "a detector boundary index given twice"),
        ReasonSpec(ReasonCode.LABEL_FAIL, "a relation label outside support / contradict / coreference / causal / "
                                          "semantic / unrelated"),
        ReasonSpec(ReasonCode.UNRELATED, "the relation role judged the topics unrelated: never an edge"),
        ReasonSpec(ReasonCode.LOW_CONF, "relation confidence not above τ"),
        ReasonSpec(ReasonCode.DUPLICATE, "the two topics are already related"),
        ReasonSpec(ReasonCode.APPLICABLE_FAIL, "a target is gone, or a segment's events are no longer buffered"),
        ReasonSpec(ReasonCode.SETTING_OUT_OF_RANGE, "a setting outside its declared bounds or choices"),
    ),
    stages=(
        StageSpec("anchor", "Topic anchors", "seeds",
                  "The top-{k} topic nodes by z(dense cosine of c_sum) + {anchor_lexical_weight} · z(BM25 of the "
                  "topic's text), then their first-order neighbours over topic relation edges (either way)."),
        StageSpec("drill", "Drill-down", "expansion",
                  "Every event of the archived event graphs the anchors' cross edges lead to, plus the "
                  "{buffer_k} most relevant events of the active buffer."),
        StageSpec("rerank", "Multi-factor re-rank", "ranking",
                  "Score = P_sem · β_time^I_time · β_role^I_role · β_conf^I_conf with β_time {beta_time}, β_role "
                  "{beta_role}, β_conf {beta_conf}; P_sem = σ({psem_slope} · (r − {psem_center})) of r = z(cosine) + "
                  "{rerank_lexical_weight} · z(BM25) ({rerank_model}); the top {final_k} are returned."),
    ),
    llm_roles=("boundary_detection", "topic_summary", "topic_relation"),
    ablations=ABLATIONS,
    retrieval_ablations=("no-buffer", "no-expansion", "no-lexical", "no-mfr"),
    turn_kind=Kind.EVENT,
    fits={"meetings": MEETING_DETECTOR},
    decisions=(DecisionSpec("cause", Op.RELATE, field="relation", relation=Rel.CAUSAL),
               DecisionSpec("update", Op.RELATE, field="relation", relation=Rel.CONTRADICT),
               DecisionSpec("merge", Op.RELATE, field="relation", relation=Rel.COREFERENCE)),
)

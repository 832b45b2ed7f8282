"""What MemLoom declares: sentence records and events, the event FSM, the relation closure, the steward."""
from __future__ import annotations

from engine.core.proposal import SharedReasons
from engine.core.schema import (DecisionSpec, EdgeTypeSpec, EngineSchema, KindSpec, OperatorSpec, PlanField, ProcessSpec,
                           ReasonSpec, StageSpec, StatusSpec, llm_reasons)
from engine.engines.memloom.settings import ABLATIONS


class Kind:
    SENTENCE = "turn"          # the sentence-level record of one utterance (a dataset turn)
    EVENT = "event"


class Life:
    BUFFERED = "buffered"      # sentence: in the real-time buffer, not yet curated by a steward run
    GROUNDED = "grounded"      # sentence: curated; reached through its event's evidence pointer
    PROVISIONAL = "provisional"
    ACTIVE = "active"
    CLOSED = "closed"
    ARCHIVED = "archived"
    JOINABLE = (PROVISIONAL, ACTIVE)
    CURATED = (ACTIVE, CLOSED)


class Rel:
    CAUSAL_FOLLOW = "CAUSAL_FOLLOW"
    TEMPORAL_NEXT = "TEMPORAL_NEXT"
    STATE_SUCCESSOR = "STATE_SUCCESSOR"
    SAME_EVENT = "SAME_EVENT"
    CLOSURE = (CAUSAL_FOLLOW, TEMPORAL_NEXT, STATE_SUCCESSOR, SAME_EVENT)
    EVIDENCE = "evidence"      # event -> sentence record: the reference pointer
    TOPIC = "topic"            # topic track: ANN neighbours between events (scaffold, not a relation)
    LINEAGE = "lineage"        # repaired event -> the retired events it replaced
    LOGIC = "logic_link"       # query time only: a buffered record -> its earlier cause as the logic track scores it


class Op:
    RELATION = "relation"
    REPAIR = "repair"
    BOUNDARY = "boundary"
    ORDER = (REPAIR, BOUNDARY, RELATION)


class ReasonCode(SharedReasons):
    TYPE_CLOSURE_FAIL = "TYPE_CLOSURE_FAIL"
    EVIDENCE_FAIL = "EVIDENCE_FAIL"
    TEMPORAL_ORDER_FAIL = "TEMPORAL_ORDER_FAIL"
    LIFECYCLE_FAIL = "LIFECYCLE_FAIL"
    BUDGET = "BUDGET"


SCHEMA = EngineSchema(
    name="memloom",
    label="MemLoom",
    description="Sentence-level records routed into events with a lifecycle FSM; an off-peak steward repairs "
                "the timeline and synthesises causal/temporal relations; bounded dual-stream retrieval "
                "(seeds/memloom.txt §3).",
    node_kinds=(
        KindSpec(Kind.SENTENCE, "sentence record", "#4e79a7", "one utterance, immutable, addressed by its turn "
                 "id (stored as kind `turn`, as every engine stores an ingested turn)"),
        KindSpec(Kind.EVENT, "event", "#e15759", "a group of sentence records with a lifecycle", group=True),
    ),
    statuses=(
        StatusSpec(Life.BUFFERED, "buffered", True, "sentence in the real-time buffer: searched directly"),
        StatusSpec(Life.GROUNDED, "grounded", False, "sentence curated under an event: reached by its pointer"),
        StatusSpec(Life.PROVISIONAL, "provisional", False, "new event: takes evidence, no relations yet",
                   "#f2c14e", "triangle"),
        StatusSpec(Life.ACTIVE, "active", True, "mature event: takes evidence and relations", "#59a14f", "diamond"),
        StatusSpec(Life.CLOSED, "closed", True, "read-only event after a boundary (a topic boundary, a session "
                   "shift, a completed task, the conversation's end): relations, no new evidence",
                   "#b07aa1", "box"),
        StatusSpec(Life.ARCHIVED, "archived", False, "retired by retention or timeline repair; reached by links",
                   "#8c8c8c", "square"),
    ),
    initial_status=Life.BUFFERED,
    # an event a boundary passes ends there, mature or not: provisional -> closed (a session shift or a topic
    # boundary) gives every event a defined end
    transitions=((Life.BUFFERED, Life.GROUNDED),
                 (Life.PROVISIONAL, Life.ACTIVE), (Life.ACTIVE, Life.CLOSED), (Life.PROVISIONAL, Life.CLOSED),
                 (Life.CLOSED, Life.ARCHIVED),
                 (Life.PROVISIONAL, Life.ARCHIVED), (Life.ACTIVE, Life.ARCHIVED)),
    edge_types=(
        EdgeTypeSpec(Rel.CAUSAL_FOLLOW, "CAUSAL_FOLLOW", "#d62728", False, 3.0, 1.0, 0,
                     description="cause event -> effect event (traversed both ways)", cause_end="src"),
        EdgeTypeSpec(Rel.STATE_SUCCESSOR, "STATE_SUCCESSOR", "#9467bd", False, 2.5, 1.0, 1,
                     description="an earlier state -> the state that replaced it (a why-question walks it back too)",
                     cause_end="src"),
        EdgeTypeSpec(Rel.SAME_EVENT, "SAME_EVENT", "#ff7f0e", True, 2.0, 1.0, 2,
                     description="co-referential fragments of one happening"),
        EdgeTypeSpec(Rel.TEMPORAL_NEXT, "TEMPORAL_NEXT", "#7f7f7f", False, 1.5, 0.9, 3, structural=True,
                     description="an event -> the next one in time"),
        EdgeTypeSpec(Rel.EVIDENCE, "evidence", "#4e79a7", True, 1.0, 0.6, 4, recovery=True,
                     description="event -> a sentence record it cites (reference pointer)"),
        EdgeTypeSpec(Rel.LINEAGE, "lineage", "#2ca02c", True, 2.0, 1.0, 5, recovery=True, lineage=True,
                     description="repaired event -> a retired event it replaced (lineage registry)"),
        EdgeTypeSpec(Rel.TOPIC, "topic", "#1f77b4", True, 1.0, 0.35, 6,
                     description="topic track: nearest events by centroid (scaffold)"),
        EdgeTypeSpec(Rel.LOGIC, "logic link", "#d62728", True, 1.5, 0.6, 7, query_time=True,
                     description="query time only, never stored: a buffered record (no steward run has curated "
                                 "it yet) -> the earlier record the logic track links it to, walked back by a "
                                 "why-question (the dual stream's freshness failsafe)"),
    ),
    processes=(ProcessSpec("steward", "Off-peak steward", "steward",
                           "event boundaries and timeline repair → topic and logic tracks → relation synthesis → "
                           "contract validation → snapshot publication"),),
    operators=(
        OperatorSpec(Op.REPAIR, "Timeline repair", "steward",
                     ("fragment (retired into the repaired event)",),
                     ordered_targets=True,
                     plan_fields=(PlanField("summary", "Repaired event summary"),
                                  PlanField("keywords", "Keywords", "list"),
                                  PlanField("rationale", "Why they are one event")),
                     description="merge the adjacent events between two topic boundaries into one event (closed "
                                 "when a boundary ends it)"),
        OperatorSpec(Op.BOUNDARY, "Event boundary", "steward", ("event the boundary closes",),
                     plan_fields=(PlanField("turn", "First turn after the boundary"),
                                  PlanField("rationale", "Why the topic changes here")),
                     description="close the one event a topic boundary passes (no repair needed)"),
        OperatorSpec(Op.RELATION, "Relation", "steward", ("source event", "target event"), ordered_targets=True,
                     plan_fields=(PlanField("type", "Relation type"), PlanField("evidence", "Evidence cited", "ids"),
                                  PlanField("rationale", "Rationale")),
                     description="a typed relation of the closed set between two events, citing evidence"),
    ),
    reason_codes=llm_reasons() + (
        ReasonSpec(ReasonCode.LOW_CONF, "confidence below the steward's gate"),
        ReasonSpec(ReasonCode.TYPE_CLOSURE_FAIL, "relation type outside the closed set"),
        ReasonSpec(ReasonCode.EVIDENCE_FAIL, "cites no evidence record of both events"),
        ReasonSpec(ReasonCode.TEMPORAL_ORDER_FAIL, "source is not earlier than target"),
        ReasonSpec(ReasonCode.LIFECYCLE_FAIL, "an endpoint is provisional or retired"),
        ReasonSpec(ReasonCode.DUPLICATE, "the same relation is already in the graph or the queue"),
        ReasonSpec(ReasonCode.BUDGET, "over the run's relation budget (kept the most confident)"),
        ReasonSpec(ReasonCode.APPLICABLE_FAIL, "an endpoint changed earlier in this run"),
    ),
    stages=(
        StageSpec("seed", "Seeds", "seeds",
                  "Events on the published snapshot and buffered sentence records, by z(dense) + "
                  "{lexical_weight} · z(BM25); at most {seeds} seed events."),
        StageSpec("traverse", "Relation closure", "expansion",
                  "Best first from the seeds along CAUSAL_FOLLOW (both ways), STATE_SUCCESSOR, SAME_EVENT and "
                  "TEMPORAL_NEXT: at most {hops} hops and {branching} branches per event. A why-question's causes "
                  "(a history question's earlier states) inherit the seed's score less {chain_hop_cost} per hop. A "
                  "buffered record that seeds a why-question reaches its causes by logic links (the logic track's "
                  "strongest links at the relation gate, scored at query time: no steward run has curated it)."),
        StageSpec("ground", "Ground and rank", "ranking",
                  "Sentence records reached by pointer (on the asked chain: the cited ones at the inherited score, "
                  "the change the cited cause's speaker reported before it in the event at {chain_hop_cost} less, "
                  "else one more at {uncited_cost} less), merged with the real-time buffer and ranked; the top "
                  "{final_k} are returned ({max_evidence} at most materialized)."),
    ),
    llm_roles=("router", "relation_synthesis"),
    ablations=ABLATIONS,
    retrieval_ablations=("no-lexical", "no-realtime", "no-traversal"),
    decisions=(DecisionSpec("cause", Op.RELATION, relation=Rel.CAUSAL_FOLLOW),
               DecisionSpec("update", Op.RELATION, relation=Rel.STATE_SUCCESSOR),
               DecisionSpec("merge", Op.RELATION, relation=Rel.SAME_EVENT)),
)

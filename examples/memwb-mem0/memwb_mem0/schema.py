"""What the mem0 engine declares: turns and mem0's memories, the versions mem0's history keeps, the decision
process whose operators are mem0's four events, and mem0's vector search."""
from __future__ import annotations

from engine.core.node import TURN_KIND
from engine.core.proposal import SharedReasons
from engine.core.schema import (DecisionSpec, EdgeTypeSpec, EngineSchema, KindSpec, OperatorSpec, PlanField,
                                ProcessSpec, ReasonSpec, StageSpec, StatusSpec, llm_reasons)

PROCESS = "mem0"               # the process, and the buffer of turns waiting for it
FACTS_ROLE = "mem0_facts"      # mem0's fact extraction (its USER_MEMORY_EXTRACTION_PROMPT)
UPDATE_ROLE = "mem0_update"    # mem0's memory update decision (its DEFAULT_UPDATE_MEMORY_PROMPT)


class Kind:
    TURN = TURN_KIND           # one dataset turn, raw: what mem0 was given
    MEMORY = "memory"          # one version of one mem0 memory (mem0's id in attrs["mem0_id"])


class Life:
    HEARD = "heard"            # a turn: given to mem0; mem0 searches its memories, not turns
    CURRENT = "current"        # a memory version mem0 holds now: its vector store searches it
    SUPERSEDED = "superseded"  # an earlier version: mem0 UPDATEd the memory (its history keeps the old text)
    DELETED = "deleted"        # mem0 DELETEd the memory (its history keeps it, flagged is_deleted)


class Rel:
    DERIVED_FROM = "derived_from"  # memory version -> the turn(s) mem0 took it from
    VERSION = "version"            # memory version -> the version it replaced (mem0's history: UPDATE)
    DELETES = "deletes"            # turn -> the memory mem0 deleted on reading it (mem0's history: DELETE)


class Op:
    ADD = "add"
    UPDATE = "update"
    DELETE = "delete"
    NONE = "none"
    EVENTS = {"ADD": ADD, "UPDATE": UPDATE, "DELETE": DELETE, "NONE": NONE}


class ReasonCode(SharedReasons):
    """mem0's own rules for a decision it does not carry out (mem0/memory/main.py and mem0 1.x's update loop)."""

    NO_CHANGE = "NO_CHANGE"            # NONE: mem0 leaves the memory as it is
    EMPTY_TEXT = "EMPTY_TEXT"          # mem0 skips an entry with an empty `text`
    UNKNOWN_ID = "UNKNOWN_ID"          # UPDATE/DELETE/NONE of an id that was not among the memories shown
    UNKNOWN_EVENT = "UNKNOWN_EVENT"    # an event other than ADD, UPDATE, DELETE, NONE: mem0 ignores it
    SAME_TEXT = "SAME_TEXT"            # ADD of a text mem0 already holds (mem0's hash dedup)


SCHEMA = EngineSchema(
    name="mem0",
    label="mem0",
    description="The open-source mem0 library (mem0ai 2.2.1), offline: its fact extraction and its ADD / UPDATE / "
                "DELETE / NONE memory decisions (its own prompts, asked through the workbench's LLM path) become "
                "proposals; an accepted one is carried out by mem0 itself (its FAISS store, its history db), and "
                "mem0's history is the lineage of each memory.",
    node_kinds=(
        KindSpec(Kind.TURN, "turn", "#9c9c9c", "one dataset turn, as mem0 was given it"),
        KindSpec(Kind.MEMORY, "mem0 memory", "#f28e2b", "one version of one mem0 memory: a fact mem0 extracted"),
    ),
    statuses=(
        StatusSpec(Life.HEARD, "heard", False, "a turn given to mem0: reached from the memories taken from it"),
        StatusSpec(Life.CURRENT, "current", True, "the version mem0 holds now, in its vector store"),
        StatusSpec(Life.SUPERSEDED, "superseded", False, "an earlier version mem0 updated; its history keeps it",
                   "#8c8c8c", "square"),
        StatusSpec(Life.DELETED, "deleted", False, "a memory mem0 deleted; its history keeps it", "#d62728",
                   "square"),
    ),
    initial_status=Life.HEARD,
    transitions=((Life.CURRENT, Life.SUPERSEDED), (Life.CURRENT, Life.DELETED)),
    edge_types=(
        EdgeTypeSpec(Rel.VERSION, "version", "#9467bd", True, 2.0, 1.0, 0, recovery=True, lineage=True,
                     description="a memory's version -> the version it replaced: mem0's history (UPDATE)"),
        EdgeTypeSpec(Rel.DERIVED_FROM, "derived from", "#2ca02c", False, 1.5, 0.8, 1, recovery=True,
                     description="a memory version -> the turn(s) mem0 extracted it from"),
        EdgeTypeSpec(Rel.DELETES, "deletes", "#d62728", True, 1.5, 0.8, 2, recovery=True,
                     description="a turn -> the memory mem0 deleted on reading it: mem0's history (DELETE)"),
    ),
    processes=(ProcessSpec(PROCESS, "mem0 add", PROCESS,
                           "the turns waiting, as one mem0 add(): its fact extraction, then its update decision "
                           "against the memories its vector store finds for each fact"),),
    operators=(
        OperatorSpec(Op.ADD, "ADD", PROCESS, ("source turn",),
                     plan_fields=(PlanField("text", "New memory"), PlanField("facts", "Facts extracted", "list")),
                     description="mem0 adds a new memory"),
        OperatorSpec(Op.UPDATE, "UPDATE", PROCESS, ("memory (superseded)", "source turn"), ordered_targets=True,
                     plan_fields=(PlanField("old_memory", "Old memory"), PlanField("text", "New text"),
                                  PlanField("model_old_memory", "old_memory as mem0's model wrote it"),
                                  PlanField("facts", "Facts extracted", "list")),
                     description="mem0 rewrites a memory; the old text stays in its history"),
        OperatorSpec(Op.DELETE, "DELETE", PROCESS, ("memory (deleted)", "source turn"), ordered_targets=True,
                     plan_fields=(PlanField("old_memory", "Memory deleted"), PlanField("text", "mem0's text"),
                                  PlanField("facts", "Facts extracted", "list")),
                     description="mem0 deletes a memory the new facts contradict"),
        OperatorSpec(Op.NONE, "NONE", PROCESS, ("memory (unchanged)", "source turn"), ordered_targets=True,
                     plan_fields=(PlanField("old_memory", "Memory"), PlanField("text", "mem0's text"),
                                  PlanField("facts", "Facts extracted", "list")),
                     description="mem0 leaves a memory unchanged"),
    ),
    reason_codes=llm_reasons() + (
        ReasonSpec(ReasonCode.NO_CHANGE, "NONE: mem0 leaves the memory as it is (closed at diagnosis)"),
        ReasonSpec(ReasonCode.EMPTY_TEXT, "mem0 skips an entry whose text is empty"),
        ReasonSpec(ReasonCode.UNKNOWN_ID, "the id is not one of the memories mem0 showed the model: mem0 fails it"),
        ReasonSpec(ReasonCode.UNKNOWN_EVENT, "an event other than ADD, UPDATE, DELETE, NONE: mem0 ignores it"),
        ReasonSpec(ReasonCode.SAME_TEXT, "ADD of a text mem0 already holds: its hash dedup skips it"),
        ReasonSpec(ReasonCode.APPLICABLE_FAIL, "the memory changed earlier in this run (updated or deleted)"),
    ),
    stages=(
        StageSpec("search", "mem0 search", "ranking",
                  "mem0's own search: its FAISS store (cosine) over the current memories, top {final_k} with "
                  "score ≥ {threshold}; each result carries its versions and the turns they came from."),
    ),
    llm_roles=(FACTS_ROLE, UPDATE_ROLE),
    schedule="every-1-sessions",   # one mem0 add() per session (ingest also gives mem0 a session that ended)
    decisions=(DecisionSpec("update", Op.UPDATE), DecisionSpec("update", Op.DELETE)),
)

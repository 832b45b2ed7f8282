"""What the notes engine declares about itself: every page and command reads it from here, never its code."""
from __future__ import annotations

from dataclasses import dataclass

from engine.core.proposal import SharedReasons
from engine.core.schema import (EdgeTypeSpec, EngineSchema, EngineSettings, KindSpec, OperatorSpec, ProcessSpec,
                                ReasonSpec, StageSpec, StatusSpec, setting)

NOTE = "note"                      # the one kind: a dataset turn, kept raw
CURRENT, SUPERSEDED = "current", "superseded"
SUPERSEDES = "supersedes"          # newer note -> the older note it replaced
TIDY = "tidy"                      # the offline process and its buffer
SUPERSEDE = "supersede"            # its one operator
RANK = "rank"                      # the one retrieval stage


class ReasonCode(SharedReasons):
    """The shared codes are all this engine needs; an engine's own would be added here."""


SCHEMA = EngineSchema(
    name="notes", label="Notes",
    description="Every turn a note; a newer note by the same speaker that repeats an older one supersedes it.",
    node_kinds=(KindSpec(NOTE, "note", "#59a14f", "one dataset turn, raw"),),
    statuses=(StatusSpec(CURRENT, "current", True, "searched by retrieval"),
              StatusSpec(SUPERSEDED, "superseded", False, "replaced by a newer note; reached along `supersedes`",
                         color="#bab0ac")),
    initial_status=CURRENT, transitions=((CURRENT, SUPERSEDED),), turn_kind=NOTE,
    edge_types=(EdgeTypeSpec(SUPERSEDES, "supersedes", "#e15759", recovery=True, lineage=True, priority=10,
                             description="the newer note that replaced this one"),),
    processes=(ProcessSpec(TIDY, "Tidy", TIDY, "pairs each new note with the older note it repeats"),),
    operators=(OperatorSpec(SUPERSEDE, "Supersede", TIDY, ("newer", "older"), ordered_targets=True,
                            description="take the older note off the surface, linked from the newer one"),),
    reason_codes=(ReasonSpec(ReasonCode.LOW_CONF, "the pair's cosine is below θ_accept"),
                  ReasonSpec(ReasonCode.DUPLICATE, "a closer newer note already supersedes this older one"),
                  ReasonSpec(ReasonCode.APPLICABLE_FAIL, "one of the two left the surface earlier")),
    stages=(StageSpec(RANK, "Ranking", "ranking",
                      "Dense cosine between the query and every current note; the top {final_k} are returned."),),
)


@dataclass
class NotesSettings(EngineSettings):
    final_k: int = setting(16, "results returned", minimum=1, maximum=200, group="retrieval")
    candidates: int = setting(40, "results kept in the ranking shown", minimum=1, maximum=1000, group="retrieval")
    theta_pair: float = setting(0.55, "θ_pair — cosine at which a new note is paired with an older one",
                                minimum=0.0, maximum=1.0, step=0.05, group="tidy")
    theta_accept: float = setting(0.65, "θ_accept — the gate: cosine a pair needs to be applied unreviewed",
                                  minimum=0.0, maximum=1.0, step=0.05, group="tidy")
    ablations: list = setting(help="no ablations", factory=list, choices={}, group="ablations")

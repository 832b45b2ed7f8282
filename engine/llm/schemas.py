"""JSON schemas of every LLM role's output, and the caps on its fields.

Field names follow the All-Mem paper (App. B.6, C.1) so recorded plans can be
compared with the paper's. Every output is validated against these before use;
anything that does not validate is a fail-closed no-op upstream.

The caps (`CAPS`) bound what a model may write into memory: summary length,
keyword count and length, the number, length and distinctness of Split
segments. They are checked after the schema rather than written into it as
``maxLength``/``maxItems`` because strict structured-output endpoints do not
all accept those keywords, and because each violation has its own reason code.
"""
from __future__ import annotations

from dataclasses import dataclass

_STR = {"type": "string"}
_STR_LIST = {"type": "array", "items": {"type": "string"}}
_CONF = {"type": "number", "minimum": 0.0, "maximum": 1.0}


def _obj(props: dict, required: list[str] | None = None) -> dict:
    return {
        "type": "object",
        "properties": props,
        "required": list(props) if required is None else required,
        "additionalProperties": False,
    }


DESCRIPTOR = _obj({"summary": _STR, "keywords": _STR_LIST})

DIAGNOSIS = _obj({
    "split_tasks": {"type": "array", "items": _obj({"node_id": _STR, "reason": _STR, "confidence": _CONF})},
    "merge_tasks": {"type": "array", "items": _obj({
        "node_ids": {"type": "array", "items": _STR, "minItems": 2, "maxItems": 4},
        "reason": _STR, "confidence": _CONF})},
    "update_tasks": {"type": "array", "items": _obj({
        "old_node_id": _STR, "new_node_id": _STR, "reason": _STR, "confidence": _CONF})},
})

SPLIT_PLAN = _obj({
    "do_split": {"type": "boolean"},
    "segments": {"type": "array", "items": _obj({
        "segment_text": _STR, "segment_summary": _STR, "segment_keywords": _STR_LIST, "topic_label": _STR})},
    "split_rationale": _STR,
})

MERGE_PLAN = _obj({"summary": _STR, "keywords": _STR_LIST, "salient_points": _STR_LIST})

UPDATE_PLAN = _obj({
    "updated_summary": _STR, "updated_keywords": _STR_LIST, "deprecations": _STR_LIST, "alignment_note": _STR})

ROUTER = _obj({
    "rewritten": _STR,
    "intent": _STR,
    "topics": _STR_LIST,
    "references": {"type": "array", "items": _obj({"mention": _STR, "resolved": _STR})},
    "dates": {"type": "array", "items": _obj({"mention": _STR, "date": _STR})},
})

RELATION_TYPES = ["CAUSAL_FOLLOW", "TEMPORAL_NEXT", "STATE_SUCCESSOR", "SAME_EVENT", "NONE"]

RELATION_SYNTHESIS = _obj({"relations": {"type": "array", "items": _obj({
    "type": {"type": "string"},            # checked against the closed set by the steward, not here
    "source_id": _STR, "target_id": _STR, "confidence": _CONF,
    "evidence": _STR_LIST, "rationale": _STR})}})

EVENT_MERGE = _obj({"merge": {"type": "boolean"}, "confidence": _CONF, "summary": _STR, "keywords": _STR_LIST,
                    "rationale": _STR})

# RecMem (seeds/recmem.txt App. F): the paper's fields (`episodes`, `should_merge`, `merged_memory`, `facts`),
# with the unit ids each episode and fact rests on (its provenance) and the candidates refinement dropped as known.
EPISODE_EXTRACTION = _obj({"episodes": {"type": "array", "items": _obj({"text": _STR, "units": _STR_LIST})}})

EPISODE_MERGE = _obj({"should_merge": {"type": "string", "enum": ["yes", "no"]}, "merged_memory": _STR,
                      "confidence": _CONF})

FACT_TYPES = ["USER_EVENT", "USER_CONSTRAINT_OR_PREFERENCE", "TIME_ANCHORED_UPDATE", "ENTITY_RELATION"]

FACT_REFINEMENT = _obj({
    "facts": {"type": "array", "items": _obj({"text": _STR, "type": {"type": "string", "enum": FACT_TYPES},
                                              "units": _STR_LIST, "updates": _STR})},
    "dropped": {"type": "array", "items": _obj({"text": _STR, "known": _STR, "similarity": _CONF})},
})
# GAM (seeds/gam.txt App. E): topic boundaries over the episodic buffer (E.3), a topic node's dual-granularity
# descriptor (E.2), and the relation between two topics with its confidence (E.1). Indices and the relation label
# are checked against the buffer and the closed set by the engine, which gives each failure its reason code.
BOUNDARY_DETECTION = _obj({"boundaries": {"type": "array", "items": {"type": "integer"}}})
TOPIC_SUMMARY = DESCRIPTOR
TOPIC_RELATION = _obj({"relation": _STR, "confidence": _CONF})

# What an answering model says about a question, and the evidence keys (source turn ids) it read it in.
ANSWER = _obj({"answer": _STR, "evidence_keys": _STR_LIST})

SUMMARY_CHARS = 2_000              # a summary is one or a few sentences, never the evidence again
KEYWORDS = 32
KEYWORD_CHARS = 100
SEGMENTS = 16
SEGMENT_CHARS = 100_000            # a segment is a substring of one turn: the loaders' per-turn default
ANSWER_CHARS = 2_000               # a short answer, never the evidence again
CITATIONS = 64                     # evidence keys one answer may cite
EPISODES = 3                       # "prefer 1-3 episodes" (App. F, Fig. 7)
EPISODE_CHARS = 4_000              # a short paragraph; a merged episode grows, but stays compact
FACTS = 10                         # "output less than 10 facts" (Fig. 9)
FACT_CHARS = 600                   # one fact per sentence
KEY_CHARS = 200                    # a turn id (LoCoMo `D3:7`, LongMemEval session ids, causal suite keys)


@dataclass(frozen=True)
class Cap:
    """A bound on one field of a role's output.

    `field` is a dotted path; a list met on the way is descended item by item
    (``segments.segment_text`` is every segment's text). `max_chars` bounds
    each string there (each item of a list of strings), `max_items` the
    length of the list there, and `distinct` makes the strings there pairwise
    different (reason code DUPLICATE_SEGMENTS).
    """

    field: str
    max_chars: int | None = None
    max_items: int | None = None
    distinct: bool = False


def _described(summary: str, keywords: str) -> tuple[Cap, ...]:
    return (Cap(summary, max_chars=SUMMARY_CHARS), Cap(keywords, max_chars=KEYWORD_CHARS, max_items=KEYWORDS))


CAPS: dict[str, tuple[Cap, ...]] = {
    "descriptor": _described("summary", "keywords"),
    "split_plan": (Cap("segments", max_items=SEGMENTS),
                   Cap("segments.segment_text", max_chars=SEGMENT_CHARS, distinct=True),
                   *_described("segments.segment_summary", "segments.segment_keywords")),
    "merge_plan": (*_described("summary", "keywords"), Cap("salient_points", max_chars=SUMMARY_CHARS, max_items=8)),
    "update_plan": _described("updated_summary", "updated_keywords"),
    "event_merge": _described("summary", "keywords"),
    "episode_extraction": (Cap("episodes", max_items=EPISODES), Cap("episodes.text", max_chars=EPISODE_CHARS)),
    "episode_merge": (Cap("merged_memory", max_chars=EPISODE_CHARS),),
    "fact_refinement": (Cap("facts", max_items=FACTS), Cap("facts.text", max_chars=FACT_CHARS)),
    "answer": (Cap("answer", max_chars=ANSWER_CHARS), Cap("evidence_keys", max_chars=KEY_CHARS, max_items=CITATIONS)),
    "topic_summary": _described("summary", "keywords"),
    "topic_relation": (Cap("relation", max_chars=KEYWORD_CHARS),),
}

SCHEMAS: dict[str, dict] = {
    "router": ROUTER,
    "relation_synthesis": RELATION_SYNTHESIS,
    "event_merge": EVENT_MERGE,
    "descriptor": DESCRIPTOR,
    "diagnosis": DIAGNOSIS,
    "split_plan": SPLIT_PLAN,
    "merge_plan": MERGE_PLAN,
    "update_plan": UPDATE_PLAN,
    "episode_extraction": EPISODE_EXTRACTION,
    "episode_merge": EPISODE_MERGE,
    "fact_refinement": FACT_REFINEMENT,
    "answer": ANSWER,
    "boundary_detection": BOUNDARY_DETECTION,
    "topic_summary": TOPIC_SUMMARY,
    "topic_relation": TOPIC_RELATION,
}
ROLES = tuple(SCHEMAS)

"""JSON schemas of every LLM role's output, the caps on its fields, and the bounds a model is asked within.

Field names follow the All-Mem paper (App. B.6, C.1) so recorded plans can be
compared with the paper's. Every output is validated against these before use;
anything that does not validate is a fail-closed no-op upstream.

The caps (`CAPS`) bound what any backend may write into memory: summary length,
keyword count and length, the number, length and distinctness of Split
segments. They are checked after the schema rather than written into it as
``maxLength``/``maxItems`` because each violation has its own reason code, and
because the offline rules, which have no output budget, are held to them too.

The bounds (`BOUNDS`) are tighter and bind a model only: `model_schema` writes
them into the schema a model is asked with (``maxLength`` on every string,
``maxItems`` on every list), so a reply that follows it ends within the role's
output budget (`TOKEN_CAPS`, the ``max_tokens`` sent) instead of being cut
there as invalid JSON. A reply within the bounds is within the caps
(tests/test_llm_schemas.py checks both, and the budget against the longest
reply each bounded schema admits).
"""
from __future__ import annotations

import json
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

# What a model is asked to write within (`model_schema`): tighter than the caps, so that the longest reply a
# bounded schema admits ends within its role's output budget. A rewritten turn gets more than LoCoMo dev's
# longest turn (440 characters), a Split segment (a part of one) 400; the rest is a phrase, a sentence or a short
# paragraph.
ID_CHARS = 8                       # a node, sentence, unit or candidate id ("42", "u17")
LABEL_CHARS = 32                   # an intent, topic, date, relation label or topic label
REASON_CHARS = 120                 # a rationale: one sentence
SENTENCE_CHARS = 240               # a summary or a note: one or two sentences
TURN_CHARS = 512                   # a turn rewritten by the router
_KEYWORDS = (8, LABEL_CHARS)       # "3-8 keywords"


def _words(field: str, items: int = _KEYWORDS[0], chars: int = _KEYWORDS[1]) -> Cap:
    return Cap(field, max_chars=chars, max_items=items)


BOUNDS: dict[str, tuple[Cap, ...]] = {
    "descriptor": (Cap("summary", max_chars=SENTENCE_CHARS), _words("keywords")),
    "diagnosis": (Cap("split_tasks", max_items=1),                  # the target is the one unit it may split
                  Cap("merge_tasks", max_items=2), Cap("update_tasks", max_items=2),
                  Cap("split_tasks.node_id", max_chars=ID_CHARS), Cap("merge_tasks.node_ids", max_chars=ID_CHARS),
                  Cap("update_tasks.old_node_id", max_chars=ID_CHARS),
                  Cap("update_tasks.new_node_id", max_chars=ID_CHARS),
                  *(Cap(f"{tasks}.reason", max_chars=REASON_CHARS)
                    for tasks in ("split_tasks", "merge_tasks", "update_tasks"))),
    "split_plan": (Cap("segments", max_items=3), Cap("segments.segment_text", max_chars=400),   # a part of a turn
                   Cap("segments.segment_summary", max_chars=REASON_CHARS), _words("segments.segment_keywords", 4, 24),
                   Cap("segments.topic_label", max_chars=24), Cap("split_rationale", max_chars=REASON_CHARS)),
    "merge_plan": (Cap("summary", max_chars=SENTENCE_CHARS), _words("keywords"),
                   _words("salient_points", 3, REASON_CHARS)),          # "up to three salient_points"
    "update_plan": (Cap("updated_summary", max_chars=SENTENCE_CHARS), _words("updated_keywords"),
                    _words("deprecations", 3, REASON_CHARS), Cap("alignment_note", max_chars=REASON_CHARS)),
    "router": (Cap("rewritten", max_chars=TURN_CHARS), Cap("intent", max_chars=16), _words("topics", 3),
               Cap("references", max_items=2), Cap("references.mention", max_chars=LABEL_CHARS),
               Cap("references.resolved", max_chars=LABEL_CHARS * 2),
               Cap("dates", max_items=2), Cap("dates.mention", max_chars=LABEL_CHARS),
               Cap("dates.date", max_chars=LABEL_CHARS)),
    "relation_synthesis": (Cap("relations", max_items=4), Cap("relations.type", max_chars=16),
                           Cap("relations.source_id", max_chars=ID_CHARS),
                           Cap("relations.target_id", max_chars=ID_CHARS),
                           _words("relations.evidence", 4, ID_CHARS), Cap("relations.rationale", max_chars=REASON_CHARS)),
    "event_merge": (Cap("summary", max_chars=SENTENCE_CHARS), _words("keywords"),
                    Cap("rationale", max_chars=REASON_CHARS)),
    "episode_extraction": (Cap("episodes", max_items=EPISODES), Cap("episodes.text", max_chars=640),  # 3-6 sentences
                           _words("episodes.units", 12, ID_CHARS)),
    "episode_merge": (Cap("merged_memory", max_chars=800),),
    "fact_refinement": (Cap("facts", max_items=6), Cap("facts.text", max_chars=160),     # one sentence each
                        _words("facts.units", 4, ID_CHARS), Cap("facts.updates", max_chars=ID_CHARS),
                        Cap("dropped", max_items=3), Cap("dropped.text", max_chars=160),
                        Cap("dropped.known", max_chars=ID_CHARS)),
    "answer": (Cap("answer", max_chars=200), _words("evidence_keys", 6, 24)),   # LongMemEval's keys run to ~20
    "boundary_detection": (Cap("boundaries", max_items=16),),
    "topic_summary": (Cap("summary", max_chars=SENTENCE_CHARS), _words("keywords")),
    "topic_relation": (Cap("relation", max_chars=16),),
}

# The output tokens a model is given per role (the `max_tokens` sent; MEMWB_OPENAI_MAX_TOKENS can only lower it):
# the longest reply its bounded schema admits (`structured.longest_reply`, as llama.cpp's grammar writes it),
# counted one token per character and rounded up to 64. One per character is the most any tokenizer here
# spends on plain ASCII text (SmolLM2's byte-level BPE has a token for every byte; MiniLM's WordPiece and the
# words x 4/3 estimate spend fewer); a character outside ASCII may cost up to four byte tokens.
TOKEN_CAPS: dict[str, int] = {
    "descriptor": 576, "diagnosis": 1152, "split_plan": 2496, "merge_plan": 1024, "update_plan": 1152,
    "router": 1216, "relation_synthesis": 1344, "event_merge": 768, "episode_extraction": 2560,
    "episode_merge": 896, "fact_refinement": 2624, "answer": 448, "boundary_detection": 384,
    "topic_summary": 576, "topic_relation": 64,
}


def _bound(schema: dict, path: list[str], cap: Cap) -> None:
    """Write `cap` into `schema` at `path` (a list met on the way is descended into its items; a field the
    schema does not have is left alone)."""
    while schema.get("type") == "array" and path:
        schema = schema["items"]
    if path:
        if path[0] in schema.get("properties", {}):
            _bound(schema["properties"][path[0]], path[1:], cap)
        return
    if schema.get("type") == "array":
        if cap.max_items is not None:
            schema["maxItems"] = min(cap.max_items, schema.get("maxItems", cap.max_items))
        schema = schema["items"]
    if schema.get("type") == "string" and cap.max_chars is not None:
        schema["maxLength"] = cap.max_chars


def model_schema(role: str, schema: dict | None = None) -> dict:
    """The schema a model is asked with: the role's (or `schema`) with the role's `BOUNDS` written in."""
    out = json.loads(json.dumps(SCHEMAS[role] if schema is None else schema))     # no shared sub-schemas
    for cap in BOUNDS.get(role, ()):
        _bound(out, cap.field.split("."), cap)
    return out

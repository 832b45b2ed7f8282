"""mem0's two LLM steps as workbench roles: its own prompts, asked through `LLM.call`, with offline rules.

mem0 1.x's `add()` asked a model twice: fact extraction (`get_fact_retrieval_messages`: the
USER_MEMORY_EXTRACTION_PROMPT and the conversation) and the memory update decision
(`get_update_memory_messages`: DEFAULT_UPDATE_MEMORY_PROMPT, the memories its vector store found for the
facts, and the facts; the reply lists each memory with its event ADD / UPDATE / DELETE / NONE). mem0ai 2.2.1
still ships both prompts and both builders, and its `add()` now makes one additive extraction call that only
ever ADDs; the adapter drives the two-step decision with the library's own prompt builders so that every kind
of decision is there to review. The payload is the structured input; `render` builds mem0's messages from it.

One change to mem0's prompt text: its extraction prompts carry "Today's date is …" evaluated from the wall
clock when mem0 is imported; the rendered prompt carries the dataset date of the turns instead, so the same
conversation gives the same prompt (and a recording replays) on any day.
"""
from __future__ import annotations

import re

import numpy as np
from mem0.configs.prompts import USER_MEMORY_EXTRACTION_PROMPT, get_update_memory_messages
from mem0.memory.utils import get_fact_retrieval_messages

from engine.core.text import has_negation, numbers, strip_speaker
from engine.llm.roles import Role, register_role
from engine.llm.schemas import Cap
from memwb_mem0.schema import FACTS_ROLE, UPDATE_ROLE

_TODAY = re.compile(r"Today's date is \d{4}-\d{2}-\d{2}")
if not _TODAY.search(USER_MEMORY_EXTRACTION_PROMPT):
    raise ImportError("mem0's USER_MEMORY_EXTRACTION_PROMPT no longer says \"Today's date is YYYY-MM-DD\"; the "
                      "adapter pins the date to the dataset's and needs updating for this mem0 version")

FACTS = {"type": "object", "properties": {"facts": {"type": "array", "items": {"type": "string"}}},
         "required": ["facts"], "additionalProperties": False}
EVENTS = ["ADD", "UPDATE", "DELETE", "NONE"]
UPDATE = {"type": "object", "properties": {"memory": {"type": "array", "items": {
    "type": "object",
    "properties": {"id": {"type": "string"}, "text": {"type": "string"}, "event": {"type": "string", "enum": EVENTS},
                   "old_memory": {"type": "string"}},
    "required": ["id", "text", "event"], "additionalProperties": False}}},
    "required": ["memory"], "additionalProperties": False}

FACTS_MAX, FACT_CHARS = 8, 160          # a few short facts per turn, one sentence each
ENTRIES_MAX, ENTRY_CHARS = 8, 160       # the memories mem0 shows (5 per fact, deduplicated), each one fact
ID_CHARS = 4                            # mem0 shows the memories as "0", "1", ... (its anti-hallucination ids)


def render_facts(payload: dict) -> list[dict]:
    system, user = get_fact_retrieval_messages(payload["conversation"])
    return [{"role": "system", "content": _TODAY.sub(f"Today's date is {payload['today']}", system)},
            {"role": "user", "content": user}]


def render_update(payload: dict) -> list[dict]:
    return [{"role": "user", "content": get_update_memory_messages(payload["old_memory"], payload["facts"])}]


# -- offline rules: what the workbench answers with no model --------------------------------------------------
def offline_facts(payload: dict, embedder) -> dict:
    """Each statement of the conversation (no question, four words or more) as a fact of its speaker."""
    facts: list[str] = []
    for line in payload["conversation"].splitlines():
        _, _, said = line.partition(": ")            # mem0's "user: " prefix
        speaker, body = strip_speaker(said)
        for sentence in re.split(r"(?<=[.!?])\s+", body.strip()):
            sentence = sentence.strip()
            if sentence and not sentence.endswith("?") and len(sentence.split()) >= 4:
                facts.append(f"{speaker}: {sentence}"[:FACT_CHARS] if speaker else sentence[:FACT_CHARS])
    return {"facts": list(dict.fromkeys(facts))[:FACTS_MAX]}


def offline_update(payload: dict, embedder) -> dict:
    """Per fact, by cosine to the nearest memory shown: ≥ 0.7 and of the same speaker, a changed number UPDATEs
    it and the opposite polarity DELETEs it; else ≥ 0.9 the memory already says it (NONE); else ADD. Memories no
    fact touches are NONE."""
    old, facts = payload["old_memory"], payload["facts"]
    out: list[dict] = []
    touched: set[str] = set()
    next_id = len(old)
    old_vecs = embedder.embed([m["text"] for m in old]) if old else np.zeros((0, 1))
    fact_vecs = embedder.embed(facts) if facts else np.zeros((0, 1))
    for fact, v in zip(facts, fact_vecs):
        cos = old_vecs @ v if len(old) else np.zeros(0)
        best = int(np.argmax(cos)) if len(old) else -1
        sim = float(cos[best]) if best >= 0 else 0.0
        free = best >= 0 and old[best]["id"] not in touched
        change = _change(old[best]["text"], fact) if free and sim >= 0.7 else None
        if change == "UPDATE":
            touched.add(old[best]["id"])
            out.append({"id": old[best]["id"], "text": fact, "event": "UPDATE", "old_memory": old[best]["text"]})
        elif change == "DELETE":
            touched.add(old[best]["id"])
            out.append({"id": old[best]["id"], "text": old[best]["text"], "event": "DELETE"})
        elif free and sim >= 0.9:
            touched.add(old[best]["id"])
            out.append({"id": old[best]["id"], "text": old[best]["text"], "event": "NONE"})
        else:
            out.append({"id": str(next_id), "text": fact, "event": "ADD"})
            next_id += 1
    out += [{"id": m["id"], "text": m["text"], "event": "NONE"} for m in old if m["id"] not in touched]
    return {"memory": [{**e, "text": e["text"][:ENTRY_CHARS], **({"old_memory": e["old_memory"][:ENTRY_CHARS]}
                                                                 if "old_memory" in e else {})}
                       for e in out][:ENTRIES_MAX]}


def _change(old: str, new: str) -> str | None:
    """What a new fact of the same speaker does to a close memory: a changed number updates it (mem0's
    "update"), the opposite polarity contradicts it (mem0's "delete"); None when neither."""
    (who_old, body_old), (who_new, body_new) = strip_speaker(old), strip_speaker(new)
    if who_old != who_new:
        return None
    if numbers(body_old) != numbers(body_new):
        return "UPDATE"
    return "DELETE" if has_negation(body_old) != has_negation(body_new) else None


FACTS_BOUNDS = (Cap("facts", max_items=FACTS_MAX, max_chars=FACT_CHARS),)
UPDATE_BOUNDS = (Cap("memory", max_items=ENTRIES_MAX), Cap("memory.id", max_chars=ID_CHARS),
                 Cap("memory.text", max_chars=ENTRY_CHARS), Cap("memory.old_memory", max_chars=ENTRY_CHARS))


def register() -> None:
    """Make mem0's two roles askable (idempotent)."""
    for role in (Role(FACTS_ROLE, FACTS, render_facts, offline_facts, caps=(Cap("facts", max_items=32,
                                                                                max_chars=2_000),),
                      bounds=FACTS_BOUNDS),
                 Role(UPDATE_ROLE, UPDATE, render_update, offline_update, caps=(Cap("memory", max_items=64),
                                                                                Cap("memory.text", max_chars=2_000)),
                      bounds=UPDATE_BOUNDS)):
        register_role(role)

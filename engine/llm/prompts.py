"""Prompt text for each LLM role, rendered from the role's structured payload.

The payload is the single source of what a role sees; chat backends receive
these messages, the offline backend reads the payload directly. The wording is
ours; the output field names follow the papers.
"""
from __future__ import annotations

import json

_SYSTEM = ("You maintain the long-term memory of a conversational agent. "
           "Reply with one JSON object that matches the given schema and nothing else.")

_TASKS = {
    "descriptor": (
        "Write a retrieval descriptor for the memory below: a one-sentence `summary` that keeps "
        "names, dates and numbers, and 3-8 `keywords` taken from the text. Do not add facts."),
    "diagnosis": (
        "Look at the TARGET memory and its NEIGHBOURS and propose maintenance edits.\n"
        "- split_tasks: the target mixes unrelated topics (not a single story). Never split narrative.\n"
        "- merge_tasks: 2-4 memories state the same fact about the same entity. Never merge states "
        "from different times.\n"
        "- update_tasks: the target explicitly contradicts or supersedes an older memory "
        "(new_node_id = target id, old_node_id = the stale one).\n"
        "Give each task a confidence in [0,1]; use 0.0 when in doubt. Empty lists are fine."),
    "split_plan": (
        "Split the memory into topic segments. Every `segment_text` must be copied exactly, "
        "character for character, from ORIGINAL_TEXT; keep speaker tags; cover the whole text. "
        "If it is one coherent topic, set do_split=false and return the whole text as the only segment."),
    "merge_plan": (
        "These memories are redundant. Write one canonical `summary` and `keywords` supported only by "
        "the sources, plus up to three `salient_points`."),
    "update_plan": (
        "The CURRENT memory supersedes the SUPERSEDED one. Refresh the current memory's summary and "
        "keywords from its own evidence (and the anchors), list the stale details in `deprecations`, "
        "and explain the change in `alignment_note`. Prefer the current evidence on conflict."),
    "router": (
        "Rewrite the UTTERANCE so it stands alone, using only the WINDOW of earlier turns: replace "
        "first-person pronouns by the speaker's name and `you` by the person addressed, replace a pronoun "
        "by the noun phrase it refers to when the window makes that certain, and add the absolute date "
        "after every relative time expression (yesterday, last week, in two days). Keep every other word. "
        "List what you resolved in `references` and `dates`, name the utterance's `intent` (inform, ask, "
        "plan, report_change, small_talk) and 1-3 `topics`."),
    "relation_synthesis": (
        "TARGET is an event (a group of utterances) and CANDIDATES are earlier events. For each candidate "
        "that is really connected to the target, give one relation from the closed set: CAUSAL_FOLLOW "
        "(the candidate caused or enabled the target), STATE_SUCCESSOR (the target replaces a state the "
        "candidate described), SAME_EVENT (both describe the same happening), TEMPORAL_NEXT (the target "
        "directly continues the candidate). source_id is the candidate, target_id the target. Cite in "
        "`evidence` the ids of the utterances on both sides that support it. Use type NONE or leave a "
        "candidate out when unsure; confidences must reflect the evidence."),
    "event_merge": (
        "EARLIER and LATER are adjacent events. Decide whether they are one narrative that the online "
        "router cut in two (merge=true) or two distinct happenings. Never merge states from different "
        "times or contradicting statements. If merging, write the merged `summary` and `keywords`."),
    "episode_extraction": (
        "UNITS are exchanges between the speakers (each with its id and date), in time order; they recur on one "
        "broad theme but may hold a few sub-topics over days or weeks. Write 1-3 episodes, preferring fewer: "
        "each a short paragraph (3-6 sentences) telling how ONE sub-topic evolved for the speakers themselves "
        "(their goals, plans, decisions, preferences, what was explained to them), in time order with "
        "connectives such as initially, later, eventually. Anchor every relative time expression to a date "
        "(\"the day before 2023-05-08\"); never write yesterday or next week alone. Summarise long stories or "
        "examples in a clause. Do not list every stable fact: another step extracts facts. In `units` list the "
        "ids of the units each episode is drawn from, only ids from UNITS. With no coherent episode, return an "
        "empty `episodes` list."),
    "episode_merge": (
        "NEW is a recent exchange and PAST an episode stored earlier. Decide whether NEW continues the same "
        "ongoing situation, goal or problem of the same people as PAST (follow-up details, corrections, "
        "outcomes), not merely the same domain or a generic explanation; when unsure, answer no. If yes, set "
        "should_merge to \"yes\" and write `merged_memory`: one compact paragraph keeping the important details "
        "of both in time order (later, afterwards, as a result), dates kept as given and relative ones anchored "
        "to a date, nothing invented. If no, should_merge is \"no\" and merged_memory empty. `confidence` is "
        "your probability that they are one episode."),
    "fact_refinement": (
        "EPISODE is a narrative written from the raw exchanges in UNITS; KNOWN are facts already stored about "
        "the topic. Extract fewer than 10 NEW, high-utility facts about the speakers, one self-contained "
        "sentence each (no ambiguous pronouns), preferring concrete details of UNITS that EPISODE leaves out or "
        "compresses. Each fact has a `type`: USER_EVENT (something a speaker did, asked, attended, started or "
        "decided; anchor it to a date, \"On 2023-05-22, ...\"), USER_CONSTRAINT_OR_PREFERENCE (a stable "
        "preference, constraint or recurring plan), TIME_ANCHORED_UPDATE (a change of a state, with the new "
        "value, the old one if known, and a date), or ENTITY_RELATION (a specific relation between named "
        "entities that matters to a speaker). A fact that says what a KNOWN fact says is not new: put it in "
        "`dropped` with that fact's id in `known` and your `similarity`. A fact that changes a KNOWN fact is a "
        "TIME_ANCHORED_UPDATE whose `updates` is that fact's id (else \"\"). `units` lists the ids of the units "
        "each fact rests on, only ids from UNITS. No generic advice, nothing beyond what the inputs support."),
    "boundary_detection": (
        "UTTERANCES is a stretch of conversation, each with its `index` (0-based). Find where the topic "
        "changes: a boundary at index i means the conversation shifts to a completely different subject "
        "between utterance i and utterance i+1. Do not cut a topic into pieces shorter than `min_segment` "
        "utterances. Return the indices in increasing order, each once, in `boundaries` (an empty list when "
        "the whole stretch is one topic). `tiling` holds the parameters of the embedding detector that "
        "stands in for you offline; you may ignore them."),
    "topic_summary": (
        "Analyse the CONTENT (utterances of one topic segment): list its most salient `keywords` (names, "
        "nouns, verbs, key concepts; specific and distinct, most important first), and write a concise "
        "`summary` of one to two sentences, in the fewest words, keeping names, dates and numbers."),
    "topic_relation": (
        "Determine the relationship between MEMORY_1 (a new topic) and MEMORY_2 (an earlier topic). "
        "`relation` is one of: support (one supports the other), contradict (one contradicts the other), "
        "coreference (the same entity or event), causal (one led to the other), semantic (similar meaning), "
        "unrelated (no meaningful relation). `confidence` in [0,1] is how sure you are of that relation; it "
        "becomes the edge weight. `cosine` is the similarity of their summaries; `distance` counts the topics "
        "from MEMORY_2 to MEMORY_1 in time (1: MEMORY_2 came right before)."),
    "answer": (
        "Answer the QUESTION using only the PASSAGES, which are excerpts of an earlier conversation in time "
        "order; each has the `keys` of the turns it comes from and the `time` it was said. Write a short "
        "`answer`: a phrase or one sentence that keeps names, numbers and dates as the passages give them, "
        "with relative dates (yesterday, last week) turned into dates using the passage's time. In "
        "`evidence_keys` copy exactly the keys of every passage the answer rests on, and no others. If the "
        "passages do not say, reply with an empty `answer` and no `evidence_keys`; never guess."),
}


def render(role: str, payload: dict) -> list[dict]:
    from engine.llm.roles import registered      # here: roles.py imports the schemas this module sits beside

    outside = registered(role)
    if outside is not None:                      # a role an installed engine brought, with its own prompt
        return outside.render(payload)
    task = _TASKS[role]
    body = json.dumps(payload, ensure_ascii=False, indent=1, sort_keys=True)
    return [
        {"role": "system", "content": _SYSTEM},
        {"role": "user", "content": f"{task}\n\nINPUT:\n{body}"},
    ]


def payload_of(messages: list[dict]) -> dict:
    """The payload a prompt was rendered from (`render`'s inverse): what another backend is asked on the same
    input when two backends' decisions are compared."""
    body = str(messages[-1].get("content", "")) if messages else ""
    _, sep, data = body.partition("\n\nINPUT:\n")
    if not sep:
        raise ValueError("not a prompt rendered by engine.llm.prompts: no INPUT section")
    payload = json.loads(data)
    if not isinstance(payload, dict):
        raise ValueError("the prompt's INPUT is not a JSON object")
    return payload

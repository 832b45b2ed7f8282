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
    "answer": (
        "Answer the QUESTION using only the PASSAGES, which are excerpts of an earlier conversation in time "
        "order; each has the `keys` of the turns it comes from and the `time` it was said. Write a short "
        "`answer`: a phrase or one sentence that keeps names, numbers and dates as the passages give them, "
        "with relative dates (yesterday, last week) turned into dates using the passage's time. In "
        "`evidence_keys` copy exactly the keys of every passage the answer rests on, and no others. If the "
        "passages do not say, reply with an empty `answer` and no `evidence_keys`; never guess."),
}


def render(role: str, payload: dict) -> list[dict]:
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

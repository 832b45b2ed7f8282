"""What a role's reply decides, and two backends' decisions on the same input compared.

A role's reply is partly a decision (which edits diagnosis proposes, whether two events are one, which
relations hold, whether a Split cuts, where a topic ends, how two topics relate) and partly free text
(summaries, keywords). `decisions(role, data)` reduces a validated reply to the set of its decisions; roles
whose reply is only text (descriptor, merge and update plans, topic summaries) have none. A failed call
is shown as such beside the other side's decisions, but is not counted as a difference: only two valid
replies are compared.

`compare(calls, other)` asks a second backend the very inputs of recorded calls (the payload is read back
from each prompt) and pairs the replies: the real model against the offline rules, or one recording
against another. The costs' "differs from offline" rate and the Consolidation page's side-by-side view
both come from here.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from engine.core.node import node_label
from engine.llm.base import LLM, LLMCall
from engine.llm.prompts import payload_of

FAILED = ("failed",)
DECISION_ROLES = ("diagnosis", "split_plan", "router", "relation_synthesis", "event_merge", "episode_extraction",
                  "episode_merge", "boundary_detection", "topic_relation", "answer")


def decisions(role: str, data: Mapping | None) -> frozenset[tuple] | None:
    """The decisions a reply makes (None: the role decides nothing, only writes text)."""
    if role not in DECISION_ROLES:
        return None
    if data is None:
        return frozenset({FAILED})
    if role == "diagnosis":
        return frozenset(
            [("split", str(t["node_id"])) for t in data["split_tasks"]]
            + [("merge", *sorted(str(i) for i in t["node_ids"])) for t in data["merge_tasks"]]
            + [("update", str(t["new_node_id"]), str(t["old_node_id"])) for t in data["update_tasks"]])
    if role == "split_plan":
        return frozenset({("split", bool(data["do_split"]), len(data["segments"]) if data["do_split"] else 1)})
    if role == "router":
        return frozenset({("intent", str(data["intent"]).strip().lower()),
                          *(("date", str(d["date"])) for d in data["dates"])})
    if role == "relation_synthesis":
        return frozenset((str(r["type"]), str(r["source_id"]), str(r["target_id"])) for r in data["relations"]
                         if r["type"] != "NONE")
    if role == "event_merge":
        return frozenset({("merge", bool(data["merge"]))})
    if role == "episode_extraction":          # RecMem: which units each episode groups
        return frozenset(("episode", *sorted(str(u) for u in e["units"])) for e in data["episodes"])
    if role == "episode_merge":
        return frozenset({("merge", data["should_merge"] == "yes")})
    if role == "boundary_detection":          # GAM: after which utterances the topic changes
        return frozenset(("boundary", int(b)) for b in data["boundaries"])
    if role == "topic_relation":
        return frozenset({("relation", str(data["relation"]).strip().lower())})
    return frozenset({("answers", bool(str(data["answer"]).strip())),
                      *(("cites", str(k)) for k in data["evidence_keys"])})


def label(role: str, decision: tuple) -> str:
    """A decision as a reader says it: `merge u3 + u7`, `CAUSAL_FOLLOW e2 → e5`, `intent: ask`."""
    if decision == FAILED:
        return "the call failed"
    head, *rest = decision
    if role == "diagnosis":
        if head == "update":
            return f"update: {node_label(rest[0])} supersedes {node_label(rest[1])}"
        return f"{head} " + " + ".join(node_label(r) for r in rest)
    if role == "relation_synthesis":
        return f"{head} {rest[0]} → {rest[1]}"
    if role == "split_plan":
        return f"split into {rest[1]} segments" if rest[0] else "no split"
    if role == "event_merge":
        return "merge the two events" if rest[0] else "keep the events apart"
    if role == "episode_merge":
        return "merge into the episode" if rest[0] else "keep apart from the episode"
    if role == "episode_extraction":
        return "episode of " + " + ".join(rest)
    if role == "boundary_detection":
        return f"boundary after utterance {rest[0]}"
    if role == "answer" and head == "answers":
        return "answers" if rest[0] else "abstains"
    return f"{head}: {rest[0]}"


@dataclass
class Comparison:
    """One input, answered by backend A (the recorded call) and backend B (asked again)."""

    role: str
    key: str
    payload: dict
    a: LLMCall
    b: LLMCall

    @property
    def decisions_a(self) -> frozenset[tuple] | None:
        return decisions(self.role, self.a.data)

    @property
    def decisions_b(self) -> frozenset[tuple] | None:
        return decisions(self.role, self.b.data)

    @property
    def differs(self) -> bool | None:
        """Whether the two decide otherwise; None for a role that decides nothing or when either call failed
        (a failure is no decision: the schema-valid rate counts it)."""
        if decisions(self.role, None) is None or not (self.a.ok and self.b.ok):
            return None
        return self.decisions_a != self.decisions_b


def as_calls(records: Iterable[Any]) -> list[LLMCall]:
    from engine.llm.recorded import as_call

    return [as_call(r.payload if hasattr(r, "payload") else r) for r in records]


def compare(calls: Iterable[Any], other: LLM, roles: Iterable[str] | None = None) -> list[Comparison]:
    """Ask `other` the input of each call (of `roles`, default the deciding ones) and pair the replies.

    `calls` are LLMCall records, their dicts or the store's llm_call log records; a call whose prompt was
    not rendered by `engine.llm.prompts` is skipped."""
    wanted = set(DECISION_ROLES if roles is None else roles)
    out: list[Comparison] = []
    for call in as_calls(calls):
        if call.role not in wanted:
            continue
        try:
            payload = payload_of(call.prompt)
        except ValueError:
            continue
        out.append(Comparison(call.role, call.key, payload, call, other.call(call.role, payload)))
    return out


def differ_by_key(comparisons: Iterable[Comparison]) -> dict[str, list[bool]]:
    """Per call key, whether each comparison of it differs, in order (a prompt may be sent twice)."""
    out: dict[str, list[bool]] = {}
    for c in comparisons:
        if c.differs is not None:
            out.setdefault(c.key, []).append(c.differs)
    return out


def decision_rows(comparisons: Iterable[Comparison], name_a: str = "A", name_b: str = "B") -> list[dict]:
    """One row per decision either backend made on an input: made by both, only by A or only by B, with the
    raw output of each side behind it."""
    rows: list[dict] = []
    for n, c in enumerate(comparisons):
        a, b = c.decisions_a, c.decisions_b
        if a is None:
            continue
        target = _input_label(c.role, c.payload)
        for decision in sorted(a | b, key=repr):
            made = "both" if decision in a and decision in b else f"only {name_a}" if decision in a \
                else f"only {name_b}"
            rows.append({"input": n, "role": c.role, "on": target, "decision": label(c.role, decision),
                         "made by": made, f"{name_a} raw": _raw(c.a), f"{name_b} raw": _raw(c.b)})
    return rows


def _raw(call: LLMCall) -> str:
    if call.response is not None:
        return call.response if call.ok else f"[{call.error_code}] {call.response}"
    return f"[{call.error_code}] {call.error or ''}"


def _input_label(role: str, payload: Mapping) -> str:
    """What the input was about: the diagnosed unit, the target event, the adjacent pair, the question."""
    if role == "diagnosis":
        return node_label(payload["target"]["id"])
    if role == "split_plan":
        return node_label(payload.get("node_id", ""))
    if role == "relation_synthesis":
        return str(payload["target"].get("id", ""))
    if role == "event_merge":
        return f"{payload['earlier'].get('id', '')} | {payload['later'].get('id', '')}"
    if role == "router":
        return str(payload.get("utterance", ""))[:60]
    if role == "boundary_detection":
        items = payload["utterances"]          # GAM asks only about two utterances or more
        return f"utterances {items[0]['index']}–{items[-1]['index']}"
    if role == "topic_relation":
        return f"{node_label(payload['memory_1']['id'])} | {node_label(payload['memory_2']['id'])}"
    if role == "answer":
        return str(payload.get("question", ""))[:60]
    return ""

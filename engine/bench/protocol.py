"""The streaming protocol's plan (Neuromem §4.1, App. B.1): when each question becomes askable and when the
checkpoints (rounds) fall, computed from the conversation alone before anything runs.

Inserts and questions form one time-ordered stream. A question becomes askable once every one of its
evidence turns is in memory and, when it carries a time, once the stream has reached that time (no turn
dated after it is needed). Checkpoints count visible questions: with Q questions that ever become
askable and N rounds, round i falls right after the insert that makes at least t_i = round(Q·i/N)
questions visible (half rounds up; at least 1), so several rounds may fall on one insert when Q < N.
At each checkpoint every visible question is asked again; the cohort is the questions visible at round 1.
"""
from __future__ import annotations

from dataclasses import dataclass

from engine.core.conversation import Conversation, Question

STREAMING, STATIC = "streaming", "static"
PROTOCOLS = (STREAMING, STATIC)


def thresholds(questions: int, rounds: int) -> list[int]:
    """t_i = round(Q·i/N) for i = 1..N, half up (integer arithmetic), at least 1."""
    if rounds < 1:
        raise ValueError(f"rounds must be at least 1, got {rounds}")
    return [max(1, (2 * questions * i + rounds) // (2 * rounds)) for i in range(1, rounds + 1)]


def ready_after(conversation: Conversation, question: Question) -> int | None:
    """How many turns must be in memory before `question` may be asked; None if it never can be (an
    evidence turn is not in the conversation)."""
    position = {t.id: t.index + 1 for t in conversation.turns}
    if not question.evidence or any(e not in position for e in question.evidence):
        return None
    need = max(position[e] for e in question.evidence)
    if question.time:
        need = max(need, sum(1 for t in conversation.turns if t.time <= question.time))
    return need


@dataclass(frozen=True)
class Checkpoint:
    round: int
    turns: int                       # turns in memory when it falls
    visible: tuple[str, ...]         # question ids asked at it, in question order


def plan(conversation: Conversation, questions: list[Question], rounds: int,
         protocol: str = STREAMING) -> list[Checkpoint]:
    """The checkpoints of one conversation. Static: one round after every turn, asking every askable
    question. Streaming: `rounds` checkpoints by visible-question count (module docstring)."""
    ready = {q.id: ready_after(conversation, q) for q in questions}
    askable = [q for q in questions if ready[q.id] is not None]
    total = len(conversation.turns)
    if protocol == STATIC:
        return [Checkpoint(1, total, tuple(q.id for q in askable))] if askable else []
    if protocol != STREAMING:
        raise ValueError(f"unknown protocol {protocol!r}; choose {' or '.join(PROTOCOLS)}")
    if not askable:
        return []
    out: list[Checkpoint] = []
    targets = thresholds(len(askable), rounds)
    for turns in range(1, total + 1):
        visible = tuple(q.id for q in askable if ready[q.id] <= turns)
        while len(out) < rounds and len(visible) >= targets[len(out)]:
            out.append(Checkpoint(len(out) + 1, turns, visible))
        if len(out) == rounds:
            break
    return out

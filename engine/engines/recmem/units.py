"""Interaction units (§3.2): which messages form one exchange u_i = (m_usr, m_ast, τ_i), and how it is written.

The pairing rule, within a session and in arrival order: an exchange opens at a message and closes at the next
message of the same session (its reply). A message left over when its session ends is an exchange of its own,
and so is a message by a speaker named `assistant` that would open one (with user/assistant roles an exchange
starts at the user's message). In LoCoMo, whose two named speakers take turns, this pairs each message with the
answer to it; a speaker who sends two messages in a row has them paired with each other. The rule needs only the
previous message, so streaming ingest and a batch pass over a conversation (`exchanges`) agree.
"""
from __future__ import annotations

from engine.core.conversation import Turn
from engine.core.text import human_date

ASSISTANT = "assistant"
REPLY, SESSION_END, ASSISTANT_OPENS = "reply", "session end", "assistant opens"     # why an exchange closed


def opens_alone(turn: Turn) -> bool:
    """A message that is an exchange on its own as soon as it arrives: the assistant speaking first."""
    return turn.speaker.strip().lower() == ASSISTANT


def exchanges(turns: list[Turn]) -> list[list[Turn]]:
    """The conversation's exchanges in order, by the streaming rule; the last one may be a message still waiting
    for its reply (one message, its session not ended)."""
    out: list[list[Turn]] = []
    waiting: Turn | None = None
    for t in turns:
        if waiting is not None and waiting.session != t.session:
            out.append([waiting])
            waiting = None
        if waiting is not None:
            out.append([waiting, t])
            waiting = None
        elif opens_alone(t):
            out.append([t])
        else:
            waiting = t
    if waiting is not None:
        out.append([waiting])
    return out


def exchange_raw(messages: list[Turn] | list[str]) -> str:
    """The unit's immutable evidence: its messages' raw `speaker: text`, one per line."""
    return "\n".join(m if isinstance(m, str) else m.raw for m in messages)


def formatted(time: str, raw: str) -> str:
    """Fmt(u): the exchange with its date, what Φ embeds and what the LLM roles read."""
    date = human_date(time)
    return f"[{date}] {raw}" if date else raw

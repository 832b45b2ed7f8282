"""Answering a question from memory: what the answering model reads, and what it says and cites.

The context is a list of passages, each a piece of raw evidence with the keys (source turn ids) it comes
from: a retrieval result's materialized units (`passages_from_units`), or every turn of the conversation
for the full-history ceiling (`passages_from_turns`). The answer comes from the LLM's `answer` role and
names the keys it rests on, which attribution auditability (`engine.eval.metrics.attribution_auditability`)
compares with the gold evidence.

It fails closed: a timeout, an unreachable endpoint, a reply that is not valid JSON or breaks the
schema, even an unexpected error in a backend, gives an `Answer` with no text, no citations and the
error code, never an exception, so one bad call costs one question rather than a benchmark.
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from engine.core.conversation import Turn
from engine.core.proposal import LLMReason
from engine.llm.base import LLM, LLMCall, estimate_tokens
from engine.retrieval.result import RetrievedUnit

# Context tokens (estimated, `estimate_tokens`) an answer may read: a whole LoCoMo conversation
# (about 25k) fits, so the full-history ceiling is the whole history there.
DEFAULT_CONTEXT_TOKENS = 32_000
# What an answer is scored on, in display order: token F1, BLEU-1, ROUGE-L, exact match, attribution auditability.
ANSWER_METRICS = ["f1", "bleu1", "rouge_l", "em", "aa"]


@dataclass(frozen=True)
class Passage:
    """One piece of evidence the answering model reads: raw text, the keys it comes from, its time."""

    keys: tuple[str, ...]
    text: str
    time: str = ""

    def to_payload(self) -> dict:
        return {"keys": list(self.keys), "time": self.time, "text": self.text}

    @property
    def tokens(self) -> int:
        """What the passage costs in the prompt (estimated)."""
        return estimate_tokens(f"{' '.join(self.keys)} {self.time} {self.text}")


@dataclass
class Answer:
    text: str
    cited: list[str]
    call: LLMCall | None
    error_code: str | None = None
    error: str | None = None
    rejected: list[str] = field(default_factory=list)    # keys the reply cited that the context did not hold
    passages: int = 0                                   # passages the model read
    dropped: int = 0                                    # passages left out by the token budget

    @property
    def ok(self) -> bool:
        return self.error_code is None

    def to_dict(self) -> dict:
        """The answer for a per-question record; the call (whose prompt can hold a whole history) is left to
        the call log."""
        return {"text": self.text, "cited": list(self.cited), "error_code": self.error_code, "error": self.error,
                "rejected": list(self.rejected), "passages": self.passages, "dropped": self.dropped}


def passages_from_units(units: Iterable[RetrievedUnit]) -> list[Passage]:
    """A retrieval result's units as passages, in rank order (the order the budget keeps them in).

    A unit with several sources (a merged unit) is one passage with all its keys: citing it cites them
    all."""
    return [Passage(tuple(u.source_ids), u.raw, u.time) for u in units if u.raw.strip()]


def passages_from_turns(turns: Iterable[Turn]) -> list[Passage]:
    """Every turn as a passage, newest first: when the history overflows the budget, the oldest turns are
    the ones left out, as a model's context window would lose them."""
    ordered = sorted(turns, key=lambda t: (t.time, t.index), reverse=True)
    return [Passage((t.id,), t.raw, t.time) for t in ordered]


def fit(passages: Sequence[Passage], budget_tokens: int) -> tuple[list[Passage], int]:
    """The passages that fit the budget, taken in priority order (each one that still fits is kept, one
    too long for what is left is skipped), then put in time order; and how many were left out."""
    if budget_tokens <= 0:
        raise ValueError(f"the context budget must be positive, got {budget_tokens}")
    kept: list[tuple[int, Passage]] = []
    left = budget_tokens
    for rank, passage in enumerate(passages):
        if passage.tokens <= left:
            kept.append((rank, passage))
            left -= passage.tokens
    kept.sort(key=lambda rp: (rp[1].time == "", rp[1].time, rp[0]))
    return [p for _, p in kept], len(passages) - len(kept)


def answer_question(llm: LLM, question: str, context: Sequence[Passage], *, question_time: str = "",
                    budget_tokens: int = DEFAULT_CONTEXT_TOKENS) -> Answer:
    """Ask the `answer` role about `context` (passages in priority order, see `fit`).

    With no passage to read there is nothing to answer from, so no call is made and the answer is empty.
    Keys the reply cites that are not in the context it read are dropped from `cited` (kept in
    `rejected`): an answer cannot be attributed to evidence it never saw."""
    if not isinstance(question, str) or not question.strip():
        raise ValueError(f"a question must be a non-empty string, got {question!r}")
    read, dropped = fit(context, budget_tokens)
    if not read:
        return Answer("", [], None, dropped=dropped)
    payload = {"question": question, "question_time": question_time, "passages": [p.to_payload() for p in read]}
    try:
        call = llm.call("answer", payload)
    except Exception as exc:          # a backend's own bug must not lose the other questions of a benchmark
        return Answer("", [], None, LLMReason.LLM_FAIL, f"{type(exc).__name__}: {exc}", passages=len(read),
                      dropped=dropped)
    if not call.ok:
        return Answer("", [], call, call.error_code, call.error, passages=len(read), dropped=dropped)
    known = {k for p in read for k in p.keys}
    keys = list(dict.fromkeys(k.strip() for k in call.data["evidence_keys"]))
    return Answer(call.data["answer"].strip(), [k for k in keys if k in known], call,
                  rejected=[k for k in keys if k not in known], passages=len(read), dropped=dropped)

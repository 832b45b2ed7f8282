"""What a sparse trigger does with the episodic buffer: validate the detector's boundaries, then decide which
segments are consolidated and what happens to the tail (App. A.2 "reset or trim the local buffer according to
the consolidation result", made explicit as settings).

Pure functions of the buffer's size, the boundaries, the trigger and the settings, so the engine and the
detector's fits (`scripts/fit_gam.py`, `scripts/fit_gam_chat.py`, through `GamEngine.plan_trigger`) make the same
decisions.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from engine.core.segments import segments_from_boundaries
from engine.engines.gam.schema import ReasonCode, Trigger


@dataclass(frozen=True)
class Detection:
    """The detector's answer as validated: `starts` are segment starts (1..n-1) when `code` is None; when the
    answer was refused, `starts` is empty and `code`/`message` say why (nothing of it is used)."""

    raw: list = field(default_factory=list)
    starts: tuple[int, ...] = ()
    code: str | None = None
    message: str = ""

    @property
    def indices(self) -> list[int]:
        """The boundaries in the detector's own terms: i = a change between utterance i and i+1."""
        return [s - 1 for s in self.starts]


def validate(raw, n: int) -> Detection:
    """Check a detector answer against a buffer of `n` utterances: every index an integer in 0..n-2, each once,
    in increasing order. A bad answer is refused whole, with the first problem's reason code."""
    values = list(raw) if isinstance(raw, (list, tuple)) else []
    if not isinstance(raw, (list, tuple)) or any(isinstance(v, bool) or not isinstance(v, int) for v in values):
        return Detection(values, (), ReasonCode.SCHEMA_FAIL, f"boundaries {raw!r} are not a list of integers")
    outside = [v for v in values if not 0 <= v <= n - 2]
    if outside:
        return Detection(values, (), ReasonCode.BOUNDARY_RANGE,
                         f"boundary index {outside[0]} outside 0..{n - 2} (the buffer holds {n} utterances)")
    twice = sorted({v for v in values if values.count(v) > 1})
    if twice:
        return Detection(values, (), ReasonCode.BOUNDARY_DUPLICATE, f"boundary index {twice[0]} given twice")
    if values != sorted(values):
        return Detection(values, (), ReasonCode.BOUNDARY_ORDER, f"boundaries {values} are not in increasing order")
    return Detection(values, tuple(v + 1 for v in values))


@dataclass(frozen=True)
class TriggerPlan:
    """Inclusive (first, last) utterance ranges of the buffer to consolidate, in order; the kept tail's range
    (None when nothing stays); and the policy that decided, in words."""

    consolidate: tuple[tuple[int, int], ...]
    kept: tuple[int, int] | None
    policy: str


def plan_trigger(n: int, starts, trigger: str, tokens: list[int], settings) -> TriggerPlan:
    """Which segments of an `n`-utterance buffer a `trigger` consolidates, given segment `starts` and each
    utterance's token count, under the settings' tail policies (docs/GAM.md)."""
    if n == 0:
        return TriggerPlan((), None, "empty buffer")
    segments = segments_from_boundaries(list(starts), n)
    complete, tail = tuple(segments[:-1]), segments[-1]
    if trigger == Trigger.SESSION_END:
        flush = settings.session_end_tail == "flush"
        policy = "session end: the tail is flushed" if flush else "session end: the tail is kept"
    elif trigger == Trigger.MANUAL:
        flush = settings.manual_tail == "flush"
        policy = "manual: the tail is flushed" if flush else "manual: the tail is kept"
    elif trigger == Trigger.OVERFLOW:
        tail_tokens = sum(tokens[tail[0]:tail[1] + 1])
        limit = settings.tail_keep_share * settings.t_max
        if settings.overflow_tail == "cut":
            flush, policy = True, "overflow: forced cut (the tail is consolidated too)"
        elif not complete:
            flush, policy = True, "overflow: no boundary in a full buffer, forced cut"
        elif tail_tokens > limit:
            flush, policy = True, (f"overflow: the tail's {tail_tokens} tokens exceed {limit:.0f} "
                                   f"({settings.tail_keep_share:g} of T_max), forced cut")
        else:
            flush, policy = False, f"overflow: the tail ({tail_tokens} tokens) is kept"
    else:
        raise ValueError(f"unknown trigger {trigger!r}; one of {', '.join(Trigger.ALL)}")
    if flush:
        return TriggerPlan(tuple(segments), None, policy)
    return TriggerPlan(complete, tail, policy)

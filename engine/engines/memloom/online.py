"""MemLoom's online path: HDRA event routing (§3.3, Alg. 1) and the event lifecycle rules (§3.4).

Pure functions over the state and vectors, so the engine, the tests and the
Replay page explain a routing decision with the same numbers.
"""
from __future__ import annotations

import functools
import math
from collections import Counter
from dataclasses import dataclass
from datetime import datetime

import numpy as np

from engine.core.node import Node
from engine.core.text import words
from engine.engines.memloom.settings import MemLoomSettings

COMPLETION_CUES = ("that's settled", "all set", "all done", "it's done", "we're done", "that's done",
                   "problem solved", "sorted out", "wrapped up", "case closed", "finished it")


def g(s: float) -> float:
    """The fixed sigmoid that damps noisy similarities: 1 / (1 + e^{-10(s - 0.5)})."""
    return 1.0 / (1.0 + math.exp(-10.0 * (s - 0.5)))


def days_between(a: str, b: str) -> float:
    try:
        return abs((datetime.fromisoformat(b) - datetime.fromisoformat(a)).total_seconds()) / 86400.0
    except (TypeError, ValueError):
        return 0.0


@dataclass
class Candidate:
    event: int
    cosine: float
    delta_days: float
    short_window: int
    score: float

    def to_dict(self) -> dict:
        return {"event": self.event, "cosine": round(self.cosine, 4), "delta_days": round(self.delta_days, 4),
                "b_sw": self.short_window, "score": round(self.score, 4)}


def joinable(open_events: list[Node], session: str, turn_no: int, window: int) -> list[Node]:
    """S_join: of the open (provisional or active) events, those of the current session updated within `window`
    turns (the temporal-boundary filter, which also bounds the routing cost per turn), made online.

    An event the steward repaired is curated structure: the online path writes drafts only (MemLoom's
    provisional-first contract), so new talk opens a new event that the next run folds into it or cuts
    from it. Were the repaired event to take the talk directly, a topic boundary inside that talk could
    never be cut."""
    return [n for n in open_events if n.session == session
            and turn_no - n.attrs.get("last_turn", n.created_turn) <= window and n.made_by in ("", "online")]


def score_candidates(s: MemLoomSettings, v_m: np.ndarray, events: list[Node], centroids: dict[int, np.ndarray],
                     time: str, turn_no: int) -> list[Candidate]:
    """S_j = min(1, α·g(cos(v_m, c_j)) + β·exp(−λΔh) + γ·B_sw) for every joinable event, best first."""
    out = []
    for e in events:
        cos = float(v_m @ centroids[e.id])
        dh = days_between(e.attrs.get("last_time", e.time), time)
        b_sw = int(turn_no - e.attrs.get("last_turn", e.created_turn) <= s.short_window)
        score = min(1.0, s.alpha * g(cos) + s.beta * math.exp(-s.lam * dh) + s.gamma * b_sw)
        out.append(Candidate(e.id, cos, dh, b_sw, score))
    return sorted(out, key=lambda c: (-round(c.score, 9), c.event))


def event_stats(members: list[Node]) -> dict:
    """v_stats = [n, p, V]: evidence count, normalised participant distribution, token mass."""
    speakers = Counter(sp for m in members for sp in (m.speakers or [""]))
    total = sum(speakers.values()) or 1
    return {"n": len(members), "p": {k: round(v / total, 4) for k, v in sorted(speakers.items())},
            "V": sum(word_count(m.raw) for m in members)}


@functools.lru_cache(maxsize=65536)
def word_count(text: str) -> int:
    """Cached: an event's token mass is re-summed over its members each time it grows."""
    return len(words(text))


def entropy(p: dict) -> float:
    return -sum(v * math.log(v) for v in p.values() if v > 0)


def maturity(s: MemLoomSettings, stats: dict) -> float:
    """M(E_j) = w1·n + w2·H(p) + w3·log(1 + V)."""
    return s.w1 * stats["n"] + s.w2 * entropy(stats["p"]) + s.w3 * math.log(1 + stats["V"])


def completes_task(text: str) -> str:
    low = " " + " ".join(words(text)) + " "
    return next((c for c in COMPLETION_CUES if f" {c} " in low), "")


def centroid(vectors: list[np.ndarray]) -> np.ndarray:
    c = np.mean(np.stack(vectors), axis=0)
    norm = float(np.linalg.norm(c))
    return (c / norm if norm else c).astype(np.float32)

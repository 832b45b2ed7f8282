"""Offline rules for the event roles: the router's rewrite, relation synthesis, and the merge check.

Deterministic and explainable: every rewrite lists what it resolved, every
relation names the link and hooks behind it, and each confidence is a score
(a calibrated decision model's probability, a logistic of cosine and gap), not
a constant.
"""
from __future__ import annotations

import math
import re
from datetime import datetime, timedelta

from engine.core.text import content_tokens, has_negation, jaccard, number_change, numbers, words
from engine.llm.decision_models import CHAT_PARTY, Judgement, judge_cause, judge_statements
from engine.llm.offline_diagnosis import MERGE_FLOOR, UPDATE_FLOOR
from engine.llm.pronouns import third_person
from engine.llm.schemas import SUMMARY_CHARS
from engine.retrieval.links import CHANGE_WORDS

# -- the router ----------------------------------------------------------------------------------
_WEEKDAYS = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]
_UNITS = {"day": 1, "days": 1, "week": 7, "weeks": 7, "month": 30, "months": 30, "year": 365, "years": 365}
_COUNT = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
          "eight": 8, "nine": 9, "ten": 10, "a couple of": 2, "a few": 3, "several": 3}


def _day(d: datetime) -> str:
    return d.strftime("%Y-%m-%d")


def _relative_dates(text: str, now: datetime) -> list[tuple[int, str, str]]:
    """(offset, mention, absolute date) of every relative time expression in `text`, in text order, none
    overlapping."""
    low = text.lower()
    found: list[tuple[int, str, str]] = []
    simple = {"today": now, "tonight": now, "this morning": now, "this afternoon": now, "this evening": now,
              "yesterday": now - timedelta(days=1), "last night": now - timedelta(days=1),
              "tomorrow": now + timedelta(days=1)}
    for phrase, when in simple.items():
        for m in re.finditer(rf"\b{phrase}\b", low):
            found.append((m.start(), text[m.start():m.end()], _day(when)))
    for m in re.finditer(r"\b(last|this|next)\s+(week|weekend|month|year)\b", low):
        step = {"last": -1, "this": 0, "next": 1}[m.group(1)]
        unit = m.group(2)
        if unit == "week":
            when = f"week of {_day(now + timedelta(days=7 * step) - timedelta(days=now.weekday()))}"
        elif unit == "weekend":
            saturday = now + timedelta(days=(5 - now.weekday()) + 7 * step)
            if step == -1 and now.weekday() >= 5:
                saturday = now - timedelta(days=now.weekday() - 5 + 7)
            when = f"weekend of {_day(saturday)}"
        elif unit == "month":
            month = (now.month - 1 + step) % 12 + 1
            year = now.year + (now.month - 1 + step) // 12
            when = datetime(year, month, 1).strftime("%B %Y")
        else:
            when = str(now.year + step)
        found.append((m.start(), text[m.start():m.end()], when))
    counts = "|".join(sorted(map(re.escape, _COUNT), key=len, reverse=True))
    for m in re.finditer(rf"\b(\d+|{counts})\s+(days?|weeks?|months?|years?)\s+(ago|later|from now)\b", low):
        n = int(m.group(1)) if m.group(1).isdigit() else _COUNT[m.group(1)]
        sign = -1 if m.group(3) == "ago" else 1
        found.append((m.start(), text[m.start():m.end()], _day(now + timedelta(days=sign * n * _UNITS[m.group(2)]))))
    for m in re.finditer(r"\b(last|next|on|this)\s+(" + "|".join(_WEEKDAYS) + r")\b", low):
        target = _WEEKDAYS.index(m.group(2))
        delta = target - now.weekday()
        if m.group(1) == "last" or (m.group(1) == "on" and delta > 0):
            delta = delta - 7 if delta >= 0 else delta
        elif m.group(1) == "next":
            delta = delta + 7 if delta <= 0 else delta
        found.append((m.start(), text[m.start():m.end()], _day(now + timedelta(days=delta))))
    found.sort()
    kept, end = [], -1
    for start, mention, when in found:
        if start >= end:
            kept.append((start, mention, when))
            end = start + len(mention)
    return kept


def rewrite(utterance: str, speaker: str, time: str, window: list[dict]) -> dict:
    """Speaker-anchored pronouns (in the third person, verbs agreeing), the addressee, and absolute dates;
    the raw text itself is never edited.

    One pass over the tokens and one over the date mentions, each date written after its own mention, so
    the cost is linear in the utterance however many pronouns and dates it holds.
    """
    others = [w["speaker"] for w in reversed(window) if w.get("speaker") and w["speaker"] != speaker]
    addressee = others[0] if others and len(set(w["speaker"] for w in window) | {speaker}) == 2 else ""
    text, references = third_person(utterance, speaker, addressee)
    dates = []
    try:
        now = datetime.fromisoformat(time)
    except (TypeError, ValueError):
        now = None
    if now is not None:
        pieces, done = [], 0
        for start, mention, when in _relative_dates(text, now):
            end = start + len(mention)
            pieces += [text[done:end], f" ({when})"]
            done = end
            dates.append({"mention": mention, "date": when})
        text = "".join(pieces) + text[done:]
    ws = words(utterance)
    intent = ("ask" if utterance.rstrip().endswith("?") else
              "report_change" if set(ws) & CHANGE_WORDS else
              "plan" if set(ws) & {"will", "plan", "planning", "going", "gonna", "next"} else
              "small_talk" if len(content_tokens(utterance)) < 3 else "inform")
    topics = list(dict.fromkeys(content_tokens(utterance)))[:3]
    return {"rewritten": text, "intent": intent, "topics": topics, "references": references, "dates": dates}


# -- relation synthesis ---------------------------------------------------------------------------
STATE_FLOOR = 0.5      # the update model's probability past which a same-speaker pair is a state succession
RATIONALE_CHARS = 400
RESTATES = 0.3         # shared share of content words that makes a second sentence a restatement of the first
MAX_CAUSES = 3          # a statement has few direct causes: the weaker candidates lose to its strongest three


def _logistic(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x))


def _logit(p: float) -> float:
    """The link's logit back from its (rounded) probability, which is what the payload carries."""
    p = min(max(p, 1e-4), 1 - 1e-4)
    return math.log(p / (1 - p))


def relation_between(cause: dict, effect: dict, link: dict, cosine: float, embedder, chat: bool = True
                     ) -> dict | None:
    """Type and confidence of the relation the steward's strongest sentence link suggests.

    The link (an earlier and a later utterance, its probability and the hooks they share) comes from the
    steward's logic track. Near-identical events are SAME_EVENT (the link's probability); a later utterance
    of the same speaker that gives a fact of the earlier one a new value is STATE_SUCCESSOR, with the
    calibrated update model's probability (`engine.llm.decision_models`) from STATE_FLOOR: "2 cats" then "3
    cats", Leeds then Manchester are one fact's states, not a cause and its effect. In a `chat` (two people
    talking) the same speaker's pair is read three ways, each with its calibrated model, and the likeliest
    reading wins, as All-Mem's diagnosis proposes the likelier of Update and Merge: the fact said again
    (SAME_EVENT, a co-referential fragment: "Yep, still in the Leith flat"; the merge model, from MERGE_FLOOR),
    its new value (STATE_SUCCESSOR, from UPDATE_FLOOR), or a cause and its effect, which a pair under STATE_FLOOR
    always is when its later statement names a cause itself ("because of the strike", "so"). Any other pair is
    CAUSAL_FOLLOW: in a chat with the calibrated cause model's probability (`engine.llm.decision_models.
    judge_cause`: the link, and what the two statements say: a consequence marked, a change reported, a
    question, how long apart), else with the link model's, fit on multi-party scenarios
    (`engine.retrieval.links`).
    """
    by_id = {s["id"]: s for s in cause["sentences"] + effect["sentences"]}
    old, new = by_id.get(link["source_sentence"]), by_id.get(link["target_sentence"])
    if old is None or new is None:
        return None
    p = float(link["score"])
    hooks = ", ".join(link.get("hooks", [])[:5]) or "none"
    evidence = [old["id"], new["id"]]
    if cosine >= 0.8 and p >= 0.5:
        return {"type": "SAME_EVENT", "confidence": round(p, 4), "evidence": evidence,
                "rationale": f"event cosine {cosine:.2f}; link {p:.2f} (hooks: {hooks})"}
    judged = None
    if old.get("speaker") == new.get("speaker"):
        judged = judge_statements(old["text"], old.get("speaker", ""), new["text"], new.get("speaker", ""),
                                  embedder.embed)
    update = judged["update"].probability if judged else 0.0
    if update >= STATE_FLOOR and (not chat or update >= judged["merge"].probability):
        return _state_successor(judged["update"], evidence, "")
    said = (f"link {p:.2f} from u{old['id']} to u{new['id']} (hooks: {hooks}; cue {link.get('cue') or 'none'}; "
            f"change {'yes' if link.get('change') else 'no'})")
    if not chat:
        return {"type": "CAUSAL_FOLLOW", "confidence": round(p, 4), "evidence": evidence, "rationale": said}
    cause = judge_cause(_logit(p), old, new, embedder.embed, update=update)       # the update judged once
    if judged and not _marks_a_cause(cause):
        over = f" over cause model {cause.probability:.2f}"
        restated = judged["merge"]
        if restated.probability >= MERGE_FLOOR and restated.probability > max(update, cause.probability):
            return {"type": "SAME_EVENT", "confidence": round(restated.probability, 4), "evidence": evidence,
                    "rationale": f"merge model {restated.probability:.2f} over update model {update:.2f} and"
                                 f"{over}: {restated.reason}"[:RATIONALE_CHARS]}
        if update >= UPDATE_FLOOR and update > cause.probability:
            return _state_successor(judged["update"], evidence, over)
    return {"type": "CAUSAL_FOLLOW", "confidence": round(cause.probability, 4), "evidence": evidence,
            "rationale": f"{cause.reason}; {said}"[:RATIONALE_CHARS]}


def _state_successor(state: Judgement, evidence: list[str], over: str) -> dict:
    """The relation of one fact's two states, with the update model's probability and reason."""
    return {"type": "STATE_SUCCESSOR", "confidence": round(state.probability, 4), "evidence": evidence,
            "rationale": f"update model {state.probability:.2f}{over}: {state.reason}"[:RATIONALE_CHARS]}


def _marks_a_cause(cause: Judgement) -> bool:
    """The later statement names a cause itself ("because of the strike", "so I had to"): a causal reading."""
    return bool(cause.features.get("cue") or cause.features.get("consequence"))


def _state_change(old: dict, new: dict) -> str:
    """The same speaker restating a slot with a changed number or polarity.

    A restatement repeats most of its wording (token Jaccard ≥ RESTATES); two sentences that only share a
    place or a name and differ in a "nothing" are a story moving on, not a value replaced.
    """
    if old.get("speaker") != new.get("speaker"):
        return ""
    a, b = set(content_tokens(old["text"])), set(content_tokens(new["text"]))
    if len(a & b) < 2 or jaccard(a, b) < RESTATES:
        return ""
    na, nb = numbers(old["text"]), numbers(new["text"])
    if na and nb and na != nb:
        return number_change(na, nb)
    if has_negation(old["text"]) != has_negation(new["text"]):
        return "polarity flips"
    return ""


def synthesize(payload: dict, embedder) -> dict:
    """The relations between the target event and each candidate; the people speaking in them tell a chat of two
    from a scenario of many (which cause model decides: `relation_between`)."""
    target = payload["target"]
    relations = []
    people = {s.get("speaker") for e in [target, *payload["candidates"]] for s in e["sentences"]}
    for cand in payload["candidates"]:
        rel = relation_between(cand, target, cand["link"], float(cand.get("cosine", 0.0)), embedder,
                               chat=len(people) <= CHAT_PARTY)
        if rel is not None:
            relations.append({"source_id": cand["id"], "target_id": target["id"], **rel})
    causal = sorted((r for r in relations if r["type"] == "CAUSAL_FOLLOW"), key=lambda r: -r["confidence"])
    kept: dict[str, int] = {}
    for r in causal:                        # per effect sentence: an event can hold two stories
        effect = r["evidence"][-1]
        kept[effect] = kept.get(effect, 0) + 1
        if kept[effect] > MAX_CAUSES:
            r["type"] = "NONE"
            r["rationale"] += f"; weaker than the {MAX_CAUSES} strongest candidate causes of its sentence"
    return {"relations": relations}


def judge_merge(payload: dict) -> dict:
    """Two adjacent fragments are one narrative when close in time, similar, and not a changed state."""
    a, b = payload["earlier"], payload["later"]
    cosine, gap = float(payload["cosine"]), float(payload["gap_hours"])
    last, first = a["sentences"][-1], b["sentences"][0]
    contradiction = bool(_state_change(last, first))
    conf = _logistic(10 * (cosine - 0.45) - 0.5 * gap) * (0.3 if contradiction else 1.0)
    texts = [s["text"] for s in a["sentences"] + b["sentences"]]
    keywords = list(dict.fromkeys(t for text in texts for t in content_tokens(text)))[:10]
    return {"merge": conf >= 0.5, "confidence": round(conf, 4),
            "summary": " / ".join(s["text"] for s in (a["sentences"][:1] + b["sentences"][:1]))[:SUMMARY_CHARS],
            "keywords": keywords,
            "rationale": f"centroid cosine {cosine:.2f}, {gap:.1f} h apart"
                         + ("; the later fragment changes a stated value" if contradiction else "")}

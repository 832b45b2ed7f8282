"""Offline rules for GAM's roles: topic boundaries, a topic's descriptor, and the relation of two topics.

Deterministic and explainable. Boundaries come from an embedding TextTiling over the buffer
(`engine.core.tiling.texttiling`, parameters in the payload). The descriptor is extractive: the segment's
salient words and its one or two most central utterances. A relation's confidence is a calibrated
probability that two topics belong together, σ(a·cos + c·ln d + b) of their summaries' cosine and their distance
d in the sequence of topics (1 = consecutive), fit on QMSum train topic spans by `scripts/fit_gam.py`; its label
comes from cue words between the two summaries.
"""
from __future__ import annotations

import math

from engine.core.text import content_tokens, has_negation, human_date, keywords_of, numbers, words
from engine.core.tiling import texttiling
from engine.retrieval.links import cue_of

SUMMARY_UTTERANCES = 2          # the summary's most central utterances
SUMMARY_WORDS = 30              # words kept of each
MIN_CONTENT = 4                 # content words an utterance needs to stand for its segment
KEYWORDS = 8
CONTRADICTION_CUES = ("actually", "no longer", "not anymore", "anymore", "instead", "changed", "turns out",
                      "wrong", "cancelled", "canceled", "quit", "stopped", "not true", "never")
SUPPORT_CUES = ("agree", "agreed", "exactly", "confirm", "confirmed", "indeed", "still", "again", "as well",
                "too", "same")


def detect_boundaries(payload: dict, embedder) -> dict:
    """{"boundaries": [i, ...]}: a boundary at i is a change of topic between utterance i and i+1."""
    utterances = payload["utterances"]
    if len(utterances) < 2:
        return {"boundaries": []}
    tiling = payload.get("tiling", {})
    vectors = embedder.embed([u["text"] for u in utterances])
    starts = texttiling(vectors, int(tiling.get("window", 24)), float(tiling.get("depth_threshold", 0.3)),
                        int(payload.get("min_segment", 1)))
    return {"boundaries": [s - 1 for s in starts]}


def summarize(payload: dict, embedder) -> dict:
    """Keywords of the whole segment and a summary of its one or two most central utterances, in time order."""
    utterances = payload["utterances"]
    texts = [u["text"] for u in utterances]
    keywords = segment_keywords(texts)
    if not utterances:
        return {"summary": "", "keywords": keywords}
    vectors = embedder.embed(texts)
    centroid = vectors.mean(axis=0)
    substantive = [i for i, t in enumerate(texts) if len(content_tokens(t)) >= MIN_CONTENT] or list(range(len(texts)))
    central = sorted(substantive, key=lambda i: (-round(float(vectors[i] @ centroid), 9), i))[:SUMMARY_UTTERANCES]
    parts = []
    for i in sorted(central):
        body = texts[i].split()
        clipped = " ".join(body[:SUMMARY_WORDS]) + (" …" if len(body) > SUMMARY_WORDS else "")
        parts.append(f"{utterances[i].get('speaker') or 'someone'}: {clipped}")
    date = human_date(utterances[0].get("time", ""))
    return {"summary": (f"{date} — " if date else "") + " ".join(parts), "keywords": keywords}


def segment_keywords(texts: list[str], limit: int = KEYWORDS) -> list[str]:
    """Each utterance's extractive keywords (`keywords_of`: names and numbers first), ranked over the segment by
    how many utterances hold them, then first appearance."""
    count: dict[str, int] = {}
    first: dict[str, tuple[int, str]] = {}
    for i, text in enumerate(texts):
        for k in dict.fromkeys(keywords_of(text, 2 * KEYWORDS)):
            low = k.lower()
            count[low] = count.get(low, 0) + 1
            first.setdefault(low, (i, k))
    ranked = sorted(count, key=lambda w: (-count[w], first[w][0]))[:limit]
    return [first[w][1] for w in ranked] or words(" ".join(texts))[:3]


def relate(payload: dict) -> dict:
    """{"relation", "confidence"}: unrelated below an even chance of belonging together, else the type the
    cue words point to, with the calibrated probability as its confidence."""
    new, old = payload["memory_1"], payload["memory_2"]
    cal = payload.get("calibration", {})
    logit = (float(cal.get("a", 1.0)) * float(payload["cosine"])
             + float(cal.get("c", 0.0)) * math.log(max(1, int(payload.get("distance", 1)))) + float(cal.get("b", 0.0)))
    p = 1.0 / (1.0 + math.exp(-max(-60.0, min(60.0, logit))))
    if p < 0.5:
        return {"relation": "unrelated", "confidence": round(1.0 - p, 4)}
    return {"relation": relation_type(new, old, payload.get("speakers", [])), "confidence": round(p, 4)}


def _body(summary: str) -> str:
    """A summary without its leading date ("8 May 2023 — …"), whose numbers are no statement's."""
    head, sep, rest = summary.partition(" — ")
    return rest if sep and any(ch.isdigit() for ch in head) else summary


def relation_type(new: dict, old: dict, speakers: list[str]) -> str:
    """contradict > causal > coreference > support > semantic, from the two topics' summaries and keywords.

    Both need two content words in common (speakers' names aside): contradict a change cue in the new summary
    ("actually", "no longer", "instead", …) with a flipped negation or changed numbers against the old one;
    causal a cause cue ("because", "so we", "had to", …). A shared name that is not a speaker's is the same
    entity (coreference); an agreement cue with a word in common supports; anything else is semantic."""
    a, b = f"{new['summary']} {' '.join(new['keywords'])}", f"{old['summary']} {' '.join(old['keywords'])}"
    people = {s.lower() for s in speakers}
    shared = (set(content_tokens(a)) & set(content_tokens(b))) - {p for s in people for p in content_tokens(s)}
    said, before = _body(new["summary"]), _body(old["summary"])
    low = f" {' '.join(words(said))} "
    changed = has_negation(said) != has_negation(before) or (numbers(said) and numbers(before)
                                                            and numbers(said) != numbers(before))
    if len(shared) >= 2 and changed and any(f" {cue} " in low for cue in CONTRADICTION_CUES):
        return "contradict"
    if len(shared) >= 2 and cue_of(said):
        return "causal"
    names = {k.lower() for k in new["keywords"] if k[:1].isupper()} & {k.lower() for k in old["keywords"]
                                                                      if k[:1].isupper()}
    if names - people:
        return "coreference"
    if shared and any(f" {cue} " in low for cue in SUPPORT_CUES):
        return "support"
    return "semantic"

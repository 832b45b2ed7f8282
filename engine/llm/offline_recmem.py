"""Offline rules for RecMem's roles: episode extraction, episode merge and fact refinement.

Extractive and explainable. An episode is the cluster's units threaded by topic (a unit joins the thread whose
centroid is nearest, a new thread opens below `THREAD_COSINE`, at most three), each thread told in time order
from its units' most informative sentences. A merge appends the new unit's most informative sentence to the
episode when the unit continues it: the confidence is a logistic of the unit's cosine with the episode and the
share of its content words the episode already has. A fact is one sentence of a unit (pronouns anchored to the
speakers, relative dates made absolute, prefixed with the unit's date); it is dropped as known when a known
fact says the same (near-identical embedding or words), and it is a time-anchored update of a known fact when the
calibrated update model (`engine.llm.decision_models.supersedes`, read from the structure of the two statements:
who holds the fact, its value, polarity and mood) finds a changed value, at least `UPDATE_FLOOR` likely.
"""
from __future__ import annotations

import math
import re

import numpy as np

from engine.llm.decision_models import judge_statements, supersedes
from engine.llm.offline_events import STATE_FLOOR, rewrite
from engine.llm.schemas import EPISODE_CHARS, EPISODES, FACT_CHARS, FACTS
from engine.llm.statements import analyse, analyse_ahead, update_texts
from engine.core.text import containment, content_tokens, human_date, jaccard, numbers, sentence_spans

THREAD_COSINE = 0.3         # a unit below this content cosine to every thread's centroid opens a new thread
TOPIC_WORD = 0.02           # what one informative word adds to a sentence's cosine with its topic
# MiniLM content cosines (speaker names and dates left out, which every unit shares) of one topic's sentences
# sit above ~0.45, of unrelated ones below ~0.3: the merge check's midpoint.
MERGE_MID, MERGE_SCALE, MERGE_WORDS = 0.45, 12.0, 4.0
EPISODE_SENTENCES = 6       # "3 to 6 sentences" (App. F, Fig. 8)
MIN_CONTENT = 4             # content words a sentence needs to be a fact or an episode's sentence
KNOWN_COSINE = 0.85         # a candidate this close to a known fact says the same thing ...
KNOWN_WORDS = 0.6           # ... or shares this much of its words (token Jaccard)
UPDATE_FLOOR = STATE_FLOOR  # the update model's probability past which a new fact updates a known one (the paper
                            # leaves the call to its LLM; MemLoom's state succession reads the same model the same way)
PREFERENCE = frozenset("like likes love loves prefer prefers favorite favourite hate hates enjoy enjoys allergic "
                       "always never usually vegan vegetarian budget want wants".split())
RELATION = frozenset("sister brother mother mom mum father dad wife husband son daughter friend friends boss "
                     "colleague partner aunt uncle cousin grandma grandpa neighbor neighbour girlfriend "
                     "boyfriend team coach teacher".split())
CONNECTIVES = ("Initially", "Later", "Afterwards", "Eventually")


def _messages(unit: dict) -> list[dict]:
    return [m for m in unit.get("messages", []) if isinstance(m, dict)]


def unit_text(unit: dict) -> str:
    """What a unit says, without its speakers' names: the content the offline rules compare."""
    return " ".join(str(m.get("text", "")) for m in _messages(unit))


def _sentences(unit: dict) -> list[tuple[str, str, str]]:
    """(speaker, sentence, the other message's text) of every sentence of the unit, in order."""
    msgs = _messages(unit)
    out = []
    for i, m in enumerate(msgs):
        text = str(m.get("text", ""))
        other = " ".join(str(o.get("text", "")) for j, o in enumerate(msgs) if j != i)
        out += [(str(m.get("speaker", "")), text[a:b], other) for a, b in sentence_spans(text)]
    return out


def informativeness(sentence: str) -> float:
    """Content words, plus numbers and names: how much a sentence would tell a later question."""
    words = sentence.split()
    names = sum(1 for w in words[1:] if w[:1].isupper() and w.strip(".,!?;:'\"").isalpha())
    return len(content_tokens(sentence)) + 2.0 * bool(numbers(sentence)) + 1.5 * min(names, 3)


def _candidates(unit: dict) -> list[tuple[int, str, str]]:
    return [(i, spk, s) for i, (spk, s, _) in enumerate(_sentences(unit)) if len(content_tokens(s)) >= 2]


def _vectors(embedder, texts: list[str]) -> dict[str, np.ndarray]:
    """Each distinct text's embedding, from one call to the embedder."""
    distinct = list(dict.fromkeys(texts))
    return dict(zip(distinct, embedder.embed(distinct))) if distinct else {}


def _salient(unit: dict, topic: np.ndarray, vectors: dict[str, np.ndarray]) -> tuple[str, str] | None:
    """The unit's statement that tells most about the topic: its cosine with the topic's centroid plus a little per
    informative word, a question only when the unit has nothing else. (speaker, text)."""
    found = _candidates(unit)
    if not found:
        return None
    scored = [(float(vectors[s] @ topic) + TOPIC_WORD * (informativeness(s) - 3.0 * s.rstrip().endswith("?")),
               i, spk, s) for i, spk, s in found]
    _, _, spk, s = max(scored, key=lambda x: (x[0], -x[1]))
    return spk, s.strip()


def _told(unit: dict, connective: str, topic: np.ndarray, vectors: dict[str, np.ndarray]) -> str:
    found = _salient(unit, topic, vectors)
    if found is None:
        return ""
    spk, s = found
    date = human_date(unit.get("time", ""))
    when = f", on {date}" if date else ""
    return f"{connective}{when}, {spk} said: \u201c{s}\u201d"


# -- episode extraction ------------------------------------------------------------------------------
def extract_episodes(payload: dict, embedder) -> dict:
    units = [u for u in payload.get("units", []) if isinstance(u, dict)]
    if not units:
        return {"episodes": []}
    texts = [unit_text(u) for u in units]
    vectors = _vectors(embedder, texts + [s for u in units for _, _, s in _candidates(u)])
    vecs = np.stack([vectors[t] for t in texts])
    threads = _threads(vecs)
    episodes = []
    for thread in threads:
        members = [units[i] for i in thread]
        topic = _unit(np.mean(vecs[thread], axis=0))
        picked = _spread(members, EPISODE_SENTENCES)
        lines = [_told(u, _connective(n, len(picked)), topic, vectors) for n, u in enumerate(picked)]
        text = " ".join(x for x in lines if x)
        if text:
            episodes.append({"text": _clip(text, EPISODE_CHARS), "units": [str(u["id"]) for u in members]})
    return {"episodes": episodes}


def _threads(vecs: np.ndarray) -> list[list[int]]:
    """Units (in time order) threaded by topic: each joins the thread whose centroid is nearest, or opens one
    below `THREAD_COSINE` while fewer than `EPISODES` are open; a thread of one unit then joins its nearest
    other thread, since an episode tells how a topic evolved over at least two exchanges."""
    threads: list[list[int]] = []
    for i in range(len(vecs)):
        if threads:
            sims = [float(vecs[i] @ _unit(np.mean(vecs[t], axis=0))) for t in threads]
            best = max(range(len(threads)), key=lambda j: (sims[j], -j))
            if sims[best] >= THREAD_COSINE or len(threads) >= EPISODES:
                threads[best].append(i)
                continue
        threads.append([i])
    while len(threads) > 1 and any(len(t) == 1 for t in threads):
        lone = next(t for t in threads if len(t) == 1)
        rest = [t for t in threads if t is not lone]
        sims = [float(vecs[lone[0]] @ _unit(np.mean(vecs[t], axis=0))) for t in rest]
        target = rest[max(range(len(rest)), key=lambda j: (sims[j], -j))]
        target.append(lone[0])
        target.sort()
        threads = rest
    return threads


def _connective(n: int, total: int) -> str:
    """Initially, Later, ..., Eventually: the place of the n-th of `total` sentences in the narrative."""
    if n == 0:
        return CONNECTIVES[0]
    return CONNECTIVES[3] if n == total - 1 else CONNECTIVES[1 + (n + 1) % 2]


def _unit(v: np.ndarray) -> np.ndarray:
    n = float(np.linalg.norm(v))
    return v / n if n else v


def _spread(members: list[dict], limit: int) -> list[dict]:
    """At most `limit` units of a thread, first and last always, the rest the most informative, in time order."""
    if len(members) <= limit:
        return members
    inner = sorted(range(1, len(members) - 1), key=lambda i: (-informativeness(unit_text(members[i])), i))
    keep = sorted({0, len(members) - 1, *inner[: limit - 2]})
    return [members[i] for i in keep]


def _clip(text: str, limit: int) -> str:
    """Whole sentences from the start that fit in `limit` characters (the first one cut at a word if alone)."""
    if len(text) <= limit:
        return text
    cut = text[:limit].rsplit(" ", 1)[0]
    return cut.rstrip(",;: ") + " …"


# -- episode merge -----------------------------------------------------------------------------------
def _quoted(episode: str) -> str:
    """An episode's content: what its sentences quote when it is extractive, else all of it."""
    quotes = re.findall(r"\u201c(.*?)\u201d", episode)
    return " ".join(quotes) if quotes else episode


def merge_episode(payload: dict, embedder) -> dict:
    """Whether the new unit continues the episode: a logistic of their content cosine (names and dates left
    out) and of the share of the unit's content words the episode already has."""
    new, past = payload.get("new", {}), payload.get("past", {})
    said, told = unit_text(new), _quoted(str(past.get("text", "")))
    vectors = _vectors(embedder, [said, told, *(s for _, _, s in _candidates(new))])
    a, b = vectors[said], vectors[told]
    cosine = float(a @ b)
    words = set(content_tokens(said))
    shared = len(words & set(content_tokens(told))) / len(words) if words else 0.0
    confidence = 1.0 / (1.0 + math.exp(-(MERGE_SCALE * (cosine - MERGE_MID) + MERGE_WORDS * (shared - 0.2))))
    if confidence < 0.5:
        return {"should_merge": "no", "merged_memory": "", "confidence": round(confidence, 4)}
    added = _told(new, "Later", b, vectors)
    merged = str(past.get("text", "")).strip()
    if added:
        merged = f"{merged} {added}".strip()
    if len(merged) > EPISODE_CHARS:              # compact: the opening sentence and the latest that fit
        spans = [merged[a:b] for a, b in sentence_spans(merged)]
        head, tail = spans[0], []
        for s in reversed(spans[1:]):
            if len(head) + 3 + sum(len(t) + 1 for t in tail) + len(s) > EPISODE_CHARS:
                break
            tail.insert(0, s)
        merged = _clip(" … ".join([head, " ".join(tail)]) if tail else head, EPISODE_CHARS)
    return {"should_merge": "yes", "merged_memory": merged, "confidence": round(confidence, 4)}


# -- fact refinement ---------------------------------------------------------------------------------
def _fact_type(sentence: str, updates: str) -> str:
    if updates:
        return "TIME_ANCHORED_UPDATE"
    ws = {w.lower().strip(".,!?;:'\"") for w in sentence.split()}
    if ws & RELATION:
        return "ENTITY_RELATION"
    if ws & PREFERENCE:
        return "USER_CONSTRAINT_OR_PREFERENCE"
    return "USER_EVENT"


def refine_facts(payload: dict, embedder) -> dict:
    episode = str((payload.get("episode") or {}).get("text", ""))
    told = set(content_tokens(episode))
    known = [k for k in payload.get("known", []) if isinstance(k, dict)]
    candidates = []
    for unit in payload.get("units", []):
        if not isinstance(unit, dict):
            continue
        date = human_date(unit.get("time", ""))
        for spk, s, other in _sentences(unit):
            s = s.strip()
            tokens = set(content_tokens(s))
            if len(tokens) < MIN_CONTENT or s.endswith("?"):
                continue
            others = [{"speaker": m.get("speaker", ""), "text": m.get("text", "")} for m in _messages(unit)
                      if m.get("speaker") != spk]
            body = rewrite(s, spk, unit.get("time", ""), others)["rewritten"]
            body = body if body.lower().startswith(spk.lower()) else f"{spk}: {body}"
            text = _clip(f"On {date}, {body}" if date else body, FACT_CHARS)
            missing = 1.0 - containment(tokens, told)          # detail recovery: what the episode left out
            helper = 0.5 if spk.strip().lower() == "assistant" else 1.0     # user-centric: advice counts less
            candidates.append({"text": text, "unit": str(unit.get("id")), "tokens": tokens, "sentence": s,
                               "speaker": spk, "score": informativeness(s) * (0.5 + missing) * helper})
    if not candidates:
        return {"facts": [], "dropped": []}
    said = [_said(str(k.get("text", ""))) for k in known]           # (who, what): without the date and the name
    known_texts = [text for _, text in said]
    _read_ahead(candidates, said, embedder)
    vectors = _vectors(embedder, [c["sentence"] for c in candidates] + known_texts)
    vecs = np.stack([vectors[c["sentence"]] for c in candidates])
    known_vecs = np.stack([vectors[t] for t in known_texts]) if known else None
    facts, dropped, seen = {}, [], []
    for i in sorted(range(len(candidates)), key=lambda i: (-candidates[i]["score"], i)):
        c = candidates[i]
        if any(float(vecs[i] @ vecs[j]) >= KNOWN_COSINE for j in seen):
            continue                                                 # restates a fact already kept here
        updates, match = _updated(c, known, said, embedder), None
        if known_vecs is not None and not updates:
            sims = known_vecs @ vecs[i]
            j = max(range(len(known)), key=lambda j: (float(sims[j]), -j))
            words = jaccard(c["tokens"], set(content_tokens(known_texts[j])))
            if float(sims[j]) >= KNOWN_COSINE or words >= KNOWN_WORDS:
                match = (str(known[j].get("id")), max(float(sims[j]), words))
        if match is not None:
            dropped.append({"text": c["text"], "known": match[0], "similarity": round(min(1.0, max(0.0, match[1])), 4)})
            continue
        if len(facts) < FACTS - 1:
            facts[i] = {"text": c["text"], "type": _fact_type(c["sentence"], updates), "units": [c["unit"]],
                        "updates": updates}
            seen.append(i)
    return {"facts": [facts[i] for i in sorted(facts)], "dropped": dropped}


_FACT_DATE = re.compile(r"^On [^,]+, ")


def _said(fact: str) -> tuple[str, str]:
    """Who states a known fact and what, from its text ("On 8 May 2023, Maya: I moved to Leeds." or "On 8 May
    2023, Maya moved to Leeds."): the name it opens with holds it."""
    body = _FACT_DATE.sub("", fact, count=1)
    name, colon, rest = body.partition(": ")
    if colon and 0 < len(name.split()) <= 3:
        return name, rest
    return (body.split() or [""])[0], body


def _read_ahead(candidates: list[dict], said: list[tuple[str, str]], embedder) -> None:
    """Parse every statement, and embed what the update model reads of every (known fact, candidate) pair, in
    batches ahead of `_updated`, which judges the pairs one at a time (`offline_diagnosis.prefetch` does the same
    for All-Mem's diagnosis)."""
    news = [(c["sentence"], c["speaker"]) for c in candidates]
    olds = [(text, speaker) for speaker, text in said]
    analyse_ahead(olds + news)
    wanted = {t for old in olds for new in news for t in update_texts(analyse(*old), analyse(*new))}
    embedder.embed_ahead(sorted(wanted, key=lambda t: (len(t), t)))     # like lengths together: little padding


def _updated(candidate: dict, known: list[dict], said: list[tuple[str, str]], embedder) -> str:
    """The id of the known fact (`said`: who states each, and what) the candidate most probably gives a new value,
    when the update model finds that at least `UPDATE_FLOOR` likely; "" otherwise."""
    best, best_p = "", 0.0
    for k, (speaker, text) in zip(known, said):
        judged = judge_statements(text, speaker, candidate["sentence"], candidate["speaker"], embedder.embed)
        if supersedes(judged, UPDATE_FLOOR) and judged["update"].probability > best_p:
            best, best_p = str(k.get("id")), judged["update"].probability
    return best

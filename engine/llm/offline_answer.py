"""The offline rule for the `answer` role: extractive, and citing what it extracted.

No model writes anything: the answer is made of the passages' own sentences, those that best match
the question, and cites the keys (source turn ids) of the passages they come from. A sentence's match
is the question words it contains, each weighted by how rare it is among the passages' sentences (so a
name every sentence carries counts little), averaged with the sentence's cosine to the question when
the backend has an embedder. Sentences are taken greedily: the best match first, then, while any is
left, the sentence that adds the most weight of question words not yet covered (a second hop of a
multi-hop question), at most `MAX_SENTENCES` and within the role's caps (a sentence longer than the
whole answer cap is cut at a word). With no question word in any sentence and no sentence
semantically near the question, the answer is empty and cites nothing.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from engine.core.text import content_tokens, sentence_spans, strip_speaker
from engine.llm.schemas import ANSWER_CHARS, CITATIONS

MAX_SENTENCES = 3
# MiniLM cosines of unrelated sentence pairs cluster below ~0.15 and of same-topic pairs above ~0.3
# (engine.llm.offline's split rule uses the same midpoint): below it, a sentence sharing no question
# word is no support for an answer.
RELATED_COSINE = 0.2


@dataclass(frozen=True)
class Sentence:
    passage: int
    text: str
    tokens: frozenset[str]


def sentences_of(passages: list[dict]) -> list[Sentence]:
    """Every sentence of every passage, line by line, in passage order. The speaker tag is cut from the
    text but its words count as the sentence's own ("Maya: I stopped eating meat" answers "Does Maya eat
    meat?")."""
    out: list[Sentence] = []
    for p, passage in enumerate(passages):
        for line in str(passage.get("text", "")).splitlines():
            speaker, body = strip_speaker(line.strip())
            said_by = content_tokens(speaker)
            for start, end in sentence_spans(body):
                text = body[start:end]
                out.append(Sentence(p, text, frozenset(content_tokens(text) + said_by)))
    return out


def answer(question: str, passages: list[dict], embedder=None) -> dict:
    """{"answer", "evidence_keys"}: the selected sentences in passage order, and their passages' keys."""
    sentences = sentences_of(passages)
    asked = set(content_tokens(question))
    if not sentences:
        return {"answer": "", "evidence_keys": []}
    df = {t: sum(1 for s in sentences if t in s.tokens) for t in asked}
    weight = {t: math.log(1 + len(sentences) / df[t]) for t in asked if df[t]}
    total = sum(weight.values())
    lexical = [sum(weight.get(t, 0.0) for t in s.tokens & asked) / total if total else 0.0 for s in sentences]
    if embedder is not None:
        vecs = embedder.embed([question] + [s.text for s in sentences])
        cosine = [float(vecs[0] @ v) for v in vecs[1:]]
        score = [(lex + max(cos, 0.0)) / 2 for lex, cos in zip(lexical, cosine)]
    else:
        cosine = [0.0] * len(sentences)
        score = lexical
    best = max(range(len(sentences)), key=lambda i: (score[i], -i))
    if lexical[best] == 0.0 and cosine[best] < RELATED_COSINE:
        return {"answer": "", "evidence_keys": []}
    chosen = [best]
    covered = set(sentences[best].tokens & asked)
    length = len(sentences[best].text)
    while len(chosen) < MAX_SENTENCES:
        gains = {i: sum(weight.get(t, 0.0) for t in (s.tokens & asked) - covered)
                 for i, s in enumerate(sentences) if i not in chosen and length + 1 + len(s.text) <= ANSWER_CHARS}
        nxt = max(gains, key=lambda i: (gains[i], score[i], -i), default=None)
        if nxt is None or gains[nxt] <= 0.0:
            break
        chosen.append(nxt)
        covered |= sentences[nxt].tokens & asked
        length += 1 + len(sentences[nxt].text)
    chosen.sort()
    keys: dict[str, None] = {}
    for i in chosen:
        keys.update(dict.fromkeys(str(k) for k in passages[sentences[i].passage].get("keys", [])))
    text = " ".join(sentences[i].text for i in chosen)
    return {"answer": clip(text, ANSWER_CHARS), "evidence_keys": list(keys)[:CITATIONS]}


def clip(text: str, limit: int) -> str:
    """`text` cut to at most `limit` characters, at the last space before the limit when there is one."""
    if len(text) <= limit:
        return text
    cut = text[:limit]
    return cut.rsplit(" ", 1)[0] if " " in cut else cut

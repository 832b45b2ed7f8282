"""Scoring SCDS diagnostic cases: each question's R@K over its gold evidence and SCR over its causal chain,
per retriever (the engines the Annotate page compares)."""
from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from engine.core.cases import Case
from engine.eval.metrics import recall_at_k, strict_chain_recall

Retriever = Callable[[str], Sequence[str]]


@dataclass(frozen=True)
class QuestionScore:
    """One question against one retriever: R@K over gold evidence and SCR over the causal chain."""

    sample_id: str
    retriever: str
    k: int
    recall: float | None        # None: no gold_evidence_keys annotated
    scr: float | None           # None: no supporting_evidence_keys annotated
    retrieved: tuple[str, ...]  # top-K dataset turn ids
    missed: tuple[str, ...]     # gold or chain turn ids absent from the top-K


def score_case(case: Case, retrievers: dict[str, Retriever], k: int = 5) -> list[QuestionScore]:
    """Score every question that has query text; a retriever maps a query to ranked dataset turn ids."""
    scores = []
    for q in case.questions:
        if not q.query_text.strip():
            continue
        gold = case.resolve(q.gold_evidence_keys)
        chain = case.resolve(q.gold_causal_structure.supporting_evidence_keys)
        wanted = list(dict.fromkeys(gold + chain))
        for name, retrieve in retrievers.items():
            top = list(retrieve(q.query_text))[:k]
            scores.append(QuestionScore(
                sample_id=q.sample_id, retriever=name, k=k,
                recall=recall_at_k(top, gold, k) if gold else None,
                scr=strict_chain_recall(top, chain, k) if chain else None,
                retrieved=tuple(top), missed=tuple(t for t in wanted if t not in top)))
    return scores


def summarize(scores: Iterable[QuestionScore]) -> dict[str, dict[str, float | int | None]]:
    """Mean R@K and SCR per retriever, each over the questions where it is defined (counts alongside)."""
    grouped: dict[str, list[QuestionScore]] = {}
    for s in scores:
        grouped.setdefault(s.retriever, []).append(s)
    out = {}
    for name, group in grouped.items():
        recalls = [s.recall for s in group if s.recall is not None]
        scrs = [s.scr for s in group if s.scr is not None]
        out[name] = {"questions": len(group),
                     "recall": sum(recalls) / len(recalls) if recalls else None, "recall_n": len(recalls),
                     "scr": sum(scrs) / len(scrs) if scrs else None, "scr_n": len(scrs)}
    return out

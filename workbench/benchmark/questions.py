"""The Benchmark page's question browser: which questions each system missed, and one question's gold turns,
results and provenance paths, built from a `BenchResult` (no engine work here)."""
from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from engine.eval.chain_links import LINK_FATE_LABELS, LinkFate
from engine.eval.significance import ablation_references, per_item
from engine.retrieval.result import hop_arrow
from workbench.benchmark.result import BenchResult
from workbench.retrieval_view import FREE_SOURCE, HIT, MISS, QUESTION_SOURCE


def is_miss(record: dict, metric: str) -> bool:
    """A miss: some gold turn is outside the top K of `metric` (its value is below 1)."""
    value = record["metrics"].get(metric)
    return value is not None and value < 1


@dataclass(frozen=True)
class QuestionFilter:
    systems: tuple[str, ...]
    categories: tuple[str, ...]         # category keys; empty: all
    misses_only: bool
    metric: str                         # what decides hit or miss
    changed_only: bool = False          # only questions an ablation scored differently from its full system


def filtered_questions(result: BenchResult, f: QuestionFilter) -> list[dict]:
    changed = changed_by_ablations(result, f.metric) if f.changed_only else set()
    return [q for q in result.questions
            if q["system"] in f.systems and (not f.categories or str(q.get("category")) in f.categories)
            and (not f.misses_only or is_miss(q, f.metric))
            and (not f.changed_only or question_key(q) + (q["system"],) in changed)]


def changed_by_ablations(result: BenchResult, metric: str) -> set[tuple[str, str, str]]:
    """(conversation, question, system) of each ablation's record whose `metric` at the last round differs from
    its engine's full system's on the same question, and of that full system's record: the handful of questions
    that make an ablation's difference, side by side."""
    out: set[tuple[str, str, str]] = set()
    for ablation, full in ablation_references(result.data).items():
        mine, theirs = per_item(result.data, ablation, metric), per_item(result.data, full, metric)
        for key in mine.keys() & theirs.keys():
            if mine[key] is not None and theirs[key] is not None and mine[key] != theirs[key]:
                out |= {key + (ablation,), key + (full,)}
    return out


def questions_frame(result: BenchResult, records: list[dict], metric: str) -> pd.DataFrame:
    """One row per (system, conversation, question): its metrics at its last asking and hit or miss."""
    rows = [{"system": q["system"], "conversation": q["conversation"], "id": q["question_id"],
             "category": result.category_label(q.get("category")), "question": q["question"],
             **{m: q["metrics"].get(m) for m in result.metrics},
             "gold": MISS if is_miss(q, metric) else HIT, "turn": q["turn"]} for q in records]
    columns = ["system", "conversation", "id", "category", "question", *result.metrics, "gold", "turn"]
    return pd.DataFrame(rows, columns=columns)


def question_key(record: dict) -> tuple[str, str]:
    return record["conversation"], record["question_id"]


def record_for(result: BenchResult, key: tuple[str, str], system: str) -> dict | None:
    return next((q for q in result.questions if question_key(q) == key and q["system"] == system), None)


def hop_path(result_row: dict) -> str:
    """`u3 —semantic→ u17`: the hops retrieval took from the result's seed (empty for a direct hit)."""
    path = result_row.get("path") or []
    if not path:
        return "direct"
    hops = [f"{hop_arrow(h.get('type'), bool(h.get('reverse')))} u{h.get('dst')}" for h in path]
    return " ".join([f"u{path[0].get('src')}", *hops])


def results_frame(record: dict) -> pd.DataFrame:
    """The system's ranked results for the question: unit, source ids (gold starred), score, hop, path."""
    gold = set(record["gold"])
    rows = [{"rank": i, "unit": f"u{r.get('unit')}",
             "source ids": ", ".join(f"{s}*" if s in gold else s for s in r.get("source_ids") or []),
             "score": r.get("score"), "hop": r.get("hop"), "path": hop_path(r)}
            for i, r in enumerate(record["results"], 1)]
    return pd.DataFrame(rows, columns=["rank", "unit", "source ids", "score", "hop", "path"])


LINK_COLUMN = "link to the next turn"


def gold_frame(record: dict, k: int) -> pd.DataFrame:
    """Each gold turn: its rank among the ranked source ids, and hit (within the top k) or miss; for a causal
    chain question, how the memory held the link from that turn to the next one of the chain
    (engine.eval.chain_links), with the relation's confidence."""
    ranked = list(record["ranked"])
    links = {link["cause"]: link for link in record.get("chain_links") or []}
    columns = ["gold turn", "source rank", f"in top {k}"] + ([LINK_COLUMN] if links else [])
    rows = []
    for g in record["gold"]:
        rank = ranked.index(g) + 1 if g in ranked else None
        row = {"gold turn": g, "source rank": rank, f"in top {k}": HIT if rank and rank <= k else MISS}
        if links:
            row[LINK_COLUMN] = link_text(links[g]) if g in links else "–"
        rows.append(row)
    return pd.DataFrame(rows, columns=columns)


def link_text(link: dict) -> str:
    """A chain link's fate as the page words it, with the relation's confidence when one was found."""
    text = LINK_FATE_LABELS[LinkFate(link["fate"])]
    return f"{text} ({link['confidence']:.2f})" if link.get("confidence") is not None else text


def retrieval_request(record: dict, questions, k: int) -> dict:
    """The Retrieval page's session keys that ask this record's question: the dataset question when the
    conversation has it (so its gold evidence and the missed-gold lines show), else its text as a free query."""
    known = next((q for q in questions if q.id == record["question_id"]), None)
    request = {"retrieval_k": int(k), "retrieval_query": record["question"]}
    if known is not None:
        request |= {"retrieval_source": QUESTION_SOURCE, "retrieval_question": known}
    else:
        request["retrieval_source"] = FREE_SOURCE
    return request

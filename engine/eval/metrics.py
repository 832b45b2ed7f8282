"""Metrics of a benchmark (DESIGN §7): retrieval against turn-level gold evidence, answers against gold
answers, attribution of answers to evidence, latency and LLM tokens.

Event-boundary metrics (Pk, WindowDiff, ΔB) live in `engine.eval.segmentation`; structure diagnostics
(Cov(H), H0.95, surface ratio) in `engine.eval.diagnostics`.
"""
from __future__ import annotations

import math
import re
import string
import unicodedata
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any, Sequence

from engine.core.oplog import OpKind, OpRecord
from engine.llm.base import LLMCall, estimate_prompt_tokens, estimate_tokens


def recall_at_k(ranked: Sequence[str], gold: Sequence[str], k: int) -> float:
    """Fraction of gold evidence ids found in the top-k ranked ids."""
    gold_set = set(gold)
    if not gold_set:
        raise ValueError("recall needs at least one gold evidence id")
    return len(gold_set & set(ranked[:k])) / len(gold_set)


def ndcg_at_k(ranked: Sequence[str], gold: Sequence[str], k: int) -> float:
    """Binary-relevance nDCG@k."""
    gold_set = set(gold)
    if not gold_set:
        raise ValueError("nDCG needs at least one gold evidence id")
    dcg = sum(1.0 / math.log2(i + 2) for i, sid in enumerate(ranked[:k]) if sid in gold_set)
    ideal = sum(1.0 / math.log2(i + 2) for i in range(min(k, len(gold_set))))
    return dcg / ideal


def strict_chain_recall(ranked: Sequence[str], chain: Sequence[str], k: int) -> float:
    """SCR: 1 iff every turn of the gold causal chain is in the top-k."""
    return float(set(chain) <= set(ranked[:k])) if chain else 0.0


def chain_recall(ranked: Sequence[str], chain: Sequence[str], k: int) -> float:
    """Fraction of the gold chain's turns found in the top-k: the graded companion of SCR.

    ``chain_recall == 1.0`` exactly when ``strict_chain_recall == 1.0``, so the
    gap between the two shows how close a miss was. An empty chain gives 0.0,
    as `strict_chain_recall` does.
    """
    if k < 0:
        raise ValueError(f"k must be non-negative, got {k}")
    chain_set = set(chain)
    if not chain_set:
        return 0.0
    return len(chain_set & set(ranked[:k])) / len(chain_set)


# --- answers --------------------------------------------------------------------------------------

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_ASCII_PUNCTUATION = frozenset(string.punctuation)


def _is_punctuation(ch: str) -> bool:
    return ch in _ASCII_PUNCTUATION or unicodedata.category(ch).startswith("P")


def normalize_answer(text: str) -> str:
    """SQuAD's answer normalisation: lower-case, delete punctuation, delete the articles a/an/the,
    collapse whitespace (in that order, as the SQuAD v1.1 script does).

    Punctuation is ASCII punctuation plus every Unicode punctuation character (category P*), so the
    curly quotes and dashes of chat text go too; like SQuAD, it is deleted, not replaced by a space
    ("don't" -> "dont", "e-mail" -> "email")."""
    if not isinstance(text, str):
        raise TypeError(f"an answer must be a string, got {type(text).__name__} {text!r}; a question without a "
                        "gold answer cannot be scored")
    text = "".join(ch for ch in text.lower() if not _is_punctuation(ch))
    return " ".join(_ARTICLES.sub(" ", text).split())


def answer_tokens(text: str) -> list[str]:
    """The tokens every answer metric compares: the normalised answer split on whitespace."""
    return normalize_answer(text).split()


def exact_match(prediction: str, gold: str) -> float:
    """1.0 iff the normalised prediction equals the normalised gold answer (two empty answers match)."""
    return float(normalize_answer(prediction) == normalize_answer(gold))


def token_f1(prediction: str, gold: str) -> float:
    """SQuAD token F1: harmonic mean of precision and recall of the normalised tokens, counted as
    multisets (a token the prediction repeats counts at most as often as the gold has it).

    When either side normalises to no tokens, F1 is 1.0 if both do and 0.0 otherwise (SQuAD v2's rule
    for empty answers), so an empty prediction never scores against a real gold answer."""
    pred, ref = answer_tokens(prediction), answer_tokens(gold)
    if not pred or not ref:
        return float(pred == ref)
    same = sum((Counter(pred) & Counter(ref)).values())
    if same == 0:
        return 0.0
    precision, recall = same / len(pred), same / len(ref)
    return 2 * precision * recall / (precision + recall)


def bleu1(prediction: str, gold: str) -> float:
    """BLEU-1 against one reference: BP x clipped unigram precision (Papineni et al. 2002 with N = 1,
    w1 = 1, no smoothing), on the normalised tokens.

    Clipped precision = sum over prediction tokens of min(count in prediction, count in gold) / len(prediction);
    brevity penalty BP = 1 if c > r else exp(1 - r / c), with c, r the prediction and gold lengths.
    Empty answers follow `token_f1`: 1.0 if both are empty, else 0.0."""
    pred, ref = answer_tokens(prediction), answer_tokens(gold)
    if not pred or not ref:
        return float(pred == ref)
    clipped = sum((Counter(pred) & Counter(ref)).values())
    c, r = len(pred), len(ref)
    brevity = 1.0 if c > r else math.exp(1 - r / c)
    return brevity * clipped / c


def lcs_length(a: Sequence[str], b: Sequence[str]) -> int:
    """Length of the longest common subsequence of two token sequences (dynamic programming, one row)."""
    if len(b) > len(a):
        a, b = b, a
    row = [0] * (len(b) + 1)
    for x in a:
        diagonal = 0
        for j, y in enumerate(b, start=1):
            above = row[j]
            row[j] = diagonal + 1 if x == y else max(row[j], row[j - 1])
            diagonal = above
    return row[-1]


def rouge_l(prediction: str, gold: str, beta: float = 1.0) -> float:
    """ROUGE-L (Lin 2004): the LCS-based F-measure on the normalised tokens,
    F = (1 + β²) R P / (R + β² P) with R = LCS / len(gold) and P = LCS / len(prediction).

    β = 1 by default (the F1 of P and R, as the `rouge-score` package reports it); Lin's original set
    β large, which makes F nearly R. Empty answers follow `token_f1`: 1.0 if both are empty, else 0.0."""
    if beta <= 0:
        raise ValueError(f"beta must be positive, got {beta}")
    pred, ref = answer_tokens(prediction), answer_tokens(gold)
    if not pred or not ref:
        return float(pred == ref)
    lcs = lcs_length(pred, ref)
    if lcs == 0:
        return 0.0
    recall, precision = lcs / len(ref), lcs / len(pred)
    return (1 + beta ** 2) * recall * precision / (recall + beta ** 2 * precision)


def attribution_auditability(cited_keys: Iterable[str], gold_keys: Iterable[str]) -> float:
    """AA (MemLoom §4): 1.0 iff the evidence keys the answer cites cover every gold supporting-evidence
    key, else 0.0.

    MemLoom defines AA as whether the generated answer stays explicitly attributable to the gold
    supporting evidence (`supporting_evidence_keys`); here that is the set test gold ⊆ cited. Extra
    citations are not penalised (precision is not AA's concern); an answer that cites nothing, such as
    a failed one, scores 0.0. A question without gold keys cannot be audited and raises ValueError, as
    `recall_at_k` does."""
    gold = set(gold_keys)
    if not gold:
        raise ValueError("attribution auditability needs at least one gold evidence key")
    return float(gold <= set(cited_keys))


# --- latency --------------------------------------------------------------------------------------


def percentile(samples: Sequence[float], q: float) -> float:
    """The q-quantile (0 <= q <= 1) by linear interpolation between the closest ranks (numpy's default,
    Hyndman & Fan type 7): position q (n - 1) in the sorted samples."""
    if not samples:
        raise ValueError("a percentile needs at least one sample")
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"q must be in [0, 1], got {q}")
    ordered = sorted(samples)
    position = q * (len(ordered) - 1)
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def latency_summary(samples: Sequence[float]) -> dict[str, float | int | None]:
    """{"p50", "p95", "mean", "n"} of latency samples (milliseconds, rounded to 3 decimals); the
    percentiles interpolate as `percentile` does. No samples give None for every figure and n = 0, so a
    stage that never ran is visible as such rather than as zero time."""
    values = [float(v) for v in samples]
    bad = [v for v in values if not math.isfinite(v) or v < 0]
    if bad:
        raise ValueError(f"latency samples must be finite and non-negative, got {bad[:3]}")
    if not values:
        return {"p50": None, "p95": None, "mean": None, "n": 0}
    return {"p50": round(percentile(values, 0.5), 3), "p95": round(percentile(values, 0.95), 3),
            "mean": round(math.fsum(values) / len(values), 3), "n": len(values)}


# --- LLM calls: tokens and costs ----------------------------------------------------------------------


def llm_calls(source: Any, after_seq: int | None = None, upto_seq: int | None = None) -> list[Mapping[str, Any]]:
    """The call dicts of `source`: a store (its logged `llm_call` records, optionally those with
    after_seq < seq <= upto_seq), or an iterable of log records, call dicts (`LLMCall.to_dict()`) or
    `LLMCall`s (an answering model's calls, which no store holds)."""
    if hasattr(source, "ops") and callable(source.ops):
        records: Iterable[Any] = source.ops(kinds=[OpKind.LLM_CALL], after_seq=after_seq, upto_seq=upto_seq)
    elif after_seq is not None or upto_seq is not None:
        raise ValueError("after_seq/upto_seq select records of a store; filter an iterable before passing it")
    else:
        records = source
    return [call for call in map(_call_dict, records) if call is not None]


def call_tokens(call: Mapping[str, Any]) -> tuple[int, int, bool]:
    """(prompt, completion, reported): the backend's reported usage; a call that got a reply but reports no
    usage at all is counted with `estimate_tokens` over its prompt and reply (reported False), so a run
    costs the same offline and online. A call that got no reply (timeout, network) has no tokens."""
    prompt, completion = int(call.get("prompt_tokens") or 0), int(call.get("completion_tokens") or 0)
    response = call.get("response")
    if response is not None and prompt == 0 and completion == 0:
        return estimate_prompt_tokens(call.get("prompt") or []), estimate_tokens(response), False
    params = call.get("params") or {}
    return prompt, completion, bool(params.get("usage", call.get("backend") not in (None, "offline")))


def llm_cost_tally(source: Any, differ: Mapping[str, list[bool]] | None = None, after_seq: int | None = None,
                   upto_seq: int | None = None) -> dict[str, dict]:
    """Per LLM role, what its calls cost, in a form that pools across tasks (`pool_llm_costs`) before it is
    summarised (`llm_cost_summary`): {role: {"calls", "prompt", "completion", "valid", "errors": {code: n},
    "structured": {mode: n}, "models": {the model that answered: n}, "usage": calls whose tokens the server
    reported, "latency": [ms, ...], "compared", "differ"}}, roles sorted by name.

    `differ` maps a call key to whether another backend decided otherwise on that input, one flag per time
    the prompt was sent (`engine.llm.decisions.differ_by_key`); without it nothing is compared."""
    queues = {k: list(v) for k, v in (differ or {}).items()}
    out: dict[str, dict] = {}
    for call in llm_calls(source, after_seq, upto_seq):
        prompt, completion, reported = call_tokens(call)
        t = out.setdefault(call["role"], {"calls": 0, "prompt": 0, "completion": 0, "valid": 0, "errors": {},
                                          "structured": {}, "models": {}, "usage": 0, "latency": [],
                                          "compared": 0, "differ": 0})
        t["calls"] += 1
        t["prompt"] += prompt
        t["completion"] += completion
        t["usage"] += reported
        code = call.get("error_code")
        if code is None:
            t["valid"] += 1
        else:
            t["errors"][code] = t["errors"].get(code, 0) + 1
        mode = (call.get("params") or {}).get("structured") or call.get("backend") or "?"
        t["structured"][mode] = t["structured"].get(mode, 0) + 1
        model = call.get("model") or "?"
        t["models"][model] = t["models"].get(model, 0) + 1
        t["latency"].append(round(float(call.get("latency_ms") or 0.0), 3))
        flags = queues.get(call.get("key") or "")
        if flags:
            t["compared"] += 1
            t["differ"] += flags.pop(0)
    return dict(sorted(out.items()))


def pool_llm_costs(tallies: Iterable[Mapping[str, dict]]) -> dict[str, dict]:
    """Several `llm_cost_tally` results added up, role by role."""
    out: dict[str, dict] = {}
    for tally in tallies:
        for role, t in tally.items():
            mine = out.setdefault(role, {"calls": 0, "prompt": 0, "completion": 0, "valid": 0, "errors": {},
                                         "structured": {}, "models": {}, "usage": 0, "latency": [], "compared": 0,
                                         "differ": 0})
            for key in ("calls", "prompt", "completion", "valid", "usage", "compared", "differ"):
                mine[key] += t.get(key, 0)
            for key in ("errors", "structured", "models"):
                for name, n in t.get(key, {}).items():
                    mine[key][name] = mine[key].get(name, 0) + n
            mine["latency"] += t.get("latency", [])
    return dict(sorted(out.items()))


def llm_cost_summary(tally: Mapping[str, dict]) -> dict[str, dict]:
    """A tally as reported: per role calls, prompt and completion tokens, latency p50/p95/mean (ms), the
    schema-valid rate (calls whose reply parsed, validated and kept within the caps), the error codes, the
    structured-output modes, the models that answered, and the rate at which another backend decided otherwise (None when nothing
    was compared)."""
    out = {}
    for role, t in tally.items():
        out[role] = {"calls": t["calls"], "prompt": t["prompt"], "completion": t["completion"],
                     "latency_ms": latency_summary(t["latency"]),
                     "valid_rate": round(t["valid"] / t["calls"], 4) if t["calls"] else None,
                     "errors": dict(sorted(t["errors"].items())), "structured": dict(sorted(t["structured"].items())),
                     "models": dict(sorted(t.get("models", {}).items())),
                     "usage_reported": t["usage"], "compared": t["compared"], "differ": t["differ"],
                     "differ_rate": round(t["differ"] / t["compared"], 4) if t["compared"] else None}
    return out


def llm_tokens_by_role(source: Any, after_seq: int | None = None, upto_seq: int | None = None
                       ) -> dict[str, dict[str, int]]:
    """Calls and prompt/completion tokens per LLM role: {role: {"calls", "prompt", "completion"}}, roles
    sorted by name (`source` and the counting as in `llm_calls` and `call_tokens`)."""
    return {role: {"calls": t["calls"], "prompt": t["prompt"], "completion": t["completion"]}
            for role, t in llm_cost_tally(source, after_seq=after_seq, upto_seq=upto_seq).items()}


def llm_totals(by_role: Mapping[str, Mapping[str, int]]) -> dict[str, int]:
    """Calls, prompt, completion and total tokens over every role of an `llm_tokens_by_role` tally."""
    out = {key: sum(int(r.get(key, 0)) for r in by_role.values()) for key in ("calls", "prompt", "completion")}
    out["total"] = out["prompt"] + out["completion"]
    return out


def construction_cost(by_conversation: Mapping[str, Mapping[str, Mapping[str, int]]]) -> dict:
    """What building the memory cost in LLM use (RecMem's headline figure), from each conversation's
    `llm_tokens_by_role` tally of the engine's own logged calls (ingest and offline runs, no answering):
    the mean per conversation overall (`per_conversation`) and per role (`by_role`), and each conversation's
    totals (`by_conversation`)."""
    n = len(by_conversation)
    roles = sorted({role for tally in by_conversation.values() for role in tally})
    by_role = {role: {key: round(sum(int(t.get(role, {}).get(key, 0)) for t in by_conversation.values()) / n, 1)
                      for key in ("calls", "prompt", "completion")} for role in roles} if n else {}
    totals = {conv: llm_totals(tally) for conv, tally in by_conversation.items()}
    mean = {key: round(sum(t[key] for t in totals.values()) / n, 1) if n else 0.0
            for key in ("calls", "prompt", "completion", "total")}
    return {"conversations": n, "per_conversation": mean, "by_role": by_role, "by_conversation": totals}


def _call_dict(record: Any) -> Mapping[str, Any] | None:
    """The call dict of a log record, call dict or LLMCall; None for a log record of another kind."""
    if isinstance(record, LLMCall):
        return record.to_dict()
    if isinstance(record, OpRecord):
        return record.payload if record.kind == OpKind.LLM_CALL else None
    if isinstance(record, Mapping) and "role" in record:
        return record
    raise TypeError(f"not an LLM call record: {type(record).__name__}")

"""Where naive retrieval puts the causal suite's root causes (informational, not a rule)."""
from __future__ import annotations

from collections import Counter

from engine.eval.causal_suite.suite import Suite, jsonl_category, kind_of


def retrieval_report(suite: Suite, k: int = 5, dense: bool = True) -> dict[str, dict[str, float]]:
    """Share of chain questions whose root cause / effect / whole chain, and of state questions whose latest
    state / whole history, is in the top-K of naive BM25 and dense retrieval over `speaker: text` turns."""
    from engine.retrieval.lexical import BM25

    embed = None
    if dense:
        from engine.llm.embedder import Embedder
        embed = Embedder().embed
    hits: dict[str, Counter] = {}
    totals: Counter = Counter()
    for sc in suite.scenarios:
        if sc.case is None:
            continue
        turns = sc.conversation.turns
        bm25 = BM25()
        for i, t in enumerate(turns):
            bm25.add(i, t.raw)
        vecs = embed([t.raw for t in turns]) if embed else None
        for q in sc.case.questions:
            kind = kind_of(q, jsonl_category(sc, q))
            if kind not in ("chain", "state"):
                continue
            totals[kind] += 1
            chain = [sc.turn(key).index for key in q.gold_causal_structure.supporting_evidence_keys]
            scores = bm25.scores(q.query_text)
            rankings = {"bm25": sorted(scores, key=lambda i: (-scores[i], i))[:k]}     # a zero score is no hit
            if vecs is not None:
                sims = vecs @ embed([q.query_text])[0]
                rankings["dense"] = sorted(range(len(turns)), key=lambda i: (-float(sims[i]), i))[:k]
            for name, top in rankings.items():
                c = hits.setdefault(name, Counter())
                if kind == "chain":
                    c["root"] += chain[0] in top
                    c["effect"] += chain[-1] in top
                    c["chain"] += all(i in top for i in chain)
                else:
                    c["latest"] += chain[-1] in top
                    c["history"] += all(i in top for i in chain)
    out = {}
    for name, c in hits.items():
        out[name] = {"chain_questions": totals["chain"], "state_questions": totals["state"]}
        for key, kind in (("root", "chain"), ("effect", "chain"), ("chain", "chain"),
                          ("latest", "state"), ("history", "state")):
            out[name][key] = c[key] / totals[kind] if totals[kind] else 0.0
    return out

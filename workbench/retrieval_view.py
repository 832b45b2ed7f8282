"""Retrieval-page helpers: stage tables, the Stage-2 expansion tree, provenance paths, gold marks.

Pure functions from a RetrievalResult (and the state it ran on) to tables and
text, so the page stays layout and the rendering is testable without a browser.
Conversation text only goes into dataframes and plain text, never raw HTML.
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence

import pandas as pd

from engine.allmem.retrieval import RetrievalResult, RetrievedUnit
from engine.conversation import Turn
from engine.state import MemoryState

HIT, MISS = "✓ hit", "✗ miss"
VISIBLE_MARK, ARCHIVED_MARK = "● visible", "◌ archived"


def _state_mark(state: MemoryState, uid: int) -> str:
    unit = state.units.get(uid)
    return VISIBLE_MARK if unit is None or unit.visible else ARCHIVED_MARK


def unit_ref(state: MemoryState, uid: int) -> str:
    """`u7`, or `u7 [archived]` so archived evidence is named in words, not colour."""
    unit = state.units.get(uid)
    return f"u{uid}" + ("" if unit is None or unit.visible else " [archived]")


def short(text, n: int = 60) -> str:
    """One line of at most n characters, for tables and logs."""
    text = " ".join(str(text).split())
    return text if len(text) <= n else text[: n - 1] + "…"


# -- provenance paths ----------------------------------------------------------------------------
def path_text(state: MemoryState, r: RetrievedUnit) -> str:
    """`anchor u3 —version→ u7 [archived]`: how retrieval reached the unit from its anchor."""
    parts = [f"anchor {unit_ref(state, r.anchor)}"]
    parts += [f"—{h.type}→ {unit_ref(state, h.dst)}" for h in r.path]
    return " ".join(parts)


def paths_block(state: MemoryState, units: Sequence[RetrievedUnit], gold: Sequence[str] = ()) -> str:
    """One line per ranked result: rank, unit, its source ids (gold ones starred), score, path."""
    gold_set = set(gold)
    sources = [", ".join(f"{s}*" if s in gold_set else s for s in r.source_ids) for r in units]
    uw = max((len(f"u{r.id}") for r in units), default=2)
    sw = max((len(s) for s in sources), default=2)
    lines = [f"#{i:<2} {f'u{r.id}':<{uw}}  [{src:<{sw}}]  score {r.score:7.3f}  hop {r.hop}   {path_text(state, r)}"
             for i, (r, src) in enumerate(zip(units, sources), 1)]
    if gold_set:
        lines.append("\n* = gold evidence")
    return "\n".join(lines)


def path_edges(units: Iterable[RetrievedUnit]) -> list[tuple[int, int, str]]:
    """The (src, dst, type) edges on the results' paths, for highlighting on the graph."""
    return list(dict.fromkeys((h.src, h.dst, h.type) for r in units for h in r.path))


def path_units(units: Iterable[RetrievedUnit]) -> list[int]:
    """Every unit on the results' paths, anchors included: the graph's focus."""
    return list(dict.fromkeys(u for r in units for u in (r.anchor, *(h.dst for h in r.path), r.id)))


def reaches_archived(units: Iterable[RetrievedUnit]) -> bool:
    return any(not r.visible for r in units)


# -- stage tables --------------------------------------------------------------------------------
def anchors_frame(state: MemoryState, res: RetrievalResult) -> pd.DataFrame:
    rows = [{"rank": i, "unit": f"u{uid}", "score (fused z)": round(score, 3),
             "source ids": ", ".join(state.units[uid].source_ids), "text": state.units[uid].raw}
            for i, (uid, score) in enumerate(res.anchors, 1)]
    return pd.DataFrame(rows, columns=["rank", "unit", "score (fused z)", "source ids", "text"])


def expansion_frame(state: MemoryState, res: RetrievalResult) -> pd.DataFrame:
    rows = [{"order": i, "hop": e["hop"], "edge type": e["type"], "parent → child": f"u{e['parent']} → u{e['id']}",
             "child state": _state_mark(state, e["id"]), "text": state.units[e["id"]].raw}
            for i, e in enumerate(res.expansion, 1)]
    return pd.DataFrame(rows, columns=["order", "hop", "edge type", "parent → child", "child state", "text"])


def expansion_tree(state: MemoryState, res: RetrievalResult) -> str:
    """Stage 2 as an indented tree under each anchor, in admission order."""
    children: dict[int, list[dict]] = {}
    for e in res.expansion:
        children.setdefault(e["parent"], []).append(e)
    lines: list[str] = []

    def walk(uid: int, prefix: str) -> None:
        kids = children.get(uid, [])
        for i, e in enumerate(kids):
            last = i == len(kids) - 1
            lines.append(f"{prefix}{'└─' if last else '├─'} —{e['type']}→ {unit_ref(state, e['id'])}  "
                         f"(hop {e['hop']})  {short(state.units[e['id']].raw, 50)}")
            walk(e["id"], prefix + ("   " if last else "│  "))

    for rank, (uid, score) in enumerate(res.anchors, 1):
        lines.append(f"anchor #{rank} {unit_ref(state, uid)}  score {score:.3f}  {short(state.units[uid].raw, 50)}")
        walk(uid, "  ")
    return "\n".join(lines)


def ranking_frame(res: RetrievalResult, gold: Sequence[str] = ()) -> pd.DataFrame:
    """Stage 3 over every candidate; the top final_k are the results."""
    gold_set = set(gold)
    top = {r.id for r in res.units}
    rows = []
    for i, r in enumerate(res.candidates, 1):
        row = {"rank": i, "unit": f"u{r.id}", "returned": "yes" if r.id in top else "",
               "score (fused z)": round(r.score, 3), "dense cosine": round(r.dense, 3),
               "lexical BM25": round(r.lexical, 3), "hop": r.hop, "anchor": f"u{r.anchor}",
               "state": VISIBLE_MARK if r.visible else ARCHIVED_MARK, "source ids": ", ".join(r.source_ids)}
        if gold_set:
            row["gold"] = HIT if gold_set & set(r.source_ids) else ""
        row["text"] = r.raw
        rows.append(row)
    return pd.DataFrame(rows)


# -- gold evidence -------------------------------------------------------------------------------
def gold_frame(ranked: Sequence[str], gold: Sequence[str], k: int, seen: set[str] | None = None) -> pd.DataFrame:
    """Hit/miss per gold id in the top k; `seen` tells evidence the cursor has not reached yet."""
    rows = []
    for gid in gold:
        rank = ranked.index(gid) + 1 if gid in ranked else None
        note = "" if seen is None or gid in seen else "not ingested yet"
        rows.append({"gold id": gid, f"in top {k}": HIT if rank and rank <= k else MISS,
                     "rank": rank, "note": note})
    return pd.DataFrame(rows, columns=["gold id", f"in top {k}", "rank", "note"])


def sources_frame(ranked: Sequence[str], gold: Sequence[str]) -> pd.DataFrame:
    gold_set = set(gold)
    rows = [{"rank": i, "source id": sid, **({"gold": HIT if sid in gold_set else ""} if gold_set else {})}
            for i, sid in enumerate(ranked, 1)]
    return pd.DataFrame(rows)


def naive_frame(hits: Sequence[tuple[Turn, float]], gold: Sequence[str]) -> pd.DataFrame:
    gold_set = set(gold)
    rows = [{"rank": i, "turn id": t.id, "cosine": round(score, 3),
             **({"gold": HIT if t.id in gold_set else ""} if gold_set else {}), "text": t.raw}
            for i, (t, score) in enumerate(hits, 1)]
    return pd.DataFrame(rows)

"""Retrieval-page helpers: stage tables, the expansion tree, provenance paths, gold marks.

Pure functions from a RetrievalResult (any engine's: `engine.retrieval.result`) and
the state it ran on to tables and text, so the page stays layout and the
rendering is testable without a browser. Which of them a page shows follows
the engine schema's stages (`StageSpec.shows`: seeds, expansion, ranking,
context). Conversation text only goes into dataframes and plain text, never
raw HTML.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence

import pandas as pd

from engine.core.schema import EngineSchema
from engine.core.state import MemoryState
from engine.eval.chain_links import LINK_FATE_LABELS, ChainLink
from engine.retrieval.explain import Placement, Signals, SourcePlacement
from engine.retrieval.result import RetrievalResult, RetrievedUnit, given, hop_arrow
from workbench.graph.style import kind_field, kind_label, status_tag, visibility_text
from workbench.text import MISSING, confidence_text, md_code, md_escape

HIT, MISS = "✓ hit", "✗ miss"
VISIBLE_MARK, ARCHIVED_MARK = "● visible", "◌ archived"     # All-Mem's statuses as `visibility_text` marks them
STAGE_SHOWS = ("seeds", "expansion", "ranking", "context")
QUESTION_SOURCE, FREE_SOURCE = "Dataset question", "Free query"     # the page's query radio (its key: retrieval_source)


def _state_mark(state: MemoryState, uid: int) -> str:
    unit = state.units.get(uid)
    return MISSING if unit is None else visibility_text(unit)


def _result_mark(r: RetrievedUnit) -> str:
    return f"{'●' if r.visible else '◌'} {r.status or ('visible' if r.visible else 'archived')}"


def unit_ref(state: MemoryState, uid: int) -> str:
    """`u7`, or `u7 [archived]` (the node's status) so evidence off the surface is named in words, not colour."""
    unit = state.units.get(uid)
    return f"u{uid}" + ("" if unit is None else status_tag(unit))


def stage_caption(help_text: str, settings) -> str:
    """A stage's help with the engine's settings filled in ("Exact top-{k}…" -> "Exact top-10…")."""
    try:
        values = dataclasses.asdict(settings) if dataclasses.is_dataclass(settings) else dict(vars(settings))
        return help_text.format(**values)
    except (KeyError, IndexError, ValueError, TypeError, AttributeError):
        return help_text


TIMING_NOTE = ("Timings are this one call's wall time. The first call on a new memory state also builds what later "
               "queries reuse (indexes, relation lists) and encodes a new query; any rerun of the page gives the "
               "steady figure. `python scripts/bench_retrieval.py` measures p50 / p95 over hundreds of questions.")


def stage_timings(schema: EngineSchema, stages: dict[str, float]) -> list[tuple[str, float]]:
    """(label, ms) per schema stage the result timed, then the total."""
    rows = [(f"{s.label} (ms)", stages[f"{s.key}_ms"]) for s in schema.stages if f"{s.key}_ms" in stages]
    if "total_ms" in stages:
        rows.append(("Total (ms)", stages["total_ms"]))
    return rows


def short(text, n: int = 60) -> str:
    """One line of at most n characters, for tables and logs."""
    text = " ".join(str(text).split())
    return text if len(text) <= n else text[: n - 1] + "…"


# -- provenance paths ----------------------------------------------------------------------------
def seed_word(schema: EngineSchema | None) -> str:
    """What the engine calls a retrieval seed, from its seeds stage's label ("Stage 1 · anchors" -> "anchor",
    "Seeds" -> "seed"); "anchor" when it has no seeds stage."""
    stage = next((s for s in schema.stages if s.shows == "seeds"), None) if schema is not None else None
    if stage is None:
        return "anchor"
    word = stage.label.split("·")[-1].strip().split()[-1].lower() if stage.label.strip() else "anchor"
    return word[:-1] if word.endswith("s") and len(word) > 3 else word


def hop_text(state: MemoryState, h) -> str:
    """`—CAUSAL_FOLLOW (reverse)→ u7`."""
    return f"{hop_arrow(h.type, getattr(h, 'reverse', False))} {unit_ref(state, h.dst)}"


def path_text(state: MemoryState, r: RetrievedUnit, seed: str = "anchor", seeds: Iterable[int] | None = None) -> str:
    """`anchor u3 —version→ u7 [archived]`: how retrieval reached the node from its seed.

    With `seeds` (the result's seed ids) a result that no seed reached, such as a record MemLoom takes
    straight from its real-time buffer, reads `direct u137` instead.
    """
    word = "direct" if seeds is not None and r.anchor not in set(seeds) else seed
    line = " ".join([f"{word} {unit_ref(state, r.anchor)}", *(hop_text(state, h) for h in r.path)])
    if getattr(r, "layer", ""):
        line += f" · {r.layer} layer"
    chain = provenance_text(state, r)
    return f"{line} · derives from {chain}" if chain else line


def provenance_text(state: MemoryState, r: RetrievedUnit) -> str:
    """A result's provenance chain level by level: `u12 (episode) → u3, u9 (unit) → u1, u2, u7, u8 (message)`."""
    hops = getattr(r, "provenance", None) or []
    depth = {r.id: 0}
    levels: dict[int, list[int]] = {}
    for h in hops:
        depth[h.dst] = depth.get(h.src, 0) + 1
        levels.setdefault(depth[h.dst], [])
        if h.dst not in levels[depth[h.dst]]:
            levels[depth[h.dst]].append(h.dst)
    parts = []
    for _, ids in sorted(levels.items()):
        kinds = {state.units[i].kind for i in ids if i in state.units}
        kind = kind_label(state.schema, next(iter(kinds))) if len(kinds) == 1 else "nodes"
        shown = ", ".join(unit_ref(state, i) for i in ids[:6]) + (f", … ({len(ids)})" if len(ids) > 6 else "")
        parts.append(f"{shown} ({kind})")
    return " → ".join(parts)


def paths_block(state: MemoryState, units: Sequence[RetrievedUnit], gold: Sequence[str] = (), seed: str = "anchor",
                seeds: Iterable[int] | None = None) -> str:
    """One line per ranked result: rank, unit, its source ids (gold ones starred), score, path."""
    gold_set = set(gold)
    seeds = None if seeds is None else set(seeds)
    sources = [", ".join(f"{s}*" if s in gold_set else s for s in r.source_ids) for r in units]
    uw = max((len(f"u{r.id}") for r in units), default=2)
    sw = max((len(s) for s in sources), default=2)
    lines = [f"#{i:<2} {f'u{r.id}':<{uw}}  [{src:<{sw}}]  score {r.score:7.3f}  hop {r.hop}   "
             f"{path_text(state, r, seed, seeds)}"
             for i, (r, src) in enumerate(zip(units, sources), 1)]
    if gold_set:
        lines.append("\n* = gold evidence")
    return "\n".join(lines)


def path_edges(units: Iterable[RetrievedUnit]) -> list[tuple[int, int, str]]:
    """The stored (src, dst, type) edge of every hop on the results' paths, for highlighting on the graph; a
    reverse hop names the edge it walked backwards (`Hop.edge_key`)."""
    return list(dict.fromkeys(_edge_key(h) for r in units for h in [*r.path, *getattr(r, "provenance", [])]))


def _edge_key(h) -> tuple[int, int, str]:
    key = getattr(h, "edge_key", None)
    return tuple(key) if key is not None else (h.src, h.dst, h.type)


def path_edge_labels(r: RetrievedUnit) -> dict[tuple[int, int, str], str]:
    """Labels for one result's path on the graph: "hop 1", "hop 2 (reverse)", keyed by stored edge."""
    return {_edge_key(h): f"hop {i}" + (" (reverse)" if getattr(h, "reverse", False) else "")
            for i, h in enumerate(r.path, 1)}


def hops_frame(state: MemoryState, r: RetrievedUnit) -> pd.DataFrame:
    """One result's path hop by hop: the stored edge each hop walked, its direction, confidence and cited records
    (a hop over a link the engine finds at query time, MemLoom's logic links, walked no stored edge)."""
    query_time = state.schema.query_time_types
    rows = []
    for i, h in enumerate(r.path, 1):
        src, dst, etype = _edge_key(h)
        edge = state.edges.get((src, dst, etype))
        to = state.units.get(h.dst)
        rows.append({"hop": i, "walk": f"u{h.src} → {unit_ref(state, h.dst)}", "edge type": etype,
                     "stored edge": f"u{src} —{etype}→ u{dst}" if edge is not None or etype not in query_time
                     else "none: found at query time",
                     "direction": ("back to an earlier cause" if etype in query_time else
                                   "reverse (against the stored edge)") if getattr(h, "reverse", False) else "forward",
                     "confidence": None if edge is None else confidence_text(edge.confidence),
                     "cites": ", ".join(f"u{c}" for c in (getattr(edge, "evidence", None) or [])),
                     "reached": "" if to is None else short(to.raw or to.summary, 80)})
    return pd.DataFrame(rows, columns=["hop", "walk", "edge type", "stored edge", "direction", "confidence", "cites",
                                       "reached"])


def path_units(units: Iterable[RetrievedUnit]) -> list[int]:
    """Every unit on the results' paths and provenance chains, anchors included: the graph's focus."""
    return list(dict.fromkeys(u for r in units for u in (r.anchor, *(h.dst for h in r.path), r.id,
                                                           *(h.dst for h in getattr(r, "provenance", [])))))


def reaches_archived(units: Iterable[RetrievedUnit]) -> bool:
    return any(not r.visible for r in units)


# -- stage tables --------------------------------------------------------------------------------
def node_text(state: MemoryState, uid: int) -> str:
    """A node's raw evidence, or its summary for a group node without raw text of its own (an event)."""
    unit = state.units.get(uid)
    return "" if unit is None else (unit.raw or unit.summary)


def anchors_frame(state: MemoryState, res: RetrievalResult) -> pd.DataFrame:
    """The seeds (All-Mem's Stage-1 anchors, MemLoom's seed events), ranked, with their score, kind, state,
    how many records a group node holds, and text."""
    rows = [{"rank": i, "unit": unit_ref(state, uid), "score": round(score, 3),
             "kind": kind_field(state.schema, state.units[uid].kind), "state": visibility_text(state.units[uid]),
             "records": len(state.units[uid].members) or None,
             "source ids": ", ".join(state.units[uid].source_ids), "text": node_text(state, uid)}
            for i, (uid, score) in enumerate(res.anchors, 1) if uid in state.units]
    return pd.DataFrame(rows, columns=["rank", "unit", "score", "kind", "state", "records", "source ids", "text"])


def expansion_frame(state: MemoryState, res: RetrievalResult) -> pd.DataFrame:
    rows = [{"order": i, "hop": e["hop"], "edge type": e["type"],
             "direction": "reverse" if e.get("reverse") else "forward",
             "parent → child": f"u{e['parent']} → u{e['id']}",
             "child state": _state_mark(state, e["id"]), "text": node_text(state, e["id"])}
            for i, e in enumerate(res.expansion, 1)]
    return pd.DataFrame(rows, columns=["order", "hop", "edge type", "direction", "parent → child", "child state",
                                       "text"])


def expansion_tree(state: MemoryState, res: RetrievalResult, seed: str = "anchor") -> str:
    """Stage 2 as an indented tree under each anchor, in admission order."""
    children: dict[int, list[dict]] = {}
    for e in res.expansion:
        children.setdefault(e["parent"], []).append(e)
    lines: list[str] = []

    def walk(uid: int, prefix: str) -> None:
        kids = children.get(uid, [])
        for i, e in enumerate(kids):
            last = i == len(kids) - 1
            lines.append(f"{prefix}{'└─' if last else '├─'} {hop_arrow(e['type'], bool(e.get('reverse')))} "
                         f"{unit_ref(state, e['id'])}  "
                         f"(hop {e['hop']})  {short(node_text(state, e['id']), 50)}")
            walk(e["id"], prefix + ("   " if last else "│  "))

    for rank, (uid, score) in enumerate(res.anchors, 1):
        lines.append(f"{seed} #{rank} {unit_ref(state, uid)}  score {score:.3f}  {short(node_text(state, uid), 50)}")
        walk(uid, "  ")
    return "\n".join(lines)


def source_text(r: RetrievedUnit) -> str:
    """Its source ids; a turn it gives less than its score (a merged turn's own evidence) says what it gives."""
    return ", ".join(f"{s} (≤ {given(r, s):.3f})" if given(r, s) < r.score else s for s in r.source_ids)


def ranking_frame(res: RetrievalResult, gold: Sequence[str] = ()) -> pd.DataFrame:
    """The final ranking over every candidate; the top final_k are the results."""
    gold_set = set(gold)
    top = {r.id for r in res.units}
    rows = []
    for i, r in enumerate(res.candidates, 1):
        row = {"rank": i, "unit": f"u{r.id}", "returned": "yes" if r.id in top else "",
               "score": round(r.score, 3), "dense cosine": round(r.dense, 3),
               "lexical BM25": round(r.lexical, 3), "hop": r.hop, "anchor": f"u{r.anchor}",
               "state": _result_mark(r), "source ids": source_text(r)}
        row.update({name: round(value, 3) for name, value in r.factors.items()})
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


def chain_links_frame(links: Sequence[ChainLink]) -> pd.DataFrame:
    """Each link of a causal chain question's gold chain (cause turn -> effect turn) as the memory holds it now
    (engine.eval.chain_links): the relation a why-question can walk, with its confidence, or why there is none."""
    rows = [{"cause": link.cause, "effect": link.effect, "link": LINK_FATE_LABELS[link.fate],
             "relation": f"{link.edge[2]} {link.confidence:.2f}" if link.edge and link.confidence is not None
             else link.edge[2] if link.edge else "–"} for link in links]
    return pd.DataFrame(rows, columns=["cause", "effect", "link", "relation"])


def sources_frame(res: RetrievalResult, gold: Sequence[str] = (), k: int | None = None,
                  state: MemoryState | None = None) -> pd.DataFrame:
    """The ranked source ids (what R@k scores), each with the text of the best-ranked node carrying it; the
    source id and that node follow as its labels.

    The same table for every engine, so two engines side by side compare like with like: text first, ids
    second. A group node without raw text of its own shows its summary (from `state`, the engine's state).
    """
    gold_set = set(gold)
    rows = []
    for i, (sid, r) in enumerate(res.source_carriers(k), 1):
        text = "" if r is None else (r.raw or (node_text(state, r.id) if state is not None else ""))
        rows.append({"rank": i, "text": text, "source id": sid,
                     **({"gold": HIT if sid in gold_set else ""} if gold_set else {}),
                     "node": "" if r is None else f"u{r.id}" + ("" if r.visible else f" [{r.status or 'off'}]"),
                     "score": None if r is None else round(r.score, 3)})
    columns = ["rank", "text", "source id", *(["gold"] if gold_set else []), "node", "score"]
    return pd.DataFrame(rows, columns=columns)



# -- why this rank -------------------------------------------------------------------------------
def stage_label(schema: EngineSchema | None, key: str) -> str:
    """A stage key as the schema labels it ("stage2" -> "Stage 2 · expansion")."""
    spec = next((s for s in schema.stages if s.key == key), None) if schema is not None else None
    return spec.label if spec is not None else key


def fused_text(sig: Signals) -> str:
    """How the signals add up to the value ranked by, in the fusion's own terms."""
    if sig.weight:
        held = f" of held u{sig.lexical_of}" if sig.lexical_of is not None else ""
        text = (f"z(cos {sig.dense:.3f}) {sig.z_dense:+.2f} + {sig.weight:g} × z(BM25{held} {sig.lexical:.2f}) "
                f"{sig.z_lexical:+.2f}")
    else:
        text = f"cos {sig.dense:.3f}"
    if sig.penalty:
        text += f" − penalty {sig.penalty:.2f}"
    if sig.weight or sig.penalty:
        text += f" = {sig.relevance:.3f}"
    if sig.inherited is not None:
        text += f"; the relation chain passed {sig.inherited:.3f}"
    if sig.factors:
        text += "; score = " + " · ".join(f"{name} {value:.3g}" for name, value in sig.factors) + f" = {sig.score:.3f}"
    return text


def reference_text(placements: dict[int, Placement]) -> str:
    """What one query's z-values are relative to, as the first result that says it gives it (one query, one
    population), or "" when the engine does not say."""
    sig = next((p.signals for p in placements.values() if p.signals is not None and p.signals.reference), None)
    if sig is None:
        return ""
    ref = sig.reference
    over = f"{ref.nodes} nodes" + (f", {ref.off_surface} of them off the surface" if ref.off_surface else "")
    text = f"z is taken over this query's scores of {over}: cosine mean {ref.dense_mean:.3f}, sd {ref.dense_sd:.3f}"
    if sig.weight:
        text += f"; BM25 mean {ref.lexical_mean:.2f}, sd {ref.lexical_sd:.2f}"
    return text + "."


def why_frame(res: RetrievalResult, placements: dict[int, Placement], schema: EngineSchema | None) -> pd.DataFrame:
    """Why each returned result ranked where it did: both signals, their z-values and weight, the penalty, the
    fused value, a score a relation chain passed down, and how it was admitted (stage, hop, edge type)."""
    rows = []
    for i, r in enumerate(res.units, 1):
        sig = placements[r.id].signals
        rows.append({"rank": i, "unit": f"u{r.id}", "score": round(r.score, 3),
                     "dense cosine": round(sig.dense, 3), "z dense": round(sig.z_dense, 3),
                     "BM25": round(sig.lexical, 3), "z BM25": round(sig.z_lexical, 3), "weight": sig.weight,
                     "penalty": round(sig.penalty, 3), "fused": round(sig.relevance, 3),
                     "inherited": None if sig.inherited is None else round(sig.inherited, 3),
                     "admitted by": stage_label(schema, sig.admitted), "hop": sig.hop,
                     "edge": sig.edge + (" (reverse)" if sig.reverse else ""), "how": fused_text(sig),
                     **{name: round(value, 3) for name, value in sig.factors}})
    factors = list(dict.fromkeys(name for r in res.units for name, _ in placements[r.id].signals.factors))
    return pd.DataFrame(rows, columns=["rank", "unit", "score", *factors, "dense cosine", "BM25", "fused", "penalty",
                                       "hop", "edge", "admitted by", "z dense", "z BM25", "weight", "inherited",
                                       "how"])


def missed_gold_lines(found: Sequence[SourcePlacement], k: int, schema: EngineSchema | None,
                      seen: set[str] | None = None) -> list[str]:
    """One markdown line per gold turn outside the top k: where its best unit fell (rank and scores), or the
    stage that dropped it and why. Dataset ids and engine text go through md_code / md_escape."""
    lines = []
    for sp in found:
        if sp.source_rank is not None and sp.source_rank <= k:
            continue
        head = md_code(sp.source_id) + " "
        if sp.best is None:
            lines.append(head + md_escape("not ingested yet at this turn" if seen is not None and sp.source_id
                                          not in seen else "no unit holds it"))
            continue
        p, sig = sp.best, sp.best.signals
        where = md_escape(f"source rank {sp.source_rank} > k {k}" if sp.source_rank else f"not in the top {k}")
        scores = "" if sig is None else md_escape(f" (score {sig.score:.3f}: {fused_text(sig)})")
        if p.candidate:
            state = md_escape("one of the returned units (recall counts source ids)" if p.returned else p.reason)
            lines.append(head + where + md_escape(f" · best unit u{p.uid} at candidate rank {p.rank}") + scores
                         + " · " + state)
        else:
            lines.append(head + md_escape(f"never a candidate — dropped at {stage_label(schema, p.stage)}: "
                                          f"{p.reason}") + md_escape(f" · its unit u{p.uid}" if sp.units == 1 else
                                                                f" · its most relevant unit u{p.uid} of {sp.units}")
                         + scores)
    return lines

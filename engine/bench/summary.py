"""The Markdown summary of a benchmark result: what `memwb bench` prints and writes as summary.md.

Tables read only the result dict (docs/BENCHMARK_FORMAT.md): overall and cohort figures at the last round,
the headline metrics (those at the first K) per round and per category, latency p50 per stage, and for
QMSum the boundary figures.
"""
from __future__ import annotations

from engine.eval.chain_links import LinkFate
from engine.eval.misses import Fate
from engine.eval.reproduction import interval_text
from engine.eval.significance import LEVEL, ablation_references, compare_systems


def _fmt(value) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.3f}"
    return str(value)


def _table(header: list[str], rows: list[list]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(_fmt(v) for v in row) + " |" for row in rows]
    return out


def headline(result: dict) -> list[str]:
    """The metrics at the first K (R@5 and N@5; SCR@5, chain recall@5 and R@5 for the causal suite), and
    token F1 and AA when the run answered."""
    if result["dataset"] == "qmsum":
        return list(result["metrics"])
    k = result["ks"][0]
    return [m for m in result["metrics"] if m.endswith(f"@{k}") or m in ("f1", "aa")]


def systems(result: dict) -> list[str]:
    return list(result["systems"])


def overall_table(result: dict) -> list[str]:
    metrics = result["metrics"]
    header = ["system", *metrics]
    if result["dataset"] not in ("qmsum", "decisions"):
        header += [f"cohort {m}" for m in headline(result)] + ["cohort n"]
    rows = []
    for label in systems(result):
        s = result["summary"].get(label, {})
        row = [label, *(s.get("overall", {}).get(m) for m in metrics)]
        if result["dataset"] not in ("qmsum", "decisions"):
            cohort = s.get("cohort", {})
            row += [cohort.get(m) for m in headline(result)] + [cohort.get("n")]
        rows.append(row)
    return _table(header, rows)


def rounds_tables(result: dict) -> list[str]:
    out: list[str] = []
    rounds = range(1, result["rounds"] + 1)
    for metric in headline(result):
        out += [f"**{metric} per round** (questions asked at each round in brackets)", ""]
        rows = []
        for label in systems(result):
            by_round = {d["round"]: d for d in result["rounds_detail"] if d["system"] == label}
            rows.append([label, *(f"{_fmt(by_round[r]['overall'].get(metric))} ({by_round[r]['questions']})"
                                  if r in by_round else "–" for r in rounds)])
        out += _table(["system", *(f"round {r}" for r in rounds)], rows) + [""]
    return out


def category_table(result: dict) -> list[str]:
    metrics = headline(result)
    cats = result["categories"]
    header = ["system", *(f"{label} ({key})" for key, label in cats.items())]
    rows = []
    for label in systems(result):
        by_cat = result["summary"].get(label, {}).get("by_category", {})
        rows.append([label, *(" / ".join(_fmt(by_cat[c].get(m)) for m in metrics) + f" (n={by_cat[c]['n']})"
                              if c in by_cat else "–" for c in cats)])
    return [f"**{' / '.join(metrics)} per category** (last round)", "", *_table(header, rows), ""]


def readings_table(result: dict) -> list[str]:
    """Per system and category, how many questions an engine that routes by the query read each way (the
    reading's words before its cue): a causal set whose why-questions were taken for lookups shows here."""
    counts: dict[str, dict[str, dict[str, int]]] = {}
    for q in result["questions"]:
        if q.get("reading"):
            kind = q["reading"].split(" (")[0]
            cell = counts.setdefault(q["system"], {}).setdefault(q["category"], {})
            cell[kind] = cell.get(kind, 0) + 1
    if not counts:
        return []
    cats = result["categories"]
    rows = [[label, *(", ".join(f"{kind} {n}" for kind, n in sorted(counts[label].get(c, {}).items())) or "–"
                      for c in cats)] for label in systems(result) if label in counts]
    header = ["system", *(f"{label} ({key})" for key, label in cats.items())]
    return ["**How each question was read** (engines that route by the query; its last asking)", "",
            *_table(header, rows), ""]


COV_HOPS = ("1", "2", "4")         # the hop budgets whose Cov(H) the structure table shows


def structure_table(result: dict) -> list[str]:
    """Per system with a memory: the visible ratio (searchable units per ingested turn) and Cov(H), the share
    of off-surface units within H hops of the surface, beside the headline metrics (All-Mem Tables 10-11)."""
    rows = []
    for label in systems(result):
        s = result["summary"].get(label, {})
        st = s.get("structure") or {}
        if not st:
            continue
        rows.append([label, *(s.get("overall", {}).get(m) for m in headline(result)), st.get("visible_ratio"),
                     *(st.get("cov", {}).get(h) for h in COV_HOPS), st.get("h95")])
    if not rows:
        return []
    return ["**structure (last state)**: visible ratio = searchable units per ingested turn; Cov(H) = share of "
            "off-surface units within H hops of the surface", "",
            *_table(["system", *headline(result), "visible ratio", *(f"Cov({h})" for h in COV_HOPS), "H0.95"], rows),
            ""]


def paired_table(result: dict) -> list[str]:
    """Each ablation against its engine's full system, question by question at the last round
    (engine.eval.significance): the difference per headline metric with its paired-bootstrap interval, and how
    many questions the ablation scored higher and lower on the first of them."""
    pairs = ablation_references(result)
    metrics = headline(result)
    rows = []
    for label, reference in pairs.items():
        found = [compare_systems(result, label, reference, m) for m in metrics]
        if found[0] is None:
            continue
        first = found[0]
        rows.append([label, reference, *(x for p in found for x in (
            None if p is None else f"{p.delta:+.4f}", interval_text(None if p is None else [p.low, p.high]))),
            f"{first.gained} / {first.lost} / {first.tied}", first.verdict(reference)])
    if not rows:
        return []
    return [f"**ablations against the full system** (paired over the same questions, last round; {LEVEL:.0%} "
            "paired-bootstrap interval of the difference)", "",
            *_table(["system", "vs", *(h for m in metrics for h in (f"Δ {m}", "interval")),
                     f"questions higher / lower / same ({metrics[0]})", f"verdict ({metrics[0]})"], rows), ""]


def misses_table(result: dict) -> list[str]:
    """Per system: where the gold turns went at the last round (engine.eval.misses), and what held back the
    ones that were on the surface or candidates."""
    rows = []
    for label in systems(result):
        m = result["summary"].get(label, {}).get("misses")
        if not m:
            continue
        fates = m.get("fates", {})
        rows.append([label, *(fates.get(str(f), 0) for f in Fate),
                     ", ".join(f"{k} {v}" for k, v in m.get("signals", {}).items()) or "–"])
    if not rows:
        return []
    k = next(result["summary"][r[0]]["misses"]["k"] for r in rows)
    return [f"**where the gold turns went** (top {k}, last round)", "",
            *_table(["system", *(str(f) for f in Fate), "held back by"], rows), ""]


def chain_links_table(result: dict) -> list[str]:
    """Per system: how its memory held each link of the causal chains asked at the last round
    (engine.eval.chain_links), and how many chains it held whole."""
    rows = []
    for label in systems(result):
        c = result["summary"].get(label, {}).get("chain_links")
        if c:
            rows.append([label, *(c["fates"].get(str(f), 0) for f in LinkFate),
                         f"{c['held_whole']} of {c['questions']}", c.get("held_whole_ranked_whole", "–")])
    if not rows:
        return []
    k = next(result["summary"][r[0]]["chain_links"].get("k") for r in rows)
    return ["**how each link of the causal chains is held** (cause turn -> effect turn, last round)", "",
            *_table(["system", *(str(f) for f in LinkFate), "chains held whole",
                     f"of them whole in the top {k}"], rows), ""]


def latency_table(result: dict) -> list[str]:
    columns: list[tuple[str, str]] = []
    for label in systems(result):
        lat = result["summary"].get(label, {}).get("latency_ms", {})
        for side in ("insert", "query"):
            for stage in lat.get(side, {}):
                if (side, stage) not in columns:
                    columns.append((side, stage))
    if not columns:
        return []
    rows = []
    for label in systems(result):
        lat = result["summary"].get(label, {}).get("latency_ms", {})
        rows.append([label, *(lat.get(side, {}).get(stage, {}).get("p50") for side, stage in columns)])
    return ["**latency p50 (ms) per stage**", "",
            *_table(["system", *(f"{side} {stage}" for side, stage in columns)], rows), ""]


def construction_table(result: dict) -> list[str]:
    """Per system, the mean LLM calls and prompt / output tokens of building one conversation's memory, and the
    calls per role (RecMem's headline: construction cost, App. Tables 1-2)."""
    rows = []
    for label in systems(result):
        cost = result["summary"].get(label, {}).get("construction")
        if cost is None:
            continue
        mean = cost["per_conversation"]
        roles = ", ".join(f"{role} {r['calls']:g}" for role, r in cost["by_role"].items()) or "none"
        rows.append([label, cost["conversations"], *(f"{mean[k]:,.1f}" for k in ("calls", "prompt", "completion",
                                                                                  "total")), roles])
    if not rows:
        return []
    return ["**construction cost per conversation** (the engine's own LLM calls while building memory, mean over "
            "conversations; tokens as the backend reports them, else estimated)", "",
            *_table(["system", "conversations", "LLM calls", "prompt tokens", "output tokens", "total tokens",
                     "calls per role"], rows), ""]


def boundaries_table(result: dict) -> list[str]:
    """QMSum: each meeting's figures per system."""
    rows = [[b["meeting"], b["system"], b["turns"], b["gold_boundaries"], b["boundaries"], b["pk"],
             b["window_diff"], b["delta_b"], b["delta_b_rate"]] for b in result["boundaries"] or []]
    return ["**boundaries per meeting**", "",
            *_table(["meeting", "system", "turns", "gold", "boundaries", "Pk", "WindowDiff", "ΔB", "ΔB rate"], rows),
            ""]


def decisions_tables(result: dict) -> list[str]:
    """A decision set: per system, each decision kind's precision, recall and F1 with what became of its gold
    pairs (the fates: docs/DECISIONS.md), and how many negative pairs got a decision."""
    from engine.eval.decisions import FATES

    lines = []
    for label, d in (result.get("decisions") or {}).items():
        table = d["table"]
        rows = [[kind, t["gold"], t["correct"], t["false"], t["precision"], t["recall"], t["f1"],
                 ", ".join(f"{f} {n}" for f, n in t["fates"].items() if n)]
                for kind, t in table.items() if "f1" in t]
        negatives = [[kind, t["gold"], t["decided"], t["false_rate"]] for kind, t in table.items() if "false_rate" in t]
        lines += [f"**{label}: decisions per kind** (fates of the gold pairs: {', '.join(FATES)}; "
                  f"{d['unlabelled']} applied decision(s) on unlabelled pairs, not scored)", "",
                  *_table(["kind", "gold", "correct", "false", "precision", "recall", "F1", "fates"], rows), ""]
        if negatives:
            lines += [f"*{label}: negatives given a decision*", "",
                      *_table(["negative kind", "pairs", "given a decision", "share"], negatives), ""]
    return lines


def errors(result: dict) -> list[str]:
    failed = [t for t in result["tasks"] if t["error"]]
    return [f"- {t['conversation']} · {t['system']}: {t['error']['type']}: {t['error']['message']}"
            for t in failed]


def costs_tables(result: dict) -> list[str]:
    """Per system, what each LLM role cost (calls, usage tokens, latency, schema-valid rate, differs from
    offline): shown when any role was answered by a backend other than the offline rules."""
    from engine.eval.llm_costs import MODEL_NOTE, cost_table

    online = {label: s.get("llm_costs") or {} for label, s in result["summary"].items()
              if any(set(c["structured"]) - {"offline"} for c in (s.get("llm_costs") or {}).values())}
    if not online:
        return []
    lines = [f"**LLM costs per role** (LLM {result.get('llm', 'offline')}; with the bundled SmolLM2-135M: "
             f"{MODEL_NOTE})", ""]
    for label, costs in online.items():
        lines += [cost_table(costs, f"*{label}*\n"), ""]
    return lines


def gold_overlay_table(result: dict) -> list[str]:
    """With --gold-overlay: each system's last-round figures on the original gold and on the corrected gold."""
    overlay = result.get("gold_overlay")
    if not overlay:
        return []
    metrics = [m for m in result["metrics"] if any(m in row["original"] for row in overlay["systems"].values())]
    lines = [f"**original vs corrected gold** ({overlay['corrections']} correction(s) in {overlay['path']}, "
             f"{overlay['version']}; the last round, the same questions)", "",
             "| system | questions | changed | " + " | ".join(f"{m} original | {m} corrected" for m in metrics) + " |",
             "|---|---|---|" + "---|---|" * len(metrics)]
    for label, row in overlay["systems"].items():
        cells = [f"{row['original'].get(m, float('nan')):.3f} | {row['corrected'].get(m, float('nan')):.3f}"
                 for m in metrics]
        lines.append(f"| {label} | {row['n']} | {row['changed']} | " + " | ".join(cells) + " |")
    return lines + [""]


def tables(result: dict) -> str:
    """Per-round and per-category tables (what `memwb bench` prints at the end)."""
    lines = ["**overall (last round)**", "", *overall_table(result), ""]
    if result["dataset"] == "decisions":
        lines += decisions_tables(result)
    elif result["dataset"] != "qmsum":
        lines += (rounds_tables(result) + category_table(result) + readings_table(result) + structure_table(result)
                  + paired_table(result) + misses_table(result) + chain_links_table(result))
    else:
        lines += boundaries_table(result)
    lines += gold_overlay_table(result)
    lines += costs_tables(result)
    lines += construction_table(result)
    failed = errors(result)
    if failed:
        lines += ["**failed tasks**", "", *failed, ""]
    return "\n".join(lines)


def summary_markdown(result: dict) -> str:
    tasks = result["tasks"]
    seconds = sum(t["seconds"] for t in tasks)
    own = {label: s["schedule"] for label, s in result["systems"].items()
           if s.get("schedule") and s["schedule"] != result["schedule"]}          # systems on their engine's own
    schedule = result["schedule"] + (f" ({', '.join(f'{k}: {v}' for k, v in own.items())})" if own else "")
    head = [f"# Benchmark: {result['dataset']} ({result['protocol']})", "",
            f"`{result['command']}`", "",
            f"{len(result['conversations'])} conversation(s), {len(result['systems'])} system(s), "
            f"{len(tasks)} task(s) in {seconds:.0f} s of task time; schedule {schedule}, "
            f"embedder {result['embedder']}{f' ({enc})' if (enc := result.get('encoder')) else ''}, rounds {result['rounds']}, K {', '.join(map(str, result['ks']))}.", ""]
    return "\n".join(head) + tables(result) + "\n" + "\n".join(latency_table(result)) + "\n"

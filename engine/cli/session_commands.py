"""`memwb` commands on one session database: replay, retrieve, export, consolidate, runs, diagnostics, schema."""
from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING

from engine.core.proposal import ProposalCounts
from engine.engines import engine_schema, settings_class
from engine.runtime.engine import open_run_message
from engine.runtime.errors import RunError

if TYPE_CHECKING:
    from engine.core.state import MemoryState
    from engine.retrieval.result import RetrievalResult


def default_schedule(engine: str) -> str:
    """The schedule a replay uses unless told: the engine's own, else All-Mem's every 3 sessions."""
    return engine_schema(engine).schedule or "every-3-sessions"


def cmd_replay(args) -> int:
    from engine.core.schema import parse_settings
    from engine.loaders import load_conversation
    from engine.runtime.replay import Schedule, replay
    from engine.session import open_session

    from engine.bench.talk import FIT_META, talk_fit, with_fit

    settings = parse_settings(settings_class(args.engine), args.set, args.engine)
    if args.ablation or "ablations" in settings:
        settings["ablations"] = sorted(set(args.ablation) | set(settings.get("ablations", [])))
    conversation = load_conversation(args.input, args.conversation)
    fit = talk_fit(args.engine, args.input)          # a meeting replays as `memwb bench --dataset qmsum` runs it
    consolidate = args.consolidate or (fit.schedule if fit else default_schedule(args.engine))
    schedule = Schedule.parse(consolidate)
    settings = with_fit(fit, settings)
    engine = open_session(args.db, engine=args.engine, llm=args.llm, settings=settings or None, records=args.records,
                          conversation=conversation.id, source=str(Path(args.input).resolve()),
                          schedule=consolidate, **({FIT_META: fit.talk} if fit else {}))

    tty = sys.stderr.isatty()
    if not args.quiet:
        print(f"replay: encoder: {engine.embedder.encoder_description()}", file=sys.stderr, flush=True)

    def progress(done: int, total: int) -> None:
        """Every 50 turns: redrawn in place on a terminal, one line each into a file or pipe."""
        if not args.quiet and (done % 50 == 0 or done == total):
            print(f"\r{done}/{total} turns" if tty else f"replay: {done}/{total} turns", end="" if tty else "\n",
                  file=sys.stderr, flush=True)

    since = engine.store.last_seq()
    summary = replay(engine, conversation, schedule, progress)
    if not args.quiet and tty:
        print(file=sys.stderr)
    print(summary.line())
    print(f"settings: {settings_line(engine.settings)}")
    if fit:
        print(f"talk: {fit.talk}: {fit.text()}" + (f" (--consolidate {args.consolidate} given)" if args.consolidate else ""))
    return _llm_outcome(args.command, engine, since)


def settings_line(settings) -> str:
    """The settings a memory was made with that differ from its engine's defaults (all stored in the database)."""
    defaults = type(settings)().to_dict()
    changed = {k: v for k, v in settings.to_dict().items() if v != defaults.get(k)}
    return " ".join(f"{k}={json.dumps(v, ensure_ascii=False) if not isinstance(v, str) else v}"
                    for k, v in changed.items()) or "defaults"


def _llm_outcome(command: str, engine, since: int) -> int:
    """Report the LLM calls logged after seq `since` that failed, by error code; 1 when every call failed.

    A dead endpoint or a wrong key makes every call fail closed, which alone would look like a quiet run."""
    from engine.core.oplog import OpKind

    calls = [op.payload for op in engine.store.ops(kinds=[OpKind.LLM_CALL], after_seq=since)]
    failed = [c for c in calls if c.get("error_code")]
    if not failed:
        return 0
    counts = ", ".join(f"{code}={n}" for code, n in Counter(c["error_code"] for c in failed).most_common())
    first = (failed[0].get("error") or "")[:300]
    if len(failed) == len(calls):
        print(f"memwb {command}: error: every LLM call failed ({len(failed)} of {len(calls)}): {counts}; "
              f"first: {first}", file=sys.stderr)
        return 1
    print(f"memwb {command}: warning: {len(failed)} of {len(calls)} LLM calls failed: {counts}", file=sys.stderr)
    return 0


def _read_queries(path: str) -> list[dict]:
    """A JSONL file of {"id", "query"}, read and split as the JSONL loader reads a conversation."""
    from engine.loaders.errors import LoaderError, check, decode_json, read_text
    from engine.loaders.jsonl import jsonl_lines

    rows = []
    for n, line in jsonl_lines(read_text(path)):
        if not line.strip():
            continue
        row = check(decode_json(line, path, record=f"line {n}"), dict, path=path, record=f"line {n}")
        if "id" not in row:
            raise LoaderError(path, "missing", record=f"line {n}", field="id")
        check(row.get("query"), str, path=path, record=f"line {n}", field="query")
        rows.append(row)
    return rows


def cmd_retrieve(args) -> int:
    engine = open_db(args)
    engine.embedder.warm()
    queries = [{"id": None, "query": args.query}] if args.query is not None else _read_queries(args.queries)
    for q in queries:
        res = engine.retrieve(q["query"], k=args.k)
        named = {"id": q["id"]} if q["id"] is not None else {}
        if args.json:
            print(json.dumps({**named, **res.to_dict(k=args.k, labels=True)}, ensure_ascii=False))
        else:
            print((f"id: {q['id']}\n" if named else "") + retrieval_text(res, args.k, engine.state) + "\n")
    return 0


def retrieval_text(result: RetrievalResult, k: int, state: MemoryState) -> str:
    """The top `k` source turns (what R@k scores, what --k asks for), each with the best-ranked node carrying it,
    its score, the path that reached it and its text, wrapped for a terminal; --json has every field."""
    import shutil
    import textwrap

    from engine.core.node import node_label

    width = min(shutil.get_terminal_size((100, 24)).columns, 100)
    lines = [f"query: {result.query}"] + ([f"read as: {result.reading}"] if result.reading else [])
    carriers, seeds = result.source_carriers(k), {uid for uid, _ in result.anchors}
    lines.append(f"top {len(carriers)} source turn(s), each with the best-ranked node carrying it:")
    for rank, (sid, r) in enumerate(carriers, 1):
        if r is None:
            lines.append(f"{rank:>3}. {sid}")
            continue
        where = "" if r.visible else f" [{r.status or 'off the surface'}]"
        path = "direct (no seed reached it)" if r.anchor not in seeds else "a seed" if not r.path else \
            " ".join([f"from seed {node_label(r.anchor)}", *(h.text() for h in r.path)])
        lines.append(f"{rank:>3}. {sid}  {node_label(r.id)}{where}  score {r.score:.3f}  {path}")
        node = state.units.get(r.id)
        text = " ".join((r.raw or (node.summary if node else "")).split())
        lines += textwrap.wrap(f"[{r.time}] {text}" if r.time else text, width=width,
                               initial_indent=" " * 5, subsequent_indent=" " * 5)
    return "\n".join(lines)


def cmd_export(args) -> int:
    from engine.runtime.relations import export_relations, export_text

    engine = open_db(args)
    data = export_relations(engine)
    print(json.dumps(data, ensure_ascii=False) if args.json else export_text(engine, data))
    return 0


def cmd_consolidate(args) -> int:

    engine = open_db(args)
    if not engine.processes():
        print(f"the {engine.name} engine has no offline process: nothing to consolidate")
        return 0
    with engine.writing():                 # the buffer as stored now, not as it was when the file was opened
        if engine.open_run():
            raise RunError(open_run_message(engine.state, engine.open_run(), args.db))
        if not engine.pending():
            print("buffer is empty: nothing to consolidate")
            return 0
        since = engine.store.last_seq()
        report = engine.consolidate()
    print(run_report_line(report, engine.schema))
    return _llm_outcome(args.command, engine, since)


def cmd_runs(args) -> int:
    engine = open_db(args, warn=False)
    if args.action == "list":
        if args.run:
            raise ValueError("`memwb runs` lists every run; give a run id only with apply or discard")
        for line in run_lines(engine.state):
            print(line)
        return 0
    if not args.run:
        raise ValueError(f"`memwb runs {args.action}` needs a run id, e.g. `memwb runs {args.action} run-0001 "
                         f"--db {args.db}`")
    if args.action == "discard":
        engine.discard_run(args.run, actor="cli")
        print(f"{args.run}: discarded; its buffered work waits for the next run")
        return 0
    since = engine.store.last_seq()
    report = engine.apply(None, decided_by="gate", run_id=args.run)
    print(run_report_line(report, engine.schema))
    return _llm_outcome(args.command, engine, since)


def run_report_line(report, schema) -> str:
    """What a run did: its proposals by status (the statuses it has, as JSON), the nodes made and those it took off
    the surface, named as the engine's schema names leaving it (All-Mem: archived=[...])."""
    counts = {status: n for status, n in report.counts.by_status().items() if n}
    off = schema.off_surface_word.replace(" ", "_")
    return f"{report.run_id}: {json.dumps(counts)} created={report.created} {off}={report.archived}"


def run_lines(state) -> list[str]:
    """One line per run: id, process, mode, turn, status and its proposals by status."""
    if not state.runs:
        return ["no runs"]
    lines = []
    for run in state.runs.values():
        counts = ProposalCounts.of(state.proposals.values(), run.run_id)
        props = counts.line() if counts.total else "no proposals"
        lines.append(f"{run.run_id}  {run.process or '-'}  {run.mode}  turn {run.turn}  {run.status}  {props}")
    return lines


def open_db(args, warn: bool = True):
    """An existing session; a run left open (a crash, or a review not finished) is said on stderr."""
    from engine.session import open_session

    engine = open_session(args.db, create=False)
    run = engine.open_run()
    if warn and run:
        print(f"memwb {args.command}: note: {open_run_message(engine.state, run, args.db)}",
              file=sys.stderr)
    return engine


# What each figure of `memwb diagnostics` means and which way is good: a reader of the JSON should not need the
# paper (All-Mem §4.5) to tell a healthy memory from a broken one.
DIAGNOSTICS_NOTES = {
    "visible_ratio": "nodes on the retrieval surface per ingested turn: 1.0 when nothing is consolidated, below 1 "
                     "when turns were merged or superseded (All-Mem's paper: 0.704 on LoCoMo dev-8), above 1 after "
                     "splits; lower is a leaner surface, good only if recall holds (memwb bench)",
    "off_surface": "nodes off the retrieval surface (archived, grounded, consolidated ...): only links from the "
                   "surface bring them back into a result",
    "median_hop": "median hops from the surface to an off-surface node: 1-2 is good (null: none off the surface, "
                  "or none reachable)",
    "coverage": "Cov(H): share of off-surface nodes within H hops of the surface; 1.0 from small H on is good, a "
                "plateau below 1 is the unreachable share",
    "h95": "fewest hops H with Cov(H) >= 0.95: 1-2 is good; null: not within 8 hops",
    "unreachable_fraction": "share of off-surface nodes no path from the surface reaches (0.1: one in ten), which "
                            "retrieval cannot return: 0 is best; `memwb check` says whether any is lost for good "
                            "(it follows the engine's recovery links and counts nodes still maturing as live)",
    "version_orphans": "off-surface nodes the engine's lineage links (All-Mem: version) do not reach from the "
                       "surface: must be 0 on All-Mem; an engine that keeps nodes under other links too counts them "
                       "here by design (MemLoom: its sentences, under their events' evidence pointers)",
    "degree": "per edge type, how many visible nodes have each out-degree ({\"0\": 5, \"1\": 63}: 63 nodes with "
              "one such edge); a long tail on a capped type means the cap is not applied",
}


def cmd_diagnostics(args) -> int:
    from engine.eval.diagnostics import structure

    figures = structure(open_db(args).state)
    notes = {key: note for key, note in DIAGNOSTICS_NOTES.items() if key in figures}
    print(json.dumps({**figures, "notes": notes}, indent=1, ensure_ascii=False))
    return 0


def cmd_schema(args) -> int:
    from engine.core.schema import settings_fields

    described = {**engine_schema(args.engine).to_dict(), "settings": settings_fields(settings_class(args.engine))}
    print(json.dumps(described, indent=1, ensure_ascii=False))
    return 0

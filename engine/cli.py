"""`memwb`: replay, retrieve, export, consolidate, dump/load, check and open the workbench from a shell.

The command-line contract (flags and JSON shapes) is stable: scripts and
checks rely on it. Exit codes: 0 done, 2 an error (one line on stderr), 1 a
replay or consolidation whose every LLM call failed (counts by error code on
stderr; what was ingested stays stored), a `check` with findings, or a `bench` with a failed task (the
others' figures are written).
"""
from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
from collections import Counter
from pathlib import Path

from engine.core.access import LOOPBACK, Role
from engine.core.redact import redact
from engine.core.text import seconds_text
from engine.engines import engine_schema, known_engines
from engine.runtime.engine import open_run_message
from engine.runtime.errors import RunError


def _add_db(p: argparse.ArgumentParser) -> None:
    p.add_argument("--db", required=True, help="memory database file (SQLite) or database URL")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="memwb", description="Memory Workbench command line")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("replay", help="ingest a conversation turn by turn, consolidating on schedule")
    p.add_argument("input", help="LoCoMo JSON, LongMemEval JSON, QMSum meeting JSON or JSONL conversation file")
    p.add_argument("--conversation", help="conversation id (required when the file holds several)")
    _add_db(p)
    p.add_argument("--engine", default="allmem", choices=known_engines(),
                   help=f"memory engine (default allmem): {', '.join(known_engines())}")
    p.add_argument("--llm", default="offline", choices=["offline", "openai", "recorded"])
    p.add_argument("--records", help="for --llm recorded: database or JSONL file holding the recorded calls")
    p.add_argument("--consolidate", default="every-3-sessions",
                   help="every-3-sessions (default, as in All-Mem), every-N-sessions, every-N-turns or manual")
    p.add_argument("--ablation", action="append", default=[],
                   help="an ablation switch of the engine (repeatable); `memwb schema --engine E` lists them")
    p.add_argument("--quiet", action="store_true")

    p = sub.add_parser("retrieve", help="three-stage retrieval with provenance")
    _add_db(p)
    group = p.add_mutually_exclusive_group(required=True)
    group.add_argument("--query", help="one query")
    group.add_argument("--queries", help='JSONL file of {"id": ..., "query": ...}')
    p.add_argument("--k", type=int, default=5, help="number of ranked source ids (default 5)")
    p.add_argument("--json", action="store_true", help="print JSON (one object per query)")

    p = sub.add_parser("export", help="print every unit and edge")
    _add_db(p)
    p.add_argument("--json", action="store_true", help="print JSON (the only format)")

    p = sub.add_parser("consolidate", help="run one consolidation pass on the buffer now (gate decides)")
    _add_db(p)

    p = sub.add_parser("runs", help="list the offline runs, or apply or discard an open one",
                       description="Without an action: every run with its status and proposals. `apply RUN` "
                                   "applies an open run (the gate decides its undecided proposals); `discard RUN` "
                                   "closes it without applying anything and puts its buffered work back.")
    p.add_argument("action", nargs="?", choices=["list", "apply", "discard"], default="list")
    p.add_argument("run", nargs="?", help="the run id (for apply and discard), e.g. run-0003")
    _add_db(p)

    p = sub.add_parser("diagnostics", help="structure diagnostics: visible ratio, Cov(H), H0.95, degrees")
    _add_db(p)

    p = sub.add_parser("dump", help="print the whole database as JSON Lines: a lossless copy `memwb load` reads",
                       description="Print every table (the log with its seq values, the materialized tables, fold "
                                   "checkpoints, meta, annotations) as JSON Lines on stdout, from one snapshot. "
                                   "The embedding cache is left out unless --embeddings is given (vectors are "
                                   "recomputed when needed). Usage: memwb dump --db DB > FILE")
    _add_db(p)
    p.add_argument("--embeddings", action="store_true",
                   help="include the embedding cache (left out by default: large, and recomputed on demand)")

    p = sub.add_parser("load", help="load a `memwb dump` file into a new, empty database",
                       description="Load a dump into a database holding no rows (a non-empty one is refused), in "
                                   "one transaction: a malformed or truncated file leaves the target empty.")
    p.add_argument("file", help="dump file written by `memwb dump` (- reads stdin)")
    _add_db(p)

    p = sub.add_parser("check", help="integrity check: exit 1 naming each finding, 0 with an ok line",
                       description="Check that the log folds to the materialized tables and to every checkpoint, "
                                   "ids are unique, no turn is ingested twice, no run is left open, every "
                                   "archived node is reachable and turns' raw text matches its stored hash "
                                   "(and SQLite's own integrity_check). One line per finding, each starting "
                                   "with its code; exit 1 on any finding, 2 if the database cannot be read.")
    _add_db(p)

    p = sub.add_parser("schema", help="print what an engine declares: kinds, statuses, edges, operators, stages")
    p.add_argument("--engine", default="allmem", choices=known_engines())

    p = sub.add_parser("bench", help="benchmark engines side by side on a dataset (streaming or static protocol)",
                       description="Replay every conversation into every system (engine or ablation) and score "
                                   "retrieval per round (streaming) or once (static); QMSum scores event boundaries. "
                                   "Writes result.json (docs/BENCHMARK_FORMAT.md) and summary.md into --out and "
                                   "prints the per-round and per-category tables.")
    p.add_argument("input", metavar="FILE_OR_DIR", help="the dataset file (a directory of meetings for qmsum)")
    p.add_argument("--dataset", required=True, help="locomo, longmemeval, causal or qmsum")
    p.add_argument("--conversations", nargs="+", help="only these conversation ids")
    p.add_argument("--engines", help="comma-separated engines (default: every registered engine; qmsum: every "
                                     "event engine)")
    p.add_argument("--ablations", help="comma-separated ablations (a+b combines two), or all: one more system "
                                       "per ablation of each engine that declares it")
    p.add_argument("--protocol", default="streaming", help="streaming (default) or static")
    p.add_argument("--rounds", type=int, default=5, help="streaming checkpoints N (default 5)")
    p.add_argument("--k", default="5,10", help="comma-separated K of the @K metrics (default 5,10)")
    p.add_argument("--schedule", help="offline schedule (default: the dataset's, e.g. every-3-sessions)")
    p.add_argument("--out", help="output folder (default: a new folder under the workspace's benchmarks/)")
    p.add_argument("--answer", metavar="BACKEND",
                   help="answer every question with this LLM backend (offline or openai) from each system's "
                        "results, score F1, BLEU-1, ROUGE-L, EM and AA, and add the full-history ceiling")
    p.add_argument("--answer-budget", type=int, metavar="TOKENS",
                   help="estimated tokens of passages one answer reads at most (default 32000); the full-history "
                        "ceiling keeps the newest turns that fit, so a small local model's context is not exceeded")
    p.add_argument("--llm", default="offline", choices=["offline", "openai"],
                   help="LLM backend of the engines' own roles (default offline); with openai the per-role costs "
                        "and how often the model decides otherwise than the offline rules are printed")
    p.add_argument("--ray", nargs="?", const="local", metavar="ADDRESS",
                   help="run the tasks on Ray: a local Ray without ADDRESS, else the cluster at ADDRESS")

    p = sub.add_parser("reproduce", help="an engine's paper table rows beside this project's figures",
                       description="Run the benchmarks that measure ENGINE's paper rows (All-Mem: Table 10 R@5/N@5 "
                                   "of the full system and each ablation on LoCoMo dev-8, Table 11 visible ratio; "
                                   "MemLoom: Table 2 Pk/WindowDiff on QMSum test beside fixed windows, SCDS SCR@5 on "
                                   "the causal test split), then print each paper figure beside the project's, with "
                                   "the difference from the full system and whether it points the paper's way. "
                                   "Writes OUT/<dataset>/ (result.json, reproduction.json/.md) and "
                                   "OUT/reproduction.md; the Benchmark page shows the table with each result.")
    p.add_argument("engine", help="allmem or memloom (the engines whose papers have rows this machine can measure)")
    p.add_argument("--out", help="output folder (default: a new folder under the workspace's benchmarks/)")
    p.add_argument("--conversations", nargs="+", help="only these LoCoMo conversations (default: all eight)")

    p = sub.add_parser("llm", help="the local model server: install, serve, where; what a session's LLM calls cost",
                       description="`install` builds and installs llama-cpp-python's OpenAI-compatible server and "
                                   "the SmolLM2-135M-Instruct GGUF model (scripts/install_llm.sh); `serve` runs it "
                                   "on 127.0.0.1 until Ctrl-C or SIGTERM and prints the settings that point "
                                   "--llm openai at it; `where` prints the model file; `costs --db DB` prints "
                                   "calls, tokens, latency, schema-valid rate per role, and with --compare "
                                   "offline how often another backend decides otherwise on the same input.")
    llm = p.add_subparsers(dest="llm_command", required=True)
    q = llm.add_parser("install", help="build and install the server and the model (several minutes, once)")
    q = llm.add_parser("serve", help="serve the model on 127.0.0.1 until Ctrl-C or SIGTERM")
    q.add_argument("--port", type=int, default=8089, help="port on 127.0.0.1 (default 8089)")
    q.add_argument("--ctx", type=int, default=4096, help="context size in tokens (default 4096)")
    q.add_argument("--threads", type=int, default=2, help="CPU threads (default 2)")
    q.add_argument("--log", help="append the server's own output to this file")
    llm.add_parser("where", help="print the GGUF model file the server would load")
    q = llm.add_parser("costs", help="per-role calls, tokens, latency, schema-valid rate of a session's LLM calls")
    _add_db(q)
    q.add_argument("--compare", choices=["offline"], help="ask this backend the same inputs and count how often "
                                                          "its decision differs")
    q.add_argument("--json", action="store_true", help="print JSON")

    p = sub.add_parser("ui", help="open the workbench (streamlit)")
    p.add_argument("--port", type=int, default=8501)
    p.add_argument("--headless", action="store_true", help="do not open a browser window")
    p.add_argument("--db", help="open this session database (a file `memwb replay` or the workbench wrote)")
    p.add_argument("--host", default=LOOPBACK, metavar="ADDR",
                   help=f"address to listen on (default {LOOPBACK}: this machine only); another address, e.g. "
                        "0.0.0.0, shares the workbench and requires sign-in (see `memwb auth`)")
    p.add_argument("--sign-in", action="store_true",
                   help="require sign-in even on loopback (behind a reverse proxy on this machine, or on a machine "
                        "other people log in to)")
    p.add_argument("--data-dir", action="append", default=[], metavar="DIR",
                   help="a folder whose files the pages may open by path (repeatable; added to MEMWB_DATA_DIRS; "
                        "the workspace and the bundled datasets always are)")

    p = sub.add_parser("auth", help="the workbench's users: add, rotate a token, change a role, remove, list",
                       description="Users sign in to a workbench shared beyond loopback (`memwb ui --host ADDR`). "
                                   "A token user gets a generated token (printed once on stdout; only its scrypt "
                                   "hash is stored, in the workspace's users.json); an --oidc user signs in through "
                                   "the identity provider of Streamlit's secrets ([auth]) and gets a role here; "
                                   "'@domain' gives a role to every address of a domain. Roles: viewer (browse, "
                                   "replay into a private branch, query) and reviewer (also decide, apply, undo, "
                                   "annotate, run benchmarks).")
    actions = p.add_subparsers(dest="action", required=True)
    a = actions.add_parser("add", help="add a user with a role (prints a new token unless --oidc or --password)")
    a.add_argument("name")
    a.add_argument("--role", required=True, choices=[r.value for r in Role])
    how = a.add_mutually_exclusive_group()
    how.add_argument("--oidc", action="store_true", help="signs in through the identity provider (no token)")
    how.add_argument("--password", action="store_true", help="type a password instead of getting a token")
    a = actions.add_parser("rotate", help="replace a user's token (the old one and its sessions stop working)")
    a.add_argument("name")
    a.add_argument("--password", action="store_true", help="type a password instead of getting a token")
    a = actions.add_parser("role", help="change a user's role")
    a.add_argument("name")
    a.add_argument("role", choices=[r.value for r in Role])
    a = actions.add_parser("remove", help="remove a user (their browser sessions are signed out)")
    a.add_argument("name")
    actions.add_parser("list", help="every user with their role and how they sign in")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)       # the command as typed (`memwb bench` records it)
    try:
        return COMMANDS[args.command](args)
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # one clear line for the user; tracebacks on request
        if os.environ.get("MEMWB_DEBUG"):
            raise
        print(f"memwb {args.command}: error: {redact(str(exc))}", file=sys.stderr)
        return 2


def cmd_replay(args) -> int:
    from engine.loaders import load_conversation
    from engine.runtime.replay import Schedule, replay
    from engine.session import open_session

    schedule = Schedule.parse(args.consolidate)
    conversation = load_conversation(args.input, args.conversation)
    settings = {"ablations": sorted(set(args.ablation))} if args.ablation else None
    engine = open_session(args.db, engine=args.engine, llm=args.llm, settings=settings, records=args.records,
                          conversation=conversation.id, source=str(Path(args.input).resolve()),
                          schedule=args.consolidate)

    def progress(done: int, total: int) -> None:
        if not args.quiet and (done % 50 == 0 or done == total):
            print(f"\r{done}/{total} turns", end="", file=sys.stderr, flush=True)

    since = engine.store.last_seq()
    summary = replay(engine, conversation, schedule, progress)
    if not args.quiet:
        print(file=sys.stderr)
    print(summary.line())
    return _llm_outcome(args.command, engine, since)


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
    engine = _open(args)
    engine.embedder.warm()
    queries = [{"id": None, "query": args.query}] if args.query is not None else _read_queries(args.queries)
    for q in queries:
        result = engine.retrieve(q["query"], k=args.k).to_dict(k=args.k)
        if q["id"] is not None:
            result = {"id": q["id"], **result}
        if args.json:
            print(json.dumps(result, ensure_ascii=False))
        else:
            print(f"query: {q['query']}\nsource_ids: {', '.join(result['source_ids'])}\n{result['context']}\n")
    return 0


def cmd_export(args) -> int:
    print(json.dumps(_open(args).snapshot(), ensure_ascii=False))
    return 0


def cmd_consolidate(args) -> int:

    engine = _open(args)
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
    print(f"{report.run_id}: {json.dumps(report.counts)} created={report.created} archived={report.archived}")
    return _llm_outcome(args.command, engine, since)


def cmd_runs(args) -> int:
    engine = _open(args, warn=False)
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
    print(f"{report.run_id}: {json.dumps(report.counts)} created={report.created} archived={report.archived}")
    return _llm_outcome(args.command, engine, since)


def run_lines(state) -> list[str]:
    """One line per run: id, process, mode, turn, status and its proposals by status."""
    if not state.runs:
        return ["no runs"]
    lines = []
    for run in state.runs.values():
        counts = Counter(p.status for p in state.proposals.values() if p.run_id == run.run_id)
        props = " ".join(f"{k}={v}" for k, v in sorted(counts.items())) or "no proposals"
        lines.append(f"{run.run_id}  {run.process or '-'}  {run.mode}  turn {run.turn}  {run.status}  {props}")
    return lines


def _open(args, warn: bool = True):
    """An existing session; a run left open (a crash, or a review not finished) is said on stderr."""
    from engine.session import open_session

    engine = open_session(args.db, create=False)
    run = engine.open_run()
    if warn and run:
        print(f"memwb {args.command}: note: {open_run_message(engine.state, run, args.db)}",
              file=sys.stderr)
    return engine


def cmd_diagnostics(args) -> int:
    from engine.eval.diagnostics import structure

    print(json.dumps(structure(_open(args).state), indent=1))
    return 0


def cmd_dump(args) -> int:
    from engine.store.dump import dump

    report = dump(args.db, sys.stdout.buffer, embeddings=args.embeddings)
    sys.stdout.buffer.flush()
    print(report.line(), file=sys.stderr)
    return 0


def cmd_load(args) -> int:
    from engine.store.dump import load

    stream = sys.stdin.buffer if args.file == "-" else None
    print(load("stdin" if stream else args.file, args.db, stream=stream).line())
    return 0


def cmd_check(args) -> int:
    from engine.eval.integrity import check_database

    report = check_database(args.db)
    for finding in report.findings:
        print(finding.line())
    if report.findings:
        print(f"memwb check: {len(report.findings)} finding(s) in {args.db}", file=sys.stderr)
        return 1
    print(report.ok_line())
    return 0


def cmd_schema(args) -> int:
    print(json.dumps(engine_schema(args.engine).to_dict(), indent=1, ensure_ascii=False))
    return 0


def cmd_reproduce(args) -> int:
    from engine.bench.reproduce import reproduce

    bar = ProgressBar(sys.stderr)
    path = reproduce(args.engine, out=args.out, conversations=tuple(args.conversations or ()) or None,
                     progress=bar, command=shlex.join(["memwb", *args.argv]))
    bar.close()
    print(path.read_text(encoding="utf-8"))
    print(f"wrote {path}")
    return 0


def cmd_bench(args) -> int:
    from engine.bench.datasets import BenchInputError
    from engine.bench.runner import BenchConfig, run_benchmark
    from engine.bench.summary import tables

    def names(text: str | None) -> tuple[str, ...]:
        return tuple(x.strip() for x in (text or "").split(",") if x.strip())

    try:
        ks = tuple(int(k) for k in names(args.k))
    except ValueError:
        raise BenchInputError(f"--k takes comma-separated integers such as 5,10, not {args.k!r}") from None
    config = BenchConfig(dataset=args.dataset, source=args.input, engines=names(args.engines) or None,
                         ablations=names(args.ablations), protocol=args.protocol, rounds=args.rounds, ks=ks,
                         schedule=args.schedule, conversations=tuple(args.conversations or ()) or None,
                         out=args.out, ray=args.ray, answer=args.answer, llm=args.llm,
                         answer_budget=args.answer_budget,
                         command=shlex.join(["memwb", *args.argv]))
    bar = ProgressBar(sys.stderr)
    path = run_benchmark(config, progress=bar)
    bar.close()
    result = json.loads(path.read_text(encoding="utf-8"))
    print(tables(result))
    print(f"wrote {path} and {path.with_name('summary.md')}")
    return 1 if any(t["error"] for t in result["tasks"]) else 0


class ProgressBar:
    """Tasks done, with an ETA from the mean task time so far: a redrawn bar on a terminal, plain lines else."""

    WIDTH = 30

    def __init__(self, stream):
        import time

        self.stream, self.clock, self.started = stream, time.monotonic, time.monotonic()
        self.tty = stream.isatty()
        self.drawn = False

    def __call__(self, p) -> None:
        elapsed = self.clock() - self.started
        eta = f"ETA {seconds_text(elapsed / p.done * (p.total - p.done))}" if p.done else "ETA –"
        if self.tty:
            filled = int(self.WIDTH * p.done / max(p.total, 1))
            line = f"\r[{'#' * filled}{'.' * (self.WIDTH - filled)}] {p.done}/{p.total} {eta}  {p.label[:40]:40}"
            print(line, end="", file=self.stream, flush=True)
            self.drawn = True
        else:
            print(f"bench: {p.done}/{p.total} tasks done ({p.label}), {seconds_text(elapsed)} elapsed, {eta}",
                  file=self.stream, flush=True)

    def close(self) -> None:
        if self.drawn:
            print(file=self.stream)


def cmd_ui(args) -> int:
    from engine import serve
    from engine.core.access import SIGN_IN_ENV, is_loopback
    from engine.store.catalog import DB_ENV, read_session
    from engine.store.data_paths import DATA_DIRS_ENV

    app = Path(__file__).resolve().parents[1] / "workbench" / "app.py"
    loopback = is_loopback(args.host)
    cmd = [sys.executable, "-m", "streamlit", "run", str(app), "--server.port", str(args.port),
           "--server.address", args.host, "--browser.gatherUsageStats", "false",
           "--server.enableXsrfProtection", "true", "--server.enableCORS", "true"]
    if loopback:       # a web page elsewhere cannot reach it through DNS rebinding
        for host in serve.loopback_hosts(args.host):
            cmd += ["--server.allowedHosts", host]
    else:              # tracebacks stay in the server's log, not in a remote browser
        cmd += ["--client.showErrorDetails", "type"]
    if args.headless:
        cmd += ["--server.headless", "true"]
    env = dict(os.environ)
    if args.db:
        db = Path(args.db).expanduser().resolve()
        problem = "no such file" if not db.is_file() else read_session(db).problem
        if problem:
            print(f"memwb ui: error: cannot open {db}: {problem}", file=sys.stderr)
            return 2
        env[DB_ENV] = str(db)
    if args.data_dir:
        dirs = [str(Path(d).expanduser().resolve()) for d in args.data_dir]
        env[DATA_DIRS_ENV] = os.pathsep.join(x for x in (env.get(DATA_DIRS_ENV, ""), *dirs) if x)
    if args.sign_in or not loopback:
        sign_in = serve.sign_in_methods(app)
        if not sign_in.any:
            print(f"memwb ui: error: {sign_in.missing_text(args.host)}", file=sys.stderr)
            return 2
        env[SIGN_IN_ENV] = "1"
        if not loopback:
            print(f"memwb ui: warning: {serve.exposure_text(args.host, args.port, sign_in)}", file=sys.stderr)
    return serve.run_server(cmd, env)


def cmd_auth(args) -> int:
    from engine.store.users import UserBook

    book = UserBook()
    if args.action == "list":
        users = book.users()
        for user in users.values():
            print(f"{user.name}  {user.role.value}  {'identity provider' if user.oidc else 'token'}")
        if not users:
            print(f"no users in {book.path}")
        return 0
    if args.action == "role":
        book.set_role(args.name, Role(args.role))
        print(f"{args.name}: now a {args.role}", file=sys.stderr)
        return 0
    if args.action == "remove":
        book.remove(args.name)
        print(f"{args.name}: removed; their browser sessions are signed out", file=sys.stderr)
        return 0
    password = _typed_password() if args.password else None
    if args.action == "add":
        secret = book.add(args.name, Role(args.role), oidc=args.oidc, password=password)
        said = f"{args.name}: added as a {args.role}"
    else:
        secret = book.rotate(args.name, password)
        said = f"{args.name}: new secret; the old one no longer signs in"
    if secret is None:
        print(f"{said}; signs in through the identity provider ([auth] in Streamlit's secrets)", file=sys.stderr)
    elif password is None:
        print(secret)
        print(f"{said}. The token above is shown only now (only its hash is kept in {book.path}): hand it over "
              "privately.", file=sys.stderr)
    else:
        print(f"{said} with the password typed.", file=sys.stderr)
    return 0


def _typed_password() -> str:
    """A password from the terminal (asked twice), or one line of standard input when it is not a terminal."""
    import getpass

    if not sys.stdin.isatty():
        return sys.stdin.readline().rstrip("\n")
    first = getpass.getpass("password: ")
    if getpass.getpass("again: ") != first:
        raise ValueError("the two passwords differ; nothing was changed")
    return first


def cmd_llm(args) -> int:
    from engine.llm import server

    if args.llm_command == "install":
        script = Path(__file__).resolve().parents[1] / "scripts" / "install_llm.sh"
        env = {**os.environ, "MEMWB_VENV": os.environ.get("MEMWB_VENV") or str(Path(sys.executable).parents[1])}
        return subprocess.call(["bash", str(script)], env=env)
    if args.llm_command == "where":
        print(server.model_path())
        return 0
    if args.llm_command == "serve":
        return server.serve(args.port, args.ctx, args.threads, Path(args.log) if args.log else None,
                            announce=lambda line: print(line, flush=True))
    from engine.eval.llm_costs import cost_table, decisions_line, session_costs_and_decisions

    costs, decided = session_costs_and_decisions(_open(args, warn=False), compare=args.compare)
    if args.json:
        print(json.dumps({**costs, **({"decisions": decided} if decided else {})}, indent=1))
    else:
        print(cost_table(costs) + (f"\n\n{decisions_line(decided)}" if decided else ""))
    return 0


COMMANDS = {"llm": cmd_llm, "replay": cmd_replay, "retrieve": cmd_retrieve, "export": cmd_export, "consolidate": cmd_consolidate,
            "runs": cmd_runs, "diagnostics": cmd_diagnostics, "dump": cmd_dump, "load": cmd_load,
            "check": cmd_check, "schema": cmd_schema, "bench": cmd_bench, "reproduce": cmd_reproduce, "ui": cmd_ui, "auth": cmd_auth}

if __name__ == "__main__":
    sys.exit(main())

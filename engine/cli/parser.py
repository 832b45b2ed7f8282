"""The `memwb` argument parser: every command, its flags and help (the public contract)."""
from __future__ import annotations

import argparse

from engine.core.access import LOOPBACK, Role
from engine.engines import ENGINES, broken_engines, known_engines
from engine.llm.embedder import ENCODER_ENV, ENCODER_NOTES


def _add_db(p: argparse.ArgumentParser) -> None:
    p.add_argument("--db", required=True, help="memory database file (SQLite) or database URL")


class _EngineNames:
    """`--engine`'s choices. A built-in name is checked without looking for plugins; any other name, the list an
    unknown name's error gives and `--help` discover them (the usage line shows `ENGINE`: argparse formats it as
    an argument is added). Discovery imports every installed plugin, and a command naming a built-in engine (most
    do, `allmem` by default) paid for that on each start: 0.75 s with the mem0 adapter installed."""

    def __contains__(self, name: object) -> bool:
        return name in ENGINES or name in known_engines()

    def __iter__(self):
        return iter(known_engines())


def _add_engine(p: argparse.ArgumentParser) -> None:
    """`--engine`, offering every discovered engine; a broken plugin's name is refused with its reason."""

    def engine_name(value: str) -> str:
        if value in ENGINES:
            return value
        broken = next((o for o in broken_engines() if o.name == value and value not in known_engines()), None)
        if broken is not None:
            raise argparse.ArgumentTypeError(f"engine {value!r} from {broken.describe()} cannot be used: "
                                             f"{broken.error} (`memwb engines` lists every engine)")
        return value

    p.add_argument("--engine", default="allmem", type=engine_name, choices=_EngineNames(), metavar="ENGINE",
                   help="memory engine (default allmem): %(choices)s (`memwb engines` says where each comes from)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="memwb", description="Memory Workbench command line",
        epilog=f"{ENCODER_ENV} chooses the sentence encoder: " + "; ".join(f"{name}: {note}" for name, note in
                                                                           ENCODER_NOTES.items()) + ".")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("replay", help="ingest a conversation turn by turn, consolidating on schedule")
    p.add_argument("input", help="LoCoMo JSON, LongMemEval JSON, QMSum meeting JSON or JSONL conversation file")
    p.add_argument("--conversation", help="conversation id (required when the file holds several)")
    _add_db(p)
    _add_engine(p)
    p.add_argument("--llm", default="offline", choices=["offline", "openai", "recorded"],
                   help="LLM backend of the engine's roles (default offline: deterministic rules, no model, no "
                        "network); openai: any OpenAI-compatible endpoint named by MEMWB_OPENAI_BASE_URL, "
                        "MEMWB_OPENAI_MODEL and MEMWB_OPENAI_API_KEY (README, A real model); recorded: the calls "
                        "another session logged (--records)")
    p.add_argument("--records", help="for --llm recorded: database or JSONL file holding the recorded calls")
    p.add_argument("--consolidate",
                   help="every-N-sessions, every-N-turns or manual; default: the engine's own schedule (RecMem: "
                        "every-1-turns, consolidation at the trigger), else every-3-sessions (as in All-Mem)")
    p.add_argument("--ablation", action="append", default=[],
                   help="an ablation switch of the engine (repeatable); `memwb schema --engine E` lists them")
    p.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                   help="set one of the engine's settings (repeatable), checked against its type and bounds; "
                        "`memwb schema --engine E` lists them")
    p.add_argument("--quiet", action="store_true",
                   help="no progress lines on stderr (the summary line is still printed on stdout)")

    p = sub.add_parser("retrieve", help="retrieve with the engine's own stages; every unit with the path that reached it")
    _add_db(p)
    group = p.add_mutually_exclusive_group(required=True)
    group.add_argument("--query", help="one query")
    group.add_argument("--queries", help='JSONL file of {"id": ..., "query": ...}')
    p.add_argument("--k", type=int, default=5,
                   help="number of ranked source turns (default 5): the text lists each with the node carrying "
                        "it, its path and its text; --json also holds every result of the engine's final ranking")
    p.add_argument("--json", action="store_true", help="print JSON (one object per query)")

    p = sub.add_parser("export", help="print every unit and edge; each relation an offline run wrote with its "
                                      "proposal, confidence, reason and the records it cites")
    _add_db(p)
    p.add_argument("--json", action="store_true",
                   help="print JSON: every unit, and every edge with made_by, created_turn, confidence, evidence "
                        "(the records it cites) and proposal (id, run, op, confidence, gate, threshold, reason_code, "
                        "reason, decided_by, status; null for an edge made online); without it, a readable summary")

    p = sub.add_parser("consolidate", help="run one consolidation pass on the buffer now (gate decides)")
    _add_db(p)

    p = sub.add_parser("runs", help="list the offline runs, or apply or discard an open one",
                       description="Without an action: every run with its status and proposals. `apply RUN` "
                                   "applies an open run (the gate decides its undecided proposals); `discard RUN` "
                                   "closes it without applying anything and puts its buffered work back.")
    p.add_argument("action", nargs="?", choices=["list", "apply", "discard"], default="list",
                   help="list (default), apply or discard")
    p.add_argument("run", nargs="?", help="the run id (for apply and discard), e.g. run-0003")
    _add_db(p)

    p = sub.add_parser("diagnostics", help="structure diagnostics: visible ratio, Cov(H), H0.95, degrees",
                       description="Print the memory's structure figures as JSON (All-Mem §4.5): visible ratio, "
                                   "how far off-surface nodes lie from the surface (median hop, Cov(H), H0.95, "
                                   "unreachable fraction, version orphans), edges and out-degrees. `notes` says "
                                   "what each figure means and which values are good.")
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
    _add_engine(p)

    p = sub.add_parser("engines", help="list every engine with where it came from; broken plugins with the reason",
                       description="Every engine the workbench offers: the built-in ones and those installed "
                                   "packages declare in the entry-point group memory_workbench.engines, each with "
                                   "its package and version; a plugin that cannot be used is listed as BROKEN with "
                                   "its reason (docs/WRITING_AN_ENGINE.md).")
    p.add_argument("--json", action="store_true", help="print JSON")

    p = sub.add_parser("engine", help="write a new engine package, or check an installed engine against the contract")
    actions = p.add_subparsers(dest="engine_action", required=True)
    a = actions.add_parser("new", help="write a skeleton engine package (a complete small engine to start from)",
                           description="Write memwb-NAME-engine/: a package with its entry point, schema, settings, "
                                       "an offline process and retrieval, which `memwb engine check NAME` passes "
                                       "once installed (pip install -e memwb-NAME-engine).")
    a.add_argument("name", help="the engine's name (lower-case letters, digits, _)")
    a.add_argument("--dir", help="the folder to write it in (default: the current one)")
    a = actions.add_parser("check", help="run the per-engine contract against an installed engine",
                           description="Run every test the workbench runs per engine against NAME (from the "
                                       "source checkout's tests/) and print each failure with the rule it broke and "
                                       "where the rule is documented (docs/WRITING_AN_ENGINE.md). Exit 1 on any "
                                       "failure.")
    a.add_argument("name", help="an engine `memwb engines` lists")
    a.add_argument("-k", help="only the tests whose names match this pytest -k expression")

    p = sub.add_parser("bench", help="benchmark engines side by side on a dataset (streaming or static protocol)",
                       description="Replay every conversation into every system (engine or ablation) and score "
                                   "retrieval per round (streaming) or once (static); QMSum scores event boundaries. "
                                   "Writes result.json (docs/BENCHMARK_FORMAT.md) and summary.md into --out and "
                                   "prints the per-round and per-category tables.")
    p.add_argument("input", metavar="FILE_OR_DIR", help="the dataset file (a directory of meetings for qmsum, of "
                                                         "JSONL conversations for decisions)")
    p.add_argument("--dataset", required=True, help="locomo, longmemeval, causal, qmsum or decisions (a decision "
                                                    "set: docs/DECISIONS.md)")
    p.add_argument("--decisions", metavar="OVERLAY", help="with --dataset decisions: a file of decision lines "
                                                          "labelling the input's conversations (e.g. a LoCoMo file)")
    p.add_argument("--gold-overlay", metavar="CORRECTIONS", help="a gold-correction overlay (`memwb audit-gold`): "
                                                                 "figures on the original and the corrected gold, "
                                                                 "side by side")
    p.add_argument("--conversations", nargs="+", help="only these conversation ids")
    p.add_argument("--engines", help="comma-separated engines (default: every registered engine; qmsum: every "
                                     "event engine)")
    p.add_argument("--ablations", help="comma-separated ablations (a+b combines two), or all: one more system "
                                       "per ablation of each engine that declares it")
    p.add_argument("--protocol", default="streaming", help="streaming (default) or static")
    p.add_argument("--rounds", type=int, default=5, help="streaming checkpoints N (default 5)")
    p.add_argument("--k", default="5,10", help="comma-separated K of the @K metrics (default 5,10)")
    p.add_argument("--schedule", help="offline schedule (default: the dataset's, e.g. every-3-sessions)")
    p.add_argument("--set", action="append", default=[], metavar="ENGINE.KEY=VALUE", dest="settings",
                   help="one of an engine's settings for this run (repeatable; VALUE as `memwb replay --set` "
                        "takes it, e.g. gam.depth_threshold=0.3); its ablations take it too; `memwb schema --engine "
                        "E` lists them")
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

    p = sub.add_parser("audit-gold", help="flag questions of a benchmark file whose gold looks wrong, with reasons",
                       description="Flags LoCoMo (or LongMemEval, JSONL) questions whose gold looks wrong: an "
                                   "evidence id naming no turn, an answer without evidence, an answer none of whose "
                                   "words appear in the evidence turns or their neighbours, and (with --results) a "
                                   "non-gold turn holding the answer that every system ranked above all gold turns. "
                                   "Prints one tab-separated line per flag, then the count per reason. Corrections "
                                   "go in an overlay file (engine/eval/gold_audit.py), which `memwb bench "
                                   "--gold-overlay` scores beside the original gold.")
    p.add_argument("input", metavar="FILE", help="the benchmark file")
    p.add_argument("--results", nargs="+", metavar="RESULT_JSON", help="stored `memwb bench` result.json files")
    p.add_argument("--json", action="store_true", help="print the flags as one JSON document")

    p = sub.add_parser("splits", help="lock or unlock a dataset folder's test split against tuning code",
                       description="Writes or updates FOLDER/splits.lock. Scripts that fit anything refuse a file "
                                   "of a locked split (test.jsonl, test/, cases/test/) with a message; scoring "
                                   "reads it as before.")
    p.add_argument("action", choices=["lock", "unlock", "show"], help="lock or unlock --split, or show what is "
                                                                      "locked")
    p.add_argument("folder", help="the dataset folder (e.g. datasets/causal)")
    p.add_argument("--split", default="test", choices=["validation", "test"], help="the split (default: test)")

    p = sub.add_parser("reproduce", help="an engine's paper table rows beside this project's figures",
                       description="Run the benchmarks that measure ENGINE's paper rows (All-Mem: Table 10 R@5/N@5 "
                                   "of the full system and each ablation on LoCoMo dev-8, Table 11 visible ratio; "
                                   "MemLoom: Table 2 Pk/WindowDiff on QMSum test beside fixed windows, SCDS SCR@5 on "
                                   "the causal test split; GAM: Table 3 answer F1/BLEU-1 of the full system and w/o "
                                   "MFR, Table 10 graph size after 3, 15 and 27 sessions; RecMem: Table 1 construction "
                                   "tokens per conversation), then print each paper figure beside the project's, with "
                                   "the difference from the full system and whether it points the paper's way. "
                                   "Writes OUT/<dataset>/ (result.json, reproduction.json/.md) and "
                                   "OUT/reproduction.md; the Benchmark page shows the table with each result.")
    p.add_argument("engine", help="allmem, memloom, gam or recmem (the engines whose papers have rows this machine "
                                  "can measure)")
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
    p.add_argument("--port", type=int, default=8501,
                   help="port to listen on (default 8501, as in http://localhost:8501); pick another when 8501 "
                        "is taken or to run a second workbench beside the first")
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
                                   "replay into a private branch, query), annotator (also label cases and decisions "
                                   "beside other annotators) and reviewer (also decide, apply, undo, annotate the "
                                   "gold, adjudicate labels, run benchmarks).")
    actions = p.add_subparsers(dest="action", required=True)
    a = actions.add_parser("add", help="add a user with a role (prints a new token unless --oidc or --password)")
    a.add_argument("name", help="the user's name, or an e-mail address (or '@domain') for --oidc")
    a.add_argument("--role", required=True, choices=[r.value for r in Role], help="viewer, annotator or reviewer")
    how = a.add_mutually_exclusive_group()
    how.add_argument("--oidc", action="store_true", help="signs in through the identity provider (no token)")
    how.add_argument("--password", action="store_true", help="type a password instead of getting a token")
    a = actions.add_parser("rotate", help="replace a user's token (the old one and its sessions stop working)")
    a.add_argument("name", help="the user")
    a.add_argument("--password", action="store_true", help="type a password instead of getting a token")
    a = actions.add_parser("role", help="change a user's role")
    a.add_argument("name", help="the user")
    a.add_argument("role", choices=[r.value for r in Role], help="the new role: viewer, annotator or reviewer")
    a = actions.add_parser("remove", help="remove a user (their browser sessions are signed out)")
    a.add_argument("name", help="the user")
    actions.add_parser("list", help="every user with their role and how they sign in")
    return parser

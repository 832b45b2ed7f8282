"""`memwb`: replay, retrieve, export, consolidate, dump/load, check and open the workbench from a shell.

The command-line contract (flags and JSON shapes) is stable: scripts and
checks rely on it. Exit codes: 0 done, 2 an error (one line on stderr), 1 a
replay or consolidation whose every LLM call failed (counts by error code on
stderr; what was ingested stays stored), a `check` with findings, a `bench` with a failed task (the
others' figures are written), or output its reader closed early (`memwb … | head`: nothing is said).

One module per group of commands: `parser` (the flags), `session_commands`, `store_commands`,
`bench_commands`, `server_commands`; `python -m engine.cli` runs `main`.
"""
from __future__ import annotations

import os
import sys

from engine.cli.bench_commands import cmd_bench, cmd_reproduce
from engine.cli.engine_commands import cmd_engine, cmd_engines
from engine.cli.gold_commands import cmd_audit_gold, cmd_splits
from engine.cli.parser import build_parser
from engine.cli.server_commands import cmd_auth, cmd_llm, cmd_ui
from engine.cli.session_commands import (
    cmd_consolidate,
    cmd_diagnostics,
    cmd_export,
    cmd_replay,
    cmd_retrieve,
    cmd_runs,
    cmd_schema,
)
from engine.cli.store_commands import cmd_check, cmd_dump, cmd_load
from engine.core.redact import redact


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)       # the command as typed (`memwb bench` records it)
    try:
        code = COMMANDS[args.command](args)
        sys.stdout.flush()              # a closed pipe shows here, inside the try, not at interpreter exit
        return code
    except BrokenPipeError:
        return _reader_gone()
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # one clear line for the user; tracebacks on request
        if os.environ.get("MEMWB_DEBUG"):
            raise
        print(f"memwb {args.command}: error: {redact(str(exc))}", file=sys.stderr)
        return 2


def _reader_gone() -> int:
    """The reader of stdout closed it (`memwb retrieve … | head`): stop quietly, as the Python docs' note on SIGPIPE
    advises; stdout is pointed at devnull so the flush at exit does not raise again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    return 1


COMMANDS = {"llm": cmd_llm, "replay": cmd_replay, "retrieve": cmd_retrieve, "export": cmd_export, "consolidate": cmd_consolidate,
            "runs": cmd_runs, "diagnostics": cmd_diagnostics, "dump": cmd_dump, "load": cmd_load,
            "check": cmd_check, "schema": cmd_schema, "bench": cmd_bench, "reproduce": cmd_reproduce, "ui": cmd_ui, "auth": cmd_auth,
            "engines": cmd_engines, "engine": cmd_engine, "audit-gold": cmd_audit_gold, "splits": cmd_splits}

"""`memwb dump`, `load` and `check`: the database as JSON Lines, and its integrity check."""
from __future__ import annotations

import sys


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

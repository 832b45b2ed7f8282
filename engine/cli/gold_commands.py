"""`memwb audit-gold` (flag questions whose gold looks wrong) and `memwb splits` (lock a test split)."""
from __future__ import annotations

import json
from collections import Counter
from pathlib import Path


def cmd_audit_gold(args) -> int:
    from engine.eval.gold_audit import REASONS, audit_file

    results = [json.loads(Path(p).read_text(encoding="utf-8")) for p in args.results or ()]
    convs, flags = audit_file(args.input, results)
    if args.json:
        print(json.dumps({"source": str(Path(args.input).resolve()),
                          "questions": sum(len(c.questions) for c in convs),
                          "counts": dict(Counter(f.reason for f in flags)),
                          "flags": [f.to_dict() for f in flags]}, ensure_ascii=False, indent=1))
        return 0
    for f in flags:
        print(f"{f.question_id}\t{f.reason}\t{f.question}\tanswer: {f.answer}\tevidence: "
              f"{', '.join(f.evidence) or '-'}\t{f.detail}")
    counts = Counter(f.reason for f in flags)
    total = sum(len(c.questions) for c in convs)
    print(f"{len({(f.conversation, f.question_id) for f in flags})} of {total} questions flagged: "
          + ", ".join(f"{reason} {counts[reason]}" for reason in REASONS if counts[reason]))
    return 0


def cmd_splits(args) -> int:
    import getpass

    from engine.core.splits import LOCK_FILE, locked_splits, write_lock

    folder = Path(args.folder)
    if not folder.is_dir():
        raise NotADirectoryError(f"{folder} is not a dataset folder")
    locked, _ = locked_splits(folder)
    if args.action == "show":
        print(f"{folder}: locked {', '.join(locked) or 'nothing'}")
        return 0
    wanted = set(locked) | {args.split} if args.action == "lock" else set(locked) - {args.split}
    write_lock(folder, wanted, getpass.getuser())
    print(f"{folder / LOCK_FILE}: locked {', '.join(sorted(wanted)) or 'nothing'}")
    return 0

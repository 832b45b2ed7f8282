"""Time travel cost: `at(turn)` for a late turn of a LoCoMo conversation, with and without fold checkpoints.

Replays the conversation into All-Mem (every 3 sessions), then times, for a
late turn: the fold from the first record (what every `at(turn)` cost before
checkpoints), the fold from the nearest checkpoint, and the whole read-only
view `engine.at(turn)` (fold plus vectors, FAISS and BM25 rebuilt from the
embedding cache). Prints the figures and writes them to out/bench_fold.json.

    python scripts/bench_fold.py [--conversation conv-26] [--turn 400] [--repeat 5]
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from results import timings, write_json  # noqa: E402

from engine.loaders import load_conversation  # noqa: E402
from engine.runtime.replay import Schedule, replay  # noqa: E402
from engine.session import open_session  # noqa: E402
from engine.store.tables import rows_of  # noqa: E402

DEFAULT_DATA = ROOT.parent / "shared" / "data" / "locomo" / "locomo-dev8.json"


def timed(fn, repeat: int) -> tuple[float, object]:
    """Median milliseconds over `repeat` calls, and the last result."""
    seconds, result = timings(fn, repeat)
    return round(statistics.median(seconds) * 1e3, 2), result


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=str(DEFAULT_DATA))
    ap.add_argument("--conversation", default="conv-26")
    ap.add_argument("--turn", type=int, default=400)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--out", default=str(ROOT / "out" / "bench_fold.json"))
    args = ap.parse_args()
    conv = load_conversation(args.data, args.conversation)
    engine = open_session(Path(tempfile.mkdtemp(prefix="memwb-fold-")) / "m.sqlite")
    replay(engine, conv, Schedule.parse("every-3-sessions"))
    store = engine.store
    engine.embedder.warm()
    full_ms, full = timed(lambda: store.load_state(upto_turn=args.turn, checkpoints=False), args.repeat)
    ckpt_ms, ckpt = timed(lambda: store.load_state(upto_turn=args.turn), args.repeat)
    if rows_of(full) != rows_of(ckpt):
        raise SystemExit("the fold from a checkpoint differs from the fold from the first record")
    view_ms, _ = timed(lambda: engine.at(upto_turn=args.turn), args.repeat)
    start = store._checkpoint(store.last_seq(upto_turn=args.turn))
    result = {
        "conversation": conv.id, "turn": args.turn, "records": store.last_seq(),
        "records_to_turn": store.last_seq(upto_turn=args.turn),
        "checkpoint_every": store.checkpoint_every, "checkpoint_seq": start.seq if start else None,
        "fold_from_first_record_ms": full_ms, "fold_from_checkpoint_ms": ckpt_ms, "at_turn_view_ms": view_ms,
    }
    print(f"{conv.id}: {result['records']} records; at turn {args.turn} ({result['records_to_turn']} records, "
          f"nearest checkpoint at seq {result['checkpoint_seq']})")
    print(f"fold from the first record: {full_ms:.1f} ms   fold from the checkpoint: {ckpt_ms:.1f} ms   "
          f"whole at(turn) view: {view_ms:.1f} ms   (median of {args.repeat})")
    write_json(args.out, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""How far the update model's calibration carries beyond the chats it is fit on: the stored model's probabilities
for pairs of one speaker's turns in QMSum train meetings, where a later turn seldom gives a fact a new value, and
the dev figures of a model fit with those pairs as unlabelled ones; with --locomo, every Update All-Mem applies
(θ 0.9) when each LoCoMo dev conversation is replayed as `memwb replay` replays it, with both statements, for a
person to read (docs/DECISIONS.md, stop 66).

    python scripts/update_model_shift.py                   # every third train meeting, its first 300 turns
    python scripts/update_model_shift.py --meetings 33 --turns 1000
    python scripts/update_model_shift.py --locomo ../shared/data/locomo/locomo-dev8.json

Pairs are made as `scripts/fit_decisions.py` makes them (each turn of four words or more with its `NEAREST`
earlier turns of the same speaker most alike in meaning). Reads QMSum's train split and the dev decision set
only; writes out/update_model_shift.json.
"""
from __future__ import annotations

import argparse
import dataclasses
import os
import sys
from pathlib import Path

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import fit_decisions as fd  # noqa: E402
from results import write_json  # noqa: E402

from engine.core.proposal import Status  # noqa: E402
from engine.llm.decision_models import models  # noqa: E402
from engine.llm.embedder import Embedder  # noqa: E402
from engine.llm.statements import UPDATE_FEATURES  # noqa: E402
from engine.loaders import load_conversations  # noqa: E402
from engine.runtime.replay import Schedule, replay  # noqa: E402
from engine.session import open_session  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
QMSUM_TRAIN = ROOT.parent / "shared" / "data" / "qmsum" / "train"
GATES = (0.5, 0.9)


def meeting_rows(embedder: Embedder, meetings: int, turns: int) -> list[tuple]:
    """Update rows of QMSum train meetings, every one unlabelled (no decision is labelled there)."""
    files = sorted(QMSUM_TRAIN.glob("*.json"))
    files = files[:: max(1, len(files) // meetings)][:meetings]
    rows = []
    for f in files:
        conv = load_conversations(f)[0]
        kept = [t for t in conv.turns if len(t.text.split()) >= 4][:turns]
        rows += fd.pairs_of(dataclasses.replace(conv, turns=kept, decisions=[]), embedder)
    return rows


def applied_updates(source: Path, work: Path) -> list[dict]:
    """All-Mem's applied Updates over each conversation of `source`, replayed on its default schedule."""
    out = []
    for conv in load_conversations(source):
        engine = open_session(work / f"{conv.id}.sqlite", engine="allmem")
        replay(engine, conv, Schedule.parse("every-3-sessions"))
        nodes = engine.state.nodes
        for p in sorted(engine.state.proposals.values(), key=lambda p: p.id):
            if p.op == "update" and p.status == Status.APPLIED:
                new, old = (nodes[t].raw for t in p.targets[:2])
                out.append({"conversation": conv.id, "confidence": p.confidence, "old": old, "new": new})
    return out


def passed(p: np.ndarray, y: np.ndarray) -> dict:
    return {str(g): {"passed": int((p >= g).sum()), "updates": int(((p >= g) & (y == 1)).sum())} for g in GATES}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--meetings", type=int, default=11, help="train meetings read, spread over the split")
    ap.add_argument("--turns", type=int, default=300, help="turns read of each meeting")
    ap.add_argument("--locomo", help="a LoCoMo file: list All-Mem's applied Updates on its conversations instead")
    ap.add_argument("--out", default=str(ROOT / "out" / "update_model_shift.json"))
    args = ap.parse_args()
    if args.locomo:
        import tempfile

        updates = applied_updates(Path(args.locomo), Path(tempfile.mkdtemp(prefix="memwb-shift-")))
        for u in updates:
            print(f"{u['conversation']} {u['confidence']:.3f}\n  old: {u['old'][:110]}\n  new: {u['new'][:110]}")
        print(f"{len(updates)} Updates applied")
        write_json(args.out, {"locomo": args.locomo, "applied_updates": updates})
        return 0
    embedder = Embedder()
    stored = models()["update"]
    meetings = meeting_rows(embedder, args.meetings, args.turns)
    p_meet = np.array([stored.probability(r[0]) for r in meetings])
    dev = fd.update_rows("dev", embedder)
    y_dev = np.array([r[1] for r in dev])
    with_meetings = fd.cross_validated(dev, UPDATE_FEATURES, vetoes=fd.VETOES, also=meetings)
    alone = fd.cross_validated(dev, UPDATE_FEATURES, vetoes=fd.VETOES)
    result = {"meeting_pairs": len(meetings), "meetings": args.meetings, "turns_per_meeting": args.turns,
              "stored_model_on_meetings": passed(p_meet, np.zeros(len(meetings))),
              "dev_pairs": len(dev), "dev_updates": int(y_dev.sum()),
              "dev_cross_validated": passed(alone, y_dev),
              "dev_cross_validated_fit_with_meetings": passed(with_meetings, y_dev)}
    print(f"stored update model on {len(meetings):,} pairs of one speaker in {args.meetings} QMSum train meetings:")
    for g, f in result["stored_model_on_meetings"].items():
        print(f"  p >= {g}: {f['passed']:,} pairs")
    print(f"dev ({len(dev):,} pairs, {int(y_dev.sum())} updates), cross-validated by conversation:")
    for g in map(str, GATES):
        a, b = result["dev_cross_validated"][g], result["dev_cross_validated_fit_with_meetings"][g]
        print(f"  p >= {g}: fit on dev {a['passed']} passed, {a['updates']} updates; "
              f"fit on dev and the meetings {b['passed']} passed, {b['updates']} updates")
    write_json(args.out, result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""What each engine embeds while it replays a conversation, and which stage reads each vector (issue 55.2).

Replays a conversation (the demo by default, or LoCoMo conv-26) into each engine as `memwb replay` does, with
every call to the embedder traced to the engine function that asked for it. A text asked for only by a warm-up
(`prefetch`, `embed_ahead`, a batch that fills the cache ahead of the calls that read it) and never by a
stage is embedded for nothing. Prints, per engine, the distinct texts and their tokens (the ONNX tokenizer's)
by the function that reads them, and the texts nothing reads; writes the same to `--out` as JSON.

    python scripts/embedded_texts.py                                  # the demo, four paper engines
    python scripts/embedded_texts.py --source locomo --engine memloom
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ["MEMWB_WORKSPACE"] = tempfile.mkdtemp(prefix="memwb-embedded-texts-")

from replay_fingerprint import ENGINES, SOURCES, fresh_session  # noqa: E402
from results import write_json  # noqa: E402

from engine.llm.embedder import Embedder  # noqa: E402
from engine.runtime.replay import replay  # noqa: E402

WARM_UPS = ("prefetch",)      # callers that only fill the cache for later calls (`embed_ahead` is the embedder's own)
HERE = (str(Path(__file__).resolve()), str(ROOT / "engine" / "llm" / "embedder.py"))


def asker() -> str:
    """The engine function that asked the embedder, `module:function`: the first frame outside the embedder."""
    frame = sys._getframe(2)
    while frame is not None and frame.f_code.co_filename in HERE:
        frame = frame.f_back
    if frame is None:
        return "?"
    path = Path(frame.f_code.co_filename)
    where = path.relative_to(ROOT).with_suffix("") if path.is_relative_to(ROOT) else path.stem
    return f"{str(where).replace('/', '.')}:{frame.f_code.co_name}"


def traced(engine_name: str, source: str) -> dict:
    """Replay `source` into `engine_name`, recording for every distinct text who asked for it."""
    askers: dict[str, set[str]] = defaultdict(set)
    embed = Embedder.embed

    def recording(self, texts):
        who = asker()
        for t in texts:
            askers[t].add(who)
        return embed(self, texts)

    def recording_one(self, text):
        askers[text].add(asker())
        return embed(self, [text])[0]

    engine, conversation, schedule = fresh_session(source, engine_name)
    embed_one = Embedder.embed_one
    Embedder.embed, Embedder.embed_one = recording, recording_one
    try:
        replay(engine, conversation, schedule)
    finally:
        Embedder.embed, Embedder.embed_one = embed, embed_one
    turns = [t.text for t in conversation.turns]
    counted = token_counts(list(askers) + turns, engine.embedder)
    return {"turns": len(turns), "askers": askers, "tokens": counted,
            "turn_tokens": sum(counted[t] for t in turns)}


def token_counts(texts: list[str], embedder: Embedder) -> dict[str, int]:
    """Each distinct text's tokens (the encoder's tokenizer; words where the encoder has none), counted once."""
    texts = list(dict.fromkeys(texts))
    encoder = embedder.model()
    if not hasattr(encoder, "token_ids"):
        return {t: len(t.split()) for t in texts}
    return {t: len(ids) for t, ids in zip(texts, encoder.token_ids(texts))}


def inventory(engine_name: str, source: str) -> dict:
    seen = traced(engine_name, source)
    counted = seen["tokens"]
    by_reader: dict[str, list[str]] = defaultdict(list)
    unread = []
    for text, who in seen["askers"].items():
        readers = sorted(w for w in who if w.rsplit(":", 1)[-1] not in WARM_UPS)
        if not readers:
            unread.append(text)
        for w in readers:
            by_reader[w].append(text)
    every = list(seen["askers"])
    out = {"engine": engine_name, "source": source, "turns": seen["turns"], "turn_tokens": seen["turn_tokens"],
           "texts": len(every), "tokens": sum(counted[t] for t in every),
           "read_by": {w: {"texts": len(t), "tokens": sum(counted[x] for x in t)}
                       for w, t in sorted(by_reader.items())},
           "unread": {"texts": len(unread), "tokens": sum(counted[t] for t in unread), "examples": unread[:5]}}
    out["tokens_x_turns"] = round(out["tokens"] / max(1, seen["turn_tokens"]), 2)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--source", choices=sorted(SOURCES), default="demo")
    ap.add_argument("--engine", choices=ENGINES, action="append", help="repeatable; default: all four")
    ap.add_argument("--out", default=str(ROOT / "out" / "embedded_texts.json"))
    args = ap.parse_args()
    results = []
    for name in args.engine or ENGINES:
        inv = inventory(name, args.source)
        results.append(inv)
        print(f"{name} on {args.source}: {inv['texts']} texts, {inv['tokens']:,} tokens "
              f"({inv['tokens_x_turns']}x the turns' {inv['turn_tokens']:,})")
        for who, n in inv["read_by"].items():
            print(f"  {n['texts']:>5} texts {n['tokens']:>8,} tokens  read by {who}")
        print(f"  {inv['unread']['texts']:>5} texts {inv['unread']['tokens']:>8,} tokens  read by nothing")
    write_json(Path(args.out), {"source": args.source, "engines": results})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

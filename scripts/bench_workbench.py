"""How long the workbench makes a researcher wait, on LoCoMo (issue 8, point 3): prints the figures and writes
them to out/bench_workbench.json.

- `embed_batch_s`: conv-26's turn texts embedded once in one batch by a fresh embedder (the model loaded
  beforehand), the yardstick of the jump targets.
- `jump_cold_s` / `jump_warm_s`: `Workbench.jump` to the end of conv-26 (`--engine`, All-Mem by default;
  every-3-sessions: the Replay page's default) from an empty embedding cache (a new workspace for the run), and
  again into a new database with every vector cached; each with its ratio to `embed_batch_s` (target: cold
  within 3x) and warm turns/s (target >= 300).
- `jump.embedded` / `embed_needed_s`: how many texts the cold jump ran through the model (All-Mem embeds more
  than the turns: each utterance, its descriptor, the offline diagnosis's sentences), and how long one fresh
  batch of exactly those texts takes: `cold_needed_ratio` is the replay's cost beyond the encoding it needs.
  `jump.needed_tokens_ratio`: those texts' tokens against the turns' (the ONNX encoder's tokenizer), the same
  floor counted without a clock, since the encoder's time goes with the tokens it reads.
- `page_switch_s`: each page run headless by Streamlit's AppTest on a workbench of about 400 units (conv-26)
  and about 2,000 units (several LoCoMo conversations in one JSONL conversation), first visit and again
  (target <= 1 s at 2,000 units).
- `diagnosis_s`: Run diagnosis (`engine.propose`, what the Consolidation page's button calls) on conv-26 with
  every unit still buffered (manual schedule), for an engine with offline processes.

One engine per run, since a cold jump needs an embedding cache no other engine has filled:
`--engine memloom --parts jumps` measures MemLoom's replay against the same batch.

Timings on a shared machine vary with its load: the load average is recorded beside them.

    python scripts/bench_workbench.py [--out out/bench_workbench.json] [--units 2000] [--parts jumps,pages]
                                      [--engine allmem]
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ["MEMWB_WORKSPACE"] = tempfile.mkdtemp(prefix="memwb-bench-workspace-")   # cold means an empty cache

from results import noting_encoder, write_json  # noqa: E402

from engine.engines import engine_schema, known_engines  # noqa: E402
from engine.llm.embedder import Embedder  # noqa: E402
from engine.loaders import load_conversations  # noqa: E402
from workbench.model import LOCOMO_PATH, Workbench  # noqa: E402

CONVERSATION = "conv-26"
SCHEDULE = "every-3-sessions"
PAGES = tuple(f"../pages/{name}.py" for name in            # relative to the main script's folder
              ("1_replay", "2_memory_graph", "3_consolidation", "4_retrieval", "5_annotate"))


def folder(parent: Path, name: str) -> Path:
    path = parent / name
    path.mkdir(parents=True, exist_ok=True)
    return path


def timed(fn):
    start = time.perf_counter()
    out = fn()
    return time.perf_counter() - start, out


def embed_batch(turns) -> float:
    emb = Embedder(shared=None)          # the model alone: no cache to read or to fill for the jumps after
    emb.warm()
    seconds, _ = timed(lambda: emb.embed([t.raw for t in turns]))
    return seconds


def tokens(embedder: Embedder, texts: list[str]) -> int | None:
    """How many tokens the model reads for `texts` (None under torch, whose encoder does not say)."""
    encoder = embedder.model()
    return sum(map(len, encoder.token_ids(texts))) if hasattr(encoder, "token_ids") else None


def jumps(workdir: Path, engine: str, turns) -> dict:
    emb = Embedder()
    emb.warm()
    cold = Workbench.open(LOCOMO_PATH, CONVERSATION, engine, schedule=SCHEDULE, workdir=folder(workdir, "cold"),
                          embedder=emb)
    n = cold.total_turns
    texts: list[str] = []
    undo = noting_encoder(emb.model(), texts)
    cold_s, _ = timed(lambda: cold.jump(n))
    undo()
    needed = Embedder(shared=None)
    needed_s, _ = timed(lambda: needed.embed(texts))
    warm = Workbench.open(LOCOMO_PATH, CONVERSATION, engine, schedule=SCHEDULE, workdir=folder(workdir, "warm"),
                          embedder=cold.engine.embedder)
    encoded = warm.engine.embedder.encoded
    warm_s, _ = timed(lambda: warm.jump(n))
    assert warm.engine.embedder.encoded == encoded, "the warm jump ran the model"
    needed_tokens, turn_tokens = tokens(emb, texts), tokens(emb, [t.raw for t in turns])
    return {"turns": n, "cold_s": cold_s, "warm_s": warm_s, "warm_turns_per_s": n / warm_s,
            "units": len(cold.engine.state.units), "embedded": len(texts), "embed_needed_s": needed_s,
            "cold_needed_ratio": cold_s / needed_s, "needed_tokens": needed_tokens, "turn_tokens": turn_tokens,
            "needed_tokens_ratio": needed_tokens / turn_tokens if needed_tokens and turn_tokens else None,
            "embedder": cold.engine.embedder}


def diagnosis(workdir: Path, embedder: Embedder, engine: str) -> dict:
    wb = Workbench.open(LOCOMO_PATH, CONVERSATION, engine, schedule="manual", workdir=folder(workdir, "diag"),
                        embedder=embedder)
    wb.jump(wb.total_turns)
    buffered = wb.engine.state.buffered()
    seconds, proposals = timed(lambda: wb.engine.propose(manual=True))
    return {"buffered": buffered, "seconds": seconds, "proposals": len(proposals)}


def mixed_file(folder: Path, units: int) -> Path:
    """LoCoMo conversations one after another as one JSONL conversation of at least `units` turns."""
    lines, total = [], 0
    for conv in load_conversations(LOCOMO_PATH):
        for t in conv.turns:
            lines.append({"conversation": "locomo-mix", "id": f"{conv.id}/{t.id}", "speaker": t.speaker,
                          "text": t.text, "time": t.time, "session": f"{conv.id}/{t.session}"})
        total += len(conv.turns)
        if total >= units:
            break
    path = folder / "locomo-mix.jsonl"
    path.write_text("\n".join(json.dumps(x) for x in lines))
    return path


def page_switches(wb: Workbench) -> dict:
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(ROOT / "workbench" / "app.py"), default_timeout=900)
    at.run()
    at.session_state["workbench"] = wb
    at.run()
    out = {}
    for page in PAGES + PAGES:
        seconds, _ = timed(lambda: at.switch_page(page).run())
        if at.exception:
            raise SystemExit(f"{page} failed: {at.exception}")
        out.setdefault(Path(page).stem, []).append(round(seconds, 3))
    return {page: {"first_s": s[0], "again_s": s[1]} for page, s in out.items()}


def jump_figures(work: Path, conversation, result: dict, engine: str) -> Embedder:
    """Batch embed, cold and warm jumps, diagnosis on a full buffer; returns the embedder holding the vectors."""
    batch = embed_batch(conversation.turns)
    j = jumps(work, engine, conversation.turns)
    embedder = j.pop("embedder")
    j.update(cold_ratio=j["cold_s"] / batch, warm_ratio=j["warm_s"] / batch)
    print(f"embed {len(conversation.turns)} turns of {CONVERSATION} in one batch: {batch:.2f} s")
    print(f"{engine}: jump to the end of {CONVERSATION} ({j['turns']} turns, {j['units']} units): "
          f"cold {j['cold_s']:.2f} s = {j['cold_ratio']:.1f}x the batch embed; warm {j['warm_s']:.2f} s = "
          f"{j['warm_ratio']:.1f}x, {j['warm_turns_per_s']:.0f} turns/s")
    print(f"the cold jump embedded {j['embedded']} texts; those in one batch: {j['embed_needed_s']:.2f} s, so the "
          f"cold jump is {j['cold_needed_ratio']:.1f}x the encoding it needs")
    if j["needed_tokens_ratio"] is not None:
        print(f"those texts hold {j['needed_tokens']} tokens, {j['needed_tokens_ratio']:.2f}x the turns' "
              f"{j['turn_tokens']}: the least a cold jump can be against the turns' batch")
    result.update(engine=engine, embed_batch_s=batch, jump=j)
    if engine_schema(engine).processes:
        d = diagnosis(work, embedder, engine)
        print(f"Run diagnosis on a full buffer ({d['buffered']} units): {d['seconds']:.2f} s, "
              f"{d['proposals']} proposals")
        result.update(diagnosis=d)
    return embedder


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(ROOT / "out" / "bench_workbench.json"))
    ap.add_argument("--units", type=int, default=2000, help="size of the larger page-switch workbench")
    ap.add_argument("--parts", default="jumps,pages", help="jumps (batch embed, jumps, diagnosis) and/or pages")
    ap.add_argument("--engine", default="allmem", choices=known_engines(), help="the engine the jumps replay")
    args = ap.parse_args()
    if not LOCOMO_PATH.exists():
        raise SystemExit(f"LoCoMo is missing at {LOCOMO_PATH}")
    work = Path(tempfile.mkdtemp(prefix="memwb-bench-"))
    conversation = next(c for c in load_conversations(LOCOMO_PATH) if c.id == CONVERSATION)
    load_before = os.getloadavg()[0]
    parts = set(args.parts.split(","))
    result = {"conversation": CONVERSATION, "schedule": SCHEDULE, "cpus": os.cpu_count()}
    embedder = Embedder()
    if "jumps" in parts:
        embedder = jump_figures(work, conversation, result, args.engine)
    if "pages" in parts:
        result["page_switch_s"] = {}
        small = Workbench.open(LOCOMO_PATH, CONVERSATION, workdir=folder(work, "p400"), embedder=embedder)
        small.jump(small.total_turns)
        big = Workbench.open(mixed_file(work, args.units), None, workdir=folder(work, "p2000"), embedder=embedder)
        big_s, _ = timed(lambda: big.jump(big.total_turns))
        print(f"built the larger workbench: {big.total_turns} turns in {big_s:.1f} s")
        for wb in (small, big):
            units = len(wb.engine.state.units)
            figures = page_switches(wb)
            result["page_switch_s"][str(units)] = figures
            print(f"page switch at {units} units: " + ", ".join(
                f"{p} {f['first_s']:.2f} s (again {f['again_s']:.2f} s)" for p, f in figures.items()))
    result["load_average"] = {"before": load_before, "after": os.getloadavg()[0]}
    print(f"load average {load_before:.1f} before, {os.getloadavg()[0]:.1f} after ({os.cpu_count()} cores)")
    write_json(args.out, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())

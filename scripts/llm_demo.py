"""Replay the demo through a real model and print what each LLM role cost, per engine.

Starts the local model server (`memwb llm serve`'s, SmolLM2-135M-Instruct on llama.cpp; `memwb llm install`
first) unless --base-url names another OpenAI-compatible endpoint, replays the first --turns turns of the
demo into each engine with `--llm openai` (every call recorded in the session database under --out), then
asks the offline rules the same inputs and prints, per engine and role, calls, the server's prompt and
completion tokens, latency p50/p95, the schema-valid rate and how often the offline rules decide otherwise.
Writes costs.json and costs.md into --out beside the session databases, with the model load time and the
load average before and after (figures from a loaded machine are not quiet-machine figures).

    python scripts/llm_demo.py --turns 102 --engines allmem,memloom --out out/llm-demo

A 135M model proves the path and the costs, not the papers' quality.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from engine.core.ports import free_port  # noqa: E402
from engine.eval.llm_costs import MODEL_NOTE, cost_table, costs_and_decisions, decisions_line, offline_llm  # noqa: E402
from engine.llm.server import LocalServer  # noqa: E402


def loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--turns", type=int, default=102, help="first N turns of the demo (default: all 102)")
    ap.add_argument("--engines", default="allmem,memloom")
    ap.add_argument("--consolidate", default="every-3-sessions")
    ap.add_argument("--max-tokens", type=int, help="output limit per call (default: each role's budget, "
                                                   "engine.llm.schemas.TOKEN_CAPS; a value can only lower it)")
    ap.add_argument("--timeout", type=float, default=600,
                    help="seconds per call (default 600: on two shared cores a ~4,000-token relation-synthesis "
                         "prompt took minutes to read, and a client that gives up makes the server read it again)")
    ap.add_argument("--base-url", help="an OpenAI-compatible endpoint to use instead of starting the local server "
                                       "(model and key from MEMWB_OPENAI_MODEL / MEMWB_OPENAI_API_KEY)")
    ap.add_argument("--out", default="out/llm-demo")
    args = ap.parse_args()
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    lines = [line for line in (ROOT / "datasets" / "demo" / "demo.jsonl").read_text(encoding="utf-8").splitlines()
             if json.loads(line).get("type") != "question"][:args.turns]
    conv = out / f"demo{len(lines)}.jsonl"
    conv.write_text("\n".join(lines) + "\n", encoding="utf-8")
    report = {"turns": len(lines), "consolidate": args.consolidate, "max_tokens": args.max_tokens,
              "timeout": args.timeout,
              "load_before": loadavg(), "engines": {}}
    server = None
    if args.base_url:
        env = {**os.environ, "MEMWB_OPENAI_BASE_URL": args.base_url}
    else:
        server = LocalServer(port=free_port(), log=out / "server.log").start()
        report["model_load_seconds"] = round(server.load_seconds, 2)
        env = {**os.environ, **server.env()}
        print(f"model server {server.alias} on {server.base_url}, loaded in {server.load_seconds:.1f} s", flush=True)
    env.pop("MEMWB_OPENAI_MAX_TOKENS", None)
    if args.max_tokens is not None:
        env["MEMWB_OPENAI_MAX_TOKENS"] = str(args.max_tokens)
    env["MEMWB_OPENAI_TIMEOUT"] = str(args.timeout)
    try:
        for engine in [e.strip() for e in args.engines.split(",") if e.strip()]:
            db = out / f"{engine}.sqlite"
            for stale in out.glob(f"{engine}.sqlite*"):
                stale.unlink()
            started = time.monotonic()
            proc = subprocess.run([sys.executable, "-m", "engine.cli", "replay", str(conv), "--db", str(db),
                                   "--engine", engine, "--llm", "openai", "--consolidate", args.consolidate,
                                   "--quiet"], cwd=ROOT, env=env, capture_output=True, text=True)
            seconds = time.monotonic() - started
            print(f"{engine}: {proc.stdout.strip()} ({seconds:.0f} s, load {loadavg()})", flush=True)
            if proc.stderr.strip():
                print(proc.stderr.strip(), flush=True)
            report["engines"][engine] = {"seconds": round(seconds, 1), "exit": proc.returncode,
                                         "summary": proc.stdout.strip(), "stderr": proc.stderr.strip()}
    finally:
        if server is not None:
            server.stop()
    from engine.eval.metrics import llm_calls
    from engine.llm.embedder import Embedder
    from engine.store.log_store import Store

    reference = offline_llm(Embedder())
    md = [f"# The demo through a real model ({len(lines)} turns, {args.consolidate}, max_tokens "
          f"{args.max_tokens or 'per role'})", "", f"{MODEL_NOTE}.", "",
          f"Model load: {report.get('model_load_seconds', '–')} s. Load average before: {report['load_before']}, "
          f"after: {loadavg()}.", ""]
    for engine, row in report["engines"].items():
        costs, decided = costs_and_decisions(llm_calls(Store(out / f"{engine}.sqlite")), reference)
        row["costs"], row["decisions"] = costs, decided
        table = cost_table(costs, f"## {engine} ({row['seconds']:.0f} s)\n\n{row['summary']}\n") + \
            f"\n\n{decisions_line(decided, 'the model')}"
        print(table, flush=True)
        md += [table, ""]
    report["load_after"] = loadavg()
    (out / "costs.json").write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    (out / "costs.md").write_text("\n".join(md) + "\n", encoding="utf-8")
    print(f"wrote {out / 'costs.json'} and {out / 'costs.md'}")
    return 0 if all(r["exit"] in (0, 1) for r in report["engines"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())

"""The demo through the recorded calls, in figures: calls per role, proposals made, and how many a reviewer
would reject on sight (with examples).

    python examples/memwb-mem0/demo_figures.py --db /tmp/mem0-recorded.db

"On sight" means from the proposal card alone, without judging the memory's worth: the entry names a memory id
mem0 never showed the model, its text is empty, or its text shares no content word with the turns mem0 was
given (the model copied its prompt's example: "Loves cheese pizza").
"""
from __future__ import annotations

import argparse
import re
from collections import Counter
from pathlib import Path
from statistics import mean

from engine.core.oplog import OpKind
from engine.engines import ENGINES, register_engine
from engine.llm import load_calls_jsonl
from engine.loaders import load_conversation
from engine.runtime.replay import Schedule, replay
from engine.session import open_session

HERE = Path(__file__).resolve().parent
DEMO = HERE.parents[1] / "datasets" / "demo" / "demo.jsonl"
STOP = {"the", "a", "an", "and", "or", "to", "of", "in", "on", "i", "is", "it", "my", "you", "for", "with", "so",
        "that", "this", "was", "are", "be", "at", "me", "we", "he", "she", "they", "her", "his", "its", "im", "ive"}


def words(text: str) -> set[str]:
    return {w for w in re.findall(r"[a-z]+", text.lower().replace("'", "")) if w not in STOP}


def on_sight(p, given: str) -> str | None:
    """Why a reviewer rejects `p` from its card alone, or None."""
    if p.reason_code == "UNKNOWN_ID":
        return f"names memory id {p.plan['id']!r}, which mem0 never showed"
    if p.op in ("add", "update") and not p.plan.get("text"):
        return "empty text"
    if p.op in ("add", "update") and not words(p.plan["text"]) & words(given):
        return "its text is in none of the turns given (copied from the prompt's example)"
    return None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db", required=True)
    args = ap.parse_args()
    if "mem0" not in ENGINES:
        register_engine("mem0", lambda: __import__("memwb_mem0.engine", fromlist=["Mem0Engine"]).Mem0Engine)
    import memwb_mem0
    eng = open_session(args.db, engine="mem0", llm="recorded", records=memwb_mem0.RECORDING)
    replay(eng, load_conversation(DEMO), Schedule.parse("every-1-sessions"))
    calls = [op.payload for op in eng.store.ops(kinds=[OpKind.LLM_CALL])]
    recorded = {c.key: c.latency_ms for c in load_calls_jsonl(memwb_mem0.RECORDING)}     # the model's own time
    print("calls per role:")
    for role in sorted({c["role"] for c in calls}):
        mine = [c for c in calls if c["role"] == role]
        print(f"  {role}: {len(mine)} calls, {sum(c['error_code'] is None for c in mine)} schema-valid, "
              f"prompt {mean(c['prompt_tokens'] for c in mine):.0f} tokens, reply {mean(c['completion_tokens'] for c in mine):.0f} "
              f"tokens, {mean(recorded[c['key']] for c in mine) / 1000:.1f} s on average when recorded (model {mine[0]['model']})")
    facts = [f for c in calls if c["role"] == "mem0_facts" and c["data"] for f in c["data"]["facts"]]
    print(f"facts extracted: {len(facts)}: " + "; ".join(repr(f) for f in facts))
    proposals = sorted(eng.state.proposals.values(), key=lambda p: p.id)
    print(f"proposals: {len(proposals)}: " + ", ".join(f"{op} {n}" for op, n in Counter(p.op for p in proposals).items()))
    print("  by status and reason code: " + ", ".join(f"{s}/{c} {n}" for (s, c), n in
                                                     Counter((p.status.value, p.reason_code) for p in proposals).items()))
    nodes = eng.state.nodes
    rejected = []
    for p in proposals:
        session = nodes[p.targets[-1]].session          # the run gave mem0 that session's turns
        given = " ".join(n.raw for n in nodes.values() if n.kind == "turn" and n.session == session)
        why = on_sight(p, given)
        if why:
            rejected.append((p, why))
    print(f"a reviewer rejects on sight: {len(rejected)} of {len(proposals)}")
    for p, why in rejected:
        print(f"  #{p.id} {p.op.upper()} id={p.plan['id']!r} text={p.plan['text']!r}: {why}")
    print(f"memories stored: {sum(n.kind == 'memory' for n in nodes.values())}")


if __name__ == "__main__":
    main()

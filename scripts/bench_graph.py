"""Render time of the memory graph document in headless Chromium at 800 and 5,000 units (and a real session).

Prints the figures and writes them to out/bench_graph.json. Timing lives here, never in tests.

    python scripts/bench_graph.py [--sizes 800 5000] [--db SESSION.sqlite] [--repeats 3]

States are built from real LoCoMo turns (conversations taken in file order until the size is reached, each
LoCoMo session a session of the memory; the 8 dev conversations hold 4,805 turns, so 5,000 takes the first
195 again as new sessions) with the edges All-Mem's online path makes of them: a temporal edge
from each turn to the one before it in its session, and semantic edges to the 3 most similar earlier turns
(TF-IDF cosine, ≥ 0.1; a real All-Mem replay of conv-26 holds 3.0 semantic edges per unit). `--db` adds the
state of a real session database (e.g. a replayed LoCoMo conversation).

Each document is opened from a file in Debian's Chromium (Playwright, the flags of workbench/driver/browser.py) and
timed from navigation start to vis-network's first `afterDrawing` event (the layout is fixed, physics off, so
there is no stabilisation phase); the median of `--repeats` loads is reported. Modes: `grouped` (the default
drawing: sessions as group nodes, none expanded), `grouped, all expanded` (every session opened in place)
and `ungrouped` (every unit drawn one by one in rows, as before grouping existed).
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from results import write_json  # noqa: E402

from engine.core.edge import Edge  # noqa: E402
from engine.core.node import Node  # noqa: E402
from engine.core.oplog import OpKind, OpRecord  # noqa: E402
from engine.core.ops import apply  # noqa: E402
from engine.core.state import MemoryState  # noqa: E402
from engine.engines import engine_schema  # noqa: E402
from engine.loaders import load_conversations  # noqa: E402
from engine.store.log_store import Store  # noqa: E402
from workbench.driver import browser_page  # noqa: E402
from workbench.graph.view import build_graph_html  # noqa: E402

DEFAULT_DATA = ROOT.parent / "shared" / "data" / "locomo" / "locomo-dev8.json"
SEMANTIC_PER_UNIT, MIN_COSINE = 3, 0.1
HEIGHT = 640


def locomo_state(path: Path, size: int) -> MemoryState:
    """`size` units from real LoCoMo turns, with temporal and semantic edges as All-Mem's online path makes."""
    from sklearn.feature_extraction.text import TfidfVectorizer

    conversations = load_conversations(path)
    turns = []
    for n in range(1 + size // max(1, sum(len(c.turns) for c in conversations))):   # the file again, if short
        for conv in conversations:
            turns += [(f"{conv.id}#{n}", t) for t in conv.turns]
    turns = turns[:size]
    state = MemoryState(schema=engine_schema("allmem"))
    sessions: dict[tuple[str, str], str] = {}
    for uid, (conv_id, t) in enumerate(turns, start=1):
        session = sessions.setdefault((conv_id, t.session), str(len(sessions) + 1))
        node = Node(id=uid, raw=t.raw, summary=t.text[:120], keywords=[], time=t.time, kind="turn",
                    source_ids=[t.id], speakers=[t.speaker], session=session, created_turn=uid)
        apply(state, OpRecord(OpKind.NODE_CREATED, {"node": node.payload()}))
        apply(state, OpRecord(OpKind.STATUS_CHANGED, {"node": uid, "status": "visible", "was": node.status,
                                                     "cause": {}}))
    vectors = TfidfVectorizer().fit_transform([t.raw for _, t in turns])
    sims = (vectors @ vectors.T).tocsr()
    last_in_session: dict[str, int] = {}
    for uid in range(1, size + 1):
        session = state.units[uid].session
        if session in last_in_session:
            state.put_edge(Edge(uid, last_in_session[session], "temporal", created_turn=uid))
        last_in_session[session] = uid
        row = sims.getrow(uid - 1)
        earlier = [(float(v), int(j) + 1) for j, v in zip(row.indices, row.data) if j + 1 < uid and v >= MIN_COSINE]
        for cosine, other in sorted(earlier, reverse=True)[:SEMANTIC_PER_UNIT]:
            state.put_edge(Edge(uid, other, "semantic", confidence=round(float(cosine), 3), created_turn=uid))
    return state


def render_ms(page, document: Path) -> float:
    page.goto(document.as_uri())
    page.wait_for_selector("body[data-drawn-ms]", state="attached", timeout=600_000)
    return float(page.get_attribute("body", "data-drawn-ms"))


def measure(page, state: MemoryState, name: str, work: Path, repeats: int) -> list[dict]:
    sessions = sorted({u.session for u in state.units.values()})
    modes = {"grouped": {"group": True},
             "grouped, all expanded": {"group": True, "expand": sessions},
             "ungrouped": {"group": False}}
    rows = []
    for mode, kwargs in modes.items():
        start = time.perf_counter()
        html = build_graph_html(state, height_px=HEIGHT, max_nodes=len(state.units), **kwargs)
        build = (time.perf_counter() - start) * 1000
        document = work / f"{name}-{mode.replace(', ', '-').replace(' ', '-')}.html"
        document.write_text(html, encoding="utf-8")
        nodes = json.loads(html.split("var nodeData = ", 1)[1].split(", edgeData = ", 1)[0])
        edges = html.split(", edgeData = ", 1)[1].split(";\n", 1)[0].count('"from"')
        times = [render_ms(page, document) for _ in range(repeats)]
        row = {"state": name, "units": len(state.units), "edges": len(state.edges), "mode": mode,
               "drawn_nodes": len(nodes), "drawn_edges": edges, "document_kb": round(len(html) / 1024),
               "build_ms": round(build, 1), "render_ms_median": round(statistics.median(times), 1),
               "render_ms_all": times}
        print(f"{name:>14} · {len(state.units):>5} units {len(state.edges):>6} edges · {mode:<22} · "
              f"{len(nodes):>5} nodes {edges:>6} edges drawn · build {build:7.1f} ms · "
              f"render {row['render_ms_median']:8.1f} ms (median of {repeats})", flush=True)
        rows.append(row)
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=str(DEFAULT_DATA))
    ap.add_argument("--sizes", type=int, nargs="+", default=[800, 5000])
    ap.add_argument("--db", action="append", default=[], help="a session database to measure as well")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", default=str(ROOT / "out" / "bench_graph.json"))
    args = ap.parse_args()
    states = [(f"locomo-{n}", locomo_state(Path(args.data), n)) for n in args.sizes]
    for db in args.db:
        store = Store(Path(db))
        states.append((Path(db).stem, store.load_state()))
    work = Path(tempfile.mkdtemp(prefix="memwb-bench-graph-"))
    rows = []
    with browser_page(1400, 800) as page:
        for name, state in states:
            rows += measure(page, state, name, work, args.repeats)
    write_json(args.out, {"what": "ms from navigation start to vis-network's first afterDrawing, headless Chromium",
                          "repeats": args.repeats, "results": rows})
    return 0


if __name__ == "__main__":
    sys.exit(main())

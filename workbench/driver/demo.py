"""The data the tours walk: the bundled demo (which turn comes after which, the causal question's root, the
turn whose routing shows the most, a GAM session whose topic edges wait for a person), one LoCoMo conversation
in a file of its own, and benchmark workspaces (a hand-made result file, or a real `memwb bench` run of the
demo).
"""
from __future__ import annotations

import tempfile
from pathlib import Path

from engine.store.data_paths import shared_data
from workbench.driver.server import ROOT

UPDATE_QUERY = "How many half marathons has Jon run?"
CAUSAL_QUESTION = "q7"              # "Why has Maya been missing deadlines?" (the demo's causal chain)
LOCOMO = shared_data() / "locomo" / "locomo-dev8.json"
LOCOMO_GRAPH_CONVERSATION = "conv-26"
BENCH_FIXTURE = ROOT / "tests" / "fixtures" / "bench_result_small.json"
BENCH_RUN = "small"                  # the fixture's run folder under the workspace's benchmarks/


def demo_conversation():
    """The bundled demo conversation, which the tours step through and ask about."""
    from engine.loaders import load_conversation
    from workbench.model import DEMO_PATH

    return load_conversation(DEMO_PATH)


def demo_turn_after(turn_id: str) -> int:
    """Cursor position that has just ingested `turn_id` of the bundled demo."""
    return next(i for i, t in enumerate(demo_conversation().turns) if t.id == turn_id) + 1


def causal_root() -> str:
    """The root cause of the demo's causal question: the first turn of its gold chain (D2:6 for q7)."""
    return next(q.evidence[0] for q in demo_conversation().questions if q.id.endswith(f":{CAUSAL_QUESTION}"))


def routing_showcase_turn(engine: str = "memloom", upto: str = "D6:6") -> int:
    """The demo turn (up to `upto`) whose routing decision shows the most: an FSM transition, then the most
    candidates (up to 6), then the latest. Read from the log of a scratch replay, so the tour follows the engine."""
    from engine.core.oplog import OpKind
    from workbench.model import DEMO_PATH, Workbench

    wb = Workbench.open(DEMO_PATH, None, engine=engine, workdir=Path(tempfile.mkdtemp(prefix="memwb-showcase-")))
    wb.jump(demo_turn_after(upto))
    shown = {op.turn: len((op.payload.get("routing") or {}).get("candidates") or [])
             for op in wb.engine.store.ops(kinds=[OpKind.TURN_INGESTED])}
    moved = {op.turn for op in wb.engine.store.ops(kinds=[OpKind.STATUS_CHANGED]) if not op.run_id}
    return max(shown, key=lambda t: (t in moved, min(shown[t], 6), t))


def locomo_conversation_file(folder: Path, conversation: str = LOCOMO_GRAPH_CONVERSATION) -> Path:
    """One LoCoMo conversation in a file of its own, for MEMWB_DEMO (the app opens a one-conversation file)."""
    import json

    items = [c for c in json.loads(LOCOMO.read_text(encoding="utf-8")) if c.get("sample_id") == conversation]
    if not items:
        raise RuntimeError(f"{conversation} not found in {LOCOMO}")
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{conversation}.json"
    path.write_text(json.dumps(items), encoding="utf-8")
    return path


def bench_fixture_workspace(workspace: Path, embedder=None) -> Path:
    """A workspace holding the hand-made benchmark result (tests/fixtures/bench_result_small.json) as run
    `benchmarks/small`, with the session databases its tasks name: the bundled demo replayed in each system's
    engine. Returns the result file."""
    import json

    from engine.loaders import load_conversation
    from engine.runtime.replay import Schedule, replay
    from engine.session import open_session
    from workbench.model import DEMO_PATH

    run = workspace / "benchmarks" / BENCH_RUN
    run.mkdir(parents=True, exist_ok=True)
    data = json.loads(BENCH_FIXTURE.read_text(encoding="utf-8"))
    data["source"] = str(DEMO_PATH)
    conversation = load_conversation(DEMO_PATH)
    for task in data["tasks"]:
        db = run / task["db"]
        if db.exists():
            continue
        db.parent.mkdir(parents=True, exist_ok=True)
        engine = data["systems"][task["system"]]["engine"]
        session = open_session(db, engine=engine, conversation=conversation.id, source=str(DEMO_PATH),
                               schedule=data["schedule"], label="bundled demo", embedder=embedder)
        replay(session, conversation, Schedule.parse(data["schedule"]))
    result = run / "result.json"
    result.write_text(json.dumps(data, indent=1), encoding="utf-8")
    return result


def bench_demo_workspace(workspace: Path, engines: tuple[str, ...] = ("allmem", "naive"),
                         answer: str | None = None) -> Path:
    """A workspace holding a real `memwb bench` run (streaming, 5 rounds) of `engines` on the bundled demo as
    run `benchmarks/demo`; returns its result file."""
    from engine.bench.config import BenchConfig
    from engine.bench.runner import run_benchmark
    from workbench.model import DEMO_PATH

    return run_benchmark(BenchConfig(dataset="locomo", source=str(DEMO_PATH), engines=engines, answer=answer,
                                     out=str(workspace / "benchmarks" / "demo")))


def first_miss(result: Path, system: str) -> dict:
    """`system`'s first question (in table order) that missed on the first metric."""
    from workbench.benchmark.questions import QuestionFilter, filtered_questions
    from workbench.benchmark.result import load_result

    loaded = load_result(result)
    misses = filtered_questions(loaded, QuestionFilter(tuple(loaded.systems), (), True, loaded.metrics[0]))
    return next(q for q in misses if q["system"] == system)


GAM_SHOWCASE_TURN = 64           # the demo after its fourth session: ten topics, each waiting to be linked
GAM_QUERY = "When did Jon run the Bridges half marathon?"


def gam_session(workdir: Path, embedder=None) -> Path:
    """A GAM session on the demo whose topic edges wait for a person (link_review person), stepped to
    `GAM_SHOWCASE_TURN`: the database the GAM tour opens with `memwb ui --db`."""
    from workbench.model import DEMO_PATH, Workbench

    wb = Workbench.open(DEMO_PATH, None, engine="gam", settings={"link_review": "person"}, workdir=workdir,
                        embedder=embedder)
    wb.jump(GAM_SHOWCASE_TURN)
    return wb.db_path

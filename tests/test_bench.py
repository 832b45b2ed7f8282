"""`memwb bench`: the streaming protocol's plan, every dataset kind end to end through the CLI, the result
file's format (docs/BENCHMARK_FORMAT.md), determinism, ablation systems and bad input."""
from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
from pathlib import Path

import pytest

from engine.bench.config import BenchConfig
from engine.bench.protocol import plan, ready_after, thresholds
from engine.bench.result import figures
from engine.bench.runner import run_benchmark
from engine.cli import main
from engine.core.conversation import Conversation, Question, Turn
from engine.engines import ENGINES, engine_class
from engine.engines.gam.settings import MEETING_DETECTOR
from engine.loaders import load_conversation, load_conversations
from engine.session import open_session
from tests.conftest import ROOT

DEMO = ROOT / "datasets" / "demo" / "demo.jsonl"
TINY = ROOT / "datasets" / "fixtures" / "tiny.jsonl"
LME = ROOT / "datasets" / "fixtures" / "longmemeval_tiny.json"
CAUSAL = ROOT / "datasets" / "causal" / "validation.jsonl"

TOP_KEYS = ["format", "command", "dataset", "llm", "source", "protocol", "ks", "rounds", "schedule", "embedder", "encoder",
            "systems",
            "conversations", "metrics", "categories", "tasks", "rounds_detail", "summary", "questions", "boundaries",
            "decisions", "dataset_version"]


def bench(*args, check=True):
    proc = subprocess.run([sys.executable, "-m", "engine.cli", "bench", *map(str, args)], cwd=ROOT,
                          capture_output=True, text=True, timeout=1200)
    if check and proc.returncode != 0:
        raise AssertionError(f"memwb bench {args} failed ({proc.returncode}):\n{proc.stderr}")
    return proc


def result_of(out: Path) -> dict:
    result = json.loads((out / "result.json").read_text(encoding="utf-8"))
    assert list(result) == TOP_KEYS
    assert result["format"] == "memwb-bench/1"
    assert (out / "summary.md").is_file()
    for task in result["tasks"]:
        assert task["error"] is None, task
        assert task["system"] == "full-history" and task["db"] is None or (out / task["db"]).is_file()
    return result


# -- the protocol's plan, by hand -------------------------------------------------------------------------

def _conversation(n: int, questions: list[Question]) -> Conversation:
    turns = [Turn(id=f"t{i}", speaker="A", text=f"turn {i}", time=f"2024-01-01T10:{i:02d}:00", session="1",
                  index=i - 1) for i in range(1, n + 1)]
    return Conversation("hand", turns, questions)


def test_thresholds_are_round_q_i_over_n_half_up():
    assert thresholds(14, 5) == [3, 6, 8, 11, 14]          # 2.8, 5.6, 8.4, 11.2, 14
    assert thresholds(5, 2) == [3, 5]                      # 2.5 rounds up
    assert thresholds(3, 5) == [1, 1, 2, 2, 3]             # 0.6, 1.2, 1.8, 2.4, 3
    assert thresholds(1, 5) == [1, 1, 1, 1, 1]


def test_a_question_waits_for_its_last_evidence_turn_and_its_own_time():
    qs = [Question("a", "?", None, ("t2",)), Question("b", "?", None, ("t1", "t4")),
          Question("c", "?", None, ("t6",)), Question("d", "?", None, ("t1",), time="2024-01-01T10:05:00"),
          Question("e", "?", None, ("t9",))]
    conv = _conversation(6, qs)
    assert [ready_after(conv, q) for q in qs] == [2, 4, 6, 5, None]     # e's evidence is not in the conversation
    cps = plan(conv, qs, rounds=4)
    # Q = 4 askable questions, thresholds [1, 2, 3, 4]: visible after turn 2 (a), 4 (a, b), 5 (+ d), 6 (+ c)
    assert [(cp.round, cp.turns, cp.visible) for cp in cps] == [
        (1, 2, ("a",)), (2, 4, ("a", "b")), (3, 5, ("a", "b", "d")), (4, 6, ("a", "b", "c", "d"))]
    assert [(cp.round, cp.turns) for cp in plan(conv, qs, rounds=5)] == [(1, 2), (2, 4), (3, 4), (4, 5), (5, 6)]
    static = plan(conv, qs, rounds=5, protocol="static")
    assert [(cp.round, cp.turns, cp.visible) for cp in static] == [(1, 6, ("a", "b", "c", "d"))]


def test_demo_checkpoints_fall_on_the_first_insert_reaching_each_threshold():
    conv = load_conversation(DEMO)
    cps = plan(conv, conv.questions, rounds=5)
    position = {t.id: t.index + 1 for t in conv.turns}
    assert [len(cp.visible) for cp in cps] == [3, 6, 8, 11, 14] == thresholds(14, 5)
    for cp in cps:
        for qid in cp.visible:
            q = next(q for q in conv.questions if q.id == qid)
            assert max(position[e] for e in q.evidence) <= cp.turns
        earlier = sum(1 for q in conv.questions if ready_after(conv, q) <= cp.turns - 1)
        assert earlier < thresholds(14, 5)[cp.round - 1]


# -- end to end through the CLI ---------------------------------------------------------------------------

@pytest.fixture(scope="module")
def demo_run(tmp_path_factory) -> tuple[Path, dict, str]:
    out = tmp_path_factory.mktemp("bench") / "demo"
    proc = bench("--dataset", "locomo", DEMO, "--engines", "naive,allmem", "--ablations", "anchors-only",
                 "--out", out)
    return out, result_of(out), proc.stdout


@pytest.mark.slow
def test_streaming_run_on_the_demo_writes_the_format(demo_run):
    out, result, stdout = demo_run
    assert result["dataset"] == "locomo" and result["protocol"] == "streaming" and result["rounds"] == 5
    assert result["embedder"] == "all-MiniLM-L6-v2"                    # the model's name, not its folder's
    assert result["encoder"] == os.environ.get("MEMWB_ENCODER", "onnx")   # the one that ran (default: float32 ONNX)
    assert result["metrics"] == ["r@5", "n@5", "r@10", "n@10"]
    assert list(result["systems"]) == ["naive", "allmem", "allmem-anchors-only"]
    assert result["conversations"] == ["demo"]
    assert {t["db"] for t in result["tasks"]} == {"sessions/demo-naive.sqlite", "sessions/demo-allmem.sqlite",
                                                   "sessions/demo-allmem-anchors-only.sqlite"}
    assert len(result["questions"]) == 3 * 14
    assert len(result["rounds_detail"]) == 3 * 5
    assert "r@5 per round" in stdout and "per category" in stdout and "allmem-anchors-only" in stdout
    assert "latency p50" in (out / "summary.md").read_text(encoding="utf-8")
    q = next(q for q in result["questions"] if q["system"] == "allmem" and q["question_id"] == "demo:q4")
    assert q["gold"] == ["D1:11", "D5:9"] and q["category"] == "4"
    assert len(q["ranked"]) == 10 and q["ranked"][0] in q["results"][0]["source_ids"]
    assert all({"unit", "score", "source_ids", "hop", "path"} <= set(r) for r in q["results"])
    detail = next(d for d in result["rounds_detail"] if d["system"] == "allmem" and d["round"] == 5)
    assert detail["turns_ingested"] == max(q["turn"] for q in result["questions"] if q["system"] == "allmem")
    assert sum(detail["memory"]["nodes"]["turn"].values()) >= 1 and detail["memory"]["edges"]
    assert {"ingest", "total"} <= set(detail["latency_ms"]["insert"]) and "total" in detail["latency_ms"]["query"]
    summary = result["summary"]["allmem"]
    assert summary["overall"] == detail["overall"] and set(summary["structure"]) == {"visible_ratio", "cov", "h95"}


@pytest.mark.slow
def test_every_visible_question_is_asked_again_each_round_after_its_evidence(demo_run):
    _, result, _ = demo_run
    conv = load_conversation(DEMO)
    position = {t.id: t.index + 1 for t in conv.turns}
    for system in result["systems"]:
        rounds = {d["round"]: d for d in result["rounds_detail"] if d["system"] == system}
        qs = [q for q in result["questions"] if q["system"] == system]
        turns_at = {r: d["turns_ingested"] for r, d in rounds.items()}
        for q in qs:
            assert sorted(q["by_round"], key=int) == [str(r) for r in range(q["first_round"], 6)]
            assert max(position[e] for e in q["gold"]) <= turns_at[q["first_round"]]
            if q["first_round"] > 1:     # not visible at the round before: its evidence was not all in yet
                assert max(position[e] for e in q["gold"]) > turns_at[q["first_round"] - 1]
        cohort = {q["question_id"] for q in qs if q["first_round"] == 1}
        assert [rounds[r]["questions"] for r in range(1, 6)] == [3, 6, 8, 11, 14]
        assert all(rounds[r]["cohort"]["n"] == len(cohort) == 3 for r in range(1, 6))
        mean = sum(q["by_round"]["3"]["r@5"] for q in qs if q["first_round"] == 1) / 3
        assert rounds[3]["cohort"]["r@5"] == round(mean, 4)


@pytest.mark.slow
def test_ablations_are_labelled_systems_with_their_own_settings(demo_run):
    _, result, _ = demo_run
    base, ablated = result["systems"]["allmem"], result["systems"]["allmem-anchors-only"]
    assert base["engine"] == ablated["engine"] == "allmem"
    assert base["ablations"] == [] and ablated["ablations"] == ["anchors-only"]
    assert ablated["settings"]["ablations"] == ["anchors-only"] and base["settings"]["ablations"] == []
    paths = [r["path"] for q in result["questions"] if q["system"] == "allmem-anchors-only" for r in q["results"]]
    assert paths and all(p == [] for p in paths)          # no Stage-2 expansion: every result is a seed


@pytest.mark.slow
def test_a_retrieval_only_ablation_rides_on_the_full_systems_replay_and_reopens_with_its_own_settings(demo_run):
    from engine.session import open_session

    out, result, _ = demo_run
    rows = {t["system"]: t for t in result["tasks"]}
    assert [t["system"] for t in result["tasks"]] == ["naive", "allmem", "allmem-anchors-only"]
    assert rows["allmem-anchors-only"]["replayed_with"] == "allmem" and rows["allmem"]["replayed_with"] is None
    host = open_session(out / rows["allmem"]["db"], create=False)
    rider = open_session(out / rows["allmem-anchors-only"]["db"], create=False)
    assert rider.settings.ablations == ["anchors-only"] and host.settings.ablations == []
    assert rider.store.last_seq() == host.store.last_seq() and rider.state.nodes.keys() == host.state.nodes.keys()


def test_a_rider_scores_what_its_own_replay_scores(tmp_path):
    """Asked on the full system's replay with its own settings, each retrieval-only ablation gets the records
    (ranked sources, paths, recall, where each gold turn was lost) a replay of its own gives."""
    from dataclasses import replace

    from engine.bench.tasks import BenchTask, Rider, run_task
    from engine.engines import engine_schema
    from engine.llm.embedder import Embedder

    shared_embedder = Embedder()
    for engine in ("allmem", "memloom"):
        ablations = sorted(engine_schema(engine).retrieval_ablations)
        host = BenchTask(dataset="locomo", source=str(DEMO), conversation="demo", system=engine, engine=engine,
                         settings={}, rounds=3, workdir=str(tmp_path / "shared"),
                         riders=tuple(Rider(f"{engine}-{a}", {"ablations": [a]}, (a,)) for a in ablations))
        shared = run_task(host, shared_embedder)
        assert [r["system"] for r in shared["riders"]] == [f"{engine}-{a}" for a in ablations]
        for rider, ridden in zip(host.riders, shared["riders"]):
            alone = run_task(replace(host.ridden_by(rider), workdir=str(tmp_path / "alone")), shared_embedder)
            assert ridden["questions"] == alone["questions"], rider.system
            assert [r["memory"] for r in ridden["rounds"]] == [r["memory"] for r in alone["rounds"]]
        differs = [r["system"] for r in shared["riders"] if r["questions"] != shared["questions"]]
        assert differs, f"no retrieval ablation of {engine} changed a ranking on the demo"


@pytest.mark.slow
def test_same_command_twice_gives_the_same_figures(tmp_path):
    runs = []
    for name in ("one", "two"):
        bench("--dataset", "locomo", TINY, "--engines", "allmem,memloom", "--rounds", "2", "--out", tmp_path / name)
        runs.append(figures(result_of(tmp_path / name)))
    assert runs[0] == runs[1]
    assert runs[0]["questions"] and runs[0]["summary"]["memloom"]["llm_tokens"]


def test_static_protocol_asks_every_question_once_after_everything(tmp_path):
    bench("--dataset", "locomo", TINY, "--engines", "naive", "--protocol", "static", "--out", tmp_path)
    result = result_of(tmp_path)
    assert result["rounds"] == 1 and [d["round"] for d in result["rounds_detail"]] == [1]
    assert {q["first_round"] for q in result["questions"]} == {1}
    assert all(q["turn"] == 8 for q in result["questions"]) and len(result["questions"]) == 2


def test_answers_are_scored_against_the_gold_answer_and_evidence_with_a_full_history_ceiling(tmp_path):
    from engine.eval.metrics import attribution_auditability, bleu1, rouge_l, token_f1

    bench("--dataset", "locomo", TINY, "--engines", "naive", "--answer", "offline", "--out", tmp_path)
    result = result_of(tmp_path)
    assert result["metrics"] == ["r@5", "n@5", "r@10", "n@10", "f1", "bleu1", "rouge_l", "em", "aa"]
    assert list(result["systems"]) == ["naive", "full-history"] and result["systems"]["full-history"]["engine"] is None
    gold = {q.id: q for q in load_conversation(TINY).questions}
    asks = 0
    for q in result["questions"]:
        said, g = q["answer"], gold[q["question_id"]]
        assert said["gold"] == str(g.answer) and said["text"]
        for figures_at in q["by_round"].values():
            assert set(figures_at) >= {"f1", "bleu1", "rouge_l", "em", "aa"}
        m = q["metrics"]
        assert m["f1"] == token_f1(said["text"], said["gold"]) and m["bleu1"] == bleu1(said["text"], said["gold"])
        assert m["rouge_l"] == rouge_l(said["text"], said["gold"])
        assert m["aa"] == attribution_auditability(said["cited"], q["gold"])
        if q["system"] == "naive":          # an answer cites only what the retrieval gave it
            assert set(said["cited"]) <= {s for r in q["results"] for s in r["source_ids"]}
            assert "r@5" in m
        else:
            assert q["ranked"] == [] and "r@5" not in m
            asks += len(q["by_round"])
    ceiling = result["summary"]["full-history"]
    assert ceiling["overall"]["r@5"] is None and ceiling["overall"]["f1"] is not None
    assert ceiling["llm_tokens"]["answer"]["calls"] == asks > 0
    assert result["summary"]["naive"]["llm_tokens"]["answer"]["calls"] >= len(gold) - 1
    assert "f1 per round" in (tmp_path / "summary.md").read_text(encoding="utf-8")


def test_longmemeval_fixture_uses_question_types_as_categories(tmp_path):
    bench("--dataset", "longmemeval", LME, "--engines", "naive,memloom", "--k", "3", "--out", tmp_path)
    result = result_of(tmp_path)
    assert result["metrics"] == ["r@3", "n@3"] and result["ks"] == [3]
    assert result["categories"] == {"knowledge-update": "knowledge-update", "multi-session": "multi-session"}
    assert result["conversations"] == ["tiny_q1", "tiny_q2"]
    assert len(result["questions"]) == 4
    one = [d for d in result["rounds_detail"] if d["system"] == "naive"]
    assert [d["questions"] for d in one] == [2] * 5      # Q = 1 per instance: every round falls on the same insert


@pytest.mark.slow
def test_causal_suite_reports_chain_metrics(tmp_path):
    bench("--dataset", "causal", CAUSAL, "--conversations", "lab-freezer", "family-eid", "--engines",
          "naive,memloom", "--protocol", "static", "--out", tmp_path)
    result = result_of(tmp_path)
    assert result["metrics"] == ["scr@5", "scr@10", "chain_recall@5", "chain_recall@10", "r@5"]
    assert result["conversations"] == ["lab-freezer", "family-eid"]
    # run system by system and longest conversation first, reported in the file's order, system by system
    assert [(t["conversation"], t["system"]) for t in result["tasks"]] == [
        ("lab-freezer", "naive"), ("lab-freezer", "memloom"), ("family-eid", "naive"), ("family-eid", "memloom")]
    scenarios = [c for c in load_conversations(CAUSAL) if c.id in ("lab-freezer", "family-eid")]
    assert len(result["questions"]) == 2 * sum(len(c.questions) for c in scenarios)
    for q in result["questions"]:
        m = q["metrics"]
        assert m["scr@5"] == float(set(q["gold"]) <= set(q["ranked"][:5]))
        assert m["chain_recall@5"] == len(set(q["gold"]) & set(q["ranked"][:5])) / len(set(q["gold"]))
    assert set(result["categories"]) <= {"1", "2", "4"}
    # MemLoom says how it read each question (naive does not route); every chain question here is a why-question
    assert all("reading" not in q for q in result["questions"] if q["system"] == "naive")
    chain = [q for q in result["questions"] if q["system"] == "memloom" and q["category"] == "1"]
    assert chain and all(q["reading"].startswith("a why-question (") for q in chain)
    summary = (tmp_path / "summary.md").read_text()
    assert "**How each question was read**" in summary
    row = next(line for line in summary.splitlines() if line.startswith("| memloom | a why-question"))
    assert row.startswith(f"| memloom | a why-question {len(chain)} |")
    assert not any(line.startswith("| naive |") and "a lookup" in line for line in summary.splitlines())
    # each chain question's links, as the stored memory holds them, and their tally per system
    from engine.eval.chain_links import follow_links, tally_links
    from engine.session import open_session

    for task in result["tasks"]:
        mine = [q for q in result["questions"] if (q["system"], q["conversation"]) == (task["system"],
                                                                                        task["conversation"])]
        engine = open_session(tmp_path / task["db"])
        for q in mine:
            expected = ([link.to_dict() for link in follow_links(engine.state, engine.schema, q["gold"])]
                        if q["category"] == "1" else None)
            assert q.get("chain_links") == expected
    for system in ("naive", "memloom"):
        held = result["summary"][system]["chain_links"]
        mine = [q for q in result["questions"] if q["system"] == system]
        assert held == {"k": 5, **tally_links(mine, lambda q: q["metrics"]["scr@5"] == 1.0)}
        assert held["held_whole_ranked_whole"] == sum(
            q["metrics"]["scr@5"] == 1.0 and all(link["fate"] == "cited" for link in q["chain_links"])
            for q in mine if q.get("chain_links"))
        assert held["links"] == sum(len(q["gold"]) - 1 for q in chain)
    assert set(result["summary"]["naive"]["chain_links"]["fates"].values()) - {0} == {
        result["summary"]["naive"]["chain_links"]["links"]}
    assert result["summary"]["memloom"]["chain_links"]["fates"]["cited"] > 0
    assert "**how each link of the causal chains is held**" in summary


def _meeting(path: Path, topics: list[tuple[str, list[str]]]) -> None:
    transcript, spans = [], []
    for topic, lines in topics:
        spans.append({"topic": topic, "relevant_text_span": [[str(len(transcript)),
                                                              str(len(transcript) + len(lines) - 1)]]})
        transcript += [{"speaker": ["Ana", "Ben"][i % 2], "content": line} for i, line in enumerate(lines)]
    path.write_text(json.dumps({"topic_list": spans, "general_query_list": [], "specific_query_list": [],
                                "meeting_transcripts": transcript}), encoding="utf-8")


BUDGET_TALK = [f"The remote control budget is {n} euro per unit, we must cut the cost ." for n in range(12, 24)]
DESIGN_TALK = [f"For the design I want a {c} rubber case shaped like a banana ." for c in
               ("yellow", "green", "blue", "red", "black", "white", "grey", "pink", "purple", "orange")]


def test_qmsum_meetings_score_event_boundaries_next_to_fixed_windows(tmp_path):
    meetings = tmp_path / "meetings"
    meetings.mkdir()
    budget, design = BUDGET_TALK, DESIGN_TALK
    _meeting(meetings / "Mtg001.json", [("budget", budget), ("design", design), ("budget again", budget[:6])])
    _meeting(meetings / "Mtg002.json", [("design", design), ("budget", budget)])
    stdout = bench("--dataset", "qmsum", meetings, "--out", tmp_path / "out").stdout
    assert "boundaries per meeting" in stdout and "| Mtg002 | fixed-50 | 22 | 1 | 0 |" in stdout
    result = result_of(tmp_path / "out")
    assert result["rounds"] == 1 and result["questions"] == []
    assert list(result["systems"]) == ["memloom", "gam", "fixed-50", "no-boundary"]    # every event engine
    gam = result["systems"]["gam"]["settings"]                  # meetings run GAM's detector at its meeting fit
    assert {key: gam[key] for key in MEETING_DETECTOR} == MEETING_DETECTOR
    assert open_session(tmp_path / "out" / next(t["db"] for t in result["tasks"] if t["system"] == "gam")) \
        .settings.min_segment == MEETING_DETECTOR["min_segment"]
    rows = {(b["meeting"], b["system"]): b for b in result["boundaries"]}
    assert set(rows) == {(m, s) for m in ("Mtg001", "Mtg002") for s in ("memloom", "gam", "fixed-50", "no-boundary")}
    assert rows[("Mtg001", "fixed-50")]["boundaries"] == 0 and rows[("Mtg001", "fixed-50")]["gold_boundaries"] == 2
    assert rows[("Mtg002", "no-boundary")]["boundaries"] == 0 and result["summary"]["no-boundary"]["overall"][
        "delta_b_rate"] == -1.0
    assert rows[("Mtg002", "memloom")]["turns"] == 22 and rows[("Mtg002", "gam")]["turns"] == 22
    assert result["summary"]["fixed-50"]["overall"]["delta_b"] == -1.5
    for system in ("memloom", "gam"):
        assert set(result["summary"][system]["overall"]) == {"pk", "window_diff", "delta_b", "delta_b_rate",
                                                             "boundaries"}


@pytest.mark.parametrize("args, message", [
    (["--dataset", "squad", DEMO], "unknown dataset 'squad'"),
    (["--dataset", "locomo", "nope.json"], "no such file or directory: nope.json"),
    (["--dataset", "locomo", LME], "is a longmemeval file, not LoCoMo"),
    (["--dataset", "qmsum", DEMO], "is a jsonl file, not QMSum"),
    (["--dataset", "locomo", DEMO, "--engines", "allmem,nosuch"], "unknown engine 'nosuch'"),
    (["--dataset", "locomo", DEMO, "--ablations", "no-such"], "unknown ablation 'no-such'"),
    (["--dataset", "locomo", DEMO, "--conversations", "conv-99"], "no conversation conv-99"),
    (["--dataset", "qmsum", ROOT / "datasets", "--engines", "naive"], "holds no QMSum meeting files"),
    (["--dataset", "locomo", DEMO, "--k", "5,x"], "--k takes comma-separated integers"),
    (["--dataset", "locomo", DEMO, "--protocol", "batch"], "unknown protocol 'batch'"),
    (["--dataset", "locomo", DEMO, "--answer", "recorded"], "unknown answering LLM backend 'recorded'"),
    (["--dataset", "locomo", DEMO, "--set", "min_segment=3"], "expected ENGINE.KEY=VALUE"),
    (["--dataset", "locomo", DEMO, "--engines", "gam", "--set", "memloom.final_k=3"],
     "--set names engine 'memloom', which this run does not run"),
    (["--dataset", "locomo", DEMO, "--engines", "gam", "--set", "gam.nosuch=1"],
     "unknown setting 'nosuch' for engine gam"),
    (["--dataset", "locomo", DEMO, "--engines", "gam", "--set", "gam.depth_threshold=9"],
     "depth_threshold=9.0 is out of range"),
])
def test_bad_input_exits_2_with_one_clear_line(tmp_path, capsys, monkeypatch, args, message):
    monkeypatch.chdir(ROOT)
    assert main(["bench", *map(str, args), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("memwb bench: error: ") and message in err and err.count("\n") == 1
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("content, message", [
    ('{"broken": ', "not valid JSON: Expecting value"),
    ('[{"conversation": {}}]', "found keys ['conversation']"),
])
def test_a_file_no_dataset_recognises_is_told_what_is_wrong_with_it(tmp_path, capsys, content, message):
    bad = tmp_path / "bad.json"
    bad.write_text(content)
    assert main(["bench", "--dataset", "locomo", str(bad), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"memwb bench: error: {bad.name}: record") and message in err and err.count("\n") == 1


def test_bad_input_in_a_real_process_has_no_traceback(tmp_path):
    proc = bench("--dataset", "locomo", DEMO, "--engines", "allmem,nosuch", "--out", tmp_path / "out", check=False)
    assert proc.returncode == 2
    assert proc.stderr.startswith("memwb bench: error: unknown engine 'nosuch'") and "Traceback" not in proc.stderr


def test_a_task_is_plain_data_a_worker_can_receive():
    from engine.bench.tasks import BenchTask

    task = BenchTask(dataset="locomo", source=str(TINY), conversation="tiny", system="allmem-anchors-only",
                     engine="allmem", settings={"ablations": ["anchors-only"]}, ablations=("anchors-only",))
    assert pickle.loads(pickle.dumps(task)) == task
    assert json.loads(json.dumps(task.to_dict()))["ablations"] == ["anchors-only"]
    assert task.db_name == "tiny-allmem-anchors-only.sqlite" and task.label == "tiny · allmem-anchors-only"


def _broken() -> type:
    """The naive engine failing on its fifth turn: a task that raises must not lose the others' results."""
    naive = engine_class("naive")

    def ingest(self, turn):
        if self.state.turn == 4:
            raise RuntimeError("disk on fire")
        return naive.ingest(self, turn)
    return type("BrokenEngine", (naive,), {"name": "broken", "ingest": ingest})


def test_a_failed_task_is_reported_with_its_inputs_and_the_others_kept(tmp_path, monkeypatch):
    monkeypatch.setitem(ENGINES, "broken", _broken)
    seen = []
    path = run_benchmark(BenchConfig(dataset="locomo", source=str(TINY), engines=("naive", "broken"),
                                     out=str(tmp_path)), progress=seen.append)
    result = json.loads(path.read_text(encoding="utf-8"))
    assert [(p.done, p.total) for p in seen] == [(0, 2), (1, 2), (2, 2)]
    ok, failed = result["tasks"]
    assert ok["error"] is None and {q["system"] for q in result["questions"]} == {"naive"}
    assert failed["error"]["type"] == "RuntimeError" and failed["error"]["message"] == "disk on fire"
    assert failed["error"]["inputs"]["engine"] == "broken" and failed["error"]["inputs"]["conversation"] == "tiny"
    assert result["summary"]["naive"]["overall"]["r@5"] is not None
    assert "broken: RuntimeError: disk on fire" in (tmp_path / "summary.md").read_text(encoding="utf-8")


@pytest.mark.slow
def test_construction_cost_per_conversation_for_every_system(tmp_path):
    """Each system's LLM calls and tokens of building memory: counted from the calls its session logged, by role and
    per conversation, in result.json, summary.md and the printed tables; each system on its own schedule."""
    from engine.eval.metrics import llm_tokens_by_role, llm_totals
    from engine.store.log_store import Store

    out = tmp_path / "cost"
    proc = bench("--dataset", "locomo", DEMO, "--engines", "naive,allmem,recmem", "--protocol", "static",
                 "--out", out)
    result = result_of(out)
    assert {s: v["schedule"] for s, v in result["systems"].items()} == \
        {"naive": "every-3-sessions", "allmem": "every-3-sessions", "recmem": "every-1-turns"}
    assert "schedule every-3-sessions (recmem: every-1-turns)," in (out / "summary.md").read_text(encoding="utf-8")
    for task in result["tasks"]:
        cost = result["summary"][task["system"]]["construction"]
        logged = llm_tokens_by_role(Store(out / task["db"]))
        assert cost["conversations"] == 1 and cost["by_conversation"]["demo"] == llm_totals(logged)
        assert cost["by_role"] == {role: {k: float(v) for k, v in r.items()} for role, r in logged.items()}
        assert cost["per_conversation"] == {k: float(v) for k, v in llm_totals(logged).items()}
    assert result["summary"]["naive"]["construction"]["per_conversation"]["calls"] == 0
    allmem = result["summary"]["allmem"]["construction"]
    assert allmem["per_conversation"]["calls"] > 0 and allmem["per_conversation"]["prompt"] > 0
    assert "descriptor" in allmem["by_role"] or "diagnosis" in allmem["by_role"]
    for text in (proc.stdout, (out / "summary.md").read_text(encoding="utf-8")):
        table = text.split("**construction cost per conversation**")[1]
        assert all(f"| {s} | 1 |" in table for s in ("naive", "allmem", "recmem"))


def test_a_setting_given_with_set_is_the_one_the_run_replays_with(tmp_path, monkeypatch):
    """`--set gam.depth_threshold=2.0` (no gap is that deep): the stored GAM memory has one topic per session,
    where the default detector cuts inside sessions; result.json and its command carry the setting, and an
    ablation takes it too."""
    monkeypatch.setenv("MEMWB_WORKSPACE", str(tmp_path))
    runs = {}
    strict_settings = ["--set", "gam.depth_threshold=2.0", "--set", "gam.min_segment=4"]
    for name, extra in (("default", []), ("strict", strict_settings)):
        out = tmp_path / name
        assert main(["bench", "--dataset", "locomo", str(DEMO), "--engines", "gam", "--ablations", "no-mfr",
                     "--protocol", "static", *extra, "--out", str(out)]) == 0
        result = json.loads((out / "result.json").read_text(encoding="utf-8"))
        task = next(t for t in result["tasks"] if t["system"] == "gam")
        runs[name] = (result, open_session(out / task["db"]))
    result, strict = runs["strict"]
    for system in ("gam", "gam-no-mfr"):
        assert result["systems"][system]["settings"]["depth_threshold"] == 2.0
        assert result["systems"][system]["settings"]["min_segment"] == 4
    assert "--set gam.depth_threshold=2.0 --set gam.min_segment=4" in result["command"]
    assert strict.settings.depth_threshold == 2.0 and strict.settings.min_segment == 4
    sessions = {t.session for t in load_conversation(DEMO).turns}
    topics = [u for u in strict.state.nodes.values() if u.kind == "topic"]
    assert len(topics) == len(sessions)
    default = [u for u in runs["default"][1].state.nodes.values() if u.kind == "topic"]
    assert len(default) > len(sessions)


def test_a_dataset_of_meetings_runs_an_engines_meeting_fit_under_what_set_gives():
    """GAM's defaults are its chat calibration; QMSum takes its meeting fit, and `--set` goes over both."""
    from engine.bench.config import resolve_systems
    from engine.bench.datasets import dataset
    from engine.engines.gam.settings import GamSettings

    chats = resolve_systems(dataset("locomo"), ["gam"], [])[0].settings
    assert chats == GamSettings().to_dict()
    assert chats["min_segment"] != MEETING_DETECTOR["min_segment"]
    meetings = resolve_systems(dataset("qmsum"), ["gam", "memloom"], ["no-mfr"], {"gam": {"min_segment": 3}})
    gam, memloom, no_mfr = meetings
    assert gam.settings["min_segment"] == 3 and gam.settings["depth_threshold"] == MEETING_DETECTOR["depth_threshold"]
    assert no_mfr.label == "gam-no-mfr" and no_mfr.settings["depth_threshold"] == MEETING_DETECTOR["depth_threshold"]
    assert memloom.settings == resolve_systems(dataset("locomo"), ["memloom"], [])[0].settings    # no meeting fit

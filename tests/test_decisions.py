"""Decision sets (docs/DECISIONS.md): the gold format and its loader, the per-pair fates and per-kind scores, the
benchmark over a decision set, and the newcomer's cases as mechanisms of the offline decision makers.

The newcomer's conversation (datasets/fixtures/newcomer.jsonl) is the 30-turn, three-session conversation of
issue 52 in its own words: "I have 2 cats" then "we adopted another kitten, so I have 3 cats now"; Leeds then
Manchester; a lay-off, then a cancelled trip."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from engine.core.decision import DecisionKind
from engine.eval.decisions import FATES, judge_engine, score
from engine.loaders import LoaderError, load_conversation
from engine.loaders.jsonl import attach_decisions, load_decision_overlay, parse_jsonl
from engine.runtime.replay import Schedule, step
from engine.session import open_session

ROOT = Path(__file__).resolve().parents[1]
NEWCOMER = ROOT / "datasets" / "fixtures" / "newcomer.jsonl"
TURN = '{"id": "t%d", "speaker": "Ana", "text": "%s", "time": "2024-01-0%dT10:00:00", "session": "1"}'


def _file(*decisions: dict) -> str:
    turns = [TURN % (i, text, i) for i, text in enumerate(["I have two dogs.", "Nice weather.", "Three dogs now!"], 1)]
    return "\n".join([*turns, *(json.dumps({"type": "decision", **d}) for d in decisions)])


def test_decision_lines_load_beside_the_turns_they_name() -> None:
    conv, = parse_jsonl(_file({"id": "d1", "kind": "update", "earlier": "t1", "later": "t3", "change": "number"},
                              {"id": "d2", "kind": "split", "turn": "t2"}), "x.jsonl")
    update, split = conv.decisions
    assert (update.kind, update.earlier, update.later, update.change, update.positive) == ("update", "t1", "t3",
                                                                                          "number", True)
    assert (split.earlier, split.later, split.turns) == ("t2", "t2", ("t2",))


@pytest.mark.parametrize(("decision", "field", "words"), [
    ({"id": "d1", "kind": "supersede", "earlier": "t1", "later": "t3"}, "kind", "unknown kind 'supersede'"),
    ({"id": "d1", "kind": "update", "earlier": "t1", "later": "t9"}, "earlier", "unknown turn id(s) 't9'"),
    ({"id": "d1", "kind": "cause", "earlier": "t3", "later": "t1"}, "earlier", "'t3' comes after 't1'"),
    ({"id": "d1", "kind": "update", "earlier": "t1"}, "later", "missing"),
    ({"id": "d1", "kind": "update", "earlier": "t1", "later": "t3", "change": "mood"}, "change", "unknown change"),
    ({"id": "d1", "kind": "split"}, "turn", "missing"),
])
def test_a_bad_decision_line_is_refused_naming_its_line_and_field(decision: dict, field: str, words: str) -> None:
    with pytest.raises(LoaderError) as err:
        parse_jsonl(_file(decision), "x.jsonl")
    assert "line 4" in str(err.value) and field in str(err.value) and words in str(err.value)


def test_an_overlay_labels_another_files_conversations_and_names_what_it_does_not_know(tmp_path: Path) -> None:
    conv, = parse_jsonl(_file(), "x.jsonl")
    overlay = tmp_path / "labels.jsonl"
    overlay.write_text(json.dumps({"type": "decision", "conversation": "x", "id": "d1", "kind": "update",
                                   "earlier": "t1", "later": "t3"}) + "\n")
    labelled, = attach_decisions([conv], load_decision_overlay(overlay), overlay)
    assert [d.id for d in labelled.decisions] == ["d1"] and not conv.decisions
    overlay.write_text(json.dumps({"type": "decision", "conversation": "nope", "id": "d1", "kind": "update",
                                   "earlier": "t1", "later": "t3"}) + "\n")
    with pytest.raises(LoaderError, match="unknown conversation"):
        attach_decisions([conv], load_decision_overlay(overlay), overlay)


def test_the_project_decision_sets_are_large_varied_and_separate() -> None:
    """Dev and test: 40 or more conversations and 200 or more labelled decisions each, every kind of change at
    least twice, causes with and without a cue word, every distractor kind; no conversation in both."""
    seen: dict[str, set[str]] = {}
    for split in ("dev", "test"):
        convs = [load_conversation(f) for f in sorted((ROOT / "datasets" / "decisions" / split).glob("*.jsonl"))]
        decisions = [d for c in convs for d in c.decisions]
        assert len(convs) >= 40 and len(decisions) >= 200, split
        kinds = {k: sum(d.kind == k for d in decisions) for k in DecisionKind.ALL}
        assert all(n >= 3 for n in kinds.values()), (split, kinds)
        changes = [d.change for d in decisions if d.kind == "update"]
        assert len(set(changes)) >= 12 and all(changes.count(c) >= 2 for c in set(changes)), split
        cues = [d.cue for d in decisions if d.kind == "cause"]
        assert cues.count("none") >= len(cues) / 3 and len(set(cues)) >= 3, split
        seen[split] = {c.id for c in convs}
    assert not seen["dev"] & seen["test"]


@pytest.fixture(scope="module")
def newcomer(tmp_path_factory):
    """The newcomer's conversation replayed into All-Mem and MemLoom, offline, as `memwb replay` does."""
    conv = load_conversation(NEWCOMER)
    out = {}
    for name in ("allmem", "memloom"):
        engine = open_session(tmp_path_factory.mktemp(name) / f"{name}.sqlite", engine=name, conversation=conv.id,
                              source=str(NEWCOMER))
        schedule = Schedule.parse(engine.schema.schedule or "every-3-sessions")
        for _ in conv.turns:
            step(engine, conv, schedule)
        engine.end_of_stream()
        out[name] = engine
    return conv, out


def test_the_cats_update_is_proposed_applied_and_then_answers_how_many_cats(newcomer) -> None:
    conv, engines = newcomer
    allmem = engines["allmem"]
    units = allmem.state.turn_units
    two, three = units["S1:5"], units["S2:6"]
    update = [p for p in allmem.state.proposals.values() if p.op == "update" and p.targets == [three, two]]
    assert update and update[0].status == "applied" and update[0].confidence >= allmem.settings.theta["update"]
    assert not allmem.state.nodes[two].visible
    assert any(e.src == three and e.dst == two and e.type == "version" for e in allmem.state.edges.values())
    res = allmem.retrieve("How many cats does Tom have?", k=5)
    assert res.source_ids[0] == "S2:6"


def test_changes_of_state_get_no_causal_link_and_the_verdicts_say_what_became_of_each_pair(newcomer) -> None:
    conv, engines = newcomer
    memloom = engines["memloom"]
    verdicts, _ = judge_engine(memloom, conv)
    by_id = {v.decision.id.split(":")[1]: v for v in verdicts}
    for d in ("d1", "d2", "d7"):          # 2 -> 3 cats, Leeds -> Manchester, a kitten and a move
        assert not [e for e in by_id[d].edits if e.kind == DecisionKind.CAUSE and e.outcome == "applied"], d
    assert all(v.fate in FATES for v in verdicts)
    table = score([{"conversation": conv.id, **v.to_dict()} for v in verdicts], ["cause", "update", "merge"])
    assert table["unrelated"]["decided"] == 0 and table["cause"]["gold"] == 1


def test_a_pair_the_gate_held_back_reports_its_confidence_against_theta(newcomer) -> None:
    """Every verdict that is `gated` names the proposal's confidence and the θ it fell below."""
    conv, engines = newcomer
    for engine in engines.values():
        for v in judge_engine(engine, conv)[0]:
            for e in v.edits:
                if e.outcome == "gated":
                    assert e.confidence is not None and e.threshold is not None and e.confidence < e.threshold


def test_an_undone_run_turns_an_applied_decision_into_undone(tmp_path: Path) -> None:
    conv = load_conversation(NEWCOMER)
    engine = open_session(tmp_path / "a.sqlite", engine="allmem", conversation=conv.id, source=str(NEWCOMER))
    for _ in conv.turns:
        step(engine, conv, Schedule.parse("manual"))
    engine.consolidate()
    before = {v.decision.id: v.fate for v in judge_engine(engine, conv)[0]}
    assert before["newcomer:d1"] == "applied"
    engine.undo_last_run()
    after = {v.decision.id: v.fate for v in judge_engine(engine, conv)[0]}
    assert after["newcomer:d1"] == "undone"


def test_memwb_bench_scores_a_decision_set_per_kind_and_writes_every_verdict(tmp_path: Path) -> None:
    out = tmp_path / "bench"
    run = subprocess.run([sys.executable, "-m", "engine.cli", "bench", "--dataset", "decisions", str(NEWCOMER),
                          "--engines", "allmem,memloom", "--out", str(out)], capture_output=True, text=True,
                         cwd=ROOT, timeout=600)
    assert run.returncode == 0, run.stderr
    assert "allmem: decisions per kind" in run.stdout and "memloom: decisions per kind" in run.stdout
    result = json.loads((out / "result.json").read_text())
    assert result["dataset"] == "decisions"
    allmem = result["decisions"]["allmem"]
    assert allmem["table"]["update"]["gold"] == 3 and allmem["table"]["update"]["correct"] >= 1
    assert {v["id"] for v in allmem["verdicts"]} == {d.id for d in load_conversation(NEWCOMER).decisions}
    assert result["summary"]["allmem"]["overall"]["update_f1"] is not None


def test_bench_refuses_a_decision_set_without_decisions_and_an_engine_that_makes_none(tmp_path: Path) -> None:
    plain = tmp_path / "plain.jsonl"
    plain.write_text(_file())
    for argv, words in ((["--dataset", "decisions", str(plain)], "no conversation with a labelled decision"),
                        (["--dataset", "decisions", str(NEWCOMER), "--engines", "naive"], "makes none")):
        run = subprocess.run([sys.executable, "-m", "engine.cli", "bench", *argv, "--out", str(tmp_path / "o")],
                             capture_output=True, text=True, cwd=ROOT, timeout=120)
        assert run.returncode == 2 and words in run.stderr, run.stderr

"""QMSum meetings load as conversations, expose their gold topic segmentation, and fail with located errors."""
from __future__ import annotations

import json
import math
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from engine.core.segments import fixed_windows, no_boundaries
from engine.engines import engine_schema
from engine.eval.segmentation import delta_b, pk, window_diff
from engine.loaders import LoaderError, load_conversation, load_conversations
from engine.loaders.qmsum import gold_boundaries, load_qmsum, synthetic_time, topic_segments
from tests.conftest import SHARED_DATA, needs_data

ROOT = Path(__file__).resolve().parents[1]
QMSUM = SHARED_DATA / "qmsum" / "test"


def _real(name: str) -> Path:
    return needs_data(QMSUM / f"{name}.json")


def _raw(name: str) -> dict[str, Any]:
    return json.loads(_real(name).read_text(encoding="utf-8"))


def _all_meetings() -> list[Path]:
    return sorted(needs_data(QMSUM).glob("*.json"))


def _meeting(**overrides: Any) -> dict[str, Any]:
    """A small well-formed meeting: 6 turns (one empty), two topics, one query of each kind."""
    meeting: dict[str, Any] = {
        "topic_list": [
            {"topic": "Opening", "relevant_text_span": [["0", "2"]]},
            {"topic": "Budget", "relevant_text_span": [["3", "5"]]},
        ],
        "general_query_list": [{"query": "Summarize the whole meeting.", "answer": "They met."}],
        "specific_query_list": [
            {"query": "What about the budget?", "answer": "Too small.", "relevant_text_span": [["3", "4"], ["1", "1"]]}
        ],
        "meeting_transcripts": [
            {"speaker": "Chair", "content": "Let us start ."},
            {"speaker": "Ana", "content": "Hello everyone , {vocalsound} hi ."},
            {"speaker": "Ben", "content": ""},
            {"speaker": "Chair", "content": "The budget for the remote is twelve euro ."},
            {"speaker": "Ana", "content": "That is too small for the budget ."},
            {"speaker": "Ben", "content": "Agreed ."},
        ],
    }
    meeting.update(overrides)
    return meeting


def _write(tmp_path: Path, data: Any, name: str = "m.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def _error(path: Path) -> LoaderError:
    with pytest.raises(LoaderError) as info:
        load_conversations(path)
    return info.value


# --- the loader on real meetings ------------------------------------------------


def test_real_meeting_turns_keep_index_speaker_and_raw_text():
    raw = _raw("ES2011a")
    conv = load_conversation(_real("ES2011a"))
    transcript = raw["meeting_transcripts"]
    assert conv.id == "ES2011a" and conv.sessions == ["1"]
    assert len(conv.turns) == len(transcript) == 276
    assert [t.id for t in conv.turns] == [str(i) for i in range(276)]
    assert [t.index for t in conv.turns] == list(range(276))
    assert [(t.speaker, t.text) for t in conv.turns] == [(x["speaker"], x["content"]) for x in transcript]
    assert conv.speakers == tuple(dict.fromkeys(x["speaker"] for x in transcript))  # first-appearance order
    assert sorted(conv.speakers) == ["Industrial Designer", "Marketing", "Project Manager", "User Interface"]
    assert conv.source == str(_real("ES2011a"))


def test_synthetic_times_are_one_second_per_turn_from_2000():
    conv = load_qmsum(_real("Bmr006"))  # 1,368 turns: still one day
    assert conv.turns[0].time == "2000-01-01T00:00:00"
    assert conv.turns[61].time == "2000-01-01T00:01:01"
    assert conv.turns[-1].time == "2000-01-01T00:22:47" == synthetic_time(1367)
    assert all(a.time < b.time for a, b in zip(conv.turns, conv.turns[1:]))


def test_empty_content_turns_are_kept_so_indexes_match_spans():
    raw = _raw("Bmr006")["meeting_transcripts"]
    conv = load_qmsum(_real("Bmr006"))
    assert raw[724]["content"] == "" and conv.turns[724].text == "" and conv.turns[724].id == "724"
    assert len(conv.turns) == len(raw)


def test_specific_queries_carry_expanded_span_evidence_and_general_ones_none():
    conv = load_qmsum(_real("ES2011a"))
    specific = [q for q in conv.questions if q.id.startswith("ES2011a:s")]
    general = [q for q in conv.questions if q.id.startswith("ES2011a:g")]
    assert len(specific) == 6 and len(general) == 1
    first = specific[0]
    assert first.id == "ES2011a:s0" and first.question == "What did the group discuss about animal characteristics?"
    assert first.evidence == tuple(str(i) for i in range(10, 98))  # span ["10", "97"], inclusive
    assert first.answer.startswith("User Interface and Industrial designer drawn dolphin")
    assert general[0].question == "Summarize the whole meeting." and general[0].evidence == ()
    assert all(q.category is None for q in conv.questions)


def test_multi_span_query_evidence_is_the_sorted_union():
    raw = _raw("IS1003a")
    conv = load_qmsum(_real("IS1003a"))
    for position, item in enumerate(raw["specific_query_list"]):
        expected = sorted({i for a, b in item["relevant_text_span"] for i in range(int(a), int(b) + 1)})
        assert conv.questions[position].evidence == tuple(str(i) for i in expected)
    assert any(len(item["relevant_text_span"]) == 3 for item in raw["specific_query_list"])


def test_every_test_meeting_loads_through_the_generic_loader():
    for path in _all_meetings():
        conversations = load_conversations(path)
        assert [c.id for c in conversations] == [path.stem]
        conv = conversations[0]
        ids = conv.turn_ids()
        assert conv.questions and all(set(q.evidence) <= ids for q in conv.questions)
        assert load_conversation(path, path.stem).id == path.stem


def test_asking_for_another_meeting_id_names_the_one_there():
    with pytest.raises(LoaderError) as info:
        load_conversation(_real("ES2011a"), "Bed003")
    assert info.value.field == "conversation_id" and "ES2011a" in info.value.message


# --- gold topic segmentation -------------------------------------------------


def test_topic_segments_are_the_spans_sorted():
    assert topic_segments(_real("ES2004a")) == [(12, 130), (131, 171), (173, 311)]
    # TS3011c: a topic with two spans contributes both; spans sorted across topics
    assert topic_segments(_real("TS3011c")) == [
        (0, 58), (58, 188), (189, 235), (236, 325), (326, 340), (341, 381), (382, 433), (434, 621)]


def test_gold_boundaries_resolve_gaps_overlaps_and_nesting():
    # gaps: 0-11 before the first span and turn 172 between spans open no segment
    assert gold_boundaries(_real("ES2004a")) == [131, 173]
    # overlaps 10-97 / 84-215 / 97-236: each later-started span takes over where it starts
    assert gold_boundaries(_real("ES2011a")) == [84, 97]
    # nesting: 195-206 inside 143-538, after which 143-538 resumes at 207
    assert gold_boundaries(_real("IS1003d")) == [117, 143, 195, 207, 539]
    # Bed008 starts at 45 and has gaps 82-88, 280-432, 534-668: only span starts count
    assert gold_boundaries(_real("Bed008")) == [89, 433, 669]


def test_gold_boundaries_from_segments_need_the_length():
    segments = topic_segments(_real("ES2011a"))
    assert gold_boundaries(segments, 276) == gold_boundaries(_real("ES2011a"), 276) == [84, 97]
    with pytest.raises(ValueError):
        gold_boundaries(segments)
    with pytest.raises(ValueError):
        gold_boundaries([(0, 300)], 276)


def test_small_meeting(tmp_path):
    path = _write(tmp_path, _meeting(), "tiny.json")
    conv = load_conversation(path)
    assert conv.id == "tiny" and [t.text for t in conv.turns][2] == ""
    assert [q.id for q in conv.questions] == ["tiny:s0", "tiny:g0"]
    assert conv.questions[0].evidence == ("1", "3", "4")
    assert topic_segments(path) == [(0, 2), (3, 5)]
    assert gold_boundaries(path) == [3]


# --- malformed input -------------------------------------------------------------


def test_missing_transcript_is_named(tmp_path):
    data = _meeting()
    del data["meeting_transcripts"]
    err = _error(_write(tmp_path, data))
    assert (err.record, err.field, err.message) == ("m", "meeting_transcripts", "missing")
    assert str(err) == "m.json: record m: field 'meeting_transcripts': missing"
    with pytest.raises(LoaderError):
        load_qmsum(tmp_path / "m.json")


def test_transcript_of_the_wrong_type_and_bad_turns(tmp_path):
    err = _error(_write(tmp_path, _meeting(meeting_transcripts={"0": "hi"})))
    assert err.field == "meeting_transcripts" and "expected list" in err.message
    turns = _meeting()["meeting_transcripts"]
    del turns[4]["content"]
    err = _error(_write(tmp_path, _meeting(meeting_transcripts=turns)))
    assert (err.record, err.field, err.message) == ("m/meeting_transcripts[4]", "content", "missing")
    turns[4] = "just text"
    err = _error(_write(tmp_path, _meeting(meeting_transcripts=turns)))
    assert err.record == "m/meeting_transcripts[4]" and "expected dict" in err.message


@pytest.mark.parametrize(
    ("span", "problem"),
    [
        (["3"], "pair of turn indexes"),
        (["3", "4", "5"], "pair of turn indexes"),
        ("3-5", "pair of turn indexes"),
        (["three", "5"], "non-negative integer string"),
        (["3.0", "5"], "non-negative integer string"),
        (["-1", "5"], "non-negative integer string"),
        ([None, "5"], "non-negative integer string"),
        ([True, "5"], "non-negative integer string"),
        (["5", "3"], "starts after it ends"),
        (["3", "6"], "turn index 6 out of range: meeting_transcripts has 6 turns (0..5)"),
    ],
)
def test_bad_topic_span_is_located(tmp_path, span, problem):
    data = _meeting()
    data["topic_list"][1]["relevant_text_span"] = [span]
    err = _error(_write(tmp_path, data))
    assert err.record == "m/topic_list[1].relevant_text_span[0]" and err.field == "relevant_text_span"
    assert problem in err.message
    with pytest.raises(LoaderError):
        topic_segments(tmp_path / "m.json")


def test_bad_query_span_is_located(tmp_path):
    data = _meeting()
    data["specific_query_list"][0]["relevant_text_span"] = [["3", "4"], ["2", "60"]]
    err = _error(_write(tmp_path, data))
    assert err.record == "m/specific_query_list[0].relevant_text_span[1]" and err.field == "relevant_text_span"
    assert "out of range" in err.message
    del data["specific_query_list"][0]["relevant_text_span"]
    err = _error(_write(tmp_path, data))
    assert (err.record, err.field, err.message) == ("m/specific_query_list[0]", "relevant_text_span", "missing")


def test_integer_spans_are_accepted(tmp_path):
    data = _meeting()
    data["topic_list"][1]["relevant_text_span"] = [[3, 5]]
    assert topic_segments(_write(tmp_path, data)) == [(0, 2), (3, 5)]


def test_missing_topic_list_is_named(tmp_path):
    data = _meeting()
    del data["topic_list"]
    err = _error(_write(tmp_path, data))
    assert (err.record, err.field, err.message) == ("m", "topic_list", "missing")


def test_unrelated_object_is_still_an_unknown_format(tmp_path):
    err = _error(_write(tmp_path, {"transcript": []}, "odd.json"))
    assert err.message.startswith("unknown format") and "QMSum" in err.message


# --- boundary metrics on the real test split -----------------------------------


def test_baselines_on_the_qmsum_test_split():
    """Measured over the 35 test meetings: no boundaries Pk = WD = 0.372; fixed 50-turn windows
    Pk 0.584, WD 0.761, ΔB +7.26 (see engine.segmentation for k and the gold rule)."""
    none_pk, fixed_pk, fixed_wd = [], [], []
    for path in _all_meetings():
        n = len(load_qmsum(path).turns)
        gold = gold_boundaries(path)
        assert gold, f"{path.stem}: a meeting with one topic segment"
        empty = no_boundaries(n)
        windows = fixed_windows(n, 50)
        assert len(windows) == math.ceil(n / 50) - 1 and all(b % 50 == 0 for b in windows)
        # with no hypothesis boundaries, a probe errs exactly when its window holds a gold boundary
        assert pk(gold, empty, n) == window_diff(gold, empty, n)
        assert delta_b(gold, empty) == -len(gold)
        assert delta_b(gold, windows) == len(windows) - len(gold)
        none_pk.append(pk(gold, empty, n))
        fixed_pk.append(pk(gold, windows, n))
        fixed_wd.append(window_diff(gold, windows, n))
    assert len(none_pk) == 35
    assert 0.34 <= statistics.mean(none_pk) <= 0.40
    assert 0.55 <= statistics.mean(fixed_pk) <= 0.62  # MemLoom reports 0.604 for its chunk baseline
    assert 0.72 <= statistics.mean(fixed_wd) <= 0.80
    assert statistics.mean(fixed_pk) > statistics.mean(none_pk)


# --- the command line --------------------------------------------------------------


def test_memwb_replay_accepts_a_qmsum_meeting(tmp_path):
    path = _write(tmp_path, _meeting(), "tiny.json")
    db = tmp_path / "q.sqlite"

    def memwb(*args: object) -> str:
        proc = subprocess.run([sys.executable, "-m", "engine.cli", *map(str, args)], cwd=ROOT,
                              capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, proc.stderr
        return proc.stdout

    assert memwb("replay", path, "--db", db, "--engine", "naive", "--quiet").startswith("turns=6 units=6 ")
    result = json.loads(memwb("retrieve", "--db", db, "--query", "budget for the remote", "--k", "2", "--json"))
    assert result["source_ids"][0] in {"3", "4"} and set(result["source_ids"]) <= {str(i) for i in range(6)}


def test_a_meeting_replayed_with_the_cli_runs_as_the_benchmark_runs_it(tmp_path):
    """`memwb replay` of a QMSum meeting into GAM applies GAM's fit for meetings and the meeting schedule, as
    `memwb bench --dataset qmsum` does (issue 53.9: it used the chat settings), stores both with the session and says
    so; `--set` still wins over the fit, and a chat replays with the defaults and no such line."""
    from engine.bench.config import resolve_systems
    from engine.bench.datasets import DATASETS
    from engine.session import open_session

    meeting = _real("IS1003a")
    fit = engine_schema("gam").fits["meetings"]
    out = _memwb("replay", meeting, "--db", tmp_path / "m.sqlite", "--engine", "gam", "--quiet")
    stored = open_session(tmp_path / "m.sqlite", create=False)
    bench = resolve_systems(DATASETS["qmsum"], ["gam"], [])[0].settings
    assert fit and all(getattr(stored.settings, k) == v for k, v in fit.items())
    assert stored.settings.to_dict() == bench                          # the settings the benchmark runs
    assert stored.store.meta()["schedule"] == DATASETS["qmsum"].schedule and stored.store.meta()["fit"] == "meetings"
    assert "talk: meetings: GAM's fit for meetings (fits.meetings: " in out and "and schedule every-200-turns, as memwb bench --dataset qmsum runs it" in out
    out = _memwb("replay", meeting, "--db", tmp_path / "s.sqlite", "--engine", "gam", "--quiet",
                 "--set", "min_segment=3", "--consolidate", "manual")
    given = open_session(tmp_path / "s.sqlite", create=False)
    assert given.settings.min_segment == 3 and given.settings.tiling_window == fit["tiling_window"]
    assert given.store.meta()["schedule"] == "manual" and "(--consolidate manual given)" in out
    chat = _memwb("replay", ROOT / "datasets" / "demo" / "demo.jsonl", "--db", tmp_path / "c.sqlite", "--engine", "gam",
                  "--quiet")
    assert "talk:" not in chat and "fit" not in open_session(tmp_path / "c.sqlite", create=False).store.meta()
    assert open_session(tmp_path / "c.sqlite", create=False).settings == type(stored.settings)()


def _memwb(*args) -> str:
    done = subprocess.run([sys.executable, "-m", "engine.cli", *map(str, args)], capture_output=True, text=True,
                          cwd=ROOT, check=True)
    return done.stdout

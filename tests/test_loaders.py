"""Loaders turn every dataset into the same records, and fail with located errors."""
from __future__ import annotations

import copy
import json
import pickle
import re
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from engine.core.conversation import Conversation
from engine.loaders import LoaderError, load_conversation, load_conversations
from engine.loaders.locomo import normalise_evidence, parse_locomo_time
from engine.loaders.longmemeval import parse_longmemeval_time
from tests.conftest import LOCOMO, SHARED_DATA, has_data, needs_data

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "datasets" / "fixtures"
CLEAN_ID = re.compile(r"D\d+:\d+")
SESSION_KEY = re.compile(r"session_\d+")


@pytest.fixture(scope="module")
def locomo_raw() -> list[dict[str, Any]]:
    return json.loads(needs_data(LOCOMO).read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def locomo(locomo_raw: list[dict[str, Any]]) -> dict[str, Conversation]:
    return {c.id: c for c in load_conversations(LOCOMO)}


def _raw_sample(raw: list[dict[str, Any]], sample_id: str) -> dict[str, Any]:
    return next(s for s in raw if s["sample_id"] == sample_id)


def _write(path: Path, lines: list[object]) -> Path:
    path.write_text("\n".join(x if isinstance(x, str) else json.dumps(x) for x in lines) + "\n", encoding="utf-8")
    return path


def _turn(id: str, time: str, **extra: object) -> dict[str, object]:
    return {"id": id, "speaker": "Ana", "text": f"turn {id}", "time": time, "session": "1", **extra}


# --- LoCoMo, real data -------------------------------------------------------


def test_locomo_conv26_turn_count_matches_raw(locomo_raw: list[dict[str, Any]], locomo: dict[str, Conversation]) -> None:
    raw = _raw_sample(locomo_raw, "conv-26")["conversation"]
    expected = sum(len(v) for k, v in raw.items() if SESSION_KEY.fullmatch(k))
    conv = load_conversation(LOCOMO, "conv-26")
    assert len(conv.turns) == expected
    assert [t.index for t in conv.turns] == list(range(expected))
    assert conv.speakers == (raw["speaker_a"], raw["speaker_b"])
    assert conv.source == str(LOCOMO)
    assert len(conv.questions) == len(_raw_sample(locomo_raw, "conv-26")["qa"])


def test_locomo_sessions_numeric_order_and_skip_dangling_dates(locomo_raw: list[dict[str, Any]]) -> None:
    raw = _raw_sample(locomo_raw, "conv-26")["conversation"]
    dangling = [k for k in raw if k.endswith("_date_time") and k.removesuffix("_date_time") not in raw]
    assert dangling, "conv-26 is expected to have date keys without sessions"
    conv = load_conversation(LOCOMO, "conv-26")
    numbers = [int(s) for s in conv.sessions]
    assert numbers == sorted(numbers) and numbers[-1] >= 10
    assert conv.turns[0].id == "D1:1" and conv.turns[0].time == "2023-05-08T13:56:00"


def test_locomo_times_iso_and_non_decreasing(locomo: dict[str, Conversation]) -> None:
    for conv in locomo.values():
        times = [datetime.fromisoformat(t.time) for t in conv.turns]
        assert all(t.isoformat() == turn.time for t, turn in zip(times, conv.turns))
        assert times == sorted(times), conv.id


def test_locomo_evidence_ids_are_turn_ids(locomo: dict[str, Conversation]) -> None:
    for conv in locomo.values():
        ids = conv.turn_ids()
        for q in conv.questions:
            assert set(q.evidence) <= ids, q.id
            assert len(set(q.evidence)) == len(q.evidence), q.id


def test_locomo_integer_answers_become_strings(locomo_raw: list[dict[str, Any]], locomo: dict[str, Conversation]) -> None:
    found = 0
    for sample in locomo_raw:
        conv = locomo[sample["sample_id"]]
        for i, item in enumerate(sample["qa"]):
            if isinstance(item.get("answer"), int):
                found += 1
                assert conv.questions[i].answer == str(item["answer"])
    assert found, "expected integer answers in the real data"
    assert all(q.answer is None or isinstance(q.answer, str) for c in locomo.values() for q in c.questions)


def test_locomo_adversarial_questions_use_adversarial_answer(
    locomo_raw: list[dict[str, Any]], locomo: dict[str, Conversation]
) -> None:
    sample = locomo_raw[0]
    conv = locomo[sample["sample_id"]]
    checked = 0
    for i, item in enumerate(sample["qa"]):
        if item["category"] == 5 and "answer" not in item:
            assert conv.questions[i].answer == item["adversarial_answer"]
            assert conv.questions[i].category == 5
            checked += 1
    assert checked


def test_locomo_malformed_evidence_normalised(locomo_raw: list[dict[str, Any]], locomo: dict[str, Conversation]) -> None:
    malformed = [
        (sample["sample_id"], i, ev)
        for sample in locomo_raw
        for i, item in enumerate(sample["qa"])
        for ev in item["evidence"]
        if not CLEAN_ID.fullmatch(ev)
    ]
    assert malformed, "expected malformed evidence strings in the real data"
    recovered = 0
    for sample_id, i, ev in malformed:
        conv = locomo[sample_id]
        question = conv.questions[i]
        assert question.id == f"{sample_id}:q{i}"
        assert all(CLEAN_ID.fullmatch(e) for e in question.evidence)
        pointers = [f"D{int(s)}:{int(t)}" for s, t in re.findall(r"(\d+)\s*:\s*(\d+)", ev)]
        existing = [p for p in pointers if p in conv.turn_ids()]
        assert set(existing) <= set(question.evidence), (sample_id, i, ev)
        recovered += len(existing)
    assert any(";" in ev for _, _, ev in malformed), "expected a 'D8:6; D9:17'-style evidence string"
    assert recovered >= 3, "the split and the 'D:11:26' cases should yield existing turn ids"


def test_locomo_image_captions_carried(locomo_raw: list[dict[str, Any]]) -> None:
    raw = _raw_sample(locomo_raw, "conv-26")["conversation"]
    captions = {
        t["dia_id"]: t["blip_caption"]
        for k, v in raw.items() if SESSION_KEY.fullmatch(k)
        for t in v if "blip_caption" in t
    }
    assert captions
    conv = load_conversation(LOCOMO, "conv-26")
    by_id = {t.id: t for t in conv.turns}
    for dia_id, caption in captions.items():
        assert by_id[dia_id].image_caption == caption
        assert caption in by_id[dia_id].raw
    assert all(t.image_caption is None for t in conv.turns if t.id not in captions)


# --- LoCoMo, synthetic gotchas -----------------------------------------------


def _locomo_sample() -> dict[str, Any]:
    def turns(n: int, count: int) -> list[dict[str, Any]]:
        return [{"speaker": "A" if k % 2 else "B", "dia_id": f"D{n}:{k}", "text": f"s{n} t{k}"} for k in range(1, count + 1)]

    conversation: dict[str, Any] = {"speaker_a": "A", "speaker_b": "B"}
    for n in (10, 2, 1):
        conversation[f"session_{n}"] = turns(n, 3)
        conversation[f"session_{n}_date_time"] = f"9:0{n % 10} am on {n} June, 2023"
    conversation["session_11_date_time"] = "1:00 pm on 30 June, 2023"
    conversation["session_2"][1].update(img_url=["http://x/y.jpg"], blip_caption="a dog on a beach")
    qa = [
        {"question": "q0", "answer": 2022, "evidence": ["D1:1; D2:3"], "category": 2},
        {"question": "q1", "adversarial_answer": "trap", "evidence": ["D10:03", "D:2:2", "D", "D9:9"], "category": 5},
        {"question": "q2", "answer": "x", "evidence": ["D1:2, D1:3 D1:2"], "category": 1},
    ]
    return {"sample_id": "conv-x", "conversation": conversation, "qa": qa}


def test_locomo_synthetic_gotchas(tmp_path: Path) -> None:
    path = tmp_path / "synthetic.json"
    path.write_text(json.dumps([_locomo_sample()]), encoding="utf-8")
    conv = load_conversation(path)
    assert conv.sessions == ["1", "2", "10"]
    assert [t.id for t in conv.turns][:4] == ["D1:1", "D1:2", "D1:3", "D2:1"]
    assert conv.turns[-1].time == "2023-06-10T09:00:00"
    assert conv.turns[4].image_caption == "a dog on a beach"
    q0, q1, q2 = conv.questions
    assert q0.answer == "2022" and q0.evidence == ("D1:1", "D2:3")
    assert q1.answer == "trap" and q1.evidence == ("D10:3", "D2:2")
    assert q2.evidence == ("D1:2", "D1:3")


def test_normalise_evidence_reports_dropped() -> None:
    kept, dropped = normalise_evidence(["D30:05", "D8:6; D9:17", "D", 7], {"D30:5", "D8:6"})
    assert kept == ["D30:5", "D8:6"]
    assert dropped == ["D9:17", "D", "7"]


def test_date_parsers() -> None:
    assert parse_locomo_time("1:56 pm on 8 May, 2023") == "2023-05-08T13:56:00"
    assert parse_locomo_time("12:52 am on 19 August, 2023") == "2023-08-19T00:52:00"
    assert parse_longmemeval_time("2023/05/20 (Sat) 02:21") == "2023-05-20T02:21:00"
    with pytest.raises(ValueError):
        parse_locomo_time("yesterday")


# --- JSONL and LongMemEval fixtures -----------------------------------------


def test_jsonl_fixture_loads() -> None:
    conv = load_conversation(FIXTURES / "tiny.jsonl")
    assert conv.id == "tiny"
    assert len(conv.turns) == 8 and conv.sessions == ["1", "2"]
    assert conv.speakers == ("Ana", "Ben")
    assert [t.index for t in conv.turns] == list(range(8))
    assert any(t.image_caption for t in conv.turns)
    assert [q.id for q in conv.questions] == ["q1", "q2"]
    assert all(set(q.evidence) <= conv.turn_ids() for q in conv.questions)
    assert conv.questions[0].time == "2023-05-20T00:00:00"


def test_longmemeval_fixture_loads() -> None:
    conversations = load_conversations(FIXTURES / "longmemeval_tiny.json")
    assert [c.id for c in conversations] == ["tiny_q1", "tiny_q2"]
    first, second = conversations
    assert first.speakers == ("user", "assistant")
    assert first.turns[0].id == "sharegpt_a1_0:0" and first.turns[0].session == "sharegpt_a1_0"
    assert first.turns[0].time == "2023-05-20T02:21:00"
    (q1,) = first.questions
    assert q1.evidence == ("answer_tiny_q1_1:0", "answer_tiny_q1_2:0")
    assert q1.time == "2023-06-02T09:30:00"
    (q2,) = second.questions
    assert q2.answer == "3"
    assert q2.evidence == ("answer_tiny_q2_1:0", "answer_tiny_q2_1:1", "answer_tiny_q2_2:0", "answer_tiny_q2_2:1")
    times = [t.time for t in second.turns]
    assert times == sorted(times), "sessions are put in date order"
    assert [t.index for t in second.turns] == list(range(len(second.turns)))


def test_jsonl_out_of_order_times_are_sorted(tmp_path: Path) -> None:
    path = _write(tmp_path / "order.jsonl", [
        _turn("a", "2023-05-02T10:00:00"),
        _turn("b", "2023-05-01"),
        _turn("c", "2023-05-02T10:00:00"),
    ])
    conv = load_conversation(path)
    assert [t.id for t in conv.turns] == ["b", "a", "c"]
    assert [t.index for t in conv.turns] == [0, 1, 2]
    assert conv.turns[0].time == "2023-05-01T00:00:00"


def test_jsonl_several_conversations(tmp_path: Path) -> None:
    path = _write(tmp_path / "multi.jsonl", [
        _turn("t1", "2023-01-01", conversation="one"),
        _turn("t1", "2023-01-01", conversation="two"),
        {"type": "question", "id": "q", "question": "?", "answer": 1, "evidence": ["t1"], "conversation": "two"},
    ])
    one, two = load_conversations(path)
    assert (one.id, two.id) == ("one", "two")
    assert two.questions[0].answer == "1"


# --- errors: each names the file, the record and the field --------------------


def _error(path: Path, conversation_id: str | None = None) -> LoaderError:
    with pytest.raises(LoaderError) as info:
        if conversation_id is None:
            load_conversations(path)
        else:
            load_conversation(path, conversation_id)
    return info.value


def test_jsonl_line_not_json(tmp_path: Path) -> None:
    path = _write(tmp_path / "broken.jsonl", [_turn("a", "2023-01-01"), "", '{"id": "b", oops}'])
    err = _error(path)
    assert str(err).startswith("broken.jsonl: record line 3: not valid JSON")
    assert err.record == "line 3" and err.field is None


def test_jsonl_missing_field(tmp_path: Path) -> None:
    bad = _turn("b", "2023-01-01")
    del bad["text"]
    err = _error(_write(tmp_path / "missing.jsonl", [_turn("a", "2023-01-01"), bad]))
    assert str(err) == "missing.jsonl: record line 2: field 'text': missing"


def test_jsonl_bad_time(tmp_path: Path) -> None:
    err = _error(_write(tmp_path / "time.jsonl", [_turn("a", "last Tuesday")]))
    assert str(err).startswith("time.jsonl: record line 1: field 'time': not an ISO 8601")


def test_jsonl_duplicate_id(tmp_path: Path) -> None:
    path = _write(tmp_path / "dup.jsonl", [_turn("a", "2023-01-01"), _turn("b", "2023-01-01"), _turn("a", "2023-01-02")])
    err = _error(path)
    assert str(err).startswith("dup.jsonl: record line 3: field 'id': duplicate turn id 'a'")
    assert "line 1" in err.message


def test_jsonl_question_with_unknown_evidence(tmp_path: Path) -> None:
    path = _write(tmp_path / "ev.jsonl", [_turn("a", "2023-01-01"), {"type": "question", "id": "q", "question": "?", "evidence": ["zz"]}])
    assert str(_error(path)).startswith("ev.jsonl: record line 2: field 'evidence': unknown turn id(s) 'zz'")


def test_locomo_turn_missing_text(tmp_path: Path, locomo_raw: list[dict[str, Any]]) -> None:
    sample = copy.deepcopy(_raw_sample(locomo_raw, "conv-26"))
    del sample["conversation"]["session_3"][4]["text"]
    path = tmp_path / "locomo-dev8.json"
    path.write_text(json.dumps([sample]), encoding="utf-8")
    err = _error(path)
    assert str(err) == "locomo-dev8.json: record conv-26/session_3[4]: field 'text': missing"
    assert (err.path, err.record, err.field) == (str(path), "conv-26/session_3[4]", "text")


def test_wrong_conversation_id_lists_available(locomo_raw: list[dict[str, Any]]) -> None:
    err = _error(LOCOMO, "conv-99")
    message = str(err)
    assert message.startswith("locomo-dev8.json: record conv-99: field 'conversation_id': no such conversation")
    assert all(sample["sample_id"] in message for sample in locomo_raw)


def test_missing_conversation_id_with_several(locomo_raw: list[dict[str, Any]]) -> None:
    with pytest.raises(LoaderError) as info:
        load_conversation(LOCOMO)
    assert "conv-26" in str(info.value) and info.value.field == "conversation_id"


def test_unknown_format(tmp_path: Path) -> None:
    text_file = tmp_path / "notes.txt"
    text_file.write_text("just some notes\n", encoding="utf-8")
    assert str(_error(text_file)).startswith("notes.txt: record line 1: unknown format")

    odd_json = tmp_path / "odd.json"
    odd_json.write_text(json.dumps([{"title": "not a dataset"}]), encoding="utf-8")
    err = _error(odd_json)
    assert str(err).startswith("odd.json: record item 0: unknown format")
    assert "title" in err.message


def test_missing_file_and_pickling(tmp_path: Path) -> None:
    err = _error(tmp_path / "absent.json")
    assert str(err).startswith("absent.json: cannot read file")
    clone = pickle.loads(pickle.dumps(err))
    assert str(clone) == str(err) and clone.path == err.path


def test_conversation_without_turns_is_a_clear_error(tmp_path: Path) -> None:
    from engine.loaders import LoaderError, load_conversation

    path = tmp_path / "empty.json"
    path.write_text(json.dumps([{"sample_id": "conv-x", "conversation": {"speaker_a": "A", "speaker_b": "B"},
                                 "qa": []}]))
    with pytest.raises(LoaderError) as err:
        load_conversation(path)
    assert "empty.json" in str(err.value) and "conv-x" in str(err.value) and "turns" in str(err.value)


# --- what a loader must refuse or keep: line separators, Unicode, nesting, sizes ----------------

LONE_SURROGATE = "\ud800"          # what the JSON escape "\ud800" decodes to: not encodable as UTF-8
QMSUM_MEETING = SHARED_DATA / "qmsum" / "test" / "Bed003.json"


@pytest.mark.parametrize("name", ["breaks.jsonl", "breaks.txt"])
def test_jsonl_keeps_unicode_line_separators_inside_strings(tmp_path: Path, name: str) -> None:
    """U+2028, U+2029 and U+0085 are legal inside a JSON string: only "\\n" ends a line, and a "\\r\\n"
    ending reads the same; a file without the .jsonl suffix is still recognised."""
    text = "first paragraph\u2028second\u2029third\u0085fourth"
    lines = [json.dumps(_turn("a", "2023-01-01", text=text), ensure_ascii=False), json.dumps(_turn("b", "2023-01-02"))]
    path = tmp_path / name
    path.write_bytes(("\r\n".join(lines) + "\r\n").encode("utf-8"))
    conv = load_conversation(path)
    assert [t.id for t in conv.turns] == ["a", "b"]
    assert conv.turns[0].text == text and conv.turns[1].text == "turn b"


def _jsonl_case(tmp_path: Path, field: str) -> tuple[Path, str]:
    turn, question = _turn("a", "2023-01-01"), {"type": "question", "id": "q", "question": "why?", "answer": "so"}
    on_turn = field in ("text", "speaker", "id", "session", "image_caption", "conversation")
    (turn if on_turn else question)[field] = f"x{LONE_SURROGATE}"
    return _write(tmp_path / "s.jsonl", [turn, question]), "line 1" if on_turn else "line 2"


def _json_case(tmp_path: Path, name: str, data: Any, edit: Any) -> Path:
    data = copy.deepcopy(data)
    edit(data)
    path = tmp_path / name
    path.write_text(json.dumps(data), encoding="utf-8")         # ensure_ascii: the surrogate is a \ud800 escape
    return path


def _append(container: Any, key: Any) -> None:
    container[key] = f"{container[key]}{LONE_SURROGATE}"


@pytest.mark.parametrize("field", ["text", "speaker", "id", "session", "image_caption", "question", "answer",
                                   "conversation"])
def test_lone_surrogate_is_refused_in_every_jsonl_field(tmp_path: Path, field: str) -> None:
    path, record = _jsonl_case(tmp_path, field)
    err = _error(path)
    assert (err.record, err.field) == (record, field)
    assert str(err).startswith(f"s.jsonl: record {record}: field {field!r}: invalid Unicode: lone surrogate U+D800")


def test_lone_surrogate_is_refused_in_locomo_fields(tmp_path: Path, locomo_raw: list[dict[str, Any]]) -> None:
    sample = _raw_sample(locomo_raw, "conv-26")
    cases = {
        ("conv-26/session_2[3]", "text"): lambda s: _append(s["conversation"]["session_2"][3], "text"),
        ("conv-26/session_1[0]", "speaker"): lambda s: _append(s["conversation"]["session_1"][0], "speaker"),
        ("conv-26/session_4[1]", "dia_id"): lambda s: _append(s["conversation"]["session_4"][1], "dia_id"),
        ("conv-26/qa[5]", "question"): lambda s: _append(s["qa"][5], "question"),
        ("conv-26/conversation", "speaker_b"): lambda s: _append(s["conversation"], "speaker_b"),
    }
    for (record, field), edit in cases.items():
        err = _error(_json_case(tmp_path, "locomo-dev8.json", [sample], lambda d: edit(d[0])))
        assert (err.record, err.field) == (record, field), str(err)
        assert "lone surrogate U+D800" in err.message and str(err).startswith("locomo-dev8.json: ")


def test_lone_surrogate_is_refused_in_longmemeval_and_qmsum_fields(tmp_path: Path) -> None:
    instances = json.loads((FIXTURES / "longmemeval_tiny.json").read_text(encoding="utf-8"))
    qid, session_id = instances[0]["question_id"], instances[0]["haystack_session_ids"][0]
    cases = [
        ("longmemeval_tiny.json", instances, f"{qid}/{session_id}[1]", "content",
         lambda d: _append(d[0]["haystack_sessions"][0][1], "content")),
        ("longmemeval_tiny.json", instances, f"{qid}/{session_id}[0]", "role",
         lambda d: _append(d[0]["haystack_sessions"][0][0], "role")),
        ("longmemeval_tiny.json", instances, qid, "question", lambda d: _append(d[0], "question")),
        ("longmemeval_tiny.json", instances, qid, "answer", lambda d: _append(d[0], "answer")),
    ]
    if has_data(QMSUM_MEETING):
        meeting = json.loads(QMSUM_MEETING.read_text(encoding="utf-8"))
        cases += [
            ("Bed003.json", meeting, "Bed003/meeting_transcripts[7]", "content",
             lambda d: _append(d["meeting_transcripts"][7], "content")),
            ("Bed003.json", meeting, "Bed003/meeting_transcripts[7]", "speaker",
             lambda d: _append(d["meeting_transcripts"][7], "speaker")),
            ("Bed003.json", meeting, "Bed003/specific_query_list[0]", "query",
             lambda d: _append(d["specific_query_list"][0], "query")),
        ]
    for name, data, record, field, edit in cases:
        err = _error(_json_case(tmp_path, name, data, edit))
        assert (err.record, err.field) == (record, field), str(err)
        assert "lone surrogate U+D800" in err.message and str(err).startswith(f"{name}: ")


def test_deep_nesting_is_refused_naming_the_file(tmp_path: Path) -> None:
    """100000 nested lists overflow the JSON decoder's recursion; the error names the file (and line)."""
    from engine.loaders import load_locomo, load_qmsum

    deep = "[" * 100_000 + "]" * 100_000
    files = {"deep.json": (deep, None), "deep.txt": (deep, None),
             "deep.jsonl": (json.dumps(_turn("a", "2023-01-01")) + "\n" + '{"id": ' + deep + "}\n", "line 2")}
    for name, (content, record) in files.items():
        (tmp_path / name).write_text(content, encoding="utf-8")
        err = _error(tmp_path / name)
        assert str(err).startswith(f"{name}: ") and err.record == record
        assert "JSON nested too deeply" in err.message
    for load in (load_locomo, load_qmsum):
        with pytest.raises(LoaderError, match=r"^deep\.json: JSON nested too deeply"):
            load(tmp_path / "deep.json")


def test_file_size_limit_names_the_file_the_limit_and_the_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, locomo_raw: list[dict[str, Any]]
) -> None:
    monkeypatch.delenv("MEMWB_MAX_FILE_MB", raising=False)
    big = tmp_path / "big.jsonl"
    with open(big, "wb") as handle:                 # sparse: 65 MB on paper, nothing written
        handle.truncate(65 * 1024 * 1024)
    assert str(_error(big)) == ("big.jsonl: file is 65.0 MB, more than the limit of 64 MB; "
                                "raise it with MEMWB_MAX_FILE_MB=65 (or more)")

    monkeypatch.setenv("MEMWB_MAX_FILE_MB", "1")     # the real LoCoMo file is 1.7 MB
    err = _error(LOCOMO)
    assert str(err) == ("locomo-dev8.json: file is 1.7 MB, more than the limit of 1 MB; "
                        "raise it with MEMWB_MAX_FILE_MB=2 (or more)")
    monkeypatch.setenv("MEMWB_MAX_FILE_MB", "2")
    assert len(load_conversations(LOCOMO)) == len(locomo_raw)
    monkeypatch.setenv("MEMWB_MAX_FILE_MB", "lots")
    with pytest.raises(ValueError, match="MEMWB_MAX_FILE_MB='lots': expected a positive number"):
        load_conversations(LOCOMO)


def test_turn_text_limit_names_the_turn_the_limit_and_the_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, locomo_raw: list[dict[str, Any]]
) -> None:
    monkeypatch.delenv("MEMWB_MAX_TURN_CHARS", raising=False)
    path = _write(tmp_path / "long.jsonl", [_turn("a", "2023-01-01", text="x" * 100_000),
                                            _turn("b", "2023-01-02", text="y" * 100_001)])
    err = _error(path)
    assert str(err) == ("long.jsonl: record line 2: field 'text': 100001 characters, more than the limit of 100000 "
                        "for one turn; raise it with MEMWB_MAX_TURN_CHARS=100001 (or more)")
    monkeypatch.setenv("MEMWB_MAX_TURN_CHARS", "100001")
    assert [len(t.text) for t in load_conversation(path).turns] == [100_000, 100_001]

    monkeypatch.setenv("MEMWB_MAX_TURN_CHARS", "150")        # the real data, under a tight limit
    conversation = _raw_sample(locomo_raw, "conv-26")["conversation"]
    numbers = sorted(int(k.removeprefix("session_")) for k in conversation if SESSION_KEY.fullmatch(k))
    first = next(f"conv-26/session_{n}[{i}]" for n in numbers
                 for i, t in enumerate(conversation[f"session_{n}"]) if len(t["text"]) > 150)
    err = _error(LOCOMO, "conv-26")
    assert (err.record, err.field) == (first, "text")
    assert "more than the limit of 150 for one turn" in err.message and "MEMWB_MAX_TURN_CHARS=" in err.message
    if has_data(QMSUM_MEETING):
        err = _error(QMSUM_MEETING)
        assert err.field == "content" and err.record.startswith("Bed003/meeting_transcripts[")

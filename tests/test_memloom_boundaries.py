"""MemLoom's events at a topic's granularity: the depth rule on real meeting talk, the steward's cuts and repairs,
and a defined end for events that never matured (closed by the boundary that passes them, cause logged)."""
from __future__ import annotations

import pytest

from engine.core.conversation import Conversation
from engine.core.oplog import OpKind
from engine.core.segments import DepthRule, boundaries_from_labels, deepest_boundaries, topic_depths, turn_sizes
from engine.core.text import strip_speaker
from engine.eval.segmentation import turn_labels
from engine.llm.embedder import Embedder
from engine.loaders import load_conversation
from engine.loaders.qmsum import gold_boundaries
from engine.runtime.replay import Schedule, replay
from engine.session import open_session
from tests.conftest import SHARED_DATA, needs_data, turn
from tests.test_memloom import check_log

# Meetings of QMSum's train split (the rule was fit on train; nothing here reads test/). Placing a cut within 10
# turns of a human boundary is rare for any depth rule on this talk: of the train split's 29 excerpts of 240 turns
# around one human boundary, the fitted rule does it in 4 (the settings before the one-standard-error choice, 3),
# and it leaves 13 of 17 excerpts inside one human topic uncut (12). SHIFT and STEADY are the first of each in
# file order: what the mechanism looks like when it works, not how often it does (the benchmark says that).
SHIFT_MEETING = SHARED_DATA / "qmsum" / "train" / "Bdb001.json"
SHIFT, SHIFT_AT = (475, 715), 595      # turns 475-714 hold the human topic boundary at turn 595
STEADY_MEETING = SHARED_DATA / "qmsum" / "train" / "Bmr003.json"
STEADY = (393, 633)                    # turns 393-632 lie inside one human topic


def _meeting(path, check):
    conv = load_conversation(needs_data(path))
    assert check(gold_boundaries(path, len(conv.turns)))
    return conv


@pytest.fixture(scope="module")
def meeting():
    return _meeting(SHIFT_MEETING, lambda gold: [g for g in gold if SHIFT[0] <= g < SHIFT[1]] == [SHIFT_AT])


@pytest.fixture(scope="module")
def steady_meeting():
    return _meeting(STEADY_MEETING, lambda gold: not [g for g in gold if STEADY[0] <= g < STEADY[1]])


def excerpt(conv: Conversation, span: tuple[int, int]) -> Conversation:
    return Conversation(f"{conv.id}-{span[0]}", conv.turns[span[0]:span[1]])


def cuts_of(conv: Conversation, rule: DepthRule) -> list[int]:
    texts = [strip_speaker(t.raw)[1] for t in conv.turns]
    depth = topic_depths(Embedder().embed(texts), texts, [t.speaker for t in conv.turns], rule)
    return deepest_boundaries(depth, turn_sizes(texts), rule.threshold, rule.min_size, rule.lookahead)


def test_depth_rule_cuts_a_real_topic_shift_and_not_a_steady_topic(meeting, steady_meeting):
    """The fitted rule (the settings' defaults) on real meeting talk and the real embedder."""
    rule = DepthRule()
    shift = cuts_of(excerpt(meeting, SHIFT), rule)
    assert len(shift) == 1 and abs(shift[0] + SHIFT[0] - SHIFT_AT) <= 10
    assert cuts_of(excerpt(steady_meeting, STEADY), rule) == []


def test_steward_turns_a_topic_shift_into_an_event_boundary(meeting, tmp_path):
    """Replayed into the engine, the shift ends one event (closed by the boundary, its depth in the cause) and
    starts the next; no event straddles it, and every status change is a transition of the schema."""
    conv = excerpt(meeting, SHIFT)
    eng = open_session(tmp_path / "shift.sqlite", engine="memloom")
    replay(eng, conv, Schedule.parse("manual"))
    eng.consolidate()
    cuts = boundaries_from_labels(turn_labels(eng.state))
    assert len(cuts) == 1 and abs(cuts[0] + SHIFT[0] - SHIFT_AT) <= 10
    closed = [op.payload for op in eng.store.ops(kinds=[OpKind.STATUS_CHANGED])
              if op.payload["cause"].get("rule") == "boundary"]
    assert len(closed) == 1
    cause = closed[0]["cause"]
    assert cause["turn"] == conv.turns[cuts[0]].id and cause["depth"] >= cause["threshold"] == eng.settings.boundary_threshold
    before = eng.state.nodes[closed[0]["node"]]
    assert before.status == "closed" and {eng.state.turn_units[t.id] for t in conv.turns[:cuts[0]]} == set(before.members)
    check_log(eng)


def test_steady_topic_stays_one_event(steady_meeting, tmp_path):
    conv = excerpt(steady_meeting, STEADY)
    eng = open_session(tmp_path / "steady.sqlite", engine="memloom")
    replay(eng, conv, Schedule.parse("manual"))
    eng.consolidate()
    labels = turn_labels(eng.state)
    assert len(set(labels)) == 1 and eng.state.nodes[labels[0]].status == "active"
    assert not [op for op in eng.store.ops(kinds=[OpKind.STATUS_CHANGED]) if op.payload["cause"].get("rule") == "boundary"]
    check_log(eng)


TALK = [("Ana", "The plumber finally replaced the corroded copper pipe under our kitchen sink today."),
        ("Cleo", "Separately, the tax office wants our quarterly VAT return and the receipts by Friday."),
        ("Dan", "I scanned every receipt and invoice for the VAT return and uploaded them to the accountant."),
        ("Cleo", "Good, the accountant says the quarterly VAT return goes to the tax office on Thursday.")]


def test_a_boundary_closes_an_immature_provisional_event_with_its_cause(tmp_path):
    """A one-utterance event never matures (M < τ); the topic boundary after it closes it (provisional -> closed,
    a transition of the schema), the cause names the rule, turn and depth, and it is published and offered
    to relation synthesis in the same run."""
    # sizes for four short turns (13, 14, 16 and 15 words): only the gap after the first has 32 words heard after it
    small = {"boundary_window": 40.0, "boundary_smoothing": 1, "boundary_threshold": 0.01, "boundary_min_size": 10.0,
             "boundary_lookahead": 32.0}
    eng = open_session(tmp_path / "m.sqlite", engine="memloom", settings=small)
    for i, (speaker, text) in enumerate(TALK, 1):
        eng.ingest(turn(i, speaker, text))
    first = eng.state.nodes[eng.state.turn_units["D1:1"]]
    event = next(e for e in eng.state.nodes.values() if e.kind == "event" and first.id in e.members)
    assert event.status == "provisional" and event.members == [first.id]
    eng.consolidate()
    event = eng.state.nodes[event.id]
    assert event.status == "closed" and event.attrs.get("published")
    [change] = [op.payload for op in eng.store.ops(kinds=[OpKind.STATUS_CHANGED]) if op.payload["node"] == event.id]
    assert change["was"] == "provisional" and change["cause"]["rule"] == "boundary"
    assert change["cause"]["turn"] == "D1:2" and change["cause"]["depth"] >= 0.01
    assert eng.schema.legal("provisional", "closed")
    boundary = [p for p in eng.state.proposals.values() if p.op == "boundary"]
    assert [p.targets for p in boundary] == [[event.id]] and boundary[0].status == "applied"
    assert boundary[0].detail["threshold"] == eng.settings.theta_repair
    check_log(eng)


def test_a_session_shift_closes_an_immature_event_and_hands_it_to_the_steward(tmp_path):
    eng = open_session(tmp_path / "m.sqlite", engine="memloom")
    eng.ingest(turn(1, "Ana", "The plumber replaced the corroded pipe under the kitchen sink.", "1", 1))
    first = next(e for e in eng.state.nodes.values() if e.kind == "event")
    assert first.status == "provisional"
    eng.ingest(turn(1, "Ben", "The quarterly VAT return is due at the tax office on Friday.", "2", 9))
    [change] = [op.payload for op in eng.store.ops(kinds=[OpKind.STATUS_CHANGED]) if op.payload["node"] == first.id]
    assert change["was"] == "provisional" and change["status"] == "closed"
    assert change["cause"] == {"rule": "session_shift", "from_session": "1", "to_session": "2"}
    assert first.id in eng.state.buffer("steward")
    check_log(eng)


def test_a_whole_meeting_becomes_contiguous_events(meeting, tmp_path):
    """The whole train meeting, a steward run every 200 turns as the QMSum bench schedules it: each event holds one
    unbroken stretch of turns. An online event a cut splits keeps taking talk after the cut; a later run places
    those records and retires it (it once kept them, interleaved with the repaired events, a boundary each)."""
    eng = open_session(tmp_path / "whole.sqlite", engine="memloom")
    replay(eng, meeting, Schedule.parse("every-200-turns"))
    eng.consolidate()
    labels = turn_labels(eng.state)
    stretches = [label for i, label in enumerate(labels) if i == 0 or labels[i - 1] != label]
    assert len(stretches) == len(set(stretches)) >= 2
    closed = [op.payload["node"] for op in eng.store.ops(kinds=[OpKind.STATUS_CHANGED])
              if op.payload["cause"].get("rule") == "boundary"]
    assert set(stretches[:-1]) <= set(closed)
    check_log(eng)

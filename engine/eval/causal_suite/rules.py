"""The design rules of the causal diagnostic suite (datasets/causal/README.md), as located one-line messages.

`check_suite` returns every violation (empty: the suite is valid): scenario shape (turns, sessions,
speakers, ids, order), each question's agreement with its JSONL twin, chain questions whose root cause
shares no content word with the question and lies a whole session before the effect, state questions,
single-hop controls, lexical distractors, and the suite-wide counts.
"""
from __future__ import annotations

from collections import Counter
from datetime import datetime

from engine.core.cases import DEPENDENCY_TYPES, SCENARIO_ID, TASK_TYPES, CaseQuestion
from engine.core.conversation import Turn
from engine.eval.causal_suite.suite import (
    SPLITS,
    TURN_ID,
    Scenario,
    Suite,
    counts,
    kind_of,
    shared_stems,
    shared_tokens,
)

# Shape of a scenario and of the suite (README "Design rules").
TURNS_RANGE = (40, 90)
SESSIONS_RANGE = (4, 8)
MIN_SPEAKERS = 3
CHAIN_LENGTH = (2, 4)
STATE_LENGTH = 3
MIN_SESSION_GAP = 2          # root session + 2 <= effect session: at least one whole session between
MIN_DISTRACTOR_OVERLAP = 2   # shared content tokens between a lexical distractor and the question
MIN_SCENARIOS = 14
MIN_QUESTIONS = 46
MIN_CHAIN_SHARE = 0.6
MIN_STATE = 6
MIN_SINGLE = 5
CATEGORIES = {1: "chain (multi-hop causal)", 2: "state / temporal", 4: "single-hop control"}
CHAIN_TASKS = ("chain_reconstruction", "causal_verification")


# -- checks ---------------------------------------------------------------------------------------
def check_suite(suite: Suite) -> list[str]:
    """Every violation of the design rules, as located one-line messages (empty: the suite is valid)."""
    problems = list(suite.problems)
    for sc in suite.scenarios:
        problems += check_scenario(sc)
    problems += check_global(suite)
    return problems


def check_scenario(sc: Scenario) -> list[str]:
    where = f"{sc.split}/{sc.id}"
    out: list[str] = []
    conv = sc.conversation
    if not SCENARIO_ID.fullmatch(conv.id):
        out.append(f"{where}: conversation id is not a valid scenario_id")
    # turns: ids, order, times, sessions, speakers, size
    numbers = []
    for t in conv.turns:
        m = TURN_ID.fullmatch(t.id)
        if not m or m["scenario"] != conv.id:
            out.append(f"{where}: turn id {t.id!r} is not '{conv.id}:tNN'")
        else:
            numbers.append(int(m["n"]))
    if numbers != sorted(set(numbers)) or len(numbers) != len(conv.turns):
        out.append(f"{where}: turn numbers do not increase in conversation order")
    elif numbers != list(range(1, len(numbers) + 1)):
        out.append(f"{where}: turn numbers are not t01, t02, ... by position (Case.include numbers that way)")
    raw_turns = [r for r in sc.raw_lines if r.get("type", "turn") == "turn"]
    if [r["id"] for r in raw_turns] != [t.id for t in conv.turns]:
        out.append(f"{where}: the file's turn order differs from time order")
    times = [datetime.fromisoformat(t.time) for t in conv.turns]
    if any(b <= a for a, b in zip(times, times[1:])):
        out.append(f"{where}: turn times are not strictly increasing")
    kinds = [r.get("type", "turn") for r in sc.raw_lines]
    if "question" in kinds and "turn" in kinds[kinds.index("question"):]:
        out.append(f"{where}: a turn line follows a question line (questions go at the end)")
    sessions = [t.session for t in conv.turns]
    labels = list(dict.fromkeys(sessions))
    if labels != [str(i) for i in range(1, len(labels) + 1)]:
        out.append(f"{where}: session labels are not '1', '2', ... in order: {labels}")
    if any(b < a for a, b in zip(_session_numbers(sessions), _session_numbers(sessions)[1:])):
        out.append(f"{where}: sessions interleave")
    if not SESSIONS_RANGE[0] <= len(labels) <= SESSIONS_RANGE[1]:
        out.append(f"{where}: {len(labels)} sessions (want {SESSIONS_RANGE[0]}-{SESSIONS_RANGE[1]})")
    if not TURNS_RANGE[0] <= len(conv.turns) <= TURNS_RANGE[1]:
        out.append(f"{where}: {len(conv.turns)} turns (want {TURNS_RANGE[0]}-{TURNS_RANGE[1]})")
    if len(set(t.speaker for t in conv.turns)) < MIN_SPEAKERS:
        out.append(f"{where}: fewer than {MIN_SPEAKERS} speakers")
    if sc.case is None:
        return out
    # the case: every turn under its own id as pointer
    for ct in sc.case.turns:
        if ct.pointer != ct.turn_id:
            out.append(f"{where}: pointer {ct.pointer} maps to {ct.turn_id} (pointers equal turn ids here)")
    if not sc.conversation.questions:
        out.append(f"{where}: no questions")
    # JSONL questions <-> case questions
    by_jsonl = {}
    for q in sc.case.questions:
        key = q.metadata.get("jsonl_id")
        if key in by_jsonl:
            out.append(f"{where}: two case questions claim JSONL question {key!r}")
        by_jsonl[key] = q
    for jq in conv.questions:
        q = by_jsonl.pop(jq.id, None)
        if q is None:
            out.append(f"{where}: JSONL question {jq.id} has no case question (metadata.jsonl_id)")
            continue
        out += check_question(sc, q, jq.category, jq)
    for key, q in by_jsonl.items():
        out.append(f"{where}: case question {q.sample_id} names JSONL question {key!r}, which does not exist")
    return out


def _session_numbers(sessions: list[str]) -> list[int]:
    return [int(s) if s.isdigit() else 0 for s in sessions]


def check_question(sc: Scenario, q: CaseQuestion, category: int | None, jq=None) -> list[str]:
    """Rules for one question; `jq` is its JSONL twin (text, answer, evidence must agree)."""
    where = f"{sc.split}/{q.sample_id}"
    out: list[str] = []
    chain = q.gold_causal_structure
    keys = chain.supporting_evidence_keys
    if jq is not None:
        if jq.question != q.query_text:
            out.append(f"{where}: question text differs between JSONL and cases file")
        if (jq.answer or "") != q.gold_answer:
            out.append(f"{where}: answer differs between JSONL and cases file")
        if set(jq.evidence) != set(sc.case.resolve(q.gold_evidence_keys)):
            out.append(f"{where}: JSONL evidence differs from gold_evidence_keys")
    if category not in CATEGORIES:
        out.append(f"{where}: category {category!r} (want one of {sorted(CATEGORIES)})")
    if q.task_type not in TASK_TYPES:
        out.append(f"{where}: task_type {q.task_type!r} is not one of {TASK_TYPES}")
    if chain.dependency_type not in DEPENDENCY_TYPES:
        out.append(f"{where}: dependency_type {chain.dependency_type!r}")
    if not q.query_text.strip() or not q.gold_answer.strip():
        out.append(f"{where}: empty question or answer")
    if not keys:
        return out + [f"{where}: no supporting_evidence_keys"]
    if chain.attribution_target != keys[-1]:
        out.append(f"{where}: attribution_target {chain.attribution_target!r} is not the last chain turn")
    if not set(keys) <= set(q.gold_evidence_keys):
        out.append(f"{where}: a chain turn is not in gold_evidence_keys")
    turns = [sc.turn(k) for k in keys]
    if any(b.index <= a.index for a, b in zip(turns, turns[1:])):
        out.append(f"{where}: supporting_evidence_keys are not in causal (time) order")
    kind = kind_of(q, category)
    if kind == "chain":
        out += _check_chain(sc, q, turns, where)
    elif kind == "state":
        if len(keys) != STATE_LENGTH or set(keys) != set(q.gold_evidence_keys):
            out.append(f"{where}: a state question's gold is exactly its {STATE_LENGTH} state turns")
        if len({t.session for t in turns}) != len(turns):
            out.append(f"{where}: the state turns should come from different sessions")
        out += _check_distractors(sc, q, turns[-1], where)
    elif kind == "single":
        if len(q.gold_evidence_keys) != 1 or keys != q.gold_evidence_keys:
            out.append(f"{where}: a single-hop control has exactly one evidence turn, which is its chain")
    else:
        out.append(f"{where}: category {category} with {chain.dependency_type} is not a known question kind")
    return out


def _check_chain(sc: Scenario, q: CaseQuestion, turns: list[Turn], where: str) -> list[str]:
    out = []
    chain = q.gold_causal_structure
    if chain.dependency_type != "CAUSAL_FOLLOW":
        out.append(f"{where}: a chain question's dependency_type is CAUSAL_FOLLOW")
    if q.task_type not in CHAIN_TASKS:
        out.append(f"{where}: a chain question's task_type is one of {CHAIN_TASKS}")
    if not CHAIN_LENGTH[0] <= len(turns) <= CHAIN_LENGTH[1]:
        out.append(f"{where}: chain of {len(turns)} turns (want {CHAIN_LENGTH[0]}-{CHAIN_LENGTH[1]})")
    root, effect = turns[0], turns[-1]
    overlap = shared_stems(root.text, q.query_text)
    if overlap:
        out.append(f"{where}: root cause {root.id} shares content words with the question: {sorted(overlap)}")
    sessions = sc.conversation.sessions                      # labels in conversation order
    r, e = sessions.index(root.session), sessions.index(effect.session)
    if e - r < MIN_SESSION_GAP:
        out.append(f"{where}: root cause (session {root.session}) and effect (session {effect.session}) "
                   "are not a whole session apart")
    evidence_sessions = {sc.turn(k).session for k in q.gold_evidence_keys}
    if not any(label not in evidence_sessions for label in sessions[r + 1:e]):
        out.append(f"{where}: every session between root cause and effect holds evidence of this question "
                   "(want at least one session of unrelated talk)")
    out += _check_distractors(sc, q, effect, where)
    return out


def distractors(sc: Scenario, q: CaseQuestion, focal: Turn) -> list[Turn]:
    """Non-evidence turns in the focal turn's session or the last session sharing >= 2 tokens with the question."""
    evidence = set(sc.case.resolve(q.gold_evidence_keys)) | set(sc.case.resolve(
        q.gold_causal_structure.supporting_evidence_keys))
    last = sc.conversation.turns[-1].session
    return [t for t in sc.conversation.turns
            if t.id not in evidence and t.session in (focal.session, last)
            and len(shared_tokens(t.text, q.query_text)) >= MIN_DISTRACTOR_OVERLAP]


def _check_distractors(sc: Scenario, q: CaseQuestion, focal: Turn, where: str) -> list[str]:
    out = []
    found = {t.id for t in distractors(sc, q, focal)}
    if not found:
        out.append(f"{where}: no lexical distractor (a non-evidence turn in session {focal.session} or the last "
                   f"session sharing >= {MIN_DISTRACTOR_OVERLAP} content tokens with the question)")
    declared = q.metadata.get("distractor_keys", [])
    for key in declared:
        try:
            tid = sc.case.turn_id(key)
        except KeyError:
            out.append(f"{where}: declared distractor {key!r} is not a turn of the case")
            continue
        if tid not in found:
            out.append(f"{where}: declared distractor {key} does not meet the distractor definition")
    return out


def check_global(suite: Suite) -> list[str]:
    out = []
    ids = Counter(s.id for s in suite.scenarios)
    by_split = {split: {s.id for s in suite.split(split)} for split in SPLITS}
    both = {sid for a in SPLITS for b in SPLITS if a < b for sid in by_split[a] & by_split[b]}
    if both:
        out.append(f"scenario(s) in two splits: {sorted(both)}")
    out += [f"scenario {sid!r} appears {n} times" for sid, n in ids.items() if n > 1 and sid not in both]
    texts = Counter(q.query_text.strip().lower() for s in suite.scenarios if s.case for q in s.case.questions)
    out += [f"question asked twice in the suite: {t!r}" for t, n in texts.items() if n > 1]
    turn_texts = Counter(t.text.strip().lower() for s in suite.scenarios for t in s.conversation.turns)
    out += [f"turn text used twice in the suite: {t[:60]!r}" for t, n in turn_texts.items() if n > 1]
    c = counts(suite)["all"]
    if c["scenarios"] < MIN_SCENARIOS:
        out.append(f"{c['scenarios']} scenarios (want >= {MIN_SCENARIOS})")
    if c["questions"] < MIN_QUESTIONS:
        out.append(f"{c['questions']} questions (want >= {MIN_QUESTIONS})")
    if c["questions"] and c["kinds"].get("chain", 0) / c["questions"] < MIN_CHAIN_SHARE:
        out.append(f"chain questions are {c['kinds'].get('chain', 0)}/{c['questions']} (want >= {MIN_CHAIN_SHARE:.0%})")
    if c["kinds"].get("state", 0) < MIN_STATE:
        out.append(f"{c['kinds'].get('state', 0)} state-succession questions (want >= {MIN_STATE})")
    if c["kinds"].get("single", 0) < MIN_SINGLE:
        out.append(f"{c['kinds'].get('single', 0)} single-hop controls (want >= {MIN_SINGLE})")
    return out

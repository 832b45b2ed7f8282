"""Check the causal diagnostic suite in datasets/causal/ against its design rules; print its counts.

Both splits are loaded with `engine.loaders.load_conversations`, every scenario's cases file
(`cases/<split>/<scenario_id>.json`, format `memwb-scds-cases`) is imported through
`engine.eval.annotation.AnnotationStore` into a throw-away SQLite database, and the rules of
datasets/causal/README.md are checked on what the store gives back. Exit status 1 on any violation.

    python scripts/check_causal_suite.py [--suite DIR] [--retrieval] [--k 5] [-v]

`--retrieval` also ranks every scenario's turns for each question with BM25 and with dense
MiniLM (the naive baselines) and reports where the root causes land (informational, not a rule).
"""
from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from engine.eval.annotation import (  # noqa: E402
    DEPENDENCY_TYPES,
    SCENARIO_ID,
    TASK_TYPES,
    AnnotationStore,
    Case,
    CaseQuestion,
)
from engine.core.conversation import Conversation, Turn  # noqa: E402
from engine.loaders import LoaderError, load_conversations  # noqa: E402
from engine.core.text import content_tokens  # noqa: E402

SUITE_DIR = ROOT / "datasets" / "causal"
SPLITS = ("validation", "test")

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
TURN_ID = re.compile(r"(?P<scenario>[A-Za-z0-9][A-Za-z0-9_.-]*):t(?P<n>\d{2,})")


# -- loading ---------------------------------------------------------------------------------
@dataclass
class Scenario:
    split: str
    conversation: Conversation
    case: Case | None
    raw_lines: list[dict]            # the JSONL records of this conversation, in file order

    @property
    def id(self) -> str:
        return self.conversation.id

    def turn(self, pointer: str) -> Turn:
        return self.turns_by_id[self.case.turn_id(pointer)]

    @property
    def turns_by_id(self) -> dict[str, Turn]:
        return {t.id: t for t in self.conversation.turns}


@dataclass
class Suite:
    scenarios: list[Scenario] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)    # load and import errors

    def split(self, name: str) -> list[Scenario]:
        return [s for s in self.scenarios if s.split == name]


def load_suite(suite_dir: str | Path = SUITE_DIR) -> Suite:
    """Load both splits and import every cases file into a temporary AnnotationStore."""
    suite_dir = Path(suite_dir)
    suite = Suite()
    with tempfile.TemporaryDirectory() as tmp:
        store = AnnotationStore.at(Path(tmp) / "cases.sqlite", author="check_causal_suite")
        try:
            for split in SPLITS:
                _load_split(suite, suite_dir, split, store)
        finally:
            store.engine.dispose()
    return suite


def _load_split(suite: Suite, suite_dir: Path, split: str, store: AnnotationStore) -> None:
    path = suite_dir / f"{split}.jsonl"
    try:
        conversations = load_conversations(path)
    except (LoaderError, OSError) as exc:
        suite.problems.append(f"{split}: cannot load {path.name}: {exc}")
        return
    raw = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    cases_dir = suite_dir / "cases" / split
    expected = set()
    for conv in conversations:
        expected.add(f"{conv.id}.json")
        lines = [r for r in raw if r.get("conversation") == conv.id]
        cases_path = cases_dir / f"{conv.id}.json"
        case = None
        if not cases_path.exists():
            suite.problems.append(f"{split}/{conv.id}: no cases file {cases_path.relative_to(suite_dir)}")
        else:
            try:
                store.import_json(cases_path.read_text(encoding="utf-8"), cases_path, conv)
                stored = store.cases(conv.id)
            except LoaderError as exc:
                suite.problems.append(f"{split}/{conv.id}: import failed: {exc}")
                stored = []
            if len(stored) != 1 or stored[0].scenario_id != conv.id:
                if stored:
                    suite.problems.append(f"{split}/{conv.id}: the cases file must hold exactly one case, "
                                          f"with scenario_id {conv.id!r} (found {[c.scenario_id for c in stored]})")
            else:
                case = stored[0]
        suite.scenarios.append(Scenario(split, conv, case, lines))
    if cases_dir.is_dir():
        for extra in sorted(p.name for p in cases_dir.glob("*.json") if p.name not in expected):
            suite.problems.append(f"{split}: cases file {extra} has no conversation in {path.name}")


# -- token helpers ---------------------------------------------------------------------------
def tokens(text: str) -> set[str]:
    return set(content_tokens(text))


def _clash(a: str, b: str) -> bool:
    """Same word for the overlap rule: equal tokens, a prefix (>= 4 letters), or the same first 5 letters."""
    if a == b:
        return True
    short, long_ = sorted((a, b), key=len)
    if len(short) >= 4 and long_.startswith(short):
        return True
    return len(short) >= 5 and a[:5] == b[:5]


def shared_stems(text: str, question: str) -> set[str]:
    """Content tokens of `text` that clash with a content token of `question` (stem-aware)."""
    q = tokens(question)
    return {t for t in tokens(text) if any(_clash(t, w) for w in q)}


def shared_tokens(text: str, question: str) -> set[str]:
    return tokens(text) & tokens(question)


# -- question kinds ----------------------------------------------------------------------------
def kind_of(q: CaseQuestion, category: int | None) -> str:
    if category == 1:
        return "chain"
    if category == 2 and q.gold_causal_structure.dependency_type == "STATE_SUCCESSOR":
        return "state"
    if category == 4:
        return "single"
    return "other"


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
    both = by_split["validation"] & by_split["test"]
    if both:
        out.append(f"scenario(s) in both splits: {sorted(both)}")
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


# -- counts ----------------------------------------------------------------------------------------
def _jsonl_category(sc: Scenario, q: CaseQuestion) -> int | None:
    return next((jq.category for jq in sc.conversation.questions if jq.id == q.metadata.get("jsonl_id")), None)


def counts(suite: Suite) -> dict[str, dict]:
    """Per split and overall: scenarios, turns, sessions, speakers, questions by category/kind/dependency/task."""
    out = {}
    for name, group in [*((s, suite.split(s)) for s in SPLITS), ("all", suite.scenarios)]:
        qs = [(s, q) for s in group if s.case for q in s.case.questions]
        chains = [len(q.gold_causal_structure.supporting_evidence_keys) for s, q in qs
                  if kind_of(q, _jsonl_category(s, q)) == "chain"]
        out[name] = {
            "scenarios": len(group),
            "turns": sum(len(s.conversation.turns) for s in group),
            "turns_range": _range(len(s.conversation.turns) for s in group),
            "sessions_range": _range(len(s.conversation.sessions) for s in group),
            "speakers_range": _range(len(set(t.speaker for t in s.conversation.turns)) for s in group),
            "questions": len(qs),
            "categories": dict(sorted(Counter(_jsonl_category(s, q) for s, q in qs).items(), key=str)),
            "kinds": dict(Counter(kind_of(q, _jsonl_category(s, q)) for s, q in qs)),
            "dependency_types": dict(Counter(q.gold_causal_structure.dependency_type for _, q in qs)),
            "task_types": dict(Counter(q.task_type for _, q in qs)),
            "chain_lengths": dict(sorted(Counter(chains).items())),
            "chains_cross_speaker": sum(_cross_speaker(s, q) for s, q in qs
                                        if kind_of(q, _jsonl_category(s, q)) == "chain"),
            "roots_by_named_speaker": sum(_root_speaker_named(s, q) for s, q in qs
                                          if kind_of(q, _jsonl_category(s, q)) == "chain"),
        }
    return out


def _cross_speaker(sc: Scenario, q: CaseQuestion) -> bool:
    """The root cause and the effect are said by different people."""
    keys = q.gold_causal_structure.supporting_evidence_keys
    return sc.turn(keys[0]).speaker != sc.turn(keys[-1]).speaker


def _root_speaker_named(sc: Scenario, q: CaseQuestion) -> bool:
    """The root cause's speaker is named in the question (a lexical hook for `speaker: text` retrieval)."""
    root = sc.turn(q.gold_causal_structure.supporting_evidence_keys[0])
    return bool(shared_stems(root.speaker, q.query_text))


def _range(values) -> str:
    values = list(values)
    return f"{min(values)}-{max(values)}" if values else "-"


# -- informational: where naive retrieval puts the root causes --------------------------------------
def retrieval_report(suite: Suite, k: int = 5, dense: bool = True) -> dict[str, dict[str, float]]:
    """Share of chain questions whose root cause / effect / whole chain, and of state questions whose latest
    state / whole history, is in the top-K of naive BM25 and dense retrieval over `speaker: text` turns."""
    from engine.retrieval.lexical import BM25

    embed = None
    if dense:
        from engine.llm.embedder import Embedder
        embed = Embedder().embed
    hits: dict[str, Counter] = {}
    totals: Counter = Counter()
    for sc in suite.scenarios:
        if sc.case is None:
            continue
        turns = sc.conversation.turns
        bm25 = BM25()
        for i, t in enumerate(turns):
            bm25.add(i, t.raw)
        vecs = embed([t.raw for t in turns]) if embed else None
        for q in sc.case.questions:
            kind = kind_of(q, _jsonl_category(sc, q))
            if kind not in ("chain", "state"):
                continue
            totals[kind] += 1
            chain = [sc.turn(key).index for key in q.gold_causal_structure.supporting_evidence_keys]
            scores = bm25.scores(q.query_text)
            rankings = {"bm25": sorted(scores, key=lambda i: (-scores[i], i))[:k]}     # a zero score is no hit
            if vecs is not None:
                sims = vecs @ embed([q.query_text])[0]
                rankings["dense"] = sorted(range(len(turns)), key=lambda i: (-float(sims[i]), i))[:k]
            for name, top in rankings.items():
                c = hits.setdefault(name, Counter())
                if kind == "chain":
                    c["root"] += chain[0] in top
                    c["effect"] += chain[-1] in top
                    c["chain"] += all(i in top for i in chain)
                else:
                    c["latest"] += chain[-1] in top
                    c["history"] += all(i in top for i in chain)
    out = {}
    for name, c in hits.items():
        out[name] = {"chain_questions": totals["chain"], "state_questions": totals["state"]}
        for key, kind in (("root", "chain"), ("effect", "chain"), ("chain", "chain"),
                          ("latest", "state"), ("history", "state")):
            out[name][key] = c[key] / totals[kind] if totals[kind] else 0.0
    return out


# -- command line ------------------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--suite", default=str(SUITE_DIR), help="folder with validation.jsonl, test.jsonl, cases/")
    ap.add_argument("--retrieval", action="store_true", help="also report naive BM25 / dense retrieval of chains")
    ap.add_argument("--k", type=int, default=5)
    ap.add_argument("-v", "--verbose", action="store_true", help="list every chain question with its distractors")
    args = ap.parse_args(argv)
    suite = load_suite(args.suite)
    table = counts(suite)
    for name, c in table.items():
        print(f"[{name}] {c['scenarios']} scenarios, {c['turns']} turns (per scenario {c['turns_range']}), "
              f"sessions {c['sessions_range']}, speakers {c['speakers_range']}, {c['questions']} questions")
        print(f"    categories {c['categories']}  kinds {c['kinds']}")
        print(f"    dependency {c['dependency_types']}  tasks {c['task_types']}  chain lengths {c['chain_lengths']}")
        print(f"    chains whose root cause and effect have different speakers: {c['chains_cross_speaker']}; "
              f"root causes said by someone named in the question: {c['roots_by_named_speaker']}")
    if args.verbose:
        for sc in suite.scenarios:
            for q in sc.case.questions if sc.case else []:
                focal = sc.turn(q.gold_causal_structure.attribution_target)
                found = [t.id for t in distractors(sc, q, focal)]
                print(f"  {sc.split:10} {q.sample_id:22} {q.gold_causal_structure.dependency_type:15} "
                      f"chain={len(q.gold_causal_structure.supporting_evidence_keys)} distractors={found}")
    if args.retrieval:
        for name, r in retrieval_report(suite, args.k).items():
            print(f"[naive {name}, top-{args.k}] {r['chain_questions']} chain questions: root cause found "
                  f"{r['root']:.0%}, effect found {r['effect']:.0%}, whole chain found {r['chain']:.0%}; "
                  f"{r['state_questions']} state questions: latest state found {r['latest']:.0%}, "
                  f"whole history found {r['history']:.0%}")
    problems = check_suite(suite)
    for p in problems:
        print(f"VIOLATION {p}")
    print(f"{len(problems)} violation(s)" if problems else "OK: every rule holds")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())

"""The causal diagnostic suite as loaded: scenarios (a conversation, its SCDS case, its JSONL lines) and counts.

The three splits of a suite folder (`train.jsonl`, `validation.jsonl`, `test.jsonl`, each with
`cases/<split>/<scenario_id>.json`: train to fit models on, validation to choose among them, test to report) are
read with `engine.loaders.load_conversations`, and every cases file is imported through
`engine.store.annotations.AnnotationStore` into a throw-away SQLite database, so the rules
(`engine.eval.causal_suite.rules`) are checked on what the store gives back, as the workbench would see it.
"""
from __future__ import annotations

import json
import re
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from engine.core.cases import Case, CaseQuestion
from engine.core.conversation import Conversation, Turn
from engine.core.text import content_tokens
from engine.loaders import LoaderError, load_conversations
from engine.store.annotations import AnnotationStore

SPLITS = ("train", "validation", "test")
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


def load_suite(suite_dir: str | Path) -> Suite:
    """Load every split and import every cases file into a temporary AnnotationStore."""
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


# -- counts ----------------------------------------------------------------------------------------
def jsonl_category(sc: Scenario, q: CaseQuestion) -> int | None:
    return next((jq.category for jq in sc.conversation.questions if jq.id == q.metadata.get("jsonl_id")), None)


def counts(suite: Suite) -> dict[str, dict]:
    """Per split and overall: scenarios, turns, sessions, speakers, questions by category/kind/dependency/task."""
    out = {}
    for name, group in [*((s, suite.split(s)) for s in SPLITS), ("all", suite.scenarios)]:
        qs = [(s, q) for s in group if s.case for q in s.case.questions]
        chains = [len(q.gold_causal_structure.supporting_evidence_keys) for s, q in qs
                  if kind_of(q, jsonl_category(s, q)) == "chain"]
        out[name] = {
            "scenarios": len(group),
            "turns": sum(len(s.conversation.turns) for s in group),
            "turns_range": _range(len(s.conversation.turns) for s in group),
            "sessions_range": _range(len(s.conversation.sessions) for s in group),
            "speakers_range": _range(len(set(t.speaker for t in s.conversation.turns)) for s in group),
            "questions": len(qs),
            "categories": dict(sorted(Counter(jsonl_category(s, q) for s, q in qs).items(), key=str)),
            "kinds": dict(Counter(kind_of(q, jsonl_category(s, q)) for s, q in qs)),
            "dependency_types": dict(Counter(q.gold_causal_structure.dependency_type for _, q in qs)),
            "task_types": dict(Counter(q.task_type for _, q in qs)),
            "chain_lengths": dict(sorted(Counter(chains).items())),
            "chains_cross_speaker": sum(_cross_speaker(s, q) for s, q in qs
                                        if kind_of(q, jsonl_category(s, q)) == "chain"),
            "roots_by_named_speaker": sum(_root_speaker_named(s, q) for s, q in qs
                                          if kind_of(q, jsonl_category(s, q)) == "chain"),
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

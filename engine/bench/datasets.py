"""The datasets a benchmark runs on, in one place: what a source must be, which questions count, their
categories, the metrics and the default offline schedule of each.

`--dataset` names the scoring family; the file must be of that family (`BenchInputError` otherwise, naming
what it is instead): LoCoMo JSON (or the team's JSONL with LoCoMo-style categories, like the demo),
LongMemEval JSON, the causal suite's JSONL, QMSum meeting JSON (a directory of them, or one), or a decision
set's JSONL (a directory of them, or one; docs/DECISIONS.md).
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Callable, Sequence

from engine.core.conversation import Conversation, Question
from engine.core.errors import WorkbenchError
from engine.eval.metrics import chain_recall, ndcg_at_k, recall_at_k, strict_chain_recall
from engine.loaders import LoaderError, file_format, load_conversations
from engine.loaders.jsonl import attach_decisions, load_decision_overlay


class BenchInputError(WorkbenchError, ValueError):
    """Bad input to a benchmark (dataset, file, engine, ablation): said in one line, nothing run."""


@dataclass(frozen=True)
class Source:
    """One conversation of a benchmark and the file it is loaded from."""

    conversation: str
    path: str
    overlay: str = ""          # a file of decision lines labelling this conversation (a decision set over LoCoMo)


@dataclass(frozen=True)
class DatasetSpec:
    name: str
    label: str
    formats: tuple[str, ...]                 # file formats accepted (`file_format`)
    categories: dict[str, str]               # category key -> label, display order
    schedule: str                            # default offline schedule
    metric_names: Callable[[Sequence[int]], list[str]]
    score: Callable[[list[str], Sequence[str], Sequence[int]], dict[str, float]]
    questions: bool = True                   # False: boundaries (QMSum) or decisions only
    decisions: bool = False                  # scores labelled consolidation decisions (a decision set)
    chains: tuple[str, ...] = ()             # categories whose gold is a causal chain, root cause first
    talk: str = "chats"                      # what kind of talk it holds (`EngineSchema.fits`)

    @property
    def boundaries(self) -> bool:
        """Whether it scores event boundaries (QMSum's topic segmentation)."""
        return not self.questions and not self.decisions

    def askable(self, conversation: Conversation) -> list[Question]:
        """The questions that are scored: those with turn-level gold evidence in the conversation (LoCoMo:
        categories 1-4; category 5 is adversarial and has none)."""
        if not self.questions:
            return []
        turns = conversation.turn_ids()
        return [q for q in conversation.questions if q.evidence and set(q.evidence) <= turns
                and (self.name != "locomo" or q.category in (1, 2, 3, 4))]

    def category(self, question: Question, types: dict[str, str]) -> str:
        """A question's category key (LongMemEval's `question_type` from the file, else the loader's number)."""
        if question.id in types:
            return types[question.id]
        return str(question.category) if question.category is not None else "all"


def _recall_metrics(ks: Sequence[int]) -> list[str]:
    return [name for k in ks for name in (f"r@{k}", f"n@{k}")]


def _recall_score(ranked: list[str], gold: Sequence[str], ks: Sequence[int]) -> dict[str, float]:
    out = {}
    for k in ks:
        out[f"r@{k}"] = recall_at_k(ranked, gold, k)
        out[f"n@{k}"] = ndcg_at_k(ranked, gold, k)
    return out


def _causal_metrics(ks: Sequence[int]) -> list[str]:
    return [f"scr@{k}" for k in ks] + [f"chain_recall@{k}" for k in ks] + [f"r@{ks[0]}"]


def _causal_score(ranked: list[str], gold: Sequence[str], ks: Sequence[int]) -> dict[str, float]:
    out = {f"scr@{k}": strict_chain_recall(ranked, gold, k) for k in ks}
    out.update({f"chain_recall@{k}": chain_recall(ranked, gold, k) for k in ks})
    out[f"r@{ks[0]}"] = recall_at_k(ranked, gold, ks[0])
    return out


BOUNDARY_METRICS = ["pk", "window_diff", "delta_b", "delta_b_rate", "boundaries"]
DECISION_METRICS = ["update_f1", "merge_f1", "split_f1", "cause_f1", "false_on_negatives"]

DATASETS: dict[str, DatasetSpec] = {
    "locomo": DatasetSpec("locomo", "LoCoMo", ("locomo", "jsonl"),
                          {"1": "multi-hop", "2": "temporal", "3": "open-domain", "4": "single-hop"},
                          "every-3-sessions", _recall_metrics, _recall_score),
    "longmemeval": DatasetSpec("longmemeval", "LongMemEval", ("longmemeval",), {}, "every-3-sessions",
                               _recall_metrics, _recall_score),
    "causal": DatasetSpec("causal", "causal suite", ("jsonl",),
                          {"1": "causal chain", "2": "state succession", "4": "single-hop"},
                          "every-3-sessions", _causal_metrics, _causal_score, chains=("1",)),
    "qmsum": DatasetSpec("qmsum", "QMSum", ("qmsum",), {}, "every-200-turns",
                         lambda ks: list(BOUNDARY_METRICS), lambda ranked, gold, ks: {}, questions=False,
                         talk="meetings"),
    "decisions": DatasetSpec("decisions", "decision set", ("jsonl", "locomo"), {}, "every-3-sessions",
                             lambda ks: list(DECISION_METRICS), lambda ranked, gold, ks: {}, questions=False,
                             decisions=True),
}


def dataset(name: str) -> DatasetSpec:
    try:
        return DATASETS[name]
    except KeyError:
        raise BenchInputError(f"unknown dataset {name!r}; choose one of {', '.join(DATASETS)}") from None


def chain_question(conversation: Conversation, question: Question) -> bool:
    """Whether a question's gold can be read as a causal chain, root cause first: read from a file of the causal
    suite's format (the team's JSONL, as the suite and the demo are written; LoCoMo JSON's category 1 is
    multi-hop), the suite's chain category, two or more evidence turns, in the conversation's order. A JSONL file
    does not say which dataset's categories it uses, so a page that reads evidence this way says so."""
    order = {t.id: i for i, t in enumerate(conversation.turns)}
    at = [order.get(t) for t in question.evidence]
    causal = DATASETS["causal"]
    return (str(question.category) in causal.chains and len(at) > 1 and None not in at
            and all(a < b for a, b in zip(at, at[1:])) and _format_of(conversation.source) in causal.formats)


def _format_of(path: str) -> str:
    """`file_format` of the file a conversation was loaded from, parsed once per version of it (a page asks on
    every rerun, and a LoCoMo file is parsed to know); "unknown" when there is no such file."""
    try:
        return _cached_format(path, Path(path).stat().st_mtime_ns) if path else "unknown"
    except OSError:
        return "unknown"


@lru_cache(maxsize=8)
def _cached_format(path: str, mtime_ns: int) -> str:
    return file_format(Path(path))


def _loader_complaint(file: Path) -> None:
    """Raise what the loader finds wrong with a file no dataset recognises (invalid JSON at a line and column,
    the keys it found), so the message names the fault rather than only the formats it is not."""
    try:
        load_conversations(file)
    except LoaderError as exc:
        raise BenchInputError(str(exc)) from None


def sources(spec: DatasetSpec, path: str | Path, conversations: Sequence[str] | None = None,
            overlay: str | Path | None = None) -> list[Source]:
    """The conversations of `path` to run, in file order, after checking it is a `spec` source.

    A QMSum or decision-set directory gives one source per file (sorted by name). `overlay` (a file of decision
    lines) labels decisions on the conversations of `path`: a decision set over a LoCoMo file."""
    root = Path(path)
    if not root.exists():
        raise BenchInputError(f"no such file or directory: {path}")
    if root.is_dir():
        if spec.name not in ("qmsum", "decisions"):
            raise BenchInputError(f"{path} is a directory; --dataset {spec.name} reads one file")
        files = sorted(root.glob("*.json" if spec.name == "qmsum" else "*.jsonl"))
        if not files:
            what = "QMSum meeting files (*.json)" if spec.name == "qmsum" else "decision-set files (*.jsonl)"
            raise BenchInputError(f"{path} holds no {what}")
    else:
        files = [root]
    found: list[Source] = []
    for file in files:
        kind = file_format(file)
        if kind not in spec.formats:
            if kind == "unknown":
                _loader_complaint(file)
            what = "not a file of a known dataset" if kind == "unknown" else f"a {kind} file"
            raise BenchInputError(f"{file} is {what}, not {spec.label} (--dataset {spec.name} reads "
                                  f"{' or '.join(spec.formats)})")
        try:
            convs = _labelled(file, overlay)
        except LoaderError as exc:
            raise BenchInputError(str(exc)) from None
        for conv in convs:
            if spec.questions and not spec.askable(conv) or spec.decisions and not conv.decisions:
                continue
            found.append(Source(conv.id, str(file.resolve()), str(Path(overlay).resolve()) if overlay else ""))
    if not found:
        what = "labelled decision" if spec.decisions else "question that has gold evidence turns"
        raise BenchInputError(f"{path} holds no conversation with a {what}"
                              + ("" if not spec.decisions or overlay else
                                 " (a LoCoMo file takes its decisions from --decisions OVERLAY)"))
    if conversations:
        known = {s.conversation for s in found}
        missing = [c for c in conversations if c not in known]
        if missing:
            listed = ", ".join(sorted(known)[:20])
            raise BenchInputError(f"no conversation {', '.join(missing)} with scored questions in {path}; "
                                  f"it has: {listed}")
        wanted = set(conversations)
        found = [s for s in found if s.conversation in wanted]
    return found


def question_types(spec: DatasetSpec, path: str | Path) -> dict[str, str]:
    """LongMemEval's question types by question id (its categories); empty for the other datasets."""
    if spec.name != "longmemeval":
        return {}
    return dict(_question_types(str(path), Path(path).stat().st_mtime_ns))


def load_source(source: Source) -> Conversation:
    """The conversation of `source`. A worker runs many tasks of one file in a row (LongMemEval-S is one
    file of 500 conversations), so the last files read stay parsed."""
    stamp = Path(source.overlay).stat().st_mtime_ns if source.overlay else 0
    conv = _conversations(source.path, Path(source.path).stat().st_mtime_ns, source.overlay, stamp
                          ).get(source.conversation)
    if conv is None:
        raise BenchInputError(f"{source.path} has no conversation {source.conversation!r}")
    return conv


@lru_cache(maxsize=2)
def _conversations(path: str, mtime_ns: int, overlay: str = "", overlay_ns: int = 0) -> dict[str, Conversation]:
    return {conv.id: conv for conv in _labelled(Path(path), overlay or None)}


def _labelled(file: Path, overlay: str | Path | None) -> list[Conversation]:
    """A file's conversations, with an overlay's decisions attached when one is given."""
    convs = load_conversations(file)
    if overlay:
        convs = attach_decisions(convs, load_decision_overlay(overlay), overlay)
    return convs


@lru_cache(maxsize=2)
def _question_types(path: str, mtime_ns: int) -> tuple[tuple[str, str], ...]:
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    return tuple((item["question_id"], str(item["question_type"])) for item in data
                 if isinstance(item, dict) and item.get("question_type"))


def dataset_version(paths: Sequence[str | Path | None]) -> str:
    """The version of what a benchmark scored against: a digest of the bytes of its files (a folder's files in
    name order; overlays included), so a result names the exact gold it used and a changed file shows."""
    import hashlib

    digest = hashlib.sha256()
    for path in paths:
        if not path:
            continue
        root = Path(path)
        for file in sorted(p for p in root.rglob("*") if p.is_file()) if root.is_dir() else [root]:
            digest.update(file.relative_to(root).as_posix().encode() if root.is_dir() else b"")
            digest.update(hashlib.sha256(file.read_bytes()).digest())
    return "sha256:" + digest.hexdigest()[:16]

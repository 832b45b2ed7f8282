"""An audit of a benchmark file's gold labels, and corrections to them kept as an overlay.

Users of LoCoMo keep reporting gold errors (snap-research/locomo issues 21, 27, 42): evidence ids that name no
turn, evidence turns that do not hold the answer, answers the evidence contradicts. The audit flags questions
whose gold looks wrong, each with a reason a person then checks:

- ``missing_evidence_id``: an evidence id names no turn of the conversation (LoCoMo's raw ids; the loader drops
  them, so a benchmark silently scores against fewer turns);
- ``no_evidence``: the question has an answer but no evidence turn left;
- ``answer_not_in_evidence``: none of the answer's content words (numbers included) appears in the evidence turns,
  their neighbours, their image captions or their session's date;
- ``non_gold_turn_ranked_first``: in stored benchmark results, every system ranked a turn that is not gold and
  holds every answer word above all gold turns (the gold may have missed that turn).

Corrections live in an overlay file, never in the benchmark file (JSONL, one line per checked question)::

    {"type": "gold_correction", "conversation": "conv-26", "question": "conv-26:q5", "status": "corrected",
     "evidence": ["D2:8"], "answer": "...", "reason": "answer_not_in_evidence", "note": "...", "by": "rita"}

``status`` is ``corrected`` (``evidence`` and/or ``answer`` replace the gold) or ``confirmed`` (checked, the gold
stands). `apply_overlay` gives the conversations with corrected gold; `memwb bench --gold-overlay` scores both.
"""
from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
import re
from datetime import datetime, timedelta
from pathlib import Path

from engine.core.conversation import Conversation, Question, Turn
from engine.core.text import content_tokens, numbers
from engine.loaders.errors import LoaderError, check, decode_json, optional, read_text, require

REASONS = {
    "missing_evidence_id": "an evidence id names no turn of the conversation",
    "no_evidence": "the question has an answer but no evidence turn",
    "answer_not_in_evidence": "none of the answer's words appear in the evidence turns or their neighbours",
    "non_gold_turn_ranked_first": "every system ranked a non-gold turn holding the answer above all gold turns",
}
CORRECTED, CONFIRMED = "corrected", "confirmed"
LOCOMO_ADVERSARIAL = (5,)
OVERLAY_TYPE = "gold_correction"
# words that say how sure an answer is, not what it is ("Likely yes", "Probably not")
_HEDGES = frozenset("likely probably possibly maybe perhaps yes no not".split())


@dataclass(frozen=True)
class Flag:
    conversation: str
    question_id: str
    question: str
    answer: str
    evidence: tuple[str, ...]
    reason: str
    detail: str

    def to_dict(self) -> dict:
        return {"conversation": self.conversation, "question": self.question_id, "text": self.question,
                "answer": self.answer, "evidence": list(self.evidence), "reason": self.reason,
                "detail": self.detail}


def _terms(text: str) -> set[str]:
    """Content words (stemmed, quotes and possessives trimmed, a final e dropped so "hoodie" meets "hoodies" and
    "appreciate" meets "appreciated") and numbers."""
    words = {t.strip("'’-").removesuffix("'s") for t in content_tokens(text)}
    return {w[:-1] if len(w) > 4 and w.endswith("e") else w for w in words} - {""} | numbers(text)


def answer_terms(answer: str) -> set[str]:
    """The answer's content words and numbers; hedges ("likely", "yes") left out."""
    return _terms(answer) - _HEDGES


_NUMBER = r"(\d+|a|an|one|two|three|four|five|six|seven|eight|nine|ten)"
_AGO = re.compile(rf"\b{_NUMBER} years? ago\b|\bfor {_NUMBER} years\b")
_SMALL = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
          "nine": 9, "ten": 10}


def _dates(time: str, text: str, session_date: bool = True) -> str:
    """A turn's session date in the words an answer uses ("2023-05-08 8 May 2023 Monday"), and the dates its
    relative phrases name ("last year" said in 2023: 2022; "3 years ago", "for 10 years"; last or next month), as
    LoCoMo's temporal answers give them."""
    try:
        when = datetime.fromisoformat(time)
    except (TypeError, ValueError):
        return time or ""
    low = text.lower()
    back = [1] if "last year" in low else []
    back += [int(n) if n.isdigit() else _SMALL[n] for pair in _AGO.findall(low) for n in pair if n]
    out = [f"{when:%Y-%m-%d} {when.day} {when:%B %Y %A}" if session_date else "",
           *(str(when.year - b) for b in back)]
    if "last month" in low:
        month = when.replace(day=1) - timedelta(days=1)
        out.append(f"{month:%B %Y}")
    if "next month" in low:
        month = (when.replace(day=28) + timedelta(days=4)).replace(day=1)
        out.append(f"{month:%B %Y}")
    if "next year" in low:
        out.append(str(when.year + 1))
    return " ".join(out)


def turn_terms(turn: Turn, session_date: bool = True) -> set[str]:
    """What a turn says (text, caption, the dates its relative phrases name) and, with `session_date`, its
    session's date: context enough to confirm an evidence turn, too much to say a turn holds an answer (every
    turn of a session would hold its date)."""
    text = " ".join([turn.text, turn.image_caption or "", _dates(turn.time, turn.text, session_date)])
    return _terms(text)


def _window(conv: Conversation, evidence: Sequence[str]) -> list[Turn]:
    """The evidence turns and their neighbours on either side."""
    at = {t.id: n for n, t in enumerate(conv.turns)}
    spots = sorted({at[e] + d for e in evidence if e in at for d in (-1, 0, 1)} & set(range(len(conv.turns))))
    return [conv.turns[n] for n in spots]


def audit_conversations(conversations: Iterable[Conversation], dropped: dict[str, list[str]] | None = None,
                        adversarial: Sequence[int] = ()) -> list[Flag]:
    """Flags from the gold alone; `dropped` (question id -> raw evidence ids that name no turn) from a loader.
    Questions of an `adversarial` category (LoCoMo's 5: asked of the wrong person on purpose, answered "not
    mentioned") are checked for their evidence ids only."""
    flags = []
    for conv in conversations:
        for q in conv.questions:
            answer = "" if q.answer is None else str(q.answer)

            def flag(reason: str, detail: str) -> None:
                flags.append(Flag(conv.id, q.id, q.question, answer, tuple(q.evidence), reason, detail))

            if (dropped or {}).get(q.id):
                flag("missing_evidence_id", f"no turn {', '.join(dropped[q.id])} in {conv.id}")
            if q.answer is None or q.category in adversarial:
                continue
            if not q.evidence:
                flag("no_evidence", "no evidence turn left to score against")
                continue
            wanted = answer_terms(answer)
            if wanted:
                seen = set().union(*(turn_terms(t) for t in _window(conv, q.evidence)))
                if not wanted & seen:
                    flag("answer_not_in_evidence", f"none of {', '.join(sorted(wanted))} in {', '.join(q.evidence)} "
                                                   "or their neighbours")
    return flags


def audit_results(conversations: Iterable[Conversation], results: Sequence[dict]) -> list[Flag]:
    """Questions where every system of the stored results ranked a non-gold turn holding every answer word above
    all gold turns (two systems at least). Corrected gold of an overlay is not applied here: this audits a file."""
    by_q: dict[tuple[str, str], list[list[str]]] = {}
    for result in results:
        for rec in result.get("questions", []):
            if rec.get("ranked"):
                by_q.setdefault((rec["conversation"], rec["question_id"]), []).append(rec["ranked"])
    flags = []
    for conv in conversations:
        turns = {t.id: t for t in conv.turns}
        for q in conv.questions:
            rankings = by_q.get((conv.id, q.id), [])
            wanted = answer_terms("" if q.answer is None else str(q.answer))
            if len(rankings) < 2 or not wanted or not q.evidence:
                continue
            above = []
            for ranked in rankings:
                first_gold = next((n for n, tid in enumerate(ranked) if tid in q.evidence), len(ranked))
                holder = next((tid for tid in ranked[:first_gold]
                               if tid in turns and wanted <= turn_terms(turns[tid], session_date=False)), None)
                above.append(holder)
            if all(above):
                flags.append(Flag(conv.id, q.id, q.question, str(q.answer), tuple(q.evidence),
                                  "non_gold_turn_ranked_first",
                                  f"{len(rankings)} systems ranked {', '.join(sorted(set(above)))} (holding "
                                  f"{', '.join(sorted(wanted))}) above every gold turn"))
    return flags


def locomo_dropped_evidence(path: str | Path) -> dict[str, list[str]]:
    """question id -> the raw evidence ids of a LoCoMo file that name no turn (what the loader leaves out)."""
    from engine.loaders.locomo import normalise_evidence

    out = {}
    for sample in json.loads(Path(path).read_text(encoding="utf-8")):
        conv = sample.get("conversation") or {}
        ids = {t.get("dia_id") for key, value in conv.items() if key.startswith("session_")
               and isinstance(value, list) for t in value if isinstance(t, dict)}
        for n, item in enumerate(sample.get("qa") or []):
            _, dropped = normalise_evidence(item.get("evidence") or [], ids)
            if dropped:
                out[f"{sample['sample_id']}:q{n}"] = dropped
    return out


def audit_file(path: str | Path, results: Sequence[dict] = ()) -> tuple[list[Conversation], list[Flag]]:
    """Load a benchmark file (LoCoMo, LongMemEval or JSONL) and audit its gold, with stored results if given."""
    from engine.loaders import file_format
    from engine.loaders import load_conversations

    convs = load_conversations(path)
    locomo = file_format(Path(path)) == "locomo"
    dropped = locomo_dropped_evidence(path) if locomo else {}
    flags = audit_conversations(convs, dropped, LOCOMO_ADVERSARIAL if locomo else ()) + \
        audit_results(convs, results)
    order = {(c.id, q.id): (i, j) for i, c in enumerate(convs) for j, q in enumerate(c.questions)}
    reasons = list(REASONS)
    return convs, sorted(flags, key=lambda f: (order.get((f.conversation, f.question_id), (0, 0)),
                                               reasons.index(f.reason)))


# -- the corrections overlay ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Correction:
    conversation: str
    question: str
    status: str
    evidence: tuple[str, ...] | None = None       # None: the gold evidence stands
    answer: str | None = None                     # None: the gold answer stands
    reason: str = ""
    note: str = ""
    by: str = ""
    extra: dict = field(default_factory=dict)


def load_overlay(path: str | Path) -> dict[tuple[str, str], Correction]:
    """(conversation, question id) -> its correction; every problem is a LoaderError naming line and field."""
    out: dict[tuple[str, str], Correction] = {}
    for number, line in enumerate(read_text(path).split("\n"), start=1):
        if not line.strip():
            continue
        record = f"line {number}"
        obj = check(decode_json(line, path, record=record), dict, path=path, record=record)
        if obj.get("type") != OVERLAY_TYPE:
            raise LoaderError(path, f"a gold overlay holds {OVERLAY_TYPE!r} lines only", record=record, field="type")
        conv = require(obj, "conversation", str, path=path, record=record)
        qid = require(obj, "question", str, path=path, record=record)
        status = require(obj, "status", str, path=path, record=record)
        if status not in (CORRECTED, CONFIRMED):
            raise LoaderError(path, f"{status!r}: use {CORRECTED!r} or {CONFIRMED!r}", record=record, field="status")
        evidence = optional(obj, "evidence", list, path=path, record=record)
        answer = obj.get("answer")
        if status == CORRECTED and evidence is None and answer is None:
            raise LoaderError(path, "a correction gives the corrected evidence, answer or both", record=record,
                              field="evidence")
        if (conv, qid) in out:
            raise LoaderError(path, f"{qid} is corrected twice", record=record, field="question")
        out[(conv, qid)] = Correction(conv, qid, status, None if evidence is None else tuple(map(str, evidence)),
                                      None if answer is None else str(answer),
                                      *(str(obj.get(k) or "") for k in ("reason", "note", "by")))
    return out


def apply_overlay(conversations: Sequence[Conversation], overlay: dict[tuple[str, str], Correction],
                  path: str | Path = "overlay") -> list[Conversation]:
    """The conversations with corrected gold; a correction naming an unknown question or turn is an error."""
    known = {(c.id, q.id) for c in conversations for q in c.questions}
    for key in overlay:
        if key not in known and key[0] in {c.id for c in conversations}:
            raise LoaderError(path, f"no question {key[1]!r} in conversation {key[0]!r}", field="question")
    out = []
    for conv in conversations:
        ids = {t.id for t in conv.turns}
        questions: list[Question] = []
        for q in conv.questions:
            c = overlay.get((conv.id, q.id))
            if c is None or c.status != CORRECTED:
                questions.append(q)
                continue
            bad = [e for e in c.evidence or () if e not in ids]
            if bad:
                raise LoaderError(path, f"{q.id}: no turn {', '.join(bad)} in {conv.id}", field="evidence")
            questions.append(replace(q, evidence=q.evidence if c.evidence is None else c.evidence,
                                     answer=q.answer if c.answer is None else c.answer))
        out.append(replace(conv, questions=questions))
    return out


def overlay_line(correction: Correction) -> str:
    obj = {"type": OVERLAY_TYPE, "conversation": correction.conversation, "question": correction.question,
           "status": correction.status}
    if correction.evidence is not None:
        obj["evidence"] = list(correction.evidence)
    if correction.answer is not None:
        obj["answer"] = correction.answer
    obj.update({k: v for k, v in (("reason", correction.reason), ("note", correction.note), ("by", correction.by))
                if v})
    return json.dumps(obj, ensure_ascii=False)


# -- original against corrected gold, from stored rankings -----------------------------------------------------------
def corrected_figures(questions: Sequence[dict], overlay: dict[tuple[str, str], Correction], score,
                      ks: Sequence[int]) -> dict:
    """Per system: the mean final-round figures on the original gold and on the corrected gold, over the same
    questions (each question's stored top-K ranking is scored again against its corrected evidence)."""
    out: dict[str, dict] = {}
    for rec in questions:
        if "ranked" not in rec or rec.get("metrics") is None:
            continue
        c = overlay.get((rec["conversation"], rec["question_id"]))
        gold = list(c.evidence) if c is not None and c.status == CORRECTED and c.evidence is not None \
            else rec["gold"]
        if not gold:
            continue
        row = out.setdefault(rec["system"], {"original": {}, "corrected": {}, "n": 0, "changed": 0})
        again = score(rec["ranked"], tuple(gold), list(ks))
        row["n"] += 1
        row["changed"] += gold != rec["gold"]
        for name, value in again.items():
            if value is None or rec["metrics"].get(name) is None:
                continue
            row["original"].setdefault(name, []).append(rec["metrics"][name])
            row["corrected"].setdefault(name, []).append(value)
    for row in out.values():
        for side in ("original", "corrected"):
            row[side] = {m: round(sum(v) / len(v), 4) for m, v in row[side].items()}
    return out


# -- checking flags in the multi-annotator flow ---------------------------------------------------------------------
AUDIT_CASE = "gold-audit"


def audit_case(conv: Conversation, flags: Sequence[Flag], scenario_id: str = AUDIT_CASE, candidates: int = 3):
    """A case of the Annotate page holding the flagged questions with their gold as the file has it: the
    scenario is each question's evidence window and the turns that hold every answer word (up to `candidates`),
    so annotators confirm or correct each one in the same labels, agreement and adjudication as any case."""
    from engine.core.cases import Case

    case = Case(scenario_id=scenario_id, conversation_id=conv.id, title="Gold audit: flagged questions")
    by_id = {t.id: t for t in conv.turns}
    questions = {q.id: q for q in conv.questions}
    reasons: dict[str, list[Flag]] = {}
    for f in flags:
        if f.conversation == conv.id and f.question_id in questions:
            reasons.setdefault(f.question_id, []).append(f)
    for qid, found in reasons.items():
        q = questions[qid]
        wanted = answer_terms("" if q.answer is None else str(q.answer))
        holders = [t for t in conv.turns if wanted and wanted <= turn_terms(t, session_date=False)][:candidates]
        for turn in [*_window(conv, q.evidence), *holders]:
            case.include(turn)
        pointers = [case.include(by_id[e]) for e in q.evidence]
        question = case.add_question(query_text=q.question, gold_answer="" if q.answer is None else str(q.answer),
                                     task_type="premise_retrieval")
        question.sample_id = qid
        question.gold_evidence_keys = [t.pointer for t in case.turns if t.pointer in set(pointers)]
        question.metadata = {"audit": {"question": qid, "reasons": [f.reason for f in found],
                                       "details": [f.detail for f in found], "evidence": list(q.evidence),
                                       "answer": "" if q.answer is None else str(q.answer)}}
    return case


def overlay_from_case(case, adjudicated: Iterable[str], by: str) -> list[Correction]:
    """Corrections from an audit case's adjudicated questions: the gold as adjudicated, `confirmed` where it is
    the file's own."""
    done = set(adjudicated)
    out = []
    for q in case.questions:
        audit = q.metadata.get("audit")
        if not audit or q.sample_id not in done:
            continue
        evidence = tuple(case.resolve(q.gold_evidence_keys))
        same_evidence = set(evidence) == set(audit["evidence"])
        same_answer = q.gold_answer.strip() == audit["answer"].strip()
        reason = ", ".join(audit["reasons"])
        if same_evidence and same_answer:
            out.append(Correction(case.conversation_id, audit["question"], CONFIRMED, reason=reason, by=by))
        else:
            out.append(Correction(case.conversation_id, audit["question"], CORRECTED,
                                  None if same_evidence else evidence, None if same_answer else q.gold_answer,
                                  reason=reason, by=by))
    return out

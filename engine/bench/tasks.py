"""One benchmark task: replay one conversation into one system under a protocol and score it.

`run_task(task, embedder)` is a pure function of the task (dataset time, the engines' fixed seeds, a fresh
session database), so a sweep may run tasks serially or on Ray workers and get the same figures. It
returns that task's part of the result (docs/BENCHMARK_FORMAT.md): per-question records, per-round
records with memory size and latency samples, LLM tokens, structure, the memory's growth session by session
and, for QMSum, boundaries.

Latency: inserts are timed per step (`ingest`, and `offline` for a scheduled run inside the stream,
`total` for the whole step); queries by the engine's own stages (`RetrievalResult.stages`). Turn and
question texts are embedded before the stream starts, so no stage pays for the embedding model.

Riders: an ablation that changes retrieval only (`EngineSchema.retrieval_ablations`) writes the same log as
the system without it, so it rides on that system's replay: at each checkpoint its questions are asked
with its own settings on the same memory, and its session database is a copy of the host's with its
settings (a miss reopens as that system retrieves). An `--ablations all` run replays once per
distinct log instead of once per system.

Answers (`task.answer` names an LLM backend): at each checkpoint every visible question is also answered
from its retrieved units and scored with token F1, BLEU-1, ROUGE-L, exact match and AA (the answer's
cited keys cover the gold evidence). The `full-history` system has no memory: it answers each question
from every turn ingested so far, the ceiling an engine's retrieval is measured against.
"""
from __future__ import annotations

import sqlite3
import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from engine.bench.datasets import Source, dataset, load_source, question_types
from engine.bench.figures import boundary_row, memory_size, memory_through, structure_figures
from engine.bench.protocol import STATIC, Checkpoint, plan
from engine.core.conversation import Conversation, Question
from engine.core.oplog import OpKind
from engine.eval.answer import DEFAULT_CONTEXT_TOKENS, answer_question, passages_from_turns, passages_from_units
from engine.eval.chain_links import follow_links
from engine.eval.decisions import decision_row
from engine.eval.metrics import (
    attribution_auditability,
    bleu1,
    exact_match,
    llm_calls,
    llm_cost_tally,
    llm_tokens_by_role,
    rouge_l,
    token_f1,
)
from engine.eval.misses import follow_gold
from engine.runtime.replay import Schedule, step

FULL_HISTORY = "full-history"            # the answering ceiling: no memory, every ingested turn as context


@dataclass(frozen=True)
class Rider:
    """A system asked on another system's replay: it differs from it only in retrieval-only ablations."""

    system: str
    settings: dict
    ablations: tuple[str, ...]


@dataclass(frozen=True)
class BenchTask:
    """Everything one task needs, as plain values (picklable, `to_dict` is JSON)."""

    dataset: str
    source: str                      # the file holding the conversation
    conversation: str
    system: str                      # label: engine, or engine-ablation[+ablation]
    engine: str
    settings: dict = field(default_factory=dict)
    ablations: tuple[str, ...] = ()
    protocol: str = "streaming"
    rounds: int = 5
    ks: tuple[int, ...] = (5, 10)
    schedule: str = "every-3-sessions"
    workdir: str = "."               # where the session database is written
    answer: str | None = None        # LLM backend that answers each question (None: retrieval only)
    llm: str = "offline"             # LLM backend of the engine's own roles
    answer_budget: int = DEFAULT_CONTEXT_TOKENS     # estimated tokens of passages an answer reads at most
    riders: tuple[Rider, ...] = ()   # systems asked on this task's replay (module docstring)
    overlay: str = ""                # a file of decision lines labelling the conversation (a decision set)

    @property
    def label(self) -> str:
        return f"{self.conversation} · {', '.join([self.system, *(r.system for r in self.riders)])}"

    @property
    def db_name(self) -> str:
        safe = "".join(ch if ch.isalnum() or ch in "._-" else "_" for ch in f"{self.conversation}-{self.system}")
        return f"{safe.replace('+', '_')}.sqlite"

    def to_dict(self) -> dict:
        return asdict(self)

    def ridden_by(self, rider: Rider) -> "BenchTask":
        """The task `rider` would be on its own (what its outcome is reported as)."""
        return replace(self, system=rider.system, settings=rider.settings, ablations=rider.ablations, riders=())


def run_task(task: BenchTask, embedder) -> dict:
    """Replay `task.conversation` into a fresh `task.system` session and score it (module docstring)."""
    from engine.session import open_session

    spec = dataset(task.dataset)
    conv = load_source(Source(task.conversation, task.source, task.overlay))
    questions = spec.askable(conv)
    types = question_types(spec, task.source)
    at_end = task.protocol == STATIC or not spec.questions
    checkpoints = plan(conv, questions, task.rounds, task.protocol) if spec.questions else \
        [Checkpoint(1, len(conv.turns), ())]
    if task.engine == FULL_HISTORY:
        return _full_history(task, spec, conv, questions, types, checkpoints, embedder)
    db = Path(task.workdir) / task.db_name
    db.parent.mkdir(parents=True, exist_ok=True)
    _remove_sqlite(db)
    settings = dict(task.settings)
    if task.ablations:
        settings["ablations"] = sorted(task.ablations)
    engine = open_session(db, engine=task.engine, llm=task.llm, settings=settings, embedder=embedder,
                          conversation=conv.id, source=task.source, schedule=task.schedule)
    engine.prefetch(conv.turns)
    engine.embedder.embed([q.question for q in questions])
    final_round = checkpoints[-1].round if checkpoints else None
    run = _Run(task, spec, conv, questions, types, engine, answering_llm(task, embedder), final_round=final_round)
    riders = [(r, _Run(task.ridden_by(r), spec, conv, questions, types, engine, answering_llm(task, embedder),
                       final_round=final_round, host=run)) for r in task.riders]

    def ask(cp: Checkpoint) -> None:
        run.checkpoint(cp)
        for rider, rider_run in riders:
            started = time.perf_counter()
            with _settings(engine, rider.settings):
                rider_run.checkpoint(cp)
            rider_run.seconds += time.perf_counter() - started
    schedule = Schedule.parse(task.schedule)
    due = {}
    for cp in checkpoints:
        due.setdefault(cp.turns, []).append(cp)
    growth: list[dict] = []             # the memory of the first n sessions, read as session n + 1 opens
    heard: set[str] = set()
    for i, turn in enumerate(conv.turns):
        run.insert(lambda timings: step(engine, conv, schedule, timings))
        if i and turn.session != conv.turns[i - 1].session:
            growth.append({"sessions": len(growth) + 1, "turns": i, **memory_through(engine.state, heard)})
        heard.add(turn.id)
        if not at_end:
            for cp in due.get(engine.state.turn, []):
                ask(cp)
    if at_end:
        if schedule.kind != "manual":       # what is left is consolidated once every turn is in, as replay ends
            run.insert(lambda timings: engine.end_of_stream(), stage="offline")
        for cp in checkpoints:
            ask(cp)
    if conv.turns:
        growth.append({"sessions": len(growth) + 1, "turns": len(conv.turns), **memory_through(engine.state, heard)})
    out = {**run.result(db), "growth": growth}
    out["riders"] = []
    for _, rider_run in riders:
        started = time.perf_counter()
        ridden = rider_run.result(_rider_db(db, rider_run.task, task.system), replayed_with=task.system)
        out["riders"].append({**ridden, "growth": growth,
                              "seconds": rider_run.seconds + time.perf_counter() - started})
    return out


@contextmanager
def _settings(engine, settings: dict):
    """`engine` retrieving with `settings` for a block (a rider's questions), its own settings back after."""
    own = engine.settings
    engine.settings = type(own).from_dict(settings)
    try:
        yield
    finally:
        engine.settings = own


def _rider_db(host: Path, rider: BenchTask, host_system: str) -> Path:
    """A copy of the host's session database holding the rider's settings: reopened, it retrieves as the
    rider did (its log is the host's, which is the rider's own: the two differ in retrieval only)."""
    from engine.store.log_store import Store

    target = host.with_name(rider.db_name)
    _remove_sqlite(target)
    src, dst = sqlite3.connect(host), sqlite3.connect(target)
    try:
        src.backup(dst)
    finally:
        src.close()
        dst.close()
    store = Store(target)
    store.set_meta(settings=rider.settings, replayed_with=host_system)
    store.engine.dispose()
    return target


def _remove_sqlite(db: Path) -> None:
    """A SQLite file and its write-ahead log gone, for a task's fresh session."""
    for stale in (db, db.with_name(db.name + "-wal"), db.with_name(db.name + "-shm")):
        stale.unlink(missing_ok=True)


class _Run:
    """The records of one task as its stream goes."""

    def __init__(self, task: BenchTask, spec, conv: Conversation, questions: list[Question],
                 types: dict[str, str], engine, llm=None, final_round: int | None = None,
                 host: "_Run | None" = None):
        """`host`: the run whose replay this one rides (its insert timings are this run's too)."""
        self.task, self.spec, self.conv, self.engine, self.llm = task, spec, conv, engine, llm
        self.host = host
        self.seconds = 0.0                     # a rider's own time: its checkpoints and its database copy
        self.final_round = final_round         # where each gold turn was lost is followed at this round
        self.questions = {q.id: q for q in questions}
        self.types = types
        self.k = max(task.ks)
        self.insert_all: dict[str, list[float]] = {}
        self.query_all: dict[str, list[float]] = {}
        self.insert_round: dict[str, list[float]] = {}
        self.rounds: list[dict] = []
        self.records: dict[str, dict] = {}
        self.last: tuple[int, dict] | None = None      # (memory turn, answers) of the latest checkpoint

    def insert(self, action, stage: str = "total") -> None:
        """Run `action(timings)` (which may fill in its own stages) and time all of it as `stage`."""
        timings: dict[str, float] = {}
        started = time.perf_counter()
        action(timings)
        timings[stage] = (time.perf_counter() - started) * 1e3
        for stage, ms in timings.items():
            self.insert_all.setdefault(stage, []).append(ms)
            self.insert_round.setdefault(stage, []).append(ms)

    def checkpoint(self, cp: Checkpoint) -> None:
        """Ask every visible question; a checkpoint on the same memory as the previous one reuses its answers
        (nothing changed in between) and adds no query latency."""
        state = self.engine.state
        query: dict[str, list[float]] = {}
        if self.last and self.last[0] == state.seq:
            answers = self.last[1]
        else:
            answers = {}
            for qid in cp.visible:
                q = self.questions[qid]
                res = self.engine.retrieve(q.question, k=self.k)
                stages = {(key[:-3] if key.endswith("_ms") else key): ms for key, ms in res.stages.items()}
                said = None
                if self.llm is not None:
                    said, stages["answer"] = _timed(lambda: answer_question(
                        self.llm, q.question, passages_from_units(res.units), question_time=q.time or "",
                        budget_tokens=self.task.answer_budget))
                answers[qid] = (res, said)
                for stage, ms in stages.items():
                    query.setdefault(stage, []).append(ms)
                    self.query_all.setdefault(stage, []).append(ms)
            self.last = (state.seq, answers)
        for qid in cp.visible:
            rec = self._record(qid, cp.round, *answers[qid], state.turn)
            if cp.round == self.final_round:
                res = answers[qid][0]
                rec["misses"] = [m.to_dict() for m in follow_gold(self.engine, res, rec["gold"], self.task.ks[0])]
                if rec["category"] in self.spec.chains:
                    rec["chain_links"] = [link.to_dict() for link in
                                          follow_links(state, self.engine.schema, rec["gold"])]
        inserts = self.host.rounds[-1]["insert_ms"] if self.host else self.insert_round
        self.rounds.append({"round": cp.round, "turns": state.turn, "questions": len(cp.visible),
                            "memory": memory_size(state), "insert_ms": inserts, "query_ms": query})
        self.insert_round = {}

    def _record(self, qid: str, round_no: int, res, said, turn: int) -> None:
        q = self.questions[qid]
        ranked = list(res.source_ids)
        metrics = self.spec.score(ranked, q.evidence, self.task.ks)
        rec = question_record(self.spec, self.conv, q, self.types, self.records, round_no, turn, metrics, said)
        rec.update(ranked=ranked[:self.k], results=[
            {"unit": u.id, "score": round(float(u.score), 6), "source_ids": list(u.source_ids), "hop": u.hop,
             "path": [{"src": h.src, "dst": h.dst, "type": h.type, "reverse": h.reverse} for h in u.path]}
            for u in res.units])
        if res.reading:
            rec["reading"] = res.reading
        return rec

    def result(self, db: Path, replayed_with: str | None = None) -> dict:
        state = self.engine.state
        inserts = self.host.insert_all if self.host else self.insert_all
        out = {"conversation": self.conv.id, "system": self.task.system, "turns": state.turn, "db": str(db),
               "replayed_with": replayed_with,
               "rounds": self.rounds, "questions": [self.records[q] for q in self.questions if q in self.records],
               "latency_ms": {"insert": inserts, "query": self.query_all},
               "llm_tokens": _tokens(self.engine.store, self.llm),
               "llm_costs": _costs(self.engine.store, self.llm, self.engine.embedder),
               "construction": llm_tokens_by_role(self.engine.store),
               "structure": structure_figures(state), "boundaries": None, "decisions": None}
        if self.spec.boundaries:
            out["boundaries"] = boundary_row(self.task.source, self.task.system, self.conv, state)
        if self.spec.decisions:
            out["decisions"] = decision_row(self.engine, self.conv)
        return out


def answering_llm(task: BenchTask, embedder):
    """The LLM that answers the task's questions, apart from the engine's own (whose calls go to its log);
    it keeps its calls so their tokens can be counted. None when the task does not answer."""
    if not task.answer:
        return None
    from engine.session import llm_for

    llm = llm_for(task.answer, embedder)
    llm.calls = []
    llm.recorder = llm.calls.append
    return llm


def _tokens(store, llm) -> dict:
    """Calls and tokens per LLM role: the engine's logged calls plus the answering model's."""
    logged = store.ops(kinds=[OpKind.LLM_CALL]) if store is not None else ()
    return llm_tokens_by_role([*logged, *(llm.calls if llm else ())])


def _costs(store, llm, embedder) -> dict:
    """Per-role cost tally (`engine.eval.metrics.llm_cost_tally`) of the engine's and the answering model's calls;
    the calls not made by the offline backend are also asked of it, to count how often it decides otherwise."""
    from engine.eval.llm_costs import offline_llm
    from engine.llm.decisions import compare, differ_by_key

    calls = [*(store.ops(kinds=[OpKind.LLM_CALL]) if store is not None else ()), *(llm.calls if llm else ())]
    online = [c for c in llm_calls(calls) if c.get("backend") != "offline"]
    differ = differ_by_key(compare(online, offline_llm(embedder))) if online else None
    return llm_cost_tally(calls, differ)


def _timed(action):
    started = time.perf_counter()
    value = action()
    return value, (time.perf_counter() - started) * 1e3


def answer_scores(said, question: Question) -> dict[str, float]:
    """Token F1, BLEU-1, ROUGE-L and exact match against the gold answer; AA against the gold evidence."""
    gold = "" if question.answer is None else str(question.answer)
    return {"f1": token_f1(said.text, gold), "bleu1": bleu1(said.text, gold), "rouge_l": rouge_l(said.text, gold),
            "em": exact_match(said.text, gold), "aa": attribution_auditability(said.cited, question.evidence)}


def question_record(spec, conv: Conversation, q: Question, types: dict[str, str], records: dict, round_no: int,
                    turn: int, metrics: dict, said) -> dict:
    """The question's record, created at its first asking; this asking's figures (and answer) put in."""
    rec = records.get(q.id)
    if rec is None:
        rec = records[q.id] = {
            "conversation": conv.id, "question_id": q.id, "question": q.question,
            "category": spec.category(q, types), "gold": list(q.evidence), "first_round": round_no,
            "by_round": {}}
    if said is not None:
        metrics = {**metrics, **answer_scores(said, q)}
        rec["answer"] = {**said.to_dict(), "gold": None if q.answer is None else str(q.answer)}
    rec["by_round"][str(round_no)] = metrics
    rec.update(turn=turn, metrics=metrics)
    return rec


def _full_history(task: BenchTask, spec, conv: Conversation, questions: list[Question], types: dict[str, str],
                  checkpoints: list[Checkpoint], embedder) -> dict:
    """The ceiling: no memory; at each checkpoint every visible question is answered from every turn in."""
    llm = answering_llm(task, embedder)
    if llm is None:
        raise ValueError(f"the {FULL_HISTORY} system answers questions: give it an answering LLM backend")
    by_id = {q.id: q for q in questions}
    records: dict[str, dict] = {}
    rounds, query_all = [], {"answer": []}
    for cp in checkpoints:
        context = passages_from_turns(conv.turns[:cp.turns])
        query = {"answer": []}
        for qid in cp.visible:
            q = by_id[qid]
            said, ms = _timed(lambda: answer_question(llm, q.question, context, question_time=q.time or "",
                                                      budget_tokens=task.answer_budget))
            query["answer"].append(ms)
            query_all["answer"].append(ms)
            question_record(spec, conv, q, types, records, cp.round, cp.turns, {}, said).update(ranked=[], results=[])
        rounds.append({"round": cp.round, "turns": cp.turns, "questions": len(cp.visible),
                       "memory": {"nodes": {}, "edges": {}}, "insert_ms": {}, "query_ms": query})
    return {"conversation": conv.id, "system": task.system, "turns": len(conv.turns), "db": None,
            "rounds": rounds, "questions": [records[q.id] for q in questions if q.id in records],
            "latency_ms": {"insert": {}, "query": query_all}, "llm_tokens": _tokens(None, llm),
            "llm_costs": _costs(None, llm, embedder), "construction": None,
            "structure": {}, "growth": [], "boundaries": None, "decisions": None}

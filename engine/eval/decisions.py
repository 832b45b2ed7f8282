"""A decision set scored against one engine's memory: what became of every labelled pair, and per-kind figures.

An engine says which of its edits are decisions of which kind in its schema (`EngineSchema.decisions`): All-Mem's
Update, Merge and Split proposals, MemLoom's CAUSAL_FOLLOW / STATE_SUCCESSOR / SAME_EVENT relations, GAM's
causal / contradict / coreference topic relations, RecMem's `updates` edges. A proposal covers a pair of turns
when one of its targets derives from each (the turns a relation cites as evidence, where it cites any), so the
scoring needs nothing else of the engine.

Each labelled pair gets its *fate* for the decision it calls for (a positive) or for any decision (a negative),
the answer to "why wasn't this consolidated?":

- ``applied``: a proposal of that kind covering the pair was applied and is in effect;
- ``undone``: it was applied and its run later undone;
- ``gated``: proposed, and the gate held it back (its confidence against θ, and the reason code);
- ``declined``: proposed, and dropped for another reason (a duplicate, an overlap, a person's rejection, a
  failed plan), or still pending;
- ``compared``: one call of a deciding role had both turns before it and proposed nothing of that kind;
- ``never compared``: no call ever had both turns before it (not a candidate).

A decision of any kind on a labelled pair that the labels do not call for is a false decision (someone else's
fact superseded, a change of state linked as the cause of another).
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from engine.core.decision import Decision, DecisionKind
from engine.core.node import parse_id
from engine.core.oplog import OpKind
from engine.core.proposal import GateVerdict, Status
from engine.core.schema import DecisionSpec, EngineSchema
from engine.core.state import MemoryState
from engine.llm.prompts import payload_of

FATES = ("applied", "undone", "gated", "declined", "compared", "never compared")
DECIDED = ("applied",)
# the roles whose calls put two statements side by side to decide about them
COMPARING_ROLES = ("diagnosis", "relation_synthesis", "topic_relation", "episode_extraction", "episode_merge",
                   "fact_refinement")


@dataclass
class Edit:
    """One of an engine's edits read as a decision: its kind, the turns on each side, and how it ended."""

    kind: str
    sides: list[frozenset[str]]
    outcome: str                      # applied | undone | gated | declined
    proposal: int | None = None
    confidence: float | None = None
    threshold: float | None = None
    reason_code: str | None = None
    note: str = ""
    reason: str = ""

    def covers(self, earlier: str, later: str) -> bool:
        if earlier == later:
            return any(earlier in side for side in self.sides)
        return any(earlier in a and later in b for i, a in enumerate(self.sides)
                   for j, b in enumerate(self.sides) if i != j)

    def pairs(self) -> set[tuple[str, str]]:
        """Every unordered pair of turns it decides about (one turn with itself for a single target)."""
        if len(self.sides) == 1:
            return {(t, t) for t in self.sides[0]}
        return {tuple(sorted((a, b))) for i, sa in enumerate(self.sides) for sb in self.sides[i + 1:]
                for a in sa for b in sb if a != b}

    def to_dict(self) -> dict:
        return {"kind": self.kind, "outcome": self.outcome, "proposal": self.proposal,
                "confidence": self.confidence, "threshold": self.threshold, "reason_code": self.reason_code,
                "note": self.note, "reason": self.reason[:300]}


@dataclass
class Verdict:
    """What became of one labelled decision in one engine's memory."""

    decision: Decision
    fate: str                         # one of FATES, for the kind it calls for (a negative: for any kind)
    decided: bool                     # the engine made the labelled decision (a negative: any decision)
    edits: list[Edit] = field(default_factory=list)          # every edit of any kind covering the pair
    compared_in: list[dict] = field(default_factory=list)    # calls that had both turns before them

    def to_dict(self) -> dict:
        return {**self.decision.to_dict(), "fate": self.fate, "decided": self.decided,
                "edits": [e.to_dict() for e in self.edits], "compared_in": self.compared_in[:5]}


def node_turns(state: MemoryState) -> dict[int, frozenset[str]]:
    """Every node's dataset turns (its provenance pointers)."""
    return {uid: frozenset(n.source_ids) for uid, n in state.nodes.items()}


def edits(state: MemoryState, schema: EngineSchema) -> list[Edit]:
    """The engine's edits that its schema counts as decisions, with how each ended."""
    turns = node_turns(state)
    out: list[Edit] = []
    for spec in schema.decisions:
        if spec.operator:
            out += [e for p in state.proposals.values() if _is(spec, p)
                    for e in [_proposal_edit(spec, p, state, turns)] if e is not None]
        if spec.edge:
            out += [Edit(spec.kind, [turns.get(e.src, frozenset()), turns.get(e.dst, frozenset())], "applied",
                         confidence=e.confidence) for e in state.edges.values() if e.type == spec.edge]
    return out


def _is(spec: DecisionSpec, p) -> bool:
    if p.op != spec.operator:
        return False
    if not spec.relation:
        return True
    return any((where or {}).get(spec.field) == spec.relation for where in (p.plan, p.detail))


def _proposal_edit(spec: DecisionSpec, p, state: MemoryState, turns: dict[int, frozenset[str]]) -> Edit | None:
    sides = [turns.get(t, frozenset()) for t in p.targets]
    cited = [parse_id(x) for x in (p.plan or {}).get("evidence", [])]
    cited_turns = frozenset(t for c in cited if c is not None for t in turns.get(c, ()))
    if cited_turns:
        sides = [side & cited_turns or side for side in sides]
    if not any(sides):
        return None
    run = state.runs.get(p.run_id)
    if p.status == Status.APPLIED:
        outcome = "undone" if run is not None and run.status == "undone" else "applied"
    elif p.gate == GateVerdict.FAIL and p.reason_code in ("LOW_CONF", "COH_FAIL"):
        outcome = "gated"
    else:
        outcome = "declined"
    return Edit(spec.kind, sides, outcome, p.id, p.confidence, (p.detail or {}).get("threshold"), p.reason_code,
                p.note, p.reason)


def comparisons(calls: Iterable[dict], state: MemoryState) -> list[tuple[dict, frozenset[str]]]:
    """Per call of a comparing role: (what the call was, the turns its input put before it)."""
    turns = node_turns(state)
    out = []
    for call in calls:
        if call.get("role") not in COMPARING_ROLES:
            continue
        try:
            payload = payload_of(call.get("prompt") or [])
        except (ValueError, TypeError):
            continue
        seen = frozenset(t for uid in _ids(payload) for t in turns.get(uid, ()))
        if seen:
            out.append(({"role": call["role"], "backend": call.get("backend"), "ok": call.get("error_code") is None},
                        seen))
    return out


def _ids(value: Any) -> Iterable[int]:
    """Node ids named in a role's payload (`id`, `node_id`, `*_ids` keys), at any depth."""
    if isinstance(value, dict):
        for key, item in value.items():
            if key in ("id", "node_id", "source_sentence", "target_sentence") and isinstance(item, (str, int)):
                uid = parse_id(item)
                if uid is not None:
                    yield uid
            elif key.endswith("_ids") and isinstance(item, list):
                yield from (u for u in map(parse_id, item) if u is not None)
            else:
                yield from _ids(item)
    elif isinstance(value, list):
        for item in value:
            yield from _ids(item)


def judge(decisions: list[Decision], state: MemoryState, schema: EngineSchema, calls: Iterable[dict]
          ) -> tuple[list[Verdict], list[Edit]]:
    """Each labelled decision's verdict, and the applied edits on pairs nobody labelled."""
    made = edits(state, schema)
    compared = comparisons(calls, state)
    labelled: set[tuple[str, str]] = set()
    verdicts = []
    for d in decisions:
        labelled.add(tuple(sorted((d.earlier, d.later))))
        covering = [e for e in made if e.covers(d.earlier, d.later) or e.covers(d.later, d.earlier)]
        relevant = [e for e in covering if e.kind == d.kind] if d.positive else covering
        both = [info for info, seen in compared if d.earlier in seen and d.later in seen]
        verdicts.append(Verdict(d, _fate(relevant, both), any(e.outcome in DECIDED for e in relevant),
                                covering, both))
    unlabelled = [e for e in made if e.outcome in DECIDED and not (e.pairs() & labelled)]
    return verdicts, unlabelled


def _fate(edits_: list[Edit], compared_in: list[dict]) -> str:
    for fate in ("applied", "undone", "gated", "declined"):
        if any(e.outcome == fate for e in edits_):
            return fate
    return "compared" if compared_in else "never compared"


def _pair(v: dict) -> tuple[str, str]:
    return tuple(sorted((v.get("earlier") or v["turn"], v.get("later") or v["turn"])))


def false_decisions(verdicts: list[dict]) -> list[tuple[dict, dict]]:
    """Applied edits on labelled pairs whose labels do not call for their kind (verdicts as `Verdict.to_dict`
    writes them, so a result file is scored the same way)."""
    wanted: dict[tuple[str, str], set[str]] = {}
    for v in verdicts:
        wanted.setdefault(_pair(v), set())
        if v["kind"] in DecisionKind.POSITIVE:
            wanted[_pair(v)].add(v["kind"])
    out, seen = [], set()
    for v in verdicts:
        for e in v["edits"]:
            key = (v.get("conversation", ""), _pair(v), e["kind"])
            if e["outcome"] in DECIDED and e["kind"] not in wanted[_pair(v)] and key not in seen:
                seen.add(key)
                out.append((v, e))
    return out


def score(verdicts: list[dict], kinds: Iterable[str]) -> dict[str, dict]:
    """Per decision kind an engine makes: gold positives, decided, precision, recall, F1 (precision over the
    labelled pairs: a decision of that kind on a pair not labelled with it is a false one) and the fates of the
    gold pairs; per negative kind, how many pairs got any decision. Verdicts as `Verdict.to_dict` writes them,
    each with its `conversation`."""
    false = false_decisions(verdicts)
    out: dict[str, dict] = {}
    for kind in kinds:
        gold = [v for v in verdicts if v["kind"] == kind]
        hit = sum(v["decided"] for v in gold)
        wrong = sum(e["kind"] == kind for _, e in false)
        precision = hit / (hit + wrong) if hit + wrong else None
        recall = hit / len(gold) if gold else None
        f1 = (2 * precision * recall / (precision + recall) if precision and recall else
              (0.0 if precision is not None and recall is not None else None))
        out[kind] = {"gold": len(gold), "correct": hit, "false": wrong, "precision": _round(precision),
                     "recall": _round(recall), "f1": _round(f1),
                     "fates": {f: sum(v["fate"] == f for v in gold) for f in FATES},
                     "reliability": reliability(verdicts, kind)}
    for kind in DecisionKind.NEGATIVE:
        gold = [v for v in verdicts if v["kind"] == kind]
        if gold:
            hit = sum(v["decided"] for v in gold)
            out[kind] = {"gold": len(gold), "decided": hit, "false_rate": _round(hit / len(gold))}
    return out


def reliability(verdicts: list[dict], kind: str, bins: int = 10) -> dict:
    """How well an engine's confidences in its decisions of `kind` read as probabilities, over the labelled
    pairs: each proposal of that kind on a labelled pair (applied or not) is right when the pair is labelled with
    the kind. Per confidence bin: proposals, mean confidence, share right; and the expected calibration error."""
    wanted: dict[tuple, set[str]] = {}
    for v in verdicts:
        wanted.setdefault((v.get("conversation", ""), _pair(v)), set())
        if v["kind"] in DecisionKind.POSITIVE:
            wanted[(v.get("conversation", ""), _pair(v))].add(v["kind"])
    seen: dict[tuple, tuple[float, bool]] = {}
    for v in verdicts:
        key = (v.get("conversation", ""), _pair(v))
        for e in v["edits"]:
            if e["kind"] == kind and e["confidence"] is not None:
                seen[(*key, e.get("proposal"))] = (float(e["confidence"]), kind in wanted[key])
    out = []
    for b in range(bins):
        lo, hi = b / bins, (b + 1) / bins
        inside = [(c, ok) for c, ok in seen.values() if lo <= c < hi or (b == bins - 1 and c == hi)]
        if inside:
            out.append({"from": lo, "to": hi, "proposals": len(inside),
                        "confidence": _round(sum(c for c, _ in inside) / len(inside)),
                        "right": _round(sum(ok for _, ok in inside) / len(inside))})
    n = sum(b["proposals"] for b in out)
    ece = sum(b["proposals"] * abs(b["confidence"] - b["right"]) for b in out) / n if n else None
    return {"proposals": n, "ece": _round(ece), "bins": out}


def headline(table: dict[str, dict]) -> dict[str, float | None]:
    """The figures `memwb bench` puts in its overall table: F1 per positive kind, and the share of negative
    pairs given any decision."""
    out = {f"{k}_f1": table[k]["f1"] if k in table else None for k in DecisionKind.POSITIVE}
    negatives = [table[k] for k in DecisionKind.NEGATIVE if k in table]
    total = sum(t["gold"] for t in negatives)
    out["false_on_negatives"] = _round(sum(t["decided"] for t in negatives) / total) if total else None
    return out


def _round(x: float | None) -> float | None:
    return None if x is None else round(x, 4)


def judge_engine(engine, conversation) -> tuple[list[Verdict], list[Edit]]:
    """`judge` over an engine's live memory and the calls its log holds."""
    calls = [op.payload for op in engine.store.ops(kinds=[OpKind.LLM_CALL])]
    return judge(conversation.decisions, engine.state, engine.schema, calls)


def decision_row(engine, conversation) -> dict:
    """A benchmark task's decision figures: every labelled decision's verdict, and the applied edits on pairs
    nobody labelled (not scored: a short conversation is not labelled pair by pair)."""
    verdicts, unlabelled = judge_engine(engine, conversation)
    said = {t.id: f"{t.speaker}: {t.text}" for t in conversation.turns}
    return {"conversation": conversation.id, "kinds": [s.kind for s in engine.schema.decisions],
            "verdicts": [{"conversation": conversation.id, **v.to_dict(),
                          "texts": [said[t] for t in v.decision.turns]} for v in verdicts],
            "unlabelled": [{"pairs": sorted(map(list, e.pairs()))[:6], **e.to_dict()} for e in unlabelled]}

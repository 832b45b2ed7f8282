"""Several annotators per case: labels with author, time and undo in the store (SQLite and PostgreSQL), who sees
whom, agreement (Cohen's kappa, Krippendorff's alpha) and adjudication with its lineage."""
from __future__ import annotations

import json
from itertools import count
from pathlib import Path

import krippendorff
import numpy as np
import pytest
from conftest import BACKENDS
from sklearn.metrics import cohen_kappa_score

from engine.core.access import Action, Identity, Role
from engine.core.labels import MAJORITY, PER_ITEM, majority, per_item
from engine.eval.agreement import COHEN, KRIPPENDORFF, agreement, case_agreement
from engine.loaders import load_conversation
from engine.loaders.cases import parse_document
from engine.store.annotations import AnnotationStore
from engine.store.database import database_url, open_database
from engine.eval.team_export import team_document
from engine.store.labels import LabelError, LabelStore

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "datasets" / "demo" / "demo.jsonl"
DEMO_CASES = ROOT / "datasets" / "demo" / "cases.json"
T = ["commute:t20", "commute:t38", "commute:t46", "commute:t80"]


@pytest.fixture(scope="module", params=BACKENDS)
def backend(request):
    return request.param


@pytest.fixture(scope="module")
def conv():
    return load_conversation(DEMO)


def clock():
    ticks = count(1)
    return lambda: f"2026-12-06T07:00:{next(ticks):02d}+00:00"


class Checked(LabelStore):
    """A store that asks a role, as the workbench's does."""

    def __init__(self, engine, identity: Identity):
        super().__init__(engine, identity.name, clock())
        self.identity = identity

    def check(self, action: Action) -> None:
        self.identity.require(action)


@pytest.fixture
def stores(db_url, conv):
    engine = open_database(database_url(db_url))
    gold = AnnotationStore(engine, "rita")
    gold.import_json(DEMO_CASES.read_text(encoding="utf-8"), DEMO_CASES.name, conv)

    def as_(name: str, role: Role = Role.ANNOTATOR) -> LabelStore:
        return Checked(engine, Identity(name, role, "token"))
    return gold, as_


def test_labels_carry_author_time_and_versions_and_undo_restores_the_one_before(stores):
    gold, as_ = stores
    case = gold.get("demo", "commute")
    ann = as_("ann")
    first = ann.save_label(case, "commute-q1", [T[2], T[0]], [T[0], T[2]], "the move", "CAUSAL_FOLLOW")
    assert first.evidence == (T[0], T[2]) and first.chain == (T[0], T[2]) and first.annotator == "ann"
    assert ann.save_label(case, "commute-q1", [T[0], T[2]], [T[0], T[2]], "the move", "CAUSAL_FOLLOW") is None
    second = ann.save_label(case, "commute-q1", [T[0]], [T[2], T[0]], "the new flat", "TEMPORAL_NEXT")
    assert second.seq > first.seq and second.at > first.at
    assert ann.label("demo", "commute", "commute-q1", "ann").chain == (T[2], T[0])        # order kept as given
    undone = ann.undo("demo", "commute")
    assert undone.seq == second.seq
    back = ann.label("demo", "commute", "commute-q1", "ann")
    assert (back.seq, back.gold_answer, back.chain) == (first.seq, "the move", (T[0], T[2]))
    assert ann.undo("demo", "commute").seq == first.seq
    assert ann.label("demo", "commute", "commute-q1", "ann") is None and ann.undo("demo", "commute") is None
    history = ann.history("demo", "commute")
    assert [(r.annotator, r.undoes) for r in history] == [("ann", None), ("ann", None), ("ann", second.seq),
                                                          ("ann", first.seq)]


def test_bad_labels_and_roles_are_refused_and_write_nothing(stores):
    gold, as_ = stores
    case = gold.get("demo", "commute")
    with pytest.raises(LabelError, match="commute:t99: not a turn pointer"):
        as_("ann").save_label(case, "commute-q1", ["commute:t99"], [], "", "CAUSAL_FOLLOW")
    with pytest.raises(PermissionError, match="labelling needs the annotator or reviewer role"):
        as_("vera", Role.VIEWER).save_label(case, "commute-q1", [T[0]], [], "", "CAUSAL_FOLLOW")
    with pytest.raises(PermissionError, match="adjudicating labels needs the reviewer role"):
        as_("ann").open_adjudication("demo", "commute")
    assert as_("ann").history("demo") == []


def test_an_annotator_sees_only_their_own_labels_until_they_submit_or_adjudication_opens(stores, conv):
    gold, as_ = stores
    case = gold.get("demo", "commute")
    ann, ben = as_("ann"), as_("ben")
    ann.save_label(case, "commute-q1", T[:2], T[:2], "a", "CAUSAL_FOLLOW")
    ben.save_label(case, "commute-q1", T[1:], T[1:], "b", "CAUSAL_FOLLOW")
    assert list(ann.visible_labels("demo", "commute", "ann")["commute-q1"]) == ["ann"]
    [mine, _] = team_document(gold.cases("demo"), conv, ann, reader="ann")["cases"]     # nor in the export
    assert {lab["annotator"] for lab in mine["labels"]} == {"ann"} and mine["agreement"] is None
    ann.submit("demo", "commute")
    assert list(ann.visible_labels("demo", "commute", "ann")["commute-q1"]) == ["ann", "ben"]
    assert list(ben.visible_labels("demo", "commute", "ben")["commute-q1"]) == ["ben"]
    as_("rita", Role.REVIEWER).open_adjudication("demo", "commute")
    assert list(ben.visible_labels("demo", "commute", "ben")["commute-q1"]) == ["ann", "ben"]


def test_kappa_and_alpha_are_the_libraries_values_on_the_turn_level_items(stores):
    gold, as_ = stores
    case = gold.get("demo", "commute")
    as_("ann").save_label(case, "commute-q1", [T[0], T[1], T[2]], [T[0], T[1], T[2]], "x", "CAUSAL_FOLLOW")
    as_("ben").save_label(case, "commute-q1", [T[0], T[2], T[3]], [T[1], T[0], T[2]], "x", "CAUSAL_FOLLOW")
    labels = as_("ann").labels("demo", "commute")
    result = case_agreement(case, labels)
    q1 = result.questions[0]
    assert q1.evidence.measure == COHEN and q1.evidence.items == 4
    assert q1.evidence.value == pytest.approx(cohen_kappa_score([1, 1, 1, 0], [1, 0, 1, 1]))
    assert q1.evidence.observed == pytest.approx(0.5)
    # order: pairs both chains hold, (t20,t38) flips, (t20,t46) and (t38,t46) agree
    assert q1.order.items == 3 and q1.order.observed == pytest.approx(2 / 3)
    assert q1.order.value == pytest.approx(cohen_kappa_score([1, 1, 1], [0, 1, 1]))
    assert result.most_disagreed()[0].sample_id == "commute-q1"

    as_("cy").save_label(case, "commute-q1", [T[0], T[1]], [T[0]], "y", "CAUSAL_FOLLOW")
    q1 = case_agreement(case, as_("ann").labels("demo", "commute")).questions[0]
    data = np.array([[1, 1, 1, 0], [1, 0, 1, 1], [1, 1, 0, 0]], dtype=float)
    assert q1.evidence.measure == KRIPPENDORFF
    assert q1.evidence.value == pytest.approx(krippendorff.alpha(reliability_data=data,
                                                                 level_of_measurement="nominal"))


def test_agreement_is_undefined_not_invented_when_everything_is_one_category():
    same = agreement({"a": {1: 1, 2: 1}, "b": {1: 1, 2: 1}})
    assert same.value is None and same.observed == 1.0
    assert agreement({"a": {1: 1}}).value is None


def test_majority_and_per_item_adjudication_write_the_gold_with_its_lineage(stores):
    gold, as_ = stores
    case = gold.get("demo", "commute")
    ann, ben, cy = as_("ann"), as_("ben"), as_("cy")
    a = ann.save_label(case, "commute-q2", [T[0], T[1]], [T[0], T[1], T[2]], "the move", "CAUSAL_FOLLOW")
    b = ben.save_label(case, "commute-q2", [T[0], T[2]], [T[1], T[0], T[2]], "the move", "CAUSAL_FOLLOW")
    c = cy.save_label(case, "commute-q2", [T[0], T[1], T[2]], [T[0], T[1]], "the flat", "TEMPORAL_NEXT")
    rita = as_("rita", Role.REVIEWER)
    labels = list(rita.labels("demo", "commute")["commute-q2"].values())
    merged = majority(case, labels, "rita")
    assert merged.method == MAJORITY and merged.evidence == (T[0], T[1], T[2])
    assert merged.chain == (T[0], T[1], T[2]) and merged.gold_answer == "the move"
    assert merged.sources["evidence"][T[2]] == ["ben", "cy"] and merged.sources["gold_answer"] == ["ann", "ben"]
    with pytest.raises(LabelError, match="not open"):
        rita.record_adjudication(merged, case, AnnotationStore(rita.engine, "rita").save_within)
    rita.open_adjudication("demo", "commute")
    rita.record_adjudication(merged, case, AnnotationStore(rita.engine, "rita").save_within)
    q = gold.get("demo", "commute").question("commute-q2")
    assert q.gold_evidence_keys == [T[0], T[1], T[2]] and q.gold_answer == "the move"
    assert q.gold_causal_structure.supporting_evidence_keys == [T[0], T[1], T[2]]
    picked = per_item(case, labels, "rita", [T[2]], chain_from="ben", answer_from="cy", dependency_from="cy")
    kept = rita.record_adjudication(picked, case, AnnotationStore(rita.engine, "rita").save_within)
    q = gold.get("demo", "commute").question("commute-q2")
    assert q.gold_evidence_keys == [T[2]] and q.gold_causal_structure.supporting_evidence_keys == [T[1], T[0], T[2]]
    assert (q.gold_answer, q.gold_causal_structure.dependency_type) == ("the flat", "TEMPORAL_NEXT")
    [first, last] = rita.adjudications("demo", "commute")
    assert first.method == MAJORITY and last.method == PER_ITEM and last.seq == kept.seq
    assert last.reviewer == "rita" and last.labels == (("ann", a.seq), ("ben", b.seq), ("cy", c.seq))
    assert last.sources["chain"] == {T[1]: ["ben"], T[0]: ["ben"], T[2]: ["ben"]}
    assert AnnotationStore(rita.engine).last_authors("demo", "commute")["commute-q2"] == "rita"


def test_an_adjudication_and_its_gold_commit_together_or_not_at_all(stores):
    """The gold's write fails inside the adjudication's transaction (a store that may not write): neither the
    adjudication's lineage row nor the gold is kept, and the case in hand is as it was."""
    gold, as_ = stores
    case = gold.get("demo", "commute")
    as_("ann").save_label(case, "commute-q1", [T[3]], [], "the bus", "CAUSAL_FOLLOW")
    rita = as_("rita", Role.REVIEWER)
    rita.open_adjudication("demo", "commute")
    [label] = rita.labels("demo", "commute")["commute-q1"].values()
    before = (gold.get("demo", "commute").question("commute-q1").gold_evidence_keys,
              len(rita.adjudications("demo", "commute")))
    in_hand = case.question("commute-q1").gold_evidence_keys[:]
    with pytest.raises(ValueError, match="opened without an author"):
        rita.record_adjudication(majority(case, [label], "rita"), case, AnnotationStore(rita.engine).save_within)
    after = (gold.get("demo", "commute").question("commute-q1").gold_evidence_keys,
             len(rita.adjudications("demo", "commute")))
    assert after == before and case.question("commute-q1").gold_evidence_keys == in_hand
    rita.record_adjudication(majority(case, [label], "rita"), case, AnnotationStore(rita.engine, "rita").save_within)
    assert gold.get("demo", "commute").question("commute-q1").gold_evidence_keys == [T[3]]
    assert len(rita.adjudications("demo", "commute")) == before[1] + 1


def test_the_export_holds_labels_agreement_and_adjudicated_gold_and_still_imports(stores, conv):
    gold, as_ = stores
    case = gold.get("demo", "commute")
    as_("ann").save_label(case, "commute-q3", [T[2]], [], "a new job", "CAUSAL_FOLLOW")
    as_("ben").save_label(case, "commute-q3", [T[2], T[3]], [], "a new job", "CAUSAL_FOLLOW")
    rita = as_("rita", Role.REVIEWER)
    rita.open_adjudication("demo", "commute")
    labels = list(rita.labels("demo", "commute")["commute-q3"].values())
    rita.record_adjudication(majority(case, labels, "rita"), case, AnnotationStore(rita.engine, "rita").save_within)
    doc = json.loads(json.dumps(team_document(gold.cases("demo"), conv, rita)))
    [commute] = [c for c in doc["cases"] if c["scenario_id"] == "commute"]
    assert {lab["annotator"] for lab in commute["labels"]} == {"ann", "ben"}
    q3 = next(q for q in commute["agreement"]["questions"] if q["sample_id"] == "commute-q3")
    assert q3["evidence"]["measure"] == COHEN and q3["evidence"]["observed"] == 0.75
    [adj] = commute["adjudications"]
    assert adj["reviewer"] == "rita" and adj["gold"]["gold_evidence_keys"] == [T[2]]
    assert {x["annotator"] for x in adj["from_labels"]} == {"ann", "ben"}
    assert doc["case_set"]["version"].startswith("sha256:")
    assert [c.scenario_id for c in parse_document(doc, "export.json", conv)] == ["commute", "half-marathons"]


def test_decision_labels_are_stored_undone_and_exported_as_a_decision_overlay(db_url, conv, tmp_path):
    from engine.loaders.jsonl import attach_decisions, load_decision_overlay
    from engine.store.decision_labels import DecisionLabels

    engine = open_database(database_url(db_url))
    ann = DecisionLabels(engine, "ann", clock())
    turns = [t.id for t in conv.turns]
    first = ann.add(conv, turns[9], turns[3], "supersedes", "moved")       # either order: earlier comes first
    assert (first.kind, first.earlier, first.later) == ("update", turns[3], turns[9])
    ann.add(conv, turns[1], turns[2], "is caused by")
    ann.add(conv, turns[4], turns[5], "restates")
    with pytest.raises(LabelError, match="pick two different turns"):
        ann.add(conv, turns[1], turns[1], "restates")
    assert ann.undo("demo").kind == "merge"
    DecisionLabels(engine, "ben", clock()).add(conv, turns[6], turns[7], "is unrelated to")
    overlay = tmp_path / "mine.jsonl"
    overlay.write_text(ann.overlay_lines("demo"), encoding="utf-8")
    loaded = load_decision_overlay(overlay)
    [with_labels] = attach_decisions([conv], loaded, overlay)
    assert [(d.kind, d.earlier, d.later) for d in with_labels.decisions[-3:]] == [
        ("update", turns[3], turns[9]), ("cause", turns[1], turns[2]), ("unrelated", turns[6], turns[7])]
    assert [json.loads(x)["labelled_by"] for x in overlay.read_text().splitlines()] == ["ann", "ann", "ben"]


def test_labels_adjudications_and_decision_labels_survive_a_dump_and_load(stores, conv, db_url, make_db, tmp_path):
    import io

    from engine.store.decision_labels import DecisionLabels
    from engine.store.dump import dump, load
    from engine.store.log_store import Store

    Store(db_url)                                   # a session's database: the memory's tables beside the labels
    gold, as_ = stores
    case = gold.get("demo", "commute")
    as_("ann").save_label(case, "commute-q1", [T[0]], [T[0], T[1]], "x", "CAUSAL_FOLLOW")
    as_("ben").save_label(case, "commute-q1", [T[0], T[1]], [T[0]], "x", "CAUSAL_FOLLOW")
    rita = as_("rita", Role.REVIEWER)
    rita.open_adjudication("demo", "commute")
    labels = list(rita.labels("demo", "commute")["commute-q1"].values())
    rita.record_adjudication(majority(case, labels, "rita"), case, AnnotationStore(rita.engine, "rita").save_within)
    DecisionLabels(rita.engine, "ann").add(conv, conv.turns[1].id, conv.turns[4].id, "restates")
    out = io.BytesIO()
    dump(db_url, out)
    path = tmp_path / "dump.jsonl"
    path.write_bytes(out.getvalue())
    target = make_db()
    load(path, target)
    copy = LabelStore.at(target)
    assert copy.labels("demo", "commute") == rita.labels("demo", "commute")
    assert copy.adjudications("demo", "commute") == rita.adjudications("demo", "commute")
    assert DecisionLabels.at(target).labels("demo") == DecisionLabels(rita.engine).labels("demo")

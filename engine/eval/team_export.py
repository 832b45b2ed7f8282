"""The team's export of a case set: the cases with every annotator's labels in effect, their agreement and the
adjudications (lineage) beside the gold, and the case set's version and locked splits. Its own module because it
reads the label store (engine.store.labels) and scores agreement (engine.eval.agreement)."""
from __future__ import annotations

from engine.core.cases import Case
from engine.eval.agreement import case_agreement
from engine.loaders.cases import case_set_version, export_document
from engine.store.labels import LabelStore


def team_document(cases: list[Case], conversation, labels: LabelStore, reader: str | None = None) -> dict:
    """The cases export (`engine.loaders.cases`) with the team's work beside the gold: per case its split, every
    annotator's label in effect, the agreement and the adjudications (lineage); and the case set's version and
    locked splits. It still imports as a cases file (the extra keys are read by nobody but people and tuning
    code's `refuse_locked_cases`). For a `reader` (the page's signed-in annotator) a case they may not yet see
    the others' labels of holds their own labels only, and no agreement."""
    doc = export_document(cases, conversation)
    splits = labels.splits(conversation.id)
    for case, out in zip(cases, doc["cases"]):
        by_question = labels.labels(conversation.id, case.scenario_id) if reader is None else \
            labels.visible_labels(conversation.id, case.scenario_id, reader)
        hidden = reader is not None and not labels.sees_all(conversation.id, case.scenario_id, reader)
        out["split"] = splits.get(case.scenario_id, "")
        out["labels"] = [lab.to_dict() for q in case.questions for lab in by_question.get(q.sample_id, {}).values()]
        out["submitted"] = labels.submitted(conversation.id, case.scenario_id)
        out["agreement"] = None if hidden else case_agreement(case, by_question).to_dict()
        out["adjudications"] = [a.to_dict() for a in labels.adjudications(conversation.id, case.scenario_id)]
    doc["case_set"] = {"version": case_set_version(doc), "locked": labels.locked(conversation.id)}
    return doc

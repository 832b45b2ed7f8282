"""Helpers for the Annotate page: tables in, edits out, so the page stays layout.

The transcript is a `st.data_editor` whose checkbox columns are the annotation.
Each run applies the previous run's cell edits to the case, saves it and gives
the editor a fresh key, so the table always shows what is stored (no stale
edits replayed on top of a changed case).
"""
from __future__ import annotations

import functools
import json
from pathlib import Path

import pandas as pd
import streamlit as st

from engine.core.access import AccessDenied, Action
from engine.core.cases import Case, CaseQuestion
from engine.core.conversation import Conversation, Turn
from engine.core.errors import WorkbenchError
from engine.engines import engine_schema
from engine.eval.annotation import QuestionScore, Retriever, score_case
from engine.loaders import LoaderError
from engine.loaders.cases import case_set_version, export_document
from engine.store.annotations import AnnotationStore, ImportReport
from workbench import access
from workbench.model import DEMO_PATH, UPLOAD_LIMIT_BYTES, Workbench
from workbench.replay.progress import peer_with_progress
from workbench.text import md_code, md_escape, missing

DEMO_CASES = DEMO_PATH.with_name("cases.json")
ALL_SESSIONS = "All sessions"
_NONCE = "annotate_nonce"


class PageAnnotations(AnnotationStore):
    """The page's store: every write checks the signed-in role where it is made (a crafted widget event from a
    viewer's browser is refused here too) and is recorded under the signed-in name."""

    def _writing(self):
        access.require(Action.ANNOTATE)
        return super()._writing()


def annotation_store(wb: Workbench) -> AnnotationStore:
    """Cases in the workbench's database (a branch carries them over, see Store.branch)."""
    identity = access.current_identity()
    return PageAnnotations(wb.engine.store.engine, author=identity.name if identity else None)


def refused_flashed(action):
    """A callback whose refusal (`AccessDenied`) becomes the page's error message instead of a traceback."""
    @functools.wraps(action)
    def run(*args):
        try:
            return action(*args)
        except AccessDenied as exc:
            flash("error", md_escape(exc))
    return run


def bundled_cases(wb: Workbench) -> Path | None:
    """The demo's ready-made cases, offered only when the demo conversation is loaded."""
    return DEMO_CASES if wb.source_path.resolve() == DEMO_PATH.resolve() and DEMO_CASES.is_file() else None


def import_upload(store: AnnotationStore, name: str, data: bytes, conversation: Conversation) -> ImportReport:
    """Import an uploaded cases file; raises LoaderError (file, record, field) and writes nothing then."""
    if len(data) > UPLOAD_LIMIT_BYTES:
        raise LoaderError(name, f"file is {len(data) / 2**20:.1f} MB; the limit is {UPLOAD_LIMIT_BYTES // 2**20} MB")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise LoaderError(name, f"not UTF-8 text: {exc}") from exc
    return store.import_json(text, name, conversation)


def speakers(conversation: Conversation) -> list[str]:
    return list(conversation.speakers) or list(dict.fromkeys(t.speaker for t in conversation.turns))


def question_label(q: CaseQuestion) -> str:
    text = q.query_text.strip() or "(no query text yet)"
    return f"{q.sample_id} · {text[:70]}"


# -- the transcript editor -------------------------------------------------------------
def filter_turns(conversation: Conversation, session: str, text: str) -> list[Turn]:
    needle = text.strip().lower()
    return [t for t in conversation.turns
            if (session == ALL_SESSIONS or t.session == session)
            and (not needle or needle in t.text.lower() or needle in t.speaker.lower() or needle == t.id.lower())]


def editor_key(case: Case, question: CaseQuestion, session: str, text: str) -> str:
    """Rows are positional, so the key changes with anything that changes which turn a row is."""
    nonce = st.session_state.setdefault(_NONCE, 0)
    return f"annotate-turns|{case.scenario_id}|{question.sample_id}|{session}|{text.strip()}|{nonce}"


def apply_pending_edits(case: Case, question: CaseQuestion, rows: list[Turn], key: str) -> bool:
    """Apply the cell edits the editor under `key` holds from the last run; True if the case changed."""
    edits = (st.session_state.get(key) or {}).get("edited_rows") or {}
    changed = False
    for row, cells in edits.items():
        turn = rows[int(row)]
        if "in scenario" in cells:
            if cells["in scenario"]:
                case.include(turn)
            else:
                case.exclude(turn.id)
            changed = True
        for column, chain in (("evidence", False), ("chain", True)):
            if column in cells:
                case.mark(question.sample_id, turn, bool(cells[column]), chain=chain)
                changed = True
    if changed:
        st.session_state[_NONCE] = st.session_state.get(_NONCE, 0) + 1
    return changed


def turn_table(case: Case, question: CaseQuestion, rows: list[Turn]) -> pd.DataFrame:
    evidence = set(case.resolve(question.gold_evidence_keys))
    chain = set(case.resolve(question.gold_causal_structure.supporting_evidence_keys))
    return pd.DataFrame({
        "in scenario": [case.pointer_of(t.id) is not None for t in rows],
        "evidence": [t.id in evidence for t in rows],
        "chain": [t.id in chain for t in rows],
        "pointer": [case.pointer_of(t.id) or "" for t in rows],
        "turn": [t.id for t in rows],
        "speaker": [t.speaker for t in rows],
        "text": [t.text for t in rows],
    })


TURN_COLUMNS = {
    "in scenario": st.column_config.CheckboxColumn(
        "scenario", width=95, help="Part of this case's scenario (gets a pointer scenario_id:tNN). "
        "Unticking also removes the turn from every question's evidence and chain."),
    "evidence": st.column_config.CheckboxColumn(
        "evidence", width=95, help="gold_evidence_keys of the selected question"),
    "chain": st.column_config.CheckboxColumn(
        "chain", width=95, help="gold_causal_structure.supporting_evidence_keys of the selected question"),
    "pointer": st.column_config.TextColumn("pointer", width=150),
    "turn": st.column_config.TextColumn("turn id", width=70),
    "speaker": st.column_config.TextColumn("speaker", width=90),
    "text": st.column_config.TextColumn("text"),
}
READ_ONLY = ["pointer", "turn", "speaker", "text"]


def chosen_table(case: Case, question: CaseQuestion, conversation: Conversation) -> pd.DataFrame:
    """The question's evidence and chain turns, for reading them together."""
    by_id = {t.id: t for t in conversation.turns}
    evidence = set(question.gold_evidence_keys)
    chain = set(question.gold_causal_structure.supporting_evidence_keys)
    rows = [(ct, by_id[ct.turn_id]) for ct in case.turns if ct.pointer in evidence | chain]
    return pd.DataFrame({
        "pointer": [ct.pointer for ct, _ in rows],
        "turn id": [t.id for _, t in rows],
        "evidence": [ct.pointer in evidence for ct, _ in rows],
        "chain": [ct.pointer in chain for ct, _ in rows],
        "text": [f"{t.speaker}: {t.text}" for _, t in rows],
    })


# -- scoring ----------------------------------------------------------------------------
def retriever_names(wb: Workbench) -> tuple[str, str]:
    """The two retrievers scored side by side: the session's engine and its peer (naive RAG by default)."""
    main, peer = wb.schema.label, engine_schema(wb.default_peer()).label
    return (main, peer if peer != main else f"{peer} (peer)")


def retrievers(wb: Workbench, k: int) -> dict[str, Retriever]:
    """The engine as of the cursor, and a scratch peer engine over the same turns, for a fair side by side."""
    main, other = retriever_names(wb)
    peer = peer_with_progress(wb, wb.default_peer())
    return {main: lambda q: wb.view.retrieve(q, k=k).source_ids,
            other: lambda q: peer.retrieve(q, k=k).source_ids if peer is not None else []}


def score(wb: Workbench, case: Case, k: int) -> list[QuestionScore]:
    return score_case(case, retrievers(wb, k), k)


def score_names(scores: list[QuestionScore]) -> list[str]:
    """The retrievers in `scores`, in the order they were scored."""
    return list(dict.fromkeys(s.retriever for s in scores))


def score_table(case: Case, scores: list[QuestionScore]) -> pd.DataFrame:
    """One row per question: R@K and SCR per retriever side by side (None where not annotated), then misses."""
    k = scores[0].k if scores else 0
    names = score_names(scores)
    by = {(s.sample_id, s.retriever): s for s in scores}
    rows = []
    for q in case.questions:
        if not names or (q.sample_id, names[0]) not in by:
            continue
        row = {"sample_id": q.sample_id, "task_type": q.task_type}
        for name in names:
            s = by[(q.sample_id, name)]
            recall, scr = score_columns(k, name)
            row[recall], row[scr] = s.recall, s.scr
        row.update({f"{name} missed": ", ".join(by[(q.sample_id, name)].missed) for name in names})
        row["query_text"] = q.query_text
        rows.append(row)
    return pd.DataFrame(rows)


def score_columns(k: int, *names: str) -> list[str]:
    """Column titles of the metric columns of `score_table` for the named retrievers."""
    return [f"{name} {metric}@{k}" for name in names for metric in ("R", "SCR")]


def export_text(document: dict) -> str:
    return json.dumps(document, ensure_ascii=False, indent=2) + "\n"


def version_of(cases: list[Case], conversation: Conversation) -> str:
    return case_set_version(export_document(cases, conversation))


def store_choice(key: str, write) -> None:
    """Widget callback: write the widget's new value; a refusal or bad value becomes the page's error message
    (the page then sets the widget back to what is stored)."""
    try:
        write(st.session_state[key])
    except (AccessDenied, WorkbenchError, ValueError) as exc:
        flash("error", md_escape(exc))


def fmt(value: float | None) -> str:
    return missing(value, "{:.2f}")


# -- edits from widgets ----------------------------------------------------------------------
_CHAIN_FIELDS = ("dependency_type", "local_id", "attribution_target")


def update_question(case: Case, question: CaseQuestion, **values: str) -> bool:
    """Copy widget values onto the question (chain fields onto its causal structure); True if any differ."""
    changed = False
    for name, value in values.items():
        target = question.gold_causal_structure if name in _CHAIN_FIELDS else question
        if getattr(target, name) != value:
            setattr(target, name, value)
            changed = True
    return changed


def choices(options: tuple[str, ...] | list[str], current: str) -> list[str]:
    """Known options plus the stored value, so an imported value outside the list still shows."""
    return list(options) + ([current] if current not in options else [])


def pick(where, label: str, options: list[str], state_key: str, format_func, **kwargs) -> str | None:
    """A selectbox whose choice lives in `state_key`, not in the widget.

    A widget keyed by its key alone is still rebuilt when an option's label
    changes (an edited title or query text), which would jump back to the first
    option; rebuilding it from the remembered choice keeps the selection.
    """
    current = st.session_state.get(state_key)
    index = options.index(current) if current in options else 0
    choice = where.selectbox(label, options, index=index if options else None, format_func=format_func, **kwargs)
    st.session_state[state_key] = choice
    return choice


def flash(kind: str, text: str, detail: str = "") -> None:
    """A message for the next run (callbacks run before the page, which shows it at the top)."""
    st.session_state["annotate_flash"] = (kind, text, detail)


def show_flash(where) -> None:
    """Show the pending message; `detail` (file/record/field of an error) verbatim, not as markdown."""
    kind, text, detail = st.session_state.pop("annotate_flash", (None, "", ""))
    if kind == "error":
        where.error(text, icon=":material/error:")
    elif kind:
        where.success(text, icon=":material/check_circle:")
    if detail:
        where.code(detail, language=None, wrap_lines=True)


@refused_flashed
def create_case(store: AnnotationStore, conversation_id: str) -> None:
    sid = st.session_state.get("annotate_new_id", "").strip()
    title = st.session_state.get("annotate_new_title", "").strip()
    if store.get(conversation_id, sid):
        return flash("error", f"A case {md_code(sid)} already exists; pick another scenario_id.")
    try:
        case = Case(scenario_id=sid, conversation_id=conversation_id, title=title)
    except ValueError as exc:
        return flash("error", md_escape(exc))
    case.add_question()
    store.save(case)
    st.session_state["annotate_case"] = sid
    st.session_state["annotate_new_id"] = st.session_state["annotate_new_title"] = ""
    flash("success", f"Created case {md_code(sid)} with an empty question; tick turns in the transcript to add "
                     "evidence.")


@refused_flashed
def delete_case(store: AnnotationStore, conversation_id: str, scenario_id: str) -> None:
    store.delete(conversation_id, scenario_id)
    flash("success", f"Deleted case {md_code(scenario_id)}.")


@refused_flashed
def add_question(store: AnnotationStore, conversation_id: str, scenario_id: str) -> None:
    case = store.get(conversation_id, scenario_id)
    q = case.add_question()
    store.save(case)
    st.session_state[question_key(scenario_id)] = q.sample_id


@refused_flashed
def delete_question(store: AnnotationStore, conversation_id: str, scenario_id: str, sample_id: str) -> None:
    case = store.get(conversation_id, scenario_id)
    case.remove_question(sample_id)
    store.save(case)


@refused_flashed
def audit_gold(store: AnnotationStore, conversation: Conversation) -> None:
    """Make the gold-audit case of the loaded conversation (once)."""
    from engine.eval.gold_audit import AUDIT_CASE, audit_case, audit_conversations

    if store.get(conversation.id, AUDIT_CASE):
        st.session_state["annotate_case"] = AUDIT_CASE
        return flash("error", f"The case {md_code(AUDIT_CASE)} exists already: delete it to audit again.")
    flags = audit_conversations([conversation])
    if not flags:
        return flash("success", f"No question of {md_code(conversation.id)} is flagged.")
    store.save(audit_case(conversation, flags))
    st.session_state["annotate_case"] = AUDIT_CASE
    flash("success", f"{len({f.question_id for f in flags})} flagged question(s) in case {md_code(AUDIT_CASE)}: "
                     "label them, then adjudicate.")


def question_key(scenario_id: str) -> str:
    return f"annotate_question|{scenario_id}"


def handle_upload(store: AnnotationStore, upload, conversation: Conversation) -> bool:
    """Import an uploaded file once (the uploader keeps it across reruns); True if it was just imported."""
    done = st.session_state.setdefault("annotate_uploads", set())
    if upload is None or upload.file_id in done:
        return False
    done.add(upload.file_id)
    report_import(lambda: import_upload(store, upload.name, upload.getvalue(), conversation))
    return True


def import_bundled(store: AnnotationStore, path: Path, conversation: Conversation) -> None:
    report_import(lambda: store.import_json(path.read_text(encoding="utf-8"), path.name, conversation))


def report_import(run) -> None:
    """Run an import and leave its outcome for the page; a failure names file, record and field."""
    try:
        report = run()
    except LoaderError as exc:
        return flash("error", "Import failed: nothing was imported and the stored cases are unchanged.", str(exc))
    except AccessDenied as exc:
        return flash("error", md_escape(exc))
    if report.added:
        st.session_state["annotate_case"] = report.added[0]
    flash("success", f"Imported: {report.line()}.")

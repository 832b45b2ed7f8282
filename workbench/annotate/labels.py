"""The Annotate page's team tabs: my labels, agreement, adjudication (Streamlit glue over `engine.store.labels`).

Each annotator's widgets are keyed by the version of their label in the store, so after a save or an undo the
widgets are rebuilt from what is stored, never from a stale widget state.
"""
from __future__ import annotations

import pandas as pd
import streamlit as st

from engine.core.access import AccessDenied, Action
from engine.core.cases import DEPENDENCY_TYPES, Case
from engine.core.conversation import Conversation
from engine.core.labels import Label, majority, per_item
from engine.eval.agreement import Agreement, CaseAgreement, case_agreement
from engine.store.annotations import AnnotationStore
from engine.store.decision_labels import RELATIONS, DecisionLabels
from engine.store.labels import LabelError, LabelStore
from workbench import access
from workbench.text import md_code, md_escape, missing, table

_FLASH = "label_flash"
_NONCE = "label_nonce"


class PageLabels(LabelStore):
    """The page's label store: each write checks the signed-in role where it is made, under the signed-in name."""

    def check(self, action: Action) -> None:
        access.require(action)


def label_store(engine) -> LabelStore:
    identity = access.current_identity()
    return PageLabels(engine, author=identity.name if identity else None)


def flash(kind: str, text: str) -> None:
    st.session_state[_FLASH] = (kind, text)


def show_flash() -> None:
    kind, text = st.session_state.pop(_FLASH, (None, ""))
    if kind:
        getattr(st, kind)(text)


def _guarded(action, *args) -> None:
    try:
        action(*args)
    except (AccessDenied, LabelError, ValueError) as exc:
        flash("error", md_escape(exc))


def turn_options(case: Case, conversation: Conversation) -> dict[str, str]:
    """pointer -> what a picker shows: the pointer, the speaker and the start of the turn."""
    by_id = {t.id: t for t in conversation.turns}
    return {ct.pointer: f"{ct.pointer} · {by_id[ct.turn_id].speaker}: {by_id[ct.turn_id].text[:60]}"
            for ct in case.turns}


# -- my labels -----------------------------------------------------------------------------------------------
def my_labels(store: LabelStore, case: Case, conversation: Conversation, sample_id: str, who: str) -> None:
    """The signed-in annotator's own label of one question; saved as soon as a widget changes."""
    can = access.can(Action.LABEL)
    cid, sid = case.conversation_id, case.scenario_id
    mine = store.label(cid, sid, sample_id, who) or Label(sid, sample_id, who)
    options = turn_options(case, conversation)
    key = f"label|{sid}|{sample_id}|{who}|{mine.seq}|{st.session_state.get(_NONCE, 0)}|"
    q = case.question(sample_id)
    st.markdown(f"**{md_code(sample_id)}** · {md_escape(q.query_text or '(no query text yet)')}")
    left, right = st.columns(2, gap="large")
    evidence = left.multiselect("My evidence turns", list(options), default=list(mine.evidence),
                                format_func=options.get, key=key + "evidence", disabled=not can)
    chain = right.multiselect("My causal chain, in order (cause first)", list(options), default=list(mine.chain),
                              format_func=options.get, key=key + "chain", disabled=not can,
                              help="The order you pick the turns in is the chain's order.")
    answer = left.text_area("My gold answer", value=mine.gold_answer, key=key + "answer", height=68,
                            disabled=not can)
    dependency = right.selectbox("My dependency type", DEPENDENCY_TYPES,
                                 index=DEPENDENCY_TYPES.index(mine.dependency_type), key=key + "dependency",
                                 disabled=not can)
    if can and (tuple(evidence), tuple(chain), answer, dependency) != \
            (mine.evidence, mine.chain, mine.gold_answer, mine.dependency_type):
        try:
            store.save_label(case, sample_id, list(evidence), list(chain), answer, dependency)
        except (AccessDenied, LabelError) as exc:
            flash("error", md_escape(exc))
            st.session_state[_NONCE] = st.session_state.get(_NONCE, 0) + 1   # rebuild the widgets from the store
        st.rerun()
    if mine.seq:
        st.caption(f"Your label of {md_code(sample_id)}: version {mine.seq}, saved {md_escape(mine.at)}.")
    submitted = store.submitted(cid, sid)
    bar = st.columns([1, 1, 3], vertical_alignment="center")
    bar[0].button("Undo my last label change", key=f"label_undo|{sid}", icon=":material/undo:",
                  disabled=not can, on_click=_guarded, args=(_undo, store, cid, sid))
    bar[1].button("Submit my labels", key=f"label_submit|{sid}", icon=":material/send:", type="primary",
                  disabled=not can or who in submitted, on_click=_guarded, args=(_submit, store, cid, sid))
    bar[2].caption(f"Submitted: {md_escape(', '.join(submitted) or 'nobody yet')}"
                   + (" · adjudication is open" if store.adjudication_open(cid, sid) else "")
                   + ". You see the others' labels once you submit, or once a reviewer opens adjudication.")


def _undo(store: LabelStore, cid: str, sid: str) -> None:
    undone = store.undo(cid, sid)
    flash("info" if undone is None else "success", "Nothing of yours to undo in this case." if undone is None
          else f"Undid version {undone.seq} of your label of {md_code(undone.sample_id)}.")


def _submit(store: LabelStore, cid: str, sid: str) -> None:
    store.submit(cid, sid)
    flash("success", f"Submitted your labels of {md_code(sid)}: the other annotators' labels show now.")


# -- agreement ------------------------------------------------------------------------------------------------
def _fmt(a: Agreement) -> str:
    name = {"cohen_kappa": "κ", "krippendorff_alpha": "α"}.get(a.measure, "")
    return f"{name} {missing(a.value, '{:.2f}')}" if name else missing(None)


def agreement_summary(result: CaseAgreement) -> None:
    tiles = st.columns(3)
    for tile, (part, title) in zip(tiles, (("evidence", "Evidence picks"), ("chain", "Chain membership"),
                                           ("order", "Chain order"))):
        a = getattr(result, part)
        tile.metric(f"{title} · case", _fmt(a),
                    help=f"{len(a.annotators)} annotator(s), {a.items} item(s); observed agreement "
                         f"{missing(a.observed, '{:.2f}')}. Cohen's κ for two annotators, Krippendorff's α "
                         "for more; – where undefined (every rating alike).")


def disagreement_table(result: CaseAgreement) -> pd.DataFrame:
    """Questions with two or more labels, the most disagreement first."""
    return pd.DataFrame([{"sample_id": q.sample_id, "annotators": ", ".join(q.annotators),
                          "disagreement": round(q.disagreement, 2), "evidence": _fmt(q.evidence),
                          "chain": _fmt(q.chain), "order": _fmt(q.order)} for q in result.most_disagreed()])


def side_by_side(case: Case, conversation: Conversation, labels: dict[str, Label]) -> pd.DataFrame:
    """The case's transcript with each annotator's picks beside it: E for evidence, Cn for place n in the chain."""
    by_id = {t.id: t for t in conversation.turns}
    rows = []
    for ct in case.turns:
        turn = by_id[ct.turn_id]
        row = {"pointer": ct.pointer, "turn id": ct.turn_id}
        for name, lab in labels.items():
            marks = (["E"] if ct.pointer in lab.evidence else []) + \
                    ([f"C{lab.chain.index(ct.pointer) + 1}"] if ct.pointer in lab.chain else [])
            row[name] = " ".join(marks)
        row["text"] = f"{turn.speaker}: {turn.text}"
        rows.append(row)
    return pd.DataFrame(rows)


def agreement_tab(store: LabelStore, case: Case, conversation: Conversation, who: str) -> CaseAgreement | None:
    cid, sid = case.conversation_id, case.scenario_id
    if not store.sees_all(cid, sid, who):
        st.info("The other annotators' labels and the agreement show once you submit your labels of this case "
                "(**My labels**), or once a reviewer opens adjudication.")
        return None
    labels = store.labels(cid, sid)
    result = case_agreement(case, labels)
    agreement_summary(result)
    worst = disagreement_table(result)
    if worst.empty:
        st.caption("No question has labels from two annotators yet.")
        return result
    st.markdown("**Questions with the most disagreement** (share of evidence and chain items rated differently)")
    st.dataframe(table(worst), hide_index=True)
    pick = st.selectbox("Picks side by side", list(worst["sample_id"]), key=f"agreement_question|{sid}")
    st.dataframe(table(side_by_side(case, conversation, labels[pick])), hide_index=True)
    return result


# -- adjudication ------------------------------------------------------------------------------------------------
def adjudicate_tab(store: LabelStore, gold: AnnotationStore, case: Case, conversation: Conversation,
                   sample_id: str) -> None:
    can = access.can(Action.ADJUDICATE)
    cid, sid = case.conversation_id, case.scenario_id
    if not store.adjudication_open(cid, sid):
        st.button("Open adjudication", key=f"adjudicate_open|{sid}", icon=":material/gavel:", type="primary",
                  disabled=not can, on_click=_guarded, args=(store.open_adjudication, cid, sid),
                  help="Every annotator of this case sees everyone's labels from then on.")
        return
    state = store.state(cid, sid)
    st.caption(f"Adjudication opened by **{md_escape(state.adjudication_opened_by)}** at "
               f"{md_escape(state.adjudication_opened_at)}.")
    labels = store.labels(cid, sid).get(sample_id, {})
    if not labels:
        st.info(f"Nobody has labelled {md_code(sample_id)} yet.")
        return
    st.dataframe(table(side_by_side(case, conversation, labels)), hide_index=True)
    merged = majority(case, list(labels.values()), store.author)
    st.button(f"Accept the majority for {sample_id}", key=f"adjudicate_majority|{sid}|{sample_id}",
              type="primary", disabled=not can, on_click=_guarded,
              args=(_record, store, gold, case, merged))
    names = list(labels)
    options = turn_options(case, conversation)
    key = f"adjudicate|{sid}|{sample_id}|"
    with st.expander("Pick per item", icon=":material/checklist:"):
        st.multiselect("Gold evidence turns", list(options), default=list(merged.evidence),
                       format_func=options.get, key=key + "evidence", disabled=not can)
        pick = st.columns(3)
        pick[0].selectbox("Causal chain from", names, key=key + "chain", disabled=not can)
        pick[1].selectbox("Gold answer from", names, key=key + "answer", disabled=not can,
                          format_func=lambda n: f"{n}: {labels[n].gold_answer[:40]}")
        pick[2].selectbox("Dependency type from", names, key=key + "dependency", disabled=not can,
                          format_func=lambda n: f"{n}: {labels[n].dependency_type}")
        st.button("Save this gold", key=key + "save", disabled=not can, on_click=_guarded,
                  args=(_record_per_item, store, gold, case, list(labels.values()), key))
    done = [a for a in store.adjudications(cid, sid) if a.sample_id == sample_id]
    if done:
        last = done[-1]
        st.caption(f"Gold of {md_code(sample_id)} adjudicated by **{md_escape(last.reviewer)}** ({last.method}) at "
                   f"{md_escape(last.at)} from "
                   + md_escape(", ".join(f"{a} v{v}" for a, v in last.labels)) + ".")


def _record(store: LabelStore, gold: AnnotationStore, case: Case, adjudication) -> None:
    store.record_adjudication(adjudication, case, gold.save_within)
    flash("success", f"The gold of {md_code(adjudication.sample_id)} is now the {adjudication.method} of "
                     f"{len(adjudication.labels)} label(s).")


def _record_per_item(store, gold, case, labels, key: str) -> None:
    """Reads the picks as they are at the click (callback arguments are those of the last run)."""
    state = st.session_state
    _record(store, gold, case, per_item(case, labels, store.author, state[key + "evidence"], state[key + "chain"],
                                        state[key + "answer"], state[key + "dependency"]))


# -- decision labels ------------------------------------------------------------------------------------------------
class PageDecisionLabels(DecisionLabels):
    def check(self, action: Action) -> None:
        access.require(action)


def decision_store(engine) -> DecisionLabels:
    identity = access.current_identity()
    return PageDecisionLabels(engine, author=identity.name if identity else None)


def decision_labels_panel(store: DecisionLabels, conversation: Conversation) -> None:
    """Pick two turns of this session's conversation and say how the later relates to the earlier."""
    can = access.can(Action.LABEL)
    ids = [t.id for t in conversation.turns]
    shown = {t.id: f"{t.id} · {t.speaker}: {t.text[:70]}" for t in conversation.turns}
    pair = st.columns([3, 2, 3], vertical_alignment="bottom")
    pair[0].selectbox("This turn", ids, format_func=shown.get, key="decision_label_later", disabled=not can)
    pair[1].selectbox("…", list(RELATIONS), key="decision_label_relation", disabled=not can,
                      label_visibility="hidden")
    pair[2].selectbox("that turn", ids, format_func=shown.get, key="decision_label_earlier", disabled=not can)
    st.text_input("Note (optional)", key="decision_label_note", disabled=not can)
    bar = st.columns([1, 1, 1, 2])
    bar[0].button("Add decision label", key="decision_label_add", type="primary", disabled=not can,
                  on_click=_guarded, args=(_add_decision, store, conversation))
    bar[1].button("Undo my last decision label", key="decision_label_undo", disabled=not can,
                  on_click=_guarded, args=(store.undo, conversation.id))
    bar[2].download_button("Export decisions", data=store.overlay_lines(conversation.id),
                           file_name=f"{conversation.id}-decisions.jsonl", mime="application/jsonl",
                           icon=":material/download:", help="A decision overlay (docs/DECISIONS.md): `memwb bench "
                           "--dataset decisions FILE --decisions THIS`.")
    rows = store.labels(conversation.id)
    if rows:
        st.dataframe(table(pd.DataFrame([{"id": d.id, "kind": d.kind, "earlier": d.earlier, "later": d.later,
                                          "by": who, "at": at, "note": d.note} for d, who, at in rows])),
                     hide_index=True)


def _add_decision(store: DecisionLabels, conversation: Conversation) -> None:
    """Reads the pickers' values as they are at the click (callback arguments are those of the last run)."""
    state = st.session_state
    relation = state["decision_label_relation"]
    d = store.add(conversation, state["decision_label_later"], state["decision_label_earlier"], relation,
                  state.get("decision_label_note", ""))
    flash("success", f"Labelled {md_code(d.later)} {relation} {md_code(d.earlier)} ({d.kind}).")


def corrections_download(store: LabelStore, case: Case) -> None:
    """For a gold-audit case: its adjudicated questions as a corrections overlay (`memwb bench --gold-overlay`)."""
    from engine.eval.gold_audit import overlay_from_case, overlay_line

    if not any("audit" in q.metadata for q in case.questions):
        return
    adjudicated = {a.sample_id for a in store.adjudications(case.conversation_id, case.scenario_id)}
    lines = "".join(overlay_line(c) + "\n" for c in overlay_from_case(case, adjudicated, store.author))
    st.download_button("Corrections overlay", data=lines, file_name=f"{case.conversation_id}-corrections.jsonl",
                       mime="application/jsonl", icon=":material/download:", disabled=not lines,
                       key=f"corrections_download|{case.scenario_id}",
                       help=f"{len(adjudicated)} adjudicated question(s): confirmed where the gold stands, corrected "
                            "where the adjudicated gold differs.")

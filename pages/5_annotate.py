"""Annotate: SCDS-style diagnostic cases over the loaded conversation, scored against the memory."""
import streamlit as st

from engine.core.access import AccessDenied, Action
from engine.core.cases import DEPENDENCY_TYPES, TASK_TYPES
from engine.core.splits import SPLITS
from engine.eval.annotation import summarize
from engine.eval.team_export import team_document
from workbench import access
from workbench.annotate import cases as av
from workbench.annotate import labels as lv
from workbench.state import get_workbench, header
from workbench.text import MISSING, full_height, md_code, md_escape, table

wb = get_workbench()
header(wb)
conv = wb.conversation
store = av.annotation_store(wb)
team = lv.label_store(wb.engine.store.engine)
who = access.who()

st.subheader("Annotate · SCDS diagnostic cases")
st.caption("Cases in the style of SCDS, MemLoom's Synthetic Causal Diagnostic Suite. A case is a scenario cut out of "
           "this conversation: its turns get pointers `scenario_id:tNN`, and each "
           "question names its gold evidence and its causal chain (`gold_causal_structure`). Every change is saved "
           "to this session's database at once.")
if access.can(Action.LABEL) and not access.can(Action.ANNOTATE):
    st.info(f"Signed in as {md_escape(access.current_identity().label)}: you label each question under **My labels** "
            "(and decisions below); the other annotators' labels show once you submit. A reviewer edits the gold "
            "and adjudicates.", icon=":material/edit_note:")
else:
    access.read_only_note(Action.ANNOTATE, "every case and score them")
locked = not access.can(Action.ANNOTATE)           # the store refuses a viewer's writes; the widgets say so
messages = st.container()
av.show_flash(messages)
with messages:
    lv.show_flash()

cases = store.cases(conv.id)
ids = [c.scenario_id for c in cases]
titles = {c.scenario_id: c.title for c in cases}

row = st.container(horizontal=True, vertical_alignment="bottom")    # buttons as wide as their labels
bar = [row.container(width="stretch")] + [row.container(width="content") for _ in range(3)]
sid = av.pick(bar[0], "Case", ids, "annotate_case", placeholder="No cases yet",
              format_func=lambda s: f"{s} · {titles[s]}" if titles.get(s) else s)
with bar[1].popover("New case", icon=":material/add:", width="content"):
    st.text_input("scenario_id", key="annotate_new_id", placeholder="e.g. commute", disabled=locked,
                  help="Letters, digits, '_', '.', '-'; it prefixes every turn pointer and cannot change later.")
    st.text_input("title", key="annotate_new_title", disabled=locked)
    st.button("Create case", key="annotate_create", on_click=av.create_case, args=(store, conv.id), type="primary",
              disabled=locked)
with bar[2].popover("Import", icon=":material/upload:", width="content"):
    upload = st.file_uploader("Cases JSON (format: engine/loaders/cases.py)", type=["json"], key="annotate_upload",
                              disabled=locked)
    if conv.questions:
        st.button("Audit this conversation's gold", key="annotate_audit", on_click=av.audit_gold, args=(store, conv),
                  disabled=locked, help="A case of the questions whose gold looks wrong (`memwb audit-gold`), for "
                                        "annotators to confirm or correct; adjudicated, it exports as a "
                                        "corrections overlay.")
    demo = av.bundled_cases(wb)
    if demo:
        st.button("Load the bundled demo cases", key="annotate_demo", on_click=av.import_bundled,
                  args=(store, demo, conv), disabled=locked)
if av.handle_upload(store, upload, conv):
    st.rerun()
bar[3].download_button("Export", data=av.export_text(team_document(cases, conv, team, who)),
                       file_name=f"{conv.id}-cases.json", mime="application/json", icon=":material/download:",
                       disabled=not cases, width="content",
                       help="The gold cases with every annotator's label, the agreement, the adjudications and "
                            "the case set's version.")

with st.expander("Decision labels · how one turn relates to another, for a decision set", icon=":material/link:"):
    lv.decision_labels_panel(lv.decision_store(wb.engine.store.engine), conv)

if sid is None:
    st.info("No cases for this conversation yet: create one with **New case**, or **Import** a cases file"
            + (" (the bundled demo has two ready-made cases)." if av.bundled_cases(wb) else "."))
    st.stop()

case = next(c for c in cases if c.scenario_id == sid)
head = st.columns([3, 1], vertical_alignment="bottom")
title = head[0].text_input("Title", value=case.title, key=f"annotate_title|{sid}", disabled=locked)
if title != case.title:
    case.title = title
    store.save(case)
with head[1].popover("Delete case", icon=":material/delete:", width="stretch"):
    st.button(f"Delete case {md_escape(sid)} and its questions", key="annotate_delete_case", type="primary",
              on_click=av.delete_case, args=(store, conv.id, sid), disabled=locked)
authors = store.last_authors(conv.id, sid)
meta_row = st.container(horizontal=True, vertical_alignment="bottom")        # the toggle as wide as its label
meta = [meta_row.container(width=200), meta_row.container(width="content"), meta_row.container(width="stretch")]
split_key = f"annotate_split|{sid}"
st.session_state[split_key] = team.splits(conv.id).get(sid, "")         # the widget shows what is stored
meta[0].selectbox("Split", ["", *SPLITS], key=split_key, format_func=lambda s: s or "(none)", disabled=locked,
                  on_change=av.store_choice, args=(split_key, lambda v: team.set_split(conv.id, sid, v)))
st.session_state["annotate_lock_test"] = "test" in team.locked(conv.id)
meta[1].toggle("Test split locked", key="annotate_lock_test", disabled=not access.can(Action.ADJUDICATE),
               on_change=av.store_choice, args=("annotate_lock_test", lambda v: team.lock(conv.id, "test", v)),
               help="Tuning code refuses the test cases of an export whose test split is locked.")
meta[2].caption(f"Case set version {md_code(av.version_of(cases, conv))}"
                + (f" · case last changed by **{md_escape(authors[''])}**" if "" in authors else ""))

tab_annotate, tab_mine, tab_agree, tab_adjudicate, tab_score = st.tabs(
    ["Questions & evidence", "My labels", "Agreement", "Adjudicate", "Score"])

with tab_annotate:
    qrow = st.container(horizontal=True, vertical_alignment="bottom")
    qbar = [qrow.container(width="stretch"), qrow.container(width="content"), qrow.container(width="content")]
    labels = {q.sample_id: av.question_label(q) for q in case.questions}
    sample = av.pick(qbar[0], "Question", list(labels), av.question_key(sid), format_func=labels.get)
    qbar[1].button("Add question", key="annotate_add_question", icon=":material/add:", width="content",
                   on_click=av.add_question, args=(store, conv.id, sid), disabled=locked)
    qbar[2].button("Delete question", key="annotate_delete_question", icon=":material/delete:", width="content",
                   disabled=sample is None or locked,
                   on_click=av.delete_question, args=(store, conv.id, sid, sample))
    if sample is None:
        st.info("This case has no questions: **Add question** to start annotating.")
    else:
        q = case.question(sample)
        chain = q.gold_causal_structure
        upper, lower = st.container(), st.container()

        with lower:  # filled first: ticks from the last run are stored before the fields above show them
            st.markdown("**Transcript** · tick *evidence* for `gold_evidence_keys`, *chain* for the causal "
                        "chain's `supporting_evidence_keys`, *scenario* for context turns")
            filt = st.columns([1, 3])
            session = filt[0].selectbox("Session", [av.ALL_SESSIONS, *conv.sessions], key="annotate_session")
            needle = filt[1].text_input("Find text", key="annotate_find", placeholder="word, speaker or turn id")
            rows = av.filter_turns(conv, session, needle)
            key = av.editor_key(case, q, session, needle)
            if av.apply_pending_edits(case, q, rows, key):
                store.save(case)
                key = av.editor_key(case, q, session, needle)
            st.data_editor(av.turn_table(case, q, rows), key=key, hide_index=True,
                           disabled=True if locked else av.READ_ONLY, column_config=av.TURN_COLUMNS,
                           height=full_height(len(rows)))
            st.caption(f"{len(rows)} of {len(conv.turns)} turns shown · {len(case.turns)} in the scenario")

        with upper:
            field_key = f"annotate|{sid}|{sample}|"
            left, right = st.columns(2, gap="large")
            with left:
                st.markdown(f"**Question** · {md_code(q.sample_id)}"
                            + (f" · last changed by **{md_escape(authors[sample])}**" if sample in authors else ""))
                query_text = st.text_area("query_text", value=q.query_text, key=field_key + "query_text",
                                          height=68, disabled=locked)
                gold_answer = st.text_area("gold_answer", value=q.gold_answer, key=field_key + "gold_answer",
                                           height=68, disabled=locked)
                pair = st.columns(2)
                task_options = av.choices(TASK_TYPES, q.task_type)
                task_type = pair[0].selectbox("task_type", task_options, index=task_options.index(q.task_type),
                                              key=field_key + "task_type", disabled=locked)
                viewers = av.choices(["", *av.speakers(conv)], q.viewer_id)
                viewer_id = pair[1].selectbox("viewer_id", viewers, index=viewers.index(q.viewer_id),
                                              key=field_key + "viewer_id", format_func=lambda v: v or "(none)",
                                              disabled=locked,
                                              help="The participant who asks (whose view of memory is tested).")
            with right:
                st.markdown("**Causal chain** · `gold_causal_structure`")
                pair = st.columns(2)
                dependency_type = pair[0].selectbox("dependency_type", DEPENDENCY_TYPES,
                                                    index=DEPENDENCY_TYPES.index(chain.dependency_type),
                                                    key=field_key + "dependency_type", disabled=locked)
                local_id = pair[1].text_input("local_id", value=chain.local_id, key=field_key + "local_id",
                                              disabled=locked)
                attribution_target = st.text_input(
                    "attribution_target", value=chain.attribution_target, key=field_key + "attribution_target",
                    disabled=locked,
                    help="What the chain explains, usually the pointer of the effect turn (e.g. commute:t80).")
                if av.update_question(case, q, query_text=query_text, gold_answer=gold_answer,
                                      task_type=task_type, viewer_id=viewer_id, dependency_type=dependency_type,
                                      local_id=local_id, attribution_target=attribution_target):
                    store.save(case)
                st.markdown(f"**Picked turns** · evidence {len(q.gold_evidence_keys)} · "
                            f"chain {len(chain.supporting_evidence_keys)}")
                picked = av.chosen_table(case, q, conv)
                if picked.empty:
                    st.caption("None yet: tick turns in the transcript below.")
                else:
                    st.dataframe(table(picked), hide_index=True)

question_ids = [q.sample_id for q in case.questions]
titled = {q.sample_id: av.question_label(q) for q in case.questions}
with tab_mine:
    if question_ids:
        mine = av.pick(st, "Question to label", question_ids, f"label_question|{sid}", format_func=titled.get)
        lv.my_labels(team, case, conv, mine, who)
with tab_agree:
    lv.agreement_tab(team, case, conv, who)
with tab_adjudicate:
    access.read_only_note(Action.ADJUDICATE, "the labels once adjudication is open")
    if question_ids:
        judged = av.pick(st, "Question to adjudicate", question_ids, f"adjudicate_question|{sid}",
                         format_func=titled.get)
        lv.adjudicate_tab(team, store, case, conv, judged)
    lv.corrections_download(team, case)

with tab_score:
    if wb.cursor < wb.total_turns:
        note = st.columns([4, 1], vertical_alignment="center")
        note[0].warning(f"Memory holds {wb.cursor} of {wb.total_turns} turns (the cursor); later turns cannot be "
                        "retrieved yet.")
        if note[1].button("Ingest to the end", key="annotate_ingest", width="stretch"):
            try:
                moved = access.own_session_before_ingest(wb)
            except AccessDenied as exc:
                av.flash("error", md_escape(exc))
            else:
                if moved:
                    av.flash("success", md_escape(moved))
                with st.spinner(f"Ingesting to turn {wb.total_turns}…"):
                    wb.jump(wb.total_turns)
            st.rerun()
    controls = st.columns([1, 1, 4], vertical_alignment="bottom")
    k = controls[0].number_input("K (top-K turns)", min_value=1, max_value=50, value=5, key="annotate_k")
    if controls[1].button("Score", key="annotate_score", type="primary", width="stretch"):
        with st.spinner("Retrieving for every question…"):
            st.session_state["annotate_scores"] = (sid, wb.cursor, av.score(wb, case, int(k)))
    stored = st.session_state.get("annotate_scores")
    if stored and stored[0] == sid:
        _, turn, scores = stored
        k_used = scores[0].k if scores else int(k)
        names = av.score_names(scores)
        main, peer = (names + ["", ""])[:2]
        st.caption(f"Scored at turn {turn} of {wb.total_turns}: {main} as of that turn, {peer} in a scratch database "
                   f"holding the same {turn} turns. R@{k_used}: share of gold evidence turns in the top {k_used}; "
                   f"SCR@{k_used}: 1 if every turn of the causal chain is in the top K. {MISSING}: not annotated.")
        summary = summarize(scores)
        tiles = st.columns(max(1, 2 * len(names)))
        for i, name in enumerate(names):
            result = summary.get(name, {})
            tiles[2 * i].metric(f"{name} · mean R@{k_used}", av.fmt(result.get("recall")),
                                help=f"over {result.get('recall_n', 0)} question(s) with gold evidence")
            tiles[2 * i + 1].metric(f"{name} · mean SCR@{k_used}", av.fmt(result.get("scr")),
                                    help=f"over {result.get('scr_n', 0)} question(s) with a causal chain")
        st.dataframe(table(av.score_table(case, scores).round(2)), hide_index=True)
        unscored = [q.sample_id for q in case.questions if not q.query_text.strip()]
        if unscored:
            st.caption(f"Not scored (no query_text): {md_escape(', '.join(unscored))}")
    else:
        main, peer = av.retriever_names(wb)
        st.caption(f"Press **Score** to retrieve for every question of this case with {main} and {peer}.")

"""Benchmark: open (or run) a `memwb bench` result and compare its systems round by round, per category, by
latency and memory size; then read any question's ranked results and open a miss on the Retrieval page.

The page reads only the result file (docs/BENCHMARK_FORMAT.md) and, to open a miss, the session database
its task ran in."""
from __future__ import annotations

from pathlib import Path

import streamlit as st

from engine.core.access import AccessDenied, Action
from engine.engines import engine_schema, known_engines
from engine.loaders import LoaderError
from engine.session import SessionError
from engine.store.data_paths import PathRefused, resolve_data_path
from engine.store.log_store import StoreError
from engine.store.workspace import workspace_dir
from workbench import access
from workbench.benchmark import checks as bc
from workbench.benchmark import decisions as bd
from workbench.benchmark import misses as bm
from workbench.benchmark import questions as bq
from workbench.benchmark import run as bench_run
from workbench.benchmark import view as bv
from workbench.benchmark.llm_costs import bench_costs_section
from workbench.benchmark.result import BenchFileError, BenchResult, load_result, workspace_results
from workbench.model import Workbench
from workbench.state import get_workbench, header, new_embedder, set_workbench
from workbench.text import full_height, md_code, md_escape, table

RETRIEVAL_PAGE = Path(__file__).resolve().parent / "4_retrieval.py"
WORKSPACE, A_PATH = "Workspace runs", "A file path"
PER_RESULT = ("bench_systems", "bench_metric", "bench_miss_category", "bench_q_systems", "bench_q_categories",
              "bench_q_misses", "bench_q_changed", "bench_q_pick", "bench_q_other",
              "bench_against")              # choices that belong to the result shown

wb = get_workbench()
header(wb)
st.subheader("Benchmark")
benchmarks = workspace_dir() / "benchmarks"


@st.cache_resource(max_entries=4, show_spinner=False)
def _load(path: str, stamp: float) -> BenchResult:
    return load_result(path)


@st.cache_data(max_entries=32, show_spinner=False)
def _paired(path: str, stamp: float, metric: str, against: str, _result: BenchResult):
    """The paired table of one result file as it was at `stamp`: its bootstraps take a few tenths of a second on
    an ablation run, too much to repeat on every rerun of the page."""
    return bc.paired_frame(_result, metric, against)


@st.cache_data(max_entries=8, show_spinner=False)
def _paper(path: str, stamp: float, _result: BenchResult):
    return bc.reproduction_frame(_result)


def open_result(text: str) -> BenchResult | None:
    """The result a path names, read only from the data folders (a typed path is refused before it is read)."""
    try:
        path = resolve_data_path(text, "result file")
        return _load(str(path), path.stat().st_mtime if path.is_file() else 0.0)
    except (BenchFileError, PathRefused) as exc:
        st.error(md_escape(exc), icon=":material/error:")
        return None


def decisions_section(result: BenchResult, systems: list[str]) -> None:
    """A decision set: per system its per-kind figures and confusion, then any missed or false decision with
    what became of its pair ("why wasn't this consolidated?")."""
    st.markdown("#### Decisions per kind")
    st.caption("Each labelled pair of the decision set (docs/DECISIONS.md) against the decisions the system applied. "
               "Precision counts a decision of a kind on a labelled pair not labelled with it as false. The fate of "
               "a gold pair: " + "; ".join(f"**{md_escape(f)}**: {md_escape(h)}" for f, h in bd.FATE_HELP.items()))
    system = st.selectbox("System", systems, key="bench_dec_system")
    st.dataframe(table(bd.kinds_frame(result, system)), hide_index=True, width="stretch")
    negatives = bd.negatives_frame(result, system)
    if not negatives.empty:
        st.dataframe(table(negatives), hide_index=True, width="stretch")
    left, right = st.columns([3, 2])
    with left:
        st.markdown("##### Labelled pairs against the decisions made")
        st.dataframe(table(bd.confusion_frame(result, system)), hide_index=True, width="stretch")
    with right:
        st.markdown("##### Reliability of the confidences")
        st.plotly_chart(bd.reliability_figure(result, system), width="stretch", key="bench_dec_reliability")
    st.markdown("#### Why wasn't this consolidated?")
    f1, f2 = st.columns([2, 2])
    show = f1.radio("Pairs", [bd.MISSED, bd.FALSE, bd.ALL], horizontal=True, key="bench_dec_show",
                    format_func=lambda s: {bd.MISSED: "missed decisions", bd.FALSE: "false decisions",
                                           bd.ALL: "every labelled pair"}[s])
    kinds = sorted({v["kind"] for v in result.data["decisions"][system]["verdicts"]})
    kind = f2.selectbox("Gold kind", ["", *kinds], key="bench_dec_kind",
                        format_func=lambda k: k or "every kind")
    rows = bd.verdicts_frame(result, system, show, kind)
    if rows.empty:
        st.caption("No labelled pair of this kind here.")
        return
    picked = st.dataframe(table(rows), hide_index=True, width="stretch", key="bench_dec_table",
                          on_select="rerun", selection_mode="single-row")
    chosen = picked.selection.rows[0] if picked.selection.rows else 0
    v = bd.verdict(result, system, int(rows.iloc[chosen]["#"]))
    st.markdown(f"**{md_escape(v['id'])}** · gold **{md_escape(v['kind'])}** · fate **{md_escape(v['fate'])}**"
                + (f" · {md_escape(v['note'])}" if v.get("note") else ""))
    for said in v.get("texts", []):
        st.markdown(f"> {md_escape(said)}")
    steps = bd.steps_frame(v)
    if steps.empty:
        st.caption("No deciding call ever had both turns before it: the pair was never a candidate.")
    else:
        st.dataframe(table(steps), hide_index=True, width="stretch",
                     column_config={"why": st.column_config.TextColumn("why", width="large")})


def run_form() -> None:
    """Run a benchmark in this process; its result becomes the one shown."""
    choices = bench_run.data_choices()
    with st.form("bench_run_form"):
        c1, c2, c3, c4 = st.columns([3, 3, 2, 1])
        choice = c1.selectbox("Data", choices, format_func=lambda c: f"{c.label} · {c.dataset}", key="bench_run_data")
        engines = c2.multiselect("Engines", known_engines(), default=known_engines(), key="bench_run_engines",
                                 format_func=lambda n: engine_schema(n).label)
        protocol = c3.radio("Protocol", ["streaming", "static"], horizontal=True, key="bench_run_protocol")
        rounds = c4.number_input("Rounds", 1, 20, 5, key="bench_run_rounds")
        names = sorted({a for n in known_engines() for a in engine_schema(n).ablations})
        ablations = st.multiselect("Ablations (each a system of its own)", names, key="bench_run_ablations")
        go = st.form_submit_button("Run benchmark", type="primary", key="bench_run_go",
                                   disabled=not access.can(Action.BENCHMARK))
    if not go:
        return
    try:
        access.require(Action.BENCHMARK)
    except AccessDenied as exc:
        st.error(md_escape(exc), icon=":material/block:")
        return
    if not engines:
        st.error("Choose at least one engine.")
        return
    bar = st.progress(0.0, text="Starting…")

    def progress(p) -> None:
        bar.progress(min(1.0, p.done / max(1, p.total)), text=f"{md_escape(p.label)} · {p.done} / {p.total}")

    try:
        path = bench_run.run_benchmark(choice, engines, ablations, protocol, rounds, progress)
    except Exception as exc:                 # the runner's own errors name the task and inputs
        st.error(f"The benchmark stopped: {md_escape(exc)}", icon=":material/error:")
        return
    if path.parent.parent == benchmarks:            # a run folder under the workspace's benchmarks/
        st.session_state["bench_mode"], st.session_state["bench_run"] = WORKSPACE, str(path)
    else:
        st.session_state["bench_mode"], st.session_state["bench_path"] = A_PATH, str(path)
    st.rerun()


with st.expander("Run a benchmark", icon=":material/play_arrow:"):
    run_form()

runs = workspace_results(benchmarks)
where, which = st.columns([1, 3], vertical_alignment="bottom")
mode = where.radio("Result", [WORKSPACE, A_PATH], horizontal=True, key="bench_mode",
                   help=f"Runs are folders under {benchmarks} (memwb bench's default --out).")
if mode == WORKSPACE:
    if not runs:
        st.info(f"No benchmark in {md_code(benchmarks)} yet: run one above, or `memwb bench …`, or open a file path.")
        st.stop()
    names = [str(p) for p in runs]
    if st.session_state.get("bench_run") not in names:
        st.session_state["bench_run"] = names[0]
    chosen = which.selectbox("Run", names, key="bench_run",
                             format_func=lambda p: bv.result_label(Path(p), benchmarks))
else:
    chosen = which.text_input("Result file", key="bench_path", placeholder="/path/to/result.json (or its folder)")
    if not chosen.strip():
        st.info("Type the path of a result.json (memwb bench's --out folder holds one).")
        st.stop()
result = open_result(chosen)
if result is None:
    st.stop()
if st.session_state.get("bench_shown") != str(result.path):  # another result: its own systems, metrics, questions
    for key in PER_RESULT:
        st.session_state.pop(key, None)
    st.session_state["bench_shown"] = str(result.path)

st.caption(md_escape(bv.run_caption(result)) + f" · {md_code(result.data.get('command', ''))}")
for task in result.failed_tasks():
    err = task["error"]
    st.warning(f"Task {md_code(task['conversation'])} × {md_code(task['system'])} failed: "
               f"{md_escape(err.get('type', '') if isinstance(err, dict) else '')} "
               f"{md_escape(err.get('message', err) if isinstance(err, dict) else err)}", icon=":material/warning:")

systems = st.multiselect("Systems", result.systems, default=result.systems, key="bench_systems")
if not systems:
    st.info("Choose at least one system.")
    st.stop()
st.dataframe(table(bv.summary_frame(result, systems).round(3)), hide_index=True, width="stretch")
if bd.decision_systems(result):
    decisions_section(result, [s for s in systems if s in bd.decision_systems(result)])
    st.stop()
if any(t.get("replayed_with") for t in result.tasks):
    st.caption("**replay**: a retrieval-only ablation is asked at every checkpoint on its host's replay, with its own "
               "settings (`tasks[].replayed_with`); its seconds are its questions only.")

st.markdown("#### Per-round curves")
st.caption("Each round re-asks every question visible so far. Overall: all of them; fixed cohort: the questions "
           "visible since round 1, so the curve shows memory ageing rather than a changing question mix.")
st.plotly_chart(bv.curves_figure(result, systems, "overall"), width="stretch", key="bench_curves_overall")
st.plotly_chart(bv.curves_figure(result, systems, "cohort"), width="stretch", key="bench_curves_cohort")

metric = st.selectbox("Metric for the category bars, the trade-off and hit/miss", result.metrics, key="bench_metric")
left, right = st.columns(2)
with left:
    st.markdown(f"#### By category at the last round · {md_escape(metric)}")
    st.plotly_chart(bv.category_figure(result, systems, metric), width="stretch", key="bench_categories")
with right:
    st.markdown(f"#### {md_escape(metric)} vs query latency")
    st.plotly_chart(bv.tradeoff_figure(result, systems, metric), width="stretch", key="bench_tradeoff")

stamp = result.path.stat().st_mtime
choices = bc.against_choices(result)
ablated = bc.FULL_SYSTEMS in choices
if len(result.systems) > 1:
    st.markdown(f"#### Paired differences · {md_escape(metric)}")
    st.caption("Each system beside another on the same questions (meetings for boundaries) at the last round: the "
               "difference, its 95% paired-bootstrap interval, and how many questions it scored higher, lower and "
               "the same on. When the interval holds 0 the run cannot tell the two apart: read the questions that "
               "changed, not the sign.")
    against = st.columns([1, 2])[0].selectbox("Against", choices, key="bench_against")
    paired = _paired(str(result.path), stamp, metric, against, result)
    if paired is None:
        st.caption("No question (or meeting) was scored by both.")
    else:
        st.dataframe(table(paired), hide_index=True, width="stretch")

if any((result.summary.get(s) or {}).get("misses") for s in systems):
    st.markdown("#### Where the misses were lost (last round)")
    st.caption("Each gold turn of each question followed through the system's memory: found in the top k, never "
               "stored, consolidated off the surface and not recovered, on the surface but never reached (below "
               "the seed cut or past the budget), or a candidate ranked below k. Compare an ablation with its "
               "full system to see where the recall it loses goes.")
    cat_keys = sorted({k for s in systems for k in ((result.summary.get(s) or {}).get("misses") or {})
                       .get("by_category", {})}, key=bv.category_sort_key)
    miss_cat = st.selectbox("Category", [bm.ALL_CATEGORIES, *cat_keys], key="bench_miss_category",
                            format_func=lambda c: "all categories" if c == bm.ALL_CATEGORIES
                            else result.category_label(c))
    st.plotly_chart(bm.misses_figure(result, systems, miss_cat), width="stretch", key="bench_misses")
    st.dataframe(table(bm.misses_frame(result, systems)), hide_index=True, width="stretch")

if any((result.summary.get(s) or {}).get("chain_links") for s in systems):
    st.markdown("#### How the causal chains' links were held (last round)")
    st.caption("Each step of each causal chain question's gold chain (cause turn → effect turn), looked up in the "
               "system's memory: a causal relation citing both turns (a why-question can walk it), one joining "
               "their nodes but citing other records, both turns in one node, a turn not yet consolidated (asked "
               "before the offline process curated it), or no relation. A chain held whole can still rank outside "
               "the top k; a chain with an unlinked step needs both turns found on their own.")
    st.dataframe(table(bm.chain_links_frame(result, systems)), hide_index=True, width="stretch")

st.markdown("#### Latency by stage (p50, last round)")
left, right = st.columns(2)
left.plotly_chart(bv.latency_figure(result, systems, "insert"), width="stretch", key="bench_latency_insert")
right.plotly_chart(bv.latency_figure(result, systems, "query"), width="stretch", key="bench_latency_query")

st.markdown("#### Construction cost per conversation")
costs = bv.construction_frame(result, systems)
if costs.empty:
    st.caption("This result has no construction figures (memwb bench writes them per system since they were added).")
else:
    st.caption("What building each conversation's memory cost in LLM use: the engine's own calls while ingesting "
               "and consolidating, answering excluded (mean over conversations; tokens as the backend reports them, "
               "estimated by the offline backend).")
    left, right = st.columns([2, 3])
    left.dataframe(table(costs), hide_index=True, width="stretch")
    right.plotly_chart(bv.construction_figure(result, systems), width="stretch", key="bench_construction")

st.markdown("#### Memory growth per round")
st.plotly_chart(bv.memory_figure(result, systems), width="stretch", key="bench_memory")

if result.boundaries:
    st.markdown("#### Event boundaries (QMSum topic spans)")
    st.caption("Mean over meetings; lower is better. ΔB: boundaries found minus gold (positive: fragmentation, "
               "negative: over-merging). fixed-50 is the fixed-window baseline.")
    st.dataframe(table(bv.boundaries_frame(result)), hide_index=True, width="stretch")

paper = _paper(str(result.path), stamp, result)
if paper is not None:
    st.markdown("#### Paper check")
    st.caption("The engine's own paper figures that this run measures, beside the project's. ↓: lower is better. "
               "Absolute values differ (other models, prompts and data handling); what should hold is the "
               "direction: a variant the paper found worse than its full system should be worse here too (✓), and only "
               "a difference whose 95% paired-bootstrap interval leaves out 0 says anything (else: within noise). "
               "An absolute figure (a graph's size, a construction cost) has no variant: read it as an order of "
               "magnitude. `memwb reproduce ENGINE` runs every dataset the paper rows need.")
    st.dataframe(table(paper), hide_index=True, width="stretch", height=full_height(len(paper)))

bench_costs_section(result)

# -- questions -------------------------------------------------------------------------------------------------
st.markdown("#### Questions")
f1, f2, f3, f4 = st.columns([3, 3, 1, 1.6], vertical_alignment="bottom")
shown_systems = f1.multiselect("System", systems, default=systems, key="bench_q_systems")
keys = sorted({str(q.get("category")) for q in result.questions})
cats = f2.multiselect("Category", keys, key="bench_q_categories", format_func=result.category_label,
                      placeholder="all categories")
misses = f3.checkbox("Misses only", key="bench_q_misses")
changed = f4.checkbox("Ablation changed", key="bench_q_changed", disabled=not ablated,
                      help="Only the questions an ablation scored differently from its full system on "
                           f"{metric} (last round), each beside the full system's record.")
records = bq.filtered_questions(result, bq.QuestionFilter(tuple(shown_systems), tuple(cats), misses, metric,
                                                          changed and ablated))
st.caption(f"{len(records)} of {len(result.questions)} question records. A miss: {md_escape(metric)} below 1 at "
           "the question's last asking. Select a row to read it below.")
TABLE = "bench_q_table"


def picked_row() -> None:
    rows = st.session_state[TABLE].selection.rows
    if rows:
        st.session_state["bench_q_pick"] = bq.question_key(records[rows[0]]) + (records[rows[0]]["system"],)


st.dataframe(table(bq.questions_frame(result, records, metric)), hide_index=True, width="stretch", key=TABLE,
             on_select=picked_row, selection_mode="single-row",
             column_config={"question": st.column_config.TextColumn("question", width="large")})
if not records:
    st.stop()

picks = [bq.question_key(q) + (q["system"],) for q in records]
if st.session_state.get("bench_q_pick") not in picks:
    st.session_state["bench_q_pick"] = picks[0]
by_pick = dict(zip(picks, records))
ask, beside = st.columns([4, 1])
pick = ask.selectbox("Question", picks, key="bench_q_pick",
                     format_func=lambda p: f"{p[2]} · {p[0]} · {p[1]} · {by_pick[p]['question']}"
                                           f"{' · miss' if bq.is_miss(by_pick[p], metric) else ''}")
record = by_pick[pick]
k = result.ks[0]
others = [s for s in result.systems if s != record["system"]] or [record["system"]]
if st.session_state.get("bench_q_other") not in others:
    st.session_state["bench_q_other"] = others[0]
other = beside.selectbox("Beside it", others, key="bench_q_other")
st.markdown(f"**Question** · {md_escape(record['question'])}  \n**Gold** · {md_escape(', '.join(record['gold']))}"
            f" · **asked at turn** {record['turn']} of {md_code(record['conversation'])}")


def open_on_retrieval(rec: dict) -> None:
    """Reopen the task's session database at the question's turn, ask the question there, go to Retrieval."""
    db = result.session_db(rec["conversation"], rec["system"])
    if db is None:
        st.error(f"The result names no session database for {md_code(rec['conversation'])} × "
                 f"{md_code(rec['system'])}.")
        return
    try:
        db = resolve_data_path(db, "session database")         # a result file names it: the same rule applies
        opened = Workbench.resume(db, embedder=new_embedder())
    except (PathRefused, SessionError, LoaderError, StoreError, ValueError) as exc:
        st.error(f"Could not open {md_code(db)}: {md_escape(exc)}. The open session is unchanged.",
                 icon=":material/error:")
        return
    if rec["turn"] > opened.head:
        st.error(f"{md_code(db.name)} holds {opened.head} turns, fewer than the question's turn {rec['turn']}.")
        return
    opened.jump(rec["turn"])
    set_workbench(opened)
    st.session_state.update(bq.retrieval_request(rec, opened.conversation.questions, k))
    st.switch_page(RETRIEVAL_PAGE)


for col, system in zip(st.columns(2), dict.fromkeys([record["system"], other])):
    rec = bq.record_for(result, bq.question_key(record), system)
    with col:
        st.markdown(f"##### {md_escape(system)}")
        if rec is None:
            st.caption("This system has no record of the question.")
            continue
        st.caption(" · ".join(f"{md_escape(m)} {v:.2f}" for m, v in rec["metrics"].items() if v is not None))
        if rec.get("reading"):
            st.caption(f"Read the question as {md_escape(rec['reading'])}.")
        if rec.get("answer"):
            st.markdown(bv.answer_line(rec["answer"]))
        st.dataframe(table(bq.gold_frame(rec, k)), hide_index=True, width="stretch")
        st.caption(f"Source rank among the {len(rec['ranked'])} ranked source ids the file keeps (– : not among "
                   "them). The returned results, * = gold:")
        st.dataframe(table(bq.results_frame(rec)), hide_index=True, width="stretch",
                     column_config={"path": st.column_config.TextColumn("path", width="medium")})
        if st.button(f"Open on the Retrieval page at turn {rec['turn']}", key=f"bench_open_{system}",
                     icon=":material/search:", help="Reopens this task's session database at the question's turn "
                     "and asks the question there: the engine's path and why gold turns were missed."):
            open_on_retrieval(rec)

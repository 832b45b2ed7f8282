"""The Benchmark page through Streamlit's AppTest, on the hand-made result file (tests/fixtures/
bench_result_small.json) in a workspace whose session databases are the bundled demo replayed for real."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from apptest import shown_text, start_app
from streamlit.testing.v1 import AppTest

from engine.eval.significance import per_item
from engine.store.data_paths import DATA_DIRS_ENV
from engine.store.workspace import ENV
from workbench.benchmark import misses as bm
from workbench.benchmark import questions as bq
from workbench.benchmark import run as bench_run
from workbench.benchmark import view as bv
from workbench.benchmark.result import BenchFileError, BenchResult, load_result
from workbench.driver import BENCH_FIXTURE, bench_fixture_workspace
from workbench.retrieval_view import FREE_SOURCE, MISS, QUESTION_SOURCE
from workbench.text import MISSING

PAGE = "../pages/6_benchmark.py"
MD_QUESTION = "demo:q99"            # its text holds **bold** and a markdown link

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    """The fixture's run in a workspace of its own, for the whole module (the replays take a few seconds)."""
    folder = tmp_path_factory.mktemp("bench-workspace")
    result = bench_fixture_workspace(folder)
    before = os.environ.get(ENV)
    os.environ[ENV] = str(folder)
    yield result
    if before is None:
        del os.environ[ENV]
    else:
        os.environ[ENV] = before


def open_page() -> AppTest:
    at, _ = start_app()
    at.switch_page(PAGE).run()
    assert not at.exception, at.exception
    return at


def questions_table(at: AppTest):
    return next(d.value for d in at.dataframe if "question" in d.value.columns)


def test_a_workspace_run_opens_with_every_chart(workspace):
    at = open_page()
    result = load_result(workspace)
    assert at.selectbox(key="bench_run").value == str(workspace)
    data = json.loads(Path(workspace).read_text(encoding="utf-8"))         # the picker says what ran, not only when
    shown = at.selectbox(key="bench_run").options[0]
    assert shown.endswith(f" · {data['dataset']} · {', '.join(data['systems'])} · {data['protocol']} protocol")
    figures = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    assert len(figures) == 8                 # curves ×2, categories, trade-off, latency ×2, construction, memory
    overall, cohort, categories, tradeoff, inserts, queries, construction, memory = figures
    for fig, scope in ((overall, "overall"), (cohort, "cohort")):
        for system in ("allmem", "naive"):
            lines = [t for t in fig["data"] if t["legendgroup"] == system]
            assert len(lines) == len(result.metrics)               # one line per metric panel
            rounds = [r for r in result.rounds_detail if r["system"] == system]
            assert lines[0]["y"] == [r[scope]["r@5"] for r in rounds] and lines[0]["x"] == [1, 2]
    assert overall["data"][0]["y"] != cohort["data"][0]["y"]
    assert [t["name"] for t in categories["data"]] == ["allmem", "naive"]
    assert categories["data"][0]["x"] == ["multi-hop", "temporal", "open-domain", "single-hop"]
    assert [t["name"] for t in tradeoff["data"]] == ["allmem", "naive"]
    assert tradeoff["data"][1]["x"] == [pytest.approx(3.0)]      # naive's one query stage, p50 2.4 ms × 1.25
    assert [t["name"] for t in queries["data"]] == ["stage1", "stage2", "stage3", "rank"]
    assert queries["data"][3]["y"] == [None, pytest.approx(3.0)]   # only naive has a "rank" stage
    assert {t["name"] for t in inserts["data"]} == {"embed", "anchor", "link", "write"}
    assert {t["name"] for t in memory["data"]} >= {"unit · visible", "unit · archived", "semantic", "turn · stored"}
    assert [t["y"] for t in memory["data"] if t["name"] == "turn · stored"] == [[46, 80]]
    assert [(t["name"], t["x"], t["y"]) for t in construction["data"]] == [
        ("descriptor · prompt", ["allmem"], [12880.0]), ("descriptor · completion", ["allmem"], [2300.0]),
        ("diagnosis · prompt", ["allmem"], [28350.0]), ("diagnosis · completion", ["allmem"], [3020.0])]
    costs = next(d.value for d in at.dataframe if "calls per role" in d.value.columns)
    assert costs.to_dict("records") == [
        {"system": "allmem", "conversations": 1, "LLM calls": 57.0, "prompt tokens": 41230.0,
         "output tokens": 5320.0, "total tokens": 46550.0, "calls per role": "descriptor 46, diagnosis 11"},
        {"system": "naive", "conversations": 1, "LLM calls": 0.0, "prompt tokens": 0.0, "output tokens": 0.0,
         "total tokens": 0.0, "calls per role": "none"}]
    summary = next(d.value for d in at.dataframe if "build LLM calls / conv" in d.value.columns)
    assert list(summary["build tokens / conv"]) == [46550.0, 0.0]

    assert any(b.label == "Run benchmark" for b in at.get("form_submit_button"))

    at.multiselect(key="bench_systems").set_value(["naive"]).run()
    assert not at.exception
    overall, *_ = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    assert {t["legendgroup"] for t in overall["data"]} == {"naive"} and len(overall["data"]) == 4


def test_a_run_without_ablations_pairs_every_system_with_the_one_picked(workspace):
    at = open_page()
    result = load_result(workspace)
    against = at.selectbox(key="bench_against")
    assert against.options == result.systems and at.checkbox(key="bench_q_changed").disabled
    metric = at.selectbox(key="bench_metric").value
    paired = next(d.value for d in at.dataframe if "verdict" in d.value.columns)
    other = [s for s in result.systems if s != against.value]
    assert list(paired["system"]) == other and set(paired["against"]) == {against.value}
    mine, ref = (per_item(result.data, s, metric) for s in (other[0], against.value))
    shared = mine.keys() & ref.keys()
    assert shared and paired.iloc[0]["same"] == sum(mine[k] == ref[k] for k in shared)


def test_filters_change_the_question_table(workspace):
    at = open_page()
    assert len(questions_table(at)) == 12                      # 6 questions × 2 systems
    at.multiselect(key="bench_q_systems").set_value(["naive"]).run()
    frame = questions_table(at)
    assert len(frame) == 6 and set(frame["system"]) == {"naive"}
    at.checkbox(key="bench_q_misses").check().run()
    frame = questions_table(at)
    assert sorted(frame["id"]) == ["demo:q7", "demo:q8"] and set(frame["gold"]) == {MISS}
    assert (frame["r@5"] < 1).all()
    at.multiselect(key="bench_q_categories").set_value(["1"]).run()
    assert set(questions_table(at)["category"]) == {"multi-hop"}
    at.multiselect(key="bench_q_systems").set_value(["allmem"]).run()
    assert sorted(questions_table(at)["id"]) == ["demo:q7", "demo:q8"]
    at.selectbox(key="bench_metric").set_value("r@10").run()  # All-Mem has every gold turn within its top 10
    assert questions_table(at).empty and not at.exception


def test_side_by_side_and_dataset_strings_are_escaped(workspace):
    at = open_page()
    pick = ("demo", MD_QUESTION, "allmem")
    at.selectbox(key="bench_q_pick").set_value(pick).run()
    assert not at.exception
    record = next(q for q in load_result(workspace).questions if q["question_id"] == MD_QUESTION)
    source = next(m.value for m in at.markdown if m.value.startswith("**Question**"))
    text, kinds = shown_text(source)
    assert record["question"] in text and "**bold**" in text
    assert "link_open" not in kinds
    ranked = [d.value for d in at.dataframe if "path" in d.value.columns]
    assert len(ranked) == 2                                   # allmem beside naive
    assert list(ranked[0]["source ids"])[0] == "D1:7*"        # the gold turn, starred
    assert "—semantic→" in ranked[0]["path"].iloc[2]
    assert (ranked[1]["hop"] == 0).all()                      # naive RAG: no hops


def test_opening_a_miss_reopens_its_session_on_the_retrieval_page(workspace):
    at = open_page()
    at.multiselect(key="bench_q_systems").set_value(["naive"]).run()
    at.checkbox(key="bench_q_misses").check().run()
    at.selectbox(key="bench_q_pick").set_value(("demo", "demo:q7", "naive")).run()
    at.button(key="bench_open_naive").click().run()
    assert not at.exception, at.exception
    wb = at.session_state["workbench"]
    assert wb.db_path == workspace.parent / "sessions" / "demo-naive.sqlite"
    assert wb.engine_name == "naive" and wb.cursor == 80 and wb.head == 102
    assert at.session_state["retrieval_source"] == QUESTION_SOURCE
    assert at.session_state["retrieval_question"].id == "demo:q7"
    assert at.radio(key="retrieval_source").value == QUESTION_SOURCE
    assert at.selectbox(key="retrieval_question").value.id == "demo:q7"
    assert any("Missed gold evidence" in m.value for m in at.markdown)


def test_result_paths_and_the_databases_a_result_names_stay_inside_the_data_folders(workspace, tmp_path):
    """The Result file box refuses traversal, absolute paths and links out of the data folders, reading nothing
    (the outside result's command never shows); a result inside them that names a session database outside is
    refused on Open, and the open session stays."""
    import shutil

    root = Path(os.environ[ENV])
    outside = tmp_path / "private"
    outside.mkdir()
    data = json.loads(Path(workspace).read_text())
    data["command"] = "memwb bench PRIVATE-RESULT"
    (outside / "result.json").write_text(json.dumps(data))
    link = root / "uploads" / "away"
    link.parent.mkdir(exist_ok=True)
    link.symlink_to(outside)
    try:
        at = open_page()
        at.radio(key="bench_mode").set_value("A file path").run()
        for attempt in (str(outside / "result.json"), str(outside), f"{root}/../{tmp_path.name}/private/result.json",
                        f"{root}/../../{outside.relative_to(root.parent.parent)}/result.json",
                        str(link / "result.json"), "/etc/passwd"):
            at.text_input(key="bench_path").input(attempt).run()
            assert not at.exception
            shown = " ".join(shown_text(e.value)[0] for e in at.error)
            assert "is outside the folders the workbench reads from" in shown, (attempt, shown)
            assert not at.get("plotly_chart") and "PRIVATE-RESULT" not in str([c.value for c in at.caption])

        db = next(t for t in data["tasks"] if t["system"] == "naive")
        shutil.copy(Path(workspace).parent / db["db"], outside / "demo-naive.sqlite")
        db["db"] = str(outside / "demo-naive.sqlite")
        inside = root / "uploads" / "names-outside" / "result.json"
        inside.parent.mkdir(exist_ok=True)
        inside.write_text(json.dumps(data))
        at.text_input(key="bench_path").input(str(inside)).run()
        assert not at.error and at.get("plotly_chart")
        before = at.session_state["workbench"]
        at.selectbox(key="bench_q_pick").set_value(("demo", "demo:q7", "naive")).run()
        at.button(key="bench_open_naive").click().run()
        assert not at.exception
        shown = " ".join(shown_text(e.value)[0] for e in at.error)
        assert "demo-naive.sqlite is outside the folders the workbench reads from" in shown, shown
        assert at.session_state["workbench"] is before
    finally:
        link.unlink()


def test_a_question_the_conversation_lacks_opens_as_a_free_query(workspace):
    """demo:q99 is only in the result file: the Retrieval page gets its text as a free query, at its turn."""
    at = open_page()
    at.selectbox(key="bench_q_pick").set_value(("demo", MD_QUESTION, "allmem")).run()
    at.button(key="bench_open_allmem").click().run()
    assert not at.exception, at.exception
    record = next(q for q in load_result(workspace).questions if q["question_id"] == MD_QUESTION)
    wb = at.session_state["workbench"]
    assert wb.db_path.name == "demo-allmem.sqlite" and wb.cursor == record["turn"]
    assert at.radio(key="retrieval_source").value == FREE_SOURCE
    assert at.text_input(key="retrieval_query").value == record["question"]
    assert at.number_input(key="retrieval_k").value == 5


@pytest.mark.parametrize("content, problem", [
    ("{\"format\": \"memwb-bench/1\", ", "is not valid JSON"),
    ("[1, 2]", "holds a JSON list"),
    ("{\"format\": \"other/2\"}", "has format 'other/2'"),
])
def test_a_malformed_file_names_what_is_wrong(tmp_path, content, problem):
    bad = tmp_path / "result.json"
    bad.write_text(content)
    with pytest.raises(BenchFileError, match=problem):
        load_result(bad)


def test_a_record_missing_a_field_is_named(tmp_path, workspace, monkeypatch):
    data = json.loads(BENCH_FIXTURE.read_text())
    del data["questions"][3]["ranked"]
    bad = tmp_path / "result.json"
    bad.write_text(json.dumps(data))
    with pytest.raises(BenchFileError, match=r'questions\[3\]: "ranked" is missing'):
        load_result(bad)
    monkeypatch.setenv(DATA_DIRS_ENV, str(tmp_path))        # a data folder the path box may read from
    at = open_page()
    at.radio(key="bench_mode").set_value("A file path").run()
    at.text_input(key="bench_path").input(str(bad)).run()
    assert not at.exception
    [error] = at.error
    shown, _ = shown_text(error.value)
    assert f'{bad} is not a complete memwb-bench/1 result: questions[3]: "ranked" is missing' == shown
    assert not at.get("plotly_chart")
    at.text_input(key="bench_path").input(str(tmp_path / "nothing.json")).run()
    assert shown_text(at.error[0].value)[0] == f"no benchmark result at {tmp_path / 'nothing.json'}"
    at.text_input(key="bench_path").input(str(Path(workspace).parent)).run()   # a run folder opens too
    assert not at.error and len(at.get("plotly_chart")) == 8


def test_names_from_the_file_reach_plotly_as_text():
    """Plotly reads HTML in trace names and tick labels: a category or system named with markup is escaped."""
    data = json.loads(BENCH_FIXTURE.read_text())
    data["categories"]["1"] = '<a href="https://example.com">multi</a>'
    data["systems"]["<b>x</b>"] = data["systems"].pop("naive")
    for part in ("rounds_detail", "questions", "tasks"):
        for record in data[part]:
            record["system"] = "<b>x</b>" if record["system"] == "naive" else record["system"]
    data["summary"]["<b>x</b>"] = data["summary"].pop("naive")
    result = BenchResult(BENCH_FIXTURE, data)
    fig = bv.category_figure(result, result.systems, "r@5")
    assert fig.data[0].x[0] == '&lt;a href="https://example.com"&gt;multi&lt;/a&gt;'
    assert [t.name for t in fig.data] == ["allmem", "&lt;b&gt;x&lt;/b&gt;"]
    assert all("<b>" not in t.name for f in (bv.curves_figure(result, result.systems),
                                            bv.tradeoff_figure(result, result.systems, "r@5")) for t in f.data)


def test_names_on_the_tradeoff_plot_do_not_print_over_each_other():
    """An engine's ablations sit on its latency and nearly its recall: one label for the group, the others'
    names in their hovers; two close systems are named one above and one below; a system elsewhere keeps its
    own label above it."""
    points = {"allmem": (0.53, 0.575), "allmem-no-split": (0.52, 0.573), "allmem-no-merge": (0.55, 0.577),
              "allmem-no-lexical": (0.50, 0.463), "memloom": (2.2, 0.593), "gam": (2.37, 0.545),
              "naive": (None, 0.5)}
    assert bv.point_labels(points) == {"allmem": ("allmem + 2 more", "top center"),
                                       "allmem-no-lexical": ("allmem-no-lexical", "top center"),
                                       "memloom": ("memloom", "top center"), "gam": ("gam", "bottom center")}
    result = BenchResult(BENCH_FIXTURE, json.loads(BENCH_FIXTURE.read_text()))
    fig = bv.tradeoff_figure(result, result.systems, "r@5")
    shown = {t.name: (t.text[0], t.textposition) for t in fig.data}
    points = {t.name: (t.x[0], t.y[0]) for t in fig.data}
    assert {s: v for s, v in shown.items() if v[0]} == bv.point_labels(points)
    assert all(t.name in t.hovertemplate for t in fig.data)


def test_boundaries_table_means_over_meetings(tmp_path, workspace, monkeypatch):
    """QMSum: the table pools each system's meetings (fixed-50 included), hand-computed means; the page shows it."""
    data = json.loads(BENCH_FIXTURE.read_text())
    data["boundaries"] = [
        {"meeting": "Bed003", "system": "allmem", "turns": 800, "boundaries": 12, "gold_boundaries": 9,
         "pk": 0.30, "window_diff": 0.40, "delta_b": 3, "delta_b_rate": 0.33},
        {"meeting": "Bmr005", "system": "allmem", "turns": 600, "boundaries": 5, "gold_boundaries": 7,
         "pk": 0.20, "window_diff": 0.30, "delta_b": -2, "delta_b_rate": -0.29},
        {"meeting": "Bed003", "system": "fixed-50", "turns": 800, "boundaries": 16, "gold_boundaries": 9,
         "pk": 0.45, "window_diff": 0.55, "delta_b": 7, "delta_b_rate": 0.78},
    ]
    frame = bv.boundaries_frame(BenchResult(BENCH_FIXTURE, data)).set_index("system")
    assert list(frame.index) == ["allmem", "fixed-50"]
    assert frame.loc["allmem", "meetings"] == 2 and frame.loc["allmem", "Pk"] == pytest.approx(0.25)
    assert frame.loc["allmem", "WindowDiff"] == pytest.approx(0.35) and frame.loc["allmem", "ΔB"] == 0.5
    assert frame.loc["fixed-50", "ΔB rate"] == pytest.approx(0.78)
    path = tmp_path / "result.json"
    path.write_text(json.dumps(data))
    monkeypatch.setenv(DATA_DIRS_ENV, str(tmp_path))        # a data folder the path box may read from
    at = open_page()
    at.radio(key="bench_mode").set_value("A file path").run()
    at.text_input(key="bench_path").input(str(path)).run()
    shown = next(d.value for d in at.dataframe if "WindowDiff" in d.value.columns)
    assert list(shown["system"]) == ["allmem", "fixed-50"] and list(shown["Pk"]) == [0.25, 0.45]


def test_the_run_form_offers_the_causal_suites_validation_and_train_splits():
    """Both splits a researcher tunes or checks a setting on are offered, each a file that loads as scenarios."""
    from engine.loaders import load_conversations
    causal = {c.label: c for c in bench_run.data_choices() if c.dataset == "causal"}
    assert set(causal) == {"causal suite · validation split", "causal suite · train split"}
    assert all(len(load_conversations(c.path)) >= 6 for c in causal.values())


def test_a_run_from_the_page_opens_its_result(tmp_path, monkeypatch):
    """The form runs naive RAG over the bundled demo (2 rounds) in this process; the new result is then shown."""
    monkeypatch.setenv(ENV, str(tmp_path))
    at = open_page()
    at.selectbox(key="bench_run_data").set_value(bench_run.data_choices()[0])
    at.multiselect(key="bench_run_engines").set_value(["naive"])
    at.number_input(key="bench_run_rounds").set_value(2)
    at.button(key="bench_run_go").click().run()
    assert not at.exception and not at.error, (at.exception, [e.value for e in at.error])
    shown = at.selectbox(key="bench_run").value if at.radio(key="bench_mode").value == "Workspace runs" \
        else at.text_input(key="bench_path").value
    result = load_result(shown)
    assert result.systems == ["naive"] and result.data["rounds"] == 2
    assert len(at.get("plotly_chart")) == 9          # the seven above, construction cost, and where the misses were lost


def _misses_chart(at: AppTest) -> dict:
    return next(json.loads(c.proto.spec) for c in at.get("plotly_chart")
                if any(t.get("name") == bv.esc(bm.FATE_LABELS[bm.Fate.FOUND]) for t in json.loads(c.proto.spec)["data"]))


def test_where_the_misses_were_lost_stacks_each_systems_gold_turns(tmp_path, monkeypatch):
    """A real run of All-Mem and its anchors-only ablation on the bundled demo: the stacked bar shows, per system,
    the share of gold turns in each fate the result file counts; picking a category redraws it from that
    category's counts."""
    from engine.bench.config import BenchConfig
    from engine.bench.runner import run_benchmark
    from workbench.model import DEMO_PATH

    monkeypatch.setenv(ENV, str(tmp_path))
    path = run_benchmark(BenchConfig(dataset="locomo", source=str(DEMO_PATH), engines=("allmem",),
                                     ablations=("anchors-only",), rounds=2,
                                     out=str(tmp_path / "benchmarks" / "demo")))
    result = load_result(path)
    at = open_page()
    fig = _misses_chart(at)
    assert [t["x"] for t in fig["data"]][0] == ["allmem", "allmem-anchors-only"]
    for trace, fate in zip(fig["data"], bm.Fate):
        for system, y, n in zip(trace["x"], trace["y"], trace["customdata"]):
            fates = result.summary[system]["misses"]["fates"]
            assert n == fates[fate] and y == pytest.approx(fates[fate] / sum(fates.values()))
    off = [t for t in fig["data"] if t["name"] == bv.esc(bm.FATE_LABELS[bm.Fate.OFF_SURFACE])][0]
    assert off["y"][1] > off["y"][0] == 0       # what anchors-only loses to consolidation, Stage 2 recovered
    table = next(d.value for d in at.dataframe if "held back by" in d.value.columns)
    assert list(table["system"]) == ["allmem", "allmem-anchors-only"]
    summary = next(d.value for d in at.dataframe if "replay" in d.value.columns)
    assert dict(zip(summary["system"], summary["replay"])) == {"allmem": "own", "allmem-anchors-only": "allmem's"}
    assert [t["replayed_with"] for t in result.tasks] == [None, "allmem"]

    at.selectbox(key="bench_miss_category").set_value("2").run()
    assert not at.exception
    fig = _misses_chart(at)
    for trace, fate in zip(fig["data"], bm.Fate):
        for system, n in zip(trace["x"], trace["customdata"]):
            assert n == result.summary[system]["misses"]["by_category"]["2"][fate]

    # the ablation beside its full system, question by question, for the metric picked on the page
    for metric in ("r@5", "n@10"):
        at.selectbox(key="bench_metric").set_value(metric).run()
        assert not at.exception
        paired = next(d.value for d in at.dataframe if "verdict" in d.value.columns)
        row = paired.iloc[0]
        mine, full = (per_item(result.data, s, metric) for s in ("allmem-anchors-only", "allmem"))
        assert (row["system"], row["against"]) == ("allmem-anchors-only", "allmem")
        assert (row["higher"], row["lower"], row["same"]) == (sum(mine[k] > full[k] for k in mine),
                                                            sum(mine[k] < full[k] for k in mine),
                                                            sum(mine[k] == full[k] for k in mine))
        assert row[f"Δ {metric}"] == pytest.approx(sum(mine[k] - full[k] for k in mine) / len(mine), abs=1e-4)

    # against any one system instead: every other system beside it
    at.selectbox(key="bench_against").set_value("allmem-anchors-only").run()
    paired = next(d.value for d in at.dataframe if "verdict" in d.value.columns)
    assert list(zip(paired["system"], paired["against"])) == [("allmem", "allmem-anchors-only")]
    mine, full = (per_item(result.data, s, at.selectbox(key="bench_metric").value)
                  for s in ("allmem", "allmem-anchors-only"))
    assert paired.iloc[0]["higher"] == sum(mine[k] > full[k] for k in mine)

    # the questions that make the difference: ticking the box keeps the ablation's changed records, each beside
    # the full system's record of the same question
    at.selectbox(key="bench_metric").set_value("r@5").run()
    assert at.checkbox(key="bench_q_changed").disabled is False
    at.checkbox(key="bench_q_changed").check().run()
    assert not at.exception
    shown = questions_table(at)
    mine, full = (per_item(result.data, s, "r@5") for s in ("allmem-anchors-only", "allmem"))
    changed = sorted(k for k in mine if mine[k] != full[k])
    assert changed, "anchors-only changed no question of the demo; the filter is not exercised"
    assert sorted(zip(shown["conversation"], shown["id"], shown["system"])) == sorted(
        k + (s,) for k in changed for s in ("allmem", "allmem-anchors-only"))


def test_names_from_the_file_stay_literal_and_no_cell_reads_none(tmp_path, workspace, monkeypatch):
    """A system, a conversation, a category and a question named with markdown (**, a backtick, a link): every
    markdown source of the page shows them as typed and holds no link; no table or caption shows "None"."""
    from test_page_markup import check_literal, none_words, null_cells

    system, conversation, category = "**naive**", "md`conv", "[open](https://example.com)"
    data = json.loads(BENCH_FIXTURE.read_text())
    data["systems"][system] = data["systems"].pop("naive")
    data["summary"][system] = data["summary"].pop("naive")
    data["categories"]["1"] = category
    data["conversations"] = [conversation]
    for part in ("rounds_detail", "questions", "tasks"):
        for record in data[part]:
            record["system"] = system if record["system"] == "naive" else record["system"]
            if "conversation" in record:
                record["conversation"] = conversation
    path = tmp_path / "result.json"
    path.write_text(json.dumps(data))
    monkeypatch.setenv(DATA_DIRS_ENV, str(tmp_path))        # a data folder the path box may read from
    at = open_page()
    at.radio(key="bench_mode").set_value("A file path").run()
    at.text_input(key="bench_path").input(str(path)).run()
    at.selectbox(key="bench_q_pick").set_value((conversation, MD_QUESTION, system)).run()
    assert not at.exception
    seen = check_literal(at)
    record = next(q for q in data["questions"] if q["question_id"] == MD_QUESTION)
    assert f"Question · {record['question']}" in seen and f"of {conversation}" in seen
    assert system in seen.splitlines() and category not in seen       # (the category shows in the table only)
    at.selectbox(key="bench_q_pick").set_value((conversation, "demo:q7", system)).run()
    assert null_cells(at) == [] and none_words(at) == []
    gold = next(d.value for d in at.dataframe if "gold turn" in d.value.columns)
    assert list(gold["source rank"]) == ["–", "–", "5", "1"]          # D2:6 and D3:9 are not in naive's ranking


def test_a_system_without_memory_has_no_memory_panel():
    """The full-history ceiling (engine null) answers from the transcript: memory growth shows only engines."""
    data = json.loads(BENCH_FIXTURE.read_text())
    data["systems"]["full-history"] = {"engine": None, "settings": {}, "ablations": []}
    result = BenchResult(BENCH_FIXTURE, data)
    fig = bv.memory_figure(result, result.systems)
    titles = [a.text for a in fig.layout.annotations if a.text.endswith((" · nodes", " · edges"))]
    assert titles == ["allmem · nodes", "naive · nodes", "allmem · edges", "naive · edges"]


def test_an_answer_line_keeps_dataset_strings_literal():
    line = bv.answer_line({"text": "**bold** [open](https://x.test)", "cited": ["D1:3"], "gold": "`tick`",
                           "error_code": None})
    assert "\\*\\*bold\\*\\*" in line and "\\[open\\]" in line and "`D1:3`" in line and "\\`tick\\`" in line
    assert bv.answer_line({"text": "", "cited": [], "gold": None, "error_code": "LLM_FAIL"}).startswith(
        "**Answer** · *(no answer)* · failed: `LLM_FAIL`")


def test_a_question_shows_how_memloom_read_it(tmp_path, monkeypatch):
    """A real MemLoom run on the demo: picking a why-question shows the reading the result file stored for it, and
    the naive system beside it (which does not route by the query) shows none."""
    from engine.bench.config import BenchConfig
    from engine.bench.runner import run_benchmark
    from workbench.model import DEMO_PATH

    monkeypatch.setenv(ENV, str(tmp_path))
    path = run_benchmark(BenchConfig(dataset="locomo", source=str(DEMO_PATH), engines=("memloom", "naive"),
                                     rounds=1, out=str(tmp_path / "benchmarks" / "demo")))
    record = next(q for q in load_result(path).questions if q["system"] == "memloom" and q["question_id"] == "demo:q7")
    assert record["reading"].startswith("a why-question (“why”)")
    at = open_page()
    at.selectbox(key="bench_q_pick").set_value(("demo", "demo:q7", "memloom")).run()
    assert not at.exception
    shown = [t for t in (shown_text(c.value)[0] for c in at.caption) if t.startswith("Read the question as")]
    assert shown == [f"Read the question as {record['reading']}."]


def test_the_causal_chains_links_are_tabled_as_the_result_counts_them(tmp_path, monkeypatch):
    """A real run of naive RAG and MemLoom on one causal suite scenario: the page's table of the chains' links
    holds, per system, the counts the result file tallied from the stored memory (naive: every link unlinked)."""
    from engine.bench.config import BenchConfig
    from engine.bench.runner import run_benchmark
    from engine.eval.chain_links import LINK_FATE_LABELS, LinkFate

    monkeypatch.setenv(ENV, str(tmp_path))
    source = Path(__file__).resolve().parents[1] / "datasets" / "causal" / "validation.jsonl"
    path = run_benchmark(BenchConfig(dataset="causal", source=str(source), engines=("naive", "memloom"),
                                     conversations=("lab-freezer",), protocol="static",
                                     out=str(tmp_path / "benchmarks" / "causal")))
    result = load_result(path)
    at = open_page()
    assert not at.exception
    table = next(d.value for d in at.dataframe if "chains held whole" in d.value.columns)
    assert list(table["system"]) == ["naive", "memloom"]
    for _, row in table.iterrows():
        held = result.summary[row["system"]]["chain_links"]
        assert [row[LINK_FATE_LABELS[f]] for f in LinkFate] == [held["fates"][str(f)] for f in LinkFate]
        assert row["chains held whole"] == f"{held['held_whole']} of {held['questions']}"
        assert row["of them whole in the top 5"] == held["held_whole_ranked_whole"]
    naive = table.iloc[0]
    assert naive[LINK_FATE_LABELS[LinkFate.UNLINKED]] == result.summary["naive"]["chain_links"]["links"] > 0
    assert table.iloc[1][LINK_FATE_LABELS[LinkFate.CITED]] > 0

    # a chain question picked in the question table: each gold turn's link to the next, as the file stored it
    record = next(q for q in result.questions if q["system"] == "memloom" and q.get("chain_links"))
    at.selectbox(key="bench_q_pick").set_value((record["conversation"], record["question_id"], "memloom")).run()
    assert not at.exception
    gold = next(d.value for d in at.dataframe if bq.LINK_COLUMN in d.value.columns)
    assert list(gold["gold turn"]) == record["gold"]
    assert list(gold[bq.LINK_COLUMN]) == [bq.link_text(link) for link in record["chain_links"]] + ["–"]


def test_the_paper_check_sets_gams_graph_size_beside_table_10(tmp_path, monkeypatch):
    """A real GAM run on the demo: the Paper check table lists GAM's rows only, its graph after 3 sessions read
    from the run's growth (an absolute figure, no variant), and Table 3's answer rows unmeasured without answers."""
    from engine.bench.config import BenchConfig
    from engine.bench.runner import run_benchmark
    from workbench.model import DEMO_PATH

    monkeypatch.setenv(ENV, str(tmp_path))
    path = run_benchmark(BenchConfig(dataset="locomo", source=str(DEMO_PATH), engines=("gam",), protocol="static",
                                     out=str(tmp_path / "benchmarks" / "demo")))
    grown = load_result(path).summary["gam"]["growth"]["3"]
    at = open_page()
    paper = next(d.value for d in at.dataframe if "paper table" in d.value.columns)
    assert set(paper["system"]) == {"gam", "gam-no-mfr"}               # GAM's rows only, w/o MFR not run
    assert set(paper["paper table"]) == {"GAM Table 3", "GAM Table 10"}
    rows = {(r["system"], r["variant"], r["metric"]): r for r in paper.to_dict("records")}
    for kind, name in (("topic", "topic nodes"), ("event", "event nodes")):
        row = rows[("gam", "after 3 sessions", name)]
        assert float(row["project"]) == round(grown["nodes"][kind], 1)
        assert row["direction (paper / project)"] == "absolute figure" and row["Δ vs full (paper / project)"] == MISSING
    assert float(rows[("gam", "after 3 sessions", "edges")]["project"]) == round(grown["edges"], 1)
    f1 = rows[("gam", "GAM (Ours)", "f1")]                                 # cells with a gap are shown as text
    assert float(f1["paper"]) == 0.4 and f1["project"] == MISSING
    assert f1["direction (paper / project)"] == "reference (full system)"
    no_mfr = rows[("gam-no-mfr", "w/o MFR", "f1")]                 # the paper's difference, none measured here
    assert no_mfr["Δ vs full (paper / project)"] == "-0.041 / –"
    assert no_mfr["direction (paper / project)"] == "worse / not measured"
    assert rows[("gam", "after 15 sessions", "topic nodes")]["project"] == MISSING     # the demo has 7 sessions


def test_a_decision_set_shows_each_kind_its_confusion_and_why_a_pair_was_missed(tmp_path, monkeypatch):
    """A real decision-set run of All-Mem and MemLoom on the newcomer's conversation: the page tables each kind
    as the result counted it, the labelled pairs against the decisions made, and for a pair picked from the
    missed ones, every edit that covered it with its confidence against θ."""
    from engine.bench.config import BenchConfig
    from engine.bench.runner import run_benchmark
    from workbench.benchmark import decisions as bd

    monkeypatch.setenv(ENV, str(tmp_path))
    source = Path(__file__).resolve().parents[1] / "datasets" / "fixtures" / "newcomer.jsonl"
    path = run_benchmark(BenchConfig(dataset="decisions", source=str(source), engines=("allmem", "memloom"),
                                     out=str(tmp_path / "benchmarks" / "decisions")))
    result = load_result(path)
    at = open_page()
    assert not at.exception
    headings = " ".join(m.value for m in at.markdown)
    assert "Decisions per kind" in headings and "Why wasn't this consolidated?" in headings
    at.selectbox(key="bench_dec_system").set_value("memloom").run()
    kinds = next(d.value for d in at.dataframe if "F1" in d.value.columns)
    cause = kinds[kinds["kind"] == "cause"].iloc[0]
    stored = result.data["decisions"]["memloom"]["table"]["cause"]
    assert (cause["gold"], cause["correct"], cause["false"]) == (stored["gold"], stored["correct"], stored["false"])
    confusion = next(d.value for d in at.dataframe if "no decision" in d.value.columns)
    assert set(confusion["gold"]) == {v["kind"] for v in result.data["decisions"]["memloom"]["verdicts"]}
    at.radio(key="bench_dec_show").set_value(bd.ALL).run()
    pairs = next(d.value for d in at.dataframe if "fate" in d.value.columns)
    first = bd.verdict(result, "memloom", int(pairs.iloc[0]["#"]))
    steps = next(d.value for d in at.dataframe if "reason code" in d.value.columns)
    calls = {(c["role"], c["backend"], c["ok"]) for c in first["compared_in"]}
    assert len(steps) == len(first["edits"]) + len(calls)
    gated = [e for e in first["edits"] if e["outcome"] == "gated"]
    for e in gated:
        row = steps[steps["outcome"] == "gated"].iloc[0]
        assert row["confidence"] == e["confidence"] and row["θ"] == e["threshold"]

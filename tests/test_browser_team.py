"""Annotation for a team in a real browser: two annotators sign in with tokens and label the same demo case
differently, agreement shows, a reviewer adjudicates, and the export holds it all (checked in the store and the
exported file, not only on the page)."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from conftest import ROOT
from sklearn.metrics import cohen_kappa_score

from engine.core.access import Role
from engine.loaders import load_conversation
from engine.store.annotations import AnnotationStore
from engine.store.labels import LabelStore
from engine.store.users import UserBook
from engine.store.workspace import ENV
from workbench.driver import CHROMIUM, browser_page, open_tab, running_app, wait_idle
from workbench.model import DEMO_PATH, Workbench

pytestmark = [pytest.mark.slow, pytest.mark.browser]
if not shutil.which(CHROMIUM) and not Path(CHROMIUM).exists():
    pytestmark.append(pytest.mark.skip(reason=f"{CHROMIUM} missing: scripts/test.sh installs Debian chromium"))
CASES = ROOT / "datasets" / "demo" / "cases.json"


def sign_in(page, url: str, name: str, secret: str) -> None:
    page.goto(url)
    page.get_by_label("User name").fill(name)
    page.get_by_label("Token or password").fill(secret)
    page.get_by_role("button", name="Sign in", exact=True).click()
    page.get_by_text("Annotate · SCDS diagnostic cases").wait_for()
    wait_idle(page)


def pick(page, label: str, *pointers: str) -> None:
    """Choose turns in a multiselect one after the other, as a person types and picks them (each pick saves)."""
    for pointer in pointers:
        box = page.get_by_test_id("stMultiSelect").filter(has_text=label).get_by_role("combobox")
        box.click()
        page.keyboard.type(pointer)
        page.get_by_role("option").filter(has_text=pointer).first.click()
        wait_idle(page, 900)
        page.keyboard.press("Escape")


def answer(page, label: str, text: str) -> None:
    area = page.get_by_label(label)
    area.fill(text)
    area.press("Control+Enter")
    wait_idle(page, 900)


def label_q1(page, evidence: list[str], chain: list[str], gold: str) -> None:
    open_tab(page, "My labels")
    pick(page, "My evidence turns", *evidence)
    pick(page, "My causal chain", *chain)
    answer(page, "My gold answer", gold)


def test_two_annotators_agreement_adjudication_and_export(tmp_path):
    workspace = tmp_path / "ws"
    book = UserBook(workspace / "users.json")
    tokens = {"ann": book.add("ann", Role.ANNOTATOR), "ben": book.add("ben", Role.ANNOTATOR),
              "rita": book.add("rita", Role.REVIEWER)}
    wb = Workbench.open(DEMO_PATH, engine="naive", workdir=tmp_path / "team", label="team demo")
    db = wb.db_path
    conv = load_conversation(DEMO_PATH)
    AnnotationStore.at(db, "rita").import_json(CASES.read_text(encoding="utf-8"), CASES.name, conv)
    store = LabelStore.at(db)
    with running_app(env={ENV: str(workspace)}, via_cli=True, cli_args=["--db", str(db), "--sign-in"]) as url, \
            browser_page() as ann:
        annotate = f"{url}/annotate"
        sign_in(ann, annotate, "ann", tokens["ann"])
        label_q1(ann, ["commute:t20", "commute:t38"], ["commute:t38", "commute:t20"], "a new job across town")
        assert "Signed in as ann (annotator): you label each question" in ann.inner_text("body")
        mine = store.label("demo", "commute", "commute-q1", "ann")
        assert mine is not None and mine.evidence == ("commute:t20", "commute:t38")
        assert mine.chain == ("commute:t38", "commute:t20") and mine.gold_answer == "a new job across town"
        ann.get_by_role("button", name="Undo my last label change").click()          # undo, as for any change
        wait_idle(ann)
        before = store.label("demo", "commute", "commute-q1", "ann")
        assert before.gold_answer == "" and before.chain == mine.chain and before.seq < mine.seq
        assert ann.get_by_label("My gold answer").input_value() == ""                # the page shows the store
        answer(ann, "My gold answer", "a new job across town")
        mine = store.label("demo", "commute", "commute-q1", "ann")
        assert mine.gold_answer == "a new job across town"
        assert [r.annotator for r in store.history("demo", "commute")] == ["ann"] * 7 and \
            all(r.at for r in store.history("demo", "commute"))

        open_tab(ann, "Adjudicate")                               # an annotator does not adjudicate
        assert ann.get_by_role("button", name="Open adjudication").is_disabled()

        ben = ann.context.browser.new_page(viewport={"width": 1500, "height": 1100})   # another person
        ben.set_default_timeout(120_000)
        sign_in(ben, annotate, "ben", tokens["ben"])
        label_q1(ben, ["commute:t20", "commute:t46", "commute:t80"], ["commute:t20", "commute:t46"], "the move")
        open_tab(ben, "Agreement")                                # ann's label stays hidden until ben submits
        assert "show once you submit" in ben.inner_text("body") and "a new job" not in ben.inner_text("body")
        open_tab(ben, "My labels")
        ben.get_by_role("button", name="Submit my labels").click()
        wait_idle(ben)
        assert list(store.submitted("demo", "commute")) == ["ben"]
        open_tab(ben, "Agreement")
        body = ben.inner_text("body")
        kappa = cohen_kappa_score([1, 1, 0, 0], [1, 0, 1, 1])           # t20 t38 t46 t80: ann vs ben
        assert "Evidence picks · case" in body and f"κ {kappa:.2f}" in body, body[-3000:]
        assert "Questions with the most disagreement" in body

        rita = ann.context.browser.new_page(viewport={"width": 1500, "height": 1100})
        rita.set_default_timeout(120_000)
        sign_in(rita, annotate, "rita", tokens["rita"])
        open_tab(rita, "Adjudicate")
        rita.get_by_role("button", name="Open adjudication").click()
        wait_idle(rita)
        assert store.adjudication_open("demo", "commute")
        rita.get_by_role("button", name="Accept the majority for commute-q1").click()
        wait_idle(rita)
        gold = AnnotationStore.at(db).get("demo", "commute").question("commute-q1")
        assert gold.gold_evidence_keys == ["commute:t20"]                 # the only turn both picked
        assert gold.gold_causal_structure.supporting_evidence_keys == ["commute:t20"]
        [adjudication] = store.adjudications("demo", "commute")
        versions = {a: store.label("demo", "commute", "commute-q1", a).seq for a in ("ann", "ben")}
        assert adjudication.reviewer == "rita" and dict(adjudication.labels) == versions

        with rita.expect_download() as download:
            rita.get_by_test_id("stDownloadButton").get_by_role("button", name="Export").click()
        exported = json.loads(Path(download.value.path()).read_text(encoding="utf-8"))
    [commute] = [c for c in exported["cases"] if c["scenario_id"] == "commute"]
    assert {(x["annotator"], x["sample_id"]) for x in commute["labels"]} == {("ann", "commute-q1"),
                                                                             ("ben", "commute-q1")}
    q1 = next(q for q in commute["agreement"]["questions"] if q["sample_id"] == "commute-q1")
    assert q1["evidence"]["measure"] == "cohen_kappa" and q1["evidence"]["value"] == pytest.approx(kappa, abs=1e-4)
    [adj] = commute["adjudications"]
    assert adj["reviewer"] == "rita" and adj["method"] == "majority"
    assert {(x["annotator"], x["version"]) for x in adj["from_labels"]} == set(versions.items())
    assert adj["gold"]["gold_evidence_keys"] == ["commute:t20"]
    assert next(q for q in commute["questions"] if q["sample_id"] == "commute-q1")["gold_evidence_keys"] == \
        ["commute:t20"]

"""The workbench in a real headless Chromium, driven the way a person uses it."""
from __future__ import annotations

import re
import shutil
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import pytest
from conftest import LOCOMO, ROOT, needs_data

from engine.core.access import local_identity
from engine.core.proposal import GateVerdict, Status
from engine.store.catalog import list_sessions, read_session
from engine.store.log_store import Store
from engine.store.workspace import ENV
from workbench.driver import (
    CHROMIUM,
    baseline_walkthrough,
    browser_page,
    click,
    demo_turn_after,
    gam_session,
    gam_walkthrough,
    jump_to_turn,
    locomo_conversation_file,
    locomo_graph_walkthrough,
    memloom_graph_walkthrough,
    memloom_walkthrough,
    open_page,
    overlapping_labels,
    running_app,
    start_long_jump,
    wait_idle,
    wait_loaded,
    walkthrough,
)
from workbench.model import DEMO_PATH, Workbench
from workbench.review.queue import sort_queue

pytestmark = [pytest.mark.slow, pytest.mark.browser]
LOCAL = local_identity().name         # the app runs on loopback: decisions are the local user's
if not shutil.which(CHROMIUM) and not (ROOT / CHROMIUM).exists():
    pytestmark.append(pytest.mark.skip(reason=f"{CHROMIUM} missing: scripts/test.sh installs Debian chromium"))


LAPTOP_WIDTHS = (1024, 1280, 1440)     # the README's story and the MemLoom walk, read whole at each (issue 53.2)


@pytest.mark.parametrize("width", LAPTOP_WIDTHS)
def test_demo_walkthrough(tmp_path, width):
    """Step past the superseded fact, consolidate, accept the Update, and recover the archived unit; at a laptop's
    width, with no label cut short (each width on a workspace of its own: `/` reopens the last demo session)."""
    with running_app(env={ENV: str(tmp_path / "workspace")}) as url, browser_page(width, 900) as page:
        texts = walkthrough(page, url, shots=tmp_path)
    assert "What turn D5:9 caused" in texts["replay"]
    assert "Applied\n\n1" in texts["consolidation"]
    assert f"decided by {LOCAL}" in texts["consolidation"].replace("\u2060", "")      # (md_escape's word joiner)
    assert re.search(r"Skipped\n\n[1-9]", texts["consolidation"])        # the rest, deferred
    assert "Nodes created / archived\n\n0 / 1" in texts["consolidation"]       # the superseded unit archived
    assert "version (ν) · 1" in texts["graph"]
    assert "—version→" in texts["retrieval"] and "[archived]" in texts["retrieval"]
    assert "D1:4" in texts["retrieval"] and "D5:4" in texts["retrieval"]
    assert "commute" in texts["annotate"]
    assert len(list(tmp_path.glob("*.png"))) == 5
    assert_readable(texts)


@pytest.mark.parametrize("by_hand", [False, True], ids=["server flags", "streamlit run by hand"])
def test_an_edit_to_the_engine_under_a_running_server_leaves_every_page_working(tmp_path, by_hand):
    """Streamlit drops and imports again every module it watches when one of them changes. The engine's tables,
    declared a second time in SQLModel's one metadata, then failed every page until a restart ("Table 'op_log' is
    already defined"). The server keeps the engine out of its watcher, so a researcher who edits an engine rule
    (here in a copy of the checkout, on PYTHONPATH as the scripts run it) keeps a working workbench, and an edit
    to a workbench module still shows on the next rerun. That holds with the flags `memwb ui` passes, and for
    `streamlit run workbench/app.py` typed in the checkout, through its `.streamlit/config.toml`."""
    tree = tmp_path / "checkout"
    for part in ("engine", "workbench", "pages", "datasets", ".streamlit"):
        shutil.copytree(ROOT / part, tree / part, ignore=shutil.ignore_patterns("__pycache__"))
    rule = tree / "engine" / "engines" / "memloom" / "retrieval.py"
    labels = tree / "workbench" / "retrieval_view.py"
    with running_app(env={ENV: str(tmp_path / "ws")}, root=tree, by_hand=by_hand) as url, browser_page() as page:
        page.goto(url)
        wait_idle(page)
        rule.write_text(rule.read_text() + "\nEDITED_UNDER_A_RUNNING_SERVER = True\n")
        labels.write_text(labels.read_text().replace('"Free query"', '"Free query (edited)"'))
        edited = False
        for _ in range(20):                # until the watcher's event for the edits has reached the server
            open_page(page, "Retrieval")
            edited = "Free query (edited)" in page.inner_text("body")
            if edited or page.get_by_test_id("stException").count():
                break
            open_page(page, "Replay")
        assert edited and page.get_by_test_id("stException").count() == 0
        open_page(page, "Consolidation")
        assert page.get_by_role("button", name="Run diagnosis").count() == 1


def assert_readable(texts: dict[str, str]) -> None:
    """On every page a tour read, no label is drawn cut short and no id is a bare integer."""
    assert {k: v for k, v in texts.items() if k.endswith(("_cut", "_bare")) and v} == {}


def test_naive_rag_session_walkthrough(tmp_path):
    """A session opened in naive RAG: no edges, nothing to consolidate, retrieval beside All-Mem."""
    with running_app(env={"MEMWB_ENGINE": "naive"}) as url, browser_page() as page:
        texts = baseline_walkthrough(page, url, shots=tmp_path)
    assert "Engine · Naive RAG" in texts["replay"] and "What turn D5:9 caused" in texts["replay"]
    assert "keeps no edges" in texts["graph"]
    assert "The Naive RAG engine has no offline process: nothing to consolidate" in texts["consolidation"]
    assert "Ranking (ms)" in texts["retrieval"] and "All-Mem" in texts["retrieval"]
    assert "D5:4" in texts["retrieval"]
    assert len(list(tmp_path.glob("*.png"))) == 4


@pytest.mark.parametrize("width", LAPTOP_WIDTHS)
def test_memloom_session_walkthrough(tmp_path, width):
    """The demo switched to MemLoom from the Replay page's form: a turn's routing decision, steward relations with
    cited evidence applied by the gate, event FSM shapes and the lifecycle timeline, the causal question's path
    from its seed event, with no label cut short and no bare integer for an id, at a laptop's width."""
    with running_app(env={ENV: str(tmp_path / "workspace")}) as url, browser_page(width, 900) as page:
        texts = memloom_walkthrough(page, url, shots=tmp_path, switch=True)
    assert "Engine · MemLoom" in texts["replay"] and "What turn D" in texts["replay"]
    assert "Routing decision" in texts["replay"] and "score S_j" in texts["replay"]
    assert "★ cited" in texts["consolidation"] and "Relation" in texts["consolidation"]
    assert "applied" in texts["applied"]
    assert "Lifecycle timeline" in texts["graph"] and "events that pass the filters" in texts["graph"]
    assert "Lanes for" in texts["graph"]            # (the graph legend lives in its iframe)
    assert texts["graph_overlaps"] == "" and texts["retrieval_overlaps"] == ""      # no label over another
    assert_readable(texts)
    assert "Gold evidence: D2:6, D3:9, D4:2, D6:6" in texts["retrieval"] and "seed u" in texts["retrieval"]
    assert "—evidence→" in texts["retrieval"] and "stored edge" in texts["retrieval"]
    # the root cause is a result, reached from D6:6's event through the chain relations a why-question walks
    # (causes, and the state a plan became) and highlighted
    assert re.search(r"u\d+ +\[D2:6\*\][^\n]* seed u\d+( —(CAUSAL_FOLLOW|STATE_SUCCESSOR) \(reverse\)→ u\d+){2,} "
                     r"—evidence→ u\d+",
                     texts["retrieval"]), texts["retrieval"][-2500:]
    assert "(D2:6)" in texts["highlight"] and "CAUSAL_FOLLOW" in texts["highlight"], texts["highlight"]
    assert sorted(p.name for p in tmp_path.glob("*.png")) == ["6_memloom_graph.png", "7_memloom_retrieval.png",
                                                              "8_memloom_replay.png", "9_memloom_consolidation.png"]


def test_gam_topic_edge_accepted_undone_and_rejected_is_what_is_stored(tmp_path):
    """A GAM session whose topic edges wait for a person: the Replay page shows the session-end trigger with the
    detector's boundaries; on the Consolidation page a topic edge is accepted (stored), the run undone (gone)
    and the same edge rejected on a second diagnosis (stored as rejected, no edge); the topic network and the
    provenance path with its factors follow."""
    db = gam_session(tmp_path / "mine")
    with running_app(env={ENV: str(tmp_path / "ws")}, via_cli=True, cli_args=["--db", str(db)]) as url, \
            browser_page() as page:
        seen = gam_walkthrough(page, url, db, shots=tmp_path)
    assert "Session end trigger" in seen["replay"] and "Events in the active graph" in seen["replay"]
    assert "semantic consolidation" in seen["replay"] and "Detector boundaries" in seen["replay"]
    assert "Topic relation" in seen["queue"] and "new topic" in seen["queue"]
    edge, chosen = seen["edge"], seen["chosen"]
    accepted = seen["accepted"]
    assert edge in accepted.edges and accepted.proposals[chosen].status == Status.APPLIED
    assert accepted.proposals[chosen].decided_by == LOCAL
    assert edge not in seen["undone"].edges and seen["undone"].runs[seen["run"]].status == "undone"
    rejected = seen["rejected"]
    assert edge not in rejected.edges and rejected.proposals[seen["rejected_id"]].status == Status.REJECTED
    assert "Topic network" in seen["graph"] and "weighted relations" in seen["graph"]
    assert "β_time" in seen["ranking"] and "P_sem" in seen["ranking"]
    assert re.search(r"anchor u\d+ (—\w+( \(reverse\))?→ u\d+ )?—cross→ u\d+ \[archived\]", seen["retrieval"])
    assert sorted(p.name for p in tmp_path.glob("*.png")) == ["15_gam_replay.png", "16_gam_consolidation.png",
                                                              "17_gam_graph.png", "18_gam_retrieval.png"]


def test_memloom_graph_at_turn_80_shows_every_event_id_with_no_label_over_another_and_opens_an_event_on_click(
        tmp_path):
    """The demo at turn 80 in MemLoom after a steward run applied by the gate, as the MemLoom tour leaves it.
    Labels are read from vis-network's own layout of the canvas (each label's box, with its vertical shift, and
    its size on screen), with events folded, with one opened by a click, and with every event open."""
    with running_app(env={"MEMWB_ENGINE": "memloom", ENV: str(tmp_path)}) as url, browser_page() as page:
        seen = memloom_graph_walkthrough(page, url)
    state = Store(_session_db(tmp_path)).load_state()
    assert seen["turn"] == 80 and state.turn == 80 and state.runs          # the run was applied and stored
    events = {n.id: n for n in state.nodes.values() if n.kind == "event"}
    records = {m for e in events.values() for m in e.members}
    for key in ("folded_labels", "opened_labels", "unfolded_labels"):
        boxes = seen[key]
        assert not overlapping_labels(boxes), (key, [(a["label"], b["label"]) for a, b in overlapping_labels(boxes)])
        assert all(b["drawn"] for b in boxes), key                        # none below vis-network's draw threshold
        shown = {b["id"]: b for b in boxes if isinstance(b["id"], int)}
        assert set(events) <= set(shown), key
        for e in events.values():                                           # every event shows its id
            assert re.match(rf"u{e.id}\b", shown[e.id]["label"]), shown[e.id]["label"]
    folded = {b["id"]: b for b in seen["folded_labels"] if isinstance(b["id"], int)}
    assert set(folded) == set(events) and not records & set(folded)       # events folded: records inside them
    assert seen["folded"] == {i: len(e.members) for i, e in events.items()}
    assert min(b["screen_font"] for b in folded.values()) >= 12              # readable without zooming
    event = events[seen["clicked"]]
    assert len(event.members) == max(len(e.members) for e in events.values())
    opened = {n for n in seen["after"] if isinstance(n, int)}
    assert opened == set(folded) | set(event.members) and len(seen["after"]) == len(seen["before"]) + len(
        event.members)                                                     # the click opened it in place
    assert f"u{event.id} · {event.status} · {len(event.members)} members" in seen["open_picker"]
    assert seen["inspector"].startswith(f"u{event.id} ·")
    assert {n for n in seen["unfolded"] if isinstance(n, int)} == set(state.nodes)


def test_conversation_html_is_escaped_on_every_page():
    """Turns carrying <script> and onerror payloads: shown as text, never executed, on any page."""
    fixture = ROOT / "tests" / "fixtures" / "xss.jsonl"
    dialogs: list[str] = []
    with running_app(env={"MEMWB_DEMO": str(fixture)}) as url, browser_page() as page:
        page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
        page.goto(url)
        page.get_by_role("button", name="Next ▶").wait_for()
        wait_loaded(page)
        jump_to_turn(page, 6)
        replay = page.inner_text("body")
        assert "<script>alert('xss-turn')</script>" in replay          # rendered as literal text
        assert "<b>bold</b>" in replay
        open_page(page, "Consolidation")
        click(page, "Run diagnosis")
        page.get_by_text("Let the gate decide", exact=True).click()
        wait_idle(page)
        page.get_by_role("button", name="Apply gate verdicts").first.click()
        wait_idle(page, 1500)
        for title in ("Memory graph", "Retrieval", "Annotate", "Consolidation", "Replay"):
            open_page(page, title)
            page.wait_for_timeout(2000)
            for frame in page.frames:                               # the pyvis graph lives in an iframe
                injected = frame.evaluate("""() => ({
                    onerror: document.querySelectorAll('[onerror]').length,
                    bold: Array.from(document.querySelectorAll('b')).filter(b => b.textContent === 'bold').length,
                    scripts: Array.from(document.scripts).filter(s => s.text.trim().startsWith('alert(')).length,
                })""")
                assert injected == {"onerror": 0, "bold": 0, "scripts": 0}, f"{title}: {injected}"
    assert dialogs == [], f"conversation text executed as script: {dialogs}"


def test_a_page_load_stays_on_this_machine(tmp_path):
    """`memwb ui` started from another folder: no request leaves the machine on any page (the favicon is the app's
    own file), and Streamlit's Deploy button and developer menu are hidden (workbench/.streamlit/config.toml)."""
    requests: list[str] = []
    with running_app(cwd=tmp_path, via_cli=True) as url, browser_page() as page:
        page.on("request", lambda r: requests.append(r.url))
        page.goto(url)
        page.get_by_role("button", name="Next ▶").wait_for()
        wait_loaded(page)
        jump_to_turn(page, 12)
        for title in ("Memory graph", "Consolidation", "Retrieval", "Annotate"):
            open_page(page, title)
            page.wait_for_timeout(1500)
        icons = page.evaluate("() => Array.from(document.querySelectorAll('link[rel*=icon]')).map(l => l.href)")
        deploy = page.get_by_test_id("stAppDeployButton").count() + page.get_by_text("Deploy", exact=True).count()
    away = [u for u in requests if urlparse(u).scheme not in ("data", "blob", "about")
            and urlparse(u).hostname not in ("127.0.0.1", "localhost")]
    assert len(requests) > 20 and away == []
    assert icons and all(i.startswith(("data:image/svg+xml", url)) for i in icons), icons
    assert deploy == 0


def _session_db(workspace: Path, conversation: str = "demo") -> Path:
    """The session database the app made for `conversation` in the workspace it was started with."""
    found = [s.path for s in list_sessions(workspace / "sessions") if s.conversation == conversation]
    assert len(found) == 1, found
    return found[0]


def _card_radio(page, queue: list, pid: int):
    """The Decision radio of proposal `pid`'s card: cards follow the queue's order (`workbench.review.queue.sort_queue`)."""
    return page.get_by_test_id("stRadio").filter(has_text="Decision").nth([p.id for p in queue].index(pid))


def _choices_on_cards(page) -> list[str]:
    """The checked choice of every review card's Decision radio, top to bottom."""
    return page.evaluate("""() => Array.from(document.querySelectorAll('[data-testid="stRadio"]'))
        .filter(r => r.innerText.startsWith('Decision'))
        .map(r => { const c = r.querySelector('input:checked'); return c ? c.closest('label').innerText.trim() : ''; })""")


def test_bulk_and_single_decisions_are_what_is_stored(tmp_path):
    """Drive the review queue's bulk buttons and card radios as a person does, apply, and read the session
    database: the cards, the Apply button and what is stored agree."""
    with running_app(env={ENV: str(tmp_path)}) as url, browser_page() as page:
        page.goto(url)
        page.get_by_role("button", name="Next ▶").wait_for()
        wait_loaded(page)
        jump_to_turn(page, demo_turn_after("D5:9"))
        open_page(page, "Consolidation")
        click(page, "Run diagnosis")
        db = _session_db(tmp_path)
        run_id, pending = _open_run(db)
        passes = [p for p in pending if p.gate == GateVerdict.PASS]
        fails = [p for p in pending if p.gate == GateVerdict.FAIL]
        assert len(passes) >= 2 and fails

        click(page, "Accept gate passes, reject the rest")
        assert sorted(_choices_on_cards(page)) == sorted(["Accept"] * len(passes) + ["Reject"] * len(fails))
        flipped, undecided = passes[0], fails[0]
        queue = sort_queue(pending)
        _card_radio(page, queue, flipped.id).get_by_text("Reject", exact=True).click()
        wait_idle(page)
        _card_radio(page, queue, undecided.id).get_by_text("Undecided", exact=True).click()
        wait_idle(page)
        expected = {p.id: Status.REJECTED for p in fails}
        expected.update({p.id: "accepted" for p in passes[1:]})
        expected.update({flipped.id: Status.REJECTED, undecided.id: Status.PENDING})
        accepted = len(passes) - 1
        click(page, f"Apply decisions ({accepted} accept, {len(pending) - accepted - 1} reject; "
                    "1 undecided stay pending)")
        page.get_by_text(re.compile(r"1 proposal\(s\) still pending")).wait_for()
        stored = Store(db).load_state()
        for pid, want in expected.items():
            got = stored.proposals[pid]
            if want == "accepted":                   # executed, or refused by the executor; never rejected
                assert got.status not in (Status.PENDING, Status.REJECTED) and got.decided_by == LOCAL, got
            else:
                assert got.status == want, (pid, got.status, want)
        assert stored.proposals[undecided.id].decided_by is None and stored.runs[run_id].status == "open"
        assert _choices_on_cards(page) == ["Undecided"]          # only the pending proposal is left on the queue

        click(page, "Defer the 1 undecided")
        page.get_by_text(re.compile(rf"{run_id} committed: .*1 skipped \(deferred with a note\)")).wait_for()
        stored = Store(db).load_state()
        deferred = stored.proposals[undecided.id]
        assert (deferred.status, deferred.decided_by) == (Status.SKIPPED, LOCAL)
        assert deferred.note.startswith(f"deferred by {LOCAL}") and stored.runs[run_id].status == "committed"

        open_page(page, "Replay")                              # the run is closed: the replay goes on
        jump_to_turn(page, len(_demo_turns()))
        open_page(page, "Consolidation")
        click(page, "Run diagnosis")
        run_id, pending = _open_run(db)
        archived = set(Store(db).load_state().archived_ids)
        click(page, "Reject all shown")
        assert set(_choices_on_cards(page)) == {"Reject"}
        click(page, f"Apply decisions (0 accept, {len(pending)} reject)")
        page.get_by_text(re.compile(rf"{run_id} committed: 0 applied, {len(pending)} rejected")).wait_for()
        stored = Store(db).load_state()
        assert {(stored.proposals[p.id].status, stored.proposals[p.id].decided_by) for p in pending} == \
            {(Status.REJECTED, LOCAL)}
        assert stored.runs[run_id].status == "committed" and set(stored.archived_ids) == archived


def _open_run(db: Path):
    """The open run of the session database and its pending proposals, as stored."""
    state = Store(db).load_state()
    run_id = next(r.run_id for r in state.open_runs())
    return run_id, [p for p in state.proposals.values() if p.run_id == run_id and p.status == Status.PENDING]


def _demo_turns():
    from engine.loaders import load_conversation
    from workbench.model import DEMO_PATH

    return load_conversation(DEMO_PATH).turns


def test_dataset_strings_show_literally_and_never_as_links(tmp_path):
    """A conversation id with a backtick, a session label with **, an annotation question whose sample_id is a
    markdown link, and a turn holding one: the page shows the characters and holds no link to them."""
    fixture = ROOT / "tests" / "fixtures" / "markdown.jsonl"
    with running_app(env={"MEMWB_DEMO": str(fixture), "TMPDIR": str(tmp_path)}) as url, browser_page() as page:
        page.goto(url)
        page.get_by_role("button", name="Next ▶").wait_for()
        wait_loaded(page)
        jump_to_turn(page, 2)
        replay = page.inner_text("body").replace("\u2060", "")
        open_page(page, "Annotate")
        page.get_by_role("button", name="Import").first.click()
        page.get_by_test_id("stFileUploaderDropzoneInput").set_input_files(
            str(ROOT / "tests" / "fixtures" / "markdown_cases.json"))
        page.get_by_text("added 1 case(s)").wait_for()
        page.keyboard.press("Escape")
        wait_idle(page, 1500)
        annotate = page.inner_text("body").replace("\u2060", "")
        links = [h for frame in page.frames for h in frame.evaluate(
            "() => Array.from(document.querySelectorAll('a')).map(a => a.href)") if "example." in h]
    assert "Conversation · md`conv" in replay and "Session · **S1**" in replay
    assert "Play to end of session **S1**" in replay
    assert "See [open the report](https://example.com) for the rota" in replay       # the transcript, as typed
    assert "Question · [open the report](https://example.com)" in annotate
    assert links == []


def _header_turn(page) -> str:
    """The header's "Turn · n / N" as the page shows it."""
    return re.search(r"Turn · (\d+) / \d+", page.inner_text("body")).group(1)


def _query(page) -> dict[str, list[str]]:
    return parse_qs(urlparse(page.url).query)


def test_a_reload_and_a_shared_link_return_to_the_same_session_page_and_turn(tmp_path):
    """Step, step back, go to another page, reload: the same session database, page and turn; then a second browser
    context opening the same URL lands there too. The workspace holds that one session, at its log head."""
    with running_app(env={ENV: str(tmp_path)}) as url, browser_page() as page:
        page.goto(url)
        page.get_by_role("button", name="Next ▶").wait_for()
        wait_loaded(page)
        jump_to_turn(page, 9)
        click(page, "◀ Back")
        page.get_by_text("Turn · 8 / ").wait_for()
        db = _session_db(tmp_path)
        assert read_session(db).turn == 9                       # the log holds 9 turns; the cursor is at 8
        open_page(page, "Memory graph")
        page.wait_for_function("() => location.pathname.endsWith('/graph') && location.search.includes('turn=8')")
        assert _query(page) == {"session": [db.name], "turn": ["8"]}
        link = page.url

        page.reload()
        page.get_by_text(f"Database · {db.name}").wait_for()
        wait_idle(page)
        assert _header_turn(page) == "8" and urlparse(page.url).path.endswith("/graph")
        assert page.get_by_role("heading", name="Memory graph").count()
        assert _session_db(tmp_path) == db and read_session(db).turn == 9      # no new session was made

        other = page.context.browser.new_context(viewport={"width": 1500, "height": 1100}).new_page()
        other.set_default_timeout(120_000)
        other.goto(link)
        other.get_by_text(f"Database · {db.name}").wait_for()
        wait_loaded(other)
        assert _header_turn(other) == "8" and urlparse(other.url).path.endswith("/graph")
        open_page(other, "Replay")
        click(other, "Next ▶")                                   # through the log: the cursor moves, nothing ingested
        other.get_by_text("Turn · 9 / ").wait_for()
        other.wait_for_function("() => location.search.includes('turn=9')")
        assert read_session(db).turn == 9 and _session_db(tmp_path) == db
        assert _query(other) == {"session": [db.name], "turn": ["9"]}
        click(other, "◀ Back")
        other.get_by_text("Sessions in the workspace").click()        # the picker reopens it at its log head
        wait_idle(other)
        chosen = other.get_by_role("combobox", name="Session", exact=True)
        assert chosen.input_value() == f"{db.name} · demo · turn 9"       # the open session, its log head
        click(other, "Open session", exact=True)
        other.get_by_text(f"Opened {db.name} at turn 9 of").wait_for()
        assert _header_turn(other) == "9"


def test_memwb_ui_db_opens_that_session(tmp_path):
    """`memwb ui --db FILE` with a database outside the workspace: the app opens it at its log head and steps on
    in that file; the URL carries only the turn (the file has no name in the workspace), and a reload comes back."""
    wb = Workbench.open(DEMO_PATH, engine="naive", workdir=tmp_path / "mine", label="my demo")
    wb.jump(6)
    db = wb.db_path
    workspace = tmp_path / "workspace"
    with running_app(env={ENV: str(workspace)}, via_cli=True, cli_args=["--db", str(db)]) as url, \
            browser_page() as page:
        page.goto(url)
        page.get_by_text(f"Database · {db.name}").wait_for()
        wait_loaded(page)
        assert _header_turn(page) == "6" and "my demo" in page.inner_text("body")
        click(page, "Next ▶")
        page.get_by_text("Turn · 7 / ").wait_for()
        assert read_session(db).turn == 7                       # the named file itself grew
        page.wait_for_function("() => location.search.includes('turn=7')")
        assert _query(page) == {"turn": ["7"]}
        page.reload()
        page.get_by_text(f"Database · {db.name}").wait_for()
        wait_idle(page)
        assert _header_turn(page) == "7"
    assert not list((workspace / "sessions").glob("*.sqlite"))     # nothing else was made
def test_graph_at_locomo_scale_groups_sessions_and_a_click_inspects_a_node(tmp_path):
    """conv-26 played to its end (419 turns): the graph draws its 19 sessions as groups with the current one
    expanded; clicking a unit on the canvas shows that unit in the inspector, clicking a group expands it."""
    needs_data(LOCOMO)
    conversation = locomo_conversation_file(tmp_path / "data")
    env = {"MEMWB_DEMO": str(conversation), "MEMWB_WORKSPACE": str(tmp_path / "ws"), "TMPDIR": str(tmp_path)}
    with running_app(env=env) as url, browser_page() as page:
        seen = locomo_graph_walkthrough(page, url)
    groups = [n for n in seen["grouped"] if str(n).startswith("group:")]
    bands = [n for n in seen["grouped"] if str(n).startswith("session:")]
    assert seen["turns"] == 419 and len(groups) == 18 and bands == ["session:19"]
    assert seen["inspector"].startswith(f"u{seen['clicked']} ·")
    session = seen["expanded_group"].removeprefix("group:")
    assert f"session:{session}" in seen["after_expanding"] and seen["expanded_group"] not in seen["after_expanding"]
    assert "sessions collapsed into group nodes" not in seen["text"]          # (the summary lives in the frame)


def test_a_long_jump_shows_progress_and_cancel_keeps_the_turns_done(tmp_path):
    """Jump to the end of LoCoMo conv-26: the bar counts turns with an estimate while the header follows; Cancel
    stops it between committed steps, the stored log holds exactly the turns the header shows, and it stays
    so (the jump does not resume)."""
    from conftest import LOCOMO, needs_data

    from engine.loaders import load_conversation

    needs_data(LOCOMO)
    source = locomo_conversation_file(tmp_path / "data")
    env = {"MEMWB_DEMO": str(source), "TMPDIR": str(tmp_path), "MEMWB_WORKSPACE": str(tmp_path / "workspace")}
    with running_app(env=env) as url, browser_page() as page:
        page.goto(url)
        page.get_by_role("button", name="Next ▶").wait_for(timeout=180_000)
        wait_loaded(page)
        bar = start_long_jump(page, 419, shown_turn=5)
        page.wait_for_function("() => +(document.body.innerText.match(/Turn · (\\d+) \\/ 419/) || [0, 0])[1] >= 5")
        header_mid = re.search(r"Turn · (\d+) / 419", page.inner_text("body"))          # redrawn as it goes
        page.get_by_role("button", name="Cancel").click()
        note = page.get_by_text(re.compile("cancelled at turn")).first
        note.wait_for()
        note = note.inner_text()
        wait_idle(page, 2000)
        body = page.inner_text("body")
        page.wait_for_timeout(3000)
        later = page.inner_text("body")
    assert re.search(r"Turn \d+ / 419 · \d+ of 419 turns ingested · [\d\w ]+ elapsed · about [\d\w ]+ left", bar), bar
    assert header_mid and int(header_mid.group(1)) >= 5                  # the header followed the jump
    shown = int(re.search(r"Turn · (\d+) / 419", body).group(1))
    assert 5 <= shown < 419 and f"cancelled at turn {shown} of 419" in note, note
    assert re.search(r"Turn · (\d+) / 419", later).group(1) == str(shown) and "Cancel" not in later
    [db] = [p for p in tmp_path.rglob("conv-26*.sqlite")]
    stored = [op.payload["turn_id"] for op in Store(db).ops(kinds=["turn_ingested"])]
    assert stored == [t.id for t in load_conversation(source).turns[:shown]]    # some, not all, in order


def test_a_benchmark_miss_opens_on_the_retrieval_page_in_its_session_at_its_turn(tmp_path, monkeypatch):
    """The Benchmark page on a real `memwb bench` run of the demo: pick naive RAG's first miss asked before
    the stream's end and open it. The Retrieval page shows that task's session database at the question's
    turn with the question chosen as the dataset question, its path and the missed gold lines; the session's
    log is unchanged and no session was added to the workspace."""
    from workbench.benchmark.result import load_result
    from workbench.driver import bench_demo_workspace, benchmark_walkthrough, first_miss

    monkeypatch.setenv(ENV, str(tmp_path))
    path = bench_demo_workspace(tmp_path)
    result = load_result(path)
    record = first_miss(path, "naive")
    qid = record["question_id"]
    db = result.session_db("demo", "naive")
    head = read_session(db).turn
    with running_app(env={ENV: str(tmp_path), "TMPDIR": str(tmp_path)}) as url, browser_page() as page:
        texts = benchmark_walkthrough(page, url, path, miss=qid, system="naive")
        question = page.get_by_test_id("stSelectbox").filter(has_text="Question").get_by_role("combobox")
        chosen = question.input_value()
        source = page.evaluate("""() => { const r = Array.from(document.querySelectorAll('[data-testid="stRadio"]'))
            .find(r => r.innerText.startsWith('Query')); const c = r && r.querySelector('input:checked');
            return c ? c.closest('label').innerText.trim() : ''; }""")
        query = _query(page)
        header_turn = _header_turn(page)
    assert "Per-round curves" in texts["benchmark"] and "Memory growth per round" in texts["benchmark"]
    assert texts["picked"] == f"naive · demo · {qid} · {record['question']} · miss"     # the table row selected
    assert record["turn"] < head                              # the question was asked before the log's end
    assert header_turn == str(record["turn"]) and query == {"turn": [str(record["turn"])]}
    assert f"Database · {db.name}" in texts["retrieval"] and "Engine · Naive RAG" in texts["retrieval"]
    assert chosen == f"{qid.split(':')[-1]} · {record['question']}" and source == "Dataset question"
    assert f"Gold evidence: {', '.join(record['gold'])}" in texts["retrieval"]
    assert "Missed gold evidence" in texts["retrieval"]
    assert read_session(db).turn == head                      # opening it ingested nothing
    made = list((tmp_path / "sessions").glob("*.sqlite"))      # only the demo session the app started on, unread
    assert len(made) == 1 and read_session(made[0]).turn == 0


def test_recmem_consolidation_accepted_rejected_and_undone(tmp_path):
    """RecMem opened from the settings form (θ_sim 0.6, θ_count 3, manual schedule): the gate's trace on Replay;
    on Consolidation one recurrence cluster rejected and the other accepted card by card, then the run undone.
    The session database says what each step did."""
    from workbench.driver import recmem_walkthrough

    with running_app(env={ENV: str(tmp_path)}) as url, browser_page() as page:
        tour = recmem_walkthrough(page, url, tmp_path)
    texts, db = tour["texts"], tour["db"]
    store = Store(db)
    settings = store.meta()["settings"]
    assert (settings["theta_sim"], settings["theta_count"], settings["theta_merge"]) == (0.6, 3, 0.6)
    assert "Recurrence gate" in texts["replay"] and "|R| vs θ_count" in texts["replay"]
    assert "Recurrence trigger" in texts["replay"] and "θ_count" in texts["replay"]
    assert "Cluster (the proposal's inputs)" in texts["consolidation"]
    run = store.load_state().runs[tour["run"]]
    applied = store.load_state(upto_seq=run.last_seq)             # the session as the apply left it
    for pid in tour["rejected"]:
        p = applied.proposals[pid]
        assert (p.status, p.decided_by) == (Status.REJECTED, LOCAL)
    rejected_cluster = applied.proposals[tour["rejected"][0]]
    assert all(applied.nodes[u].status == "subconscious" for u in rejected_cluster.targets)
    accepted = [applied.proposals[pid] for pid in tour["accepted"]]
    assert all(p.status == Status.APPLIED and p.decided_by == LOCAL for p in accepted)
    episodes = [e for p in accepted if p.op == "consolidate" for e in p.detail["episodes"]]
    assert episodes and all(applied.nodes[e].kind == "episode" for e in episodes)
    for p in accepted:
        if p.op == "consolidate":
            members = {u for e in p.detail["episodes"] for u in applied.nodes[e].members}
            assert members <= set(p.targets) and all(applied.nodes[u].status == "consolidated" for u in members)
    facts = [n for n in applied.nodes.values() if n.kind == "fact"]
    assert facts and all((f.id, applied.nodes[f.id].attrs["episode"], "derived_from") in applied.edges
                         for f in facts)
    assert "Layers" in texts["graph"] and "derives from" in texts["retrieval"]
    final = store.load_state()
    assert final.runs[tour["run"]].status == "undone"
    assert not [n for n in final.nodes.values() if n.kind in ("episode", "fact")]
    assert all(n.status == "subconscious" for n in final.nodes.values() if n.kind == "unit")

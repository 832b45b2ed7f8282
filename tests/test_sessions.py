"""The workspace's sessions: listing real databases (with a branch and files that are no session), names from a
link, and reopening a session at its log head."""
from __future__ import annotations

import shutil
import sqlite3

import pytest

from engine.loaders import load_conversation
from engine.runtime.replay import Schedule, replay
from engine.session import SessionError, open_session
from engine.store.catalog import (
    LAST_OPENED,
    SessionNameError,
    list_sessions,
    new_session_path,
    read_session,
    resolve_session,
)
from workbench.model import DEMO_PATH, Workbench


def test_listing_reads_meta_turn_and_branches_and_names_foreign_files(tmp_path):
    folder = tmp_path / "sessions"
    folder.mkdir()
    conversation = load_conversation(DEMO_PATH)
    replayed = open_session(folder / "cli.sqlite", engine="naive", conversation=conversation.id,
                            source=str(DEMO_PATH), schedule="manual")
    replay(replayed, type(conversation)(conversation.id, conversation.turns[:6], speakers=conversation.speakers),
           Schedule.parse("manual"))
    wb = Workbench.open(DEMO_PATH, engine="allmem", schedule="every-3-sessions", workdir=folder)
    wb.jump(12)
    wb.jump(8)
    parent = wb.db_path
    wb.ensure_head()                                           # an edit behind the head: a branch at turn 8
    branch = wb.db_path
    wb.jump(10)
    (folder / "notes.txt").write_text("not a database")
    (folder / "garbage.sqlite").write_bytes(b"\x00garbage" * 100)
    with sqlite3.connect(folder / "other.sqlite") as foreign:
        foreign.execute("CREATE TABLE t (x)")
    foreign_bytes = (folder / "other.sqlite").read_bytes()

    listing = list_sessions(folder)
    by_name = {s.name: s for s in listing}
    assert branch.parent == folder and parent.parent == folder
    assert set(by_name) == {"cli.sqlite", parent.name, branch.name, "notes.txt", "garbage.sqlite", "other.sqlite"}
    cli = by_name["cli.sqlite"]
    assert (cli.source, cli.conversation, cli.engine, cli.schedule, cli.turn) == \
        (str(DEMO_PATH), conversation.id, "naive", "manual", 6)
    assert cli.last_opened is None and cli.depth == 0 and cli.parent is None
    root = by_name[parent.name]
    assert (root.engine, root.schedule, root.turn, root.depth) == ("allmem", "every-3-sessions", 12, 0)
    assert root.last_opened and root.source == str(DEMO_PATH.resolve())
    child = by_name[branch.name]
    assert (child.parent, child.depth, child.turn, child.conversation) == (parent.name, 1, 10, conversation.id)
    names = [s.name for s in listing]
    assert names.index(branch.name) == names.index(parent.name) + 1            # the branch right under its parent
    assert names[-3:] == ["garbage.sqlite", "notes.txt", "other.sqlite"]     # no-session files last, each a line
    assert "not a readable session database" in by_name["garbage.sqlite"].problem
    assert "not a readable session database" in by_name["notes.txt"].problem
    assert "not a Memory Workbench session" in by_name["other.sqlite"].problem
    assert (folder / "other.sqlite").read_bytes() == foreign_bytes            # listing never writes to a file
    assert not any(s.name.endswith(("-wal", "-shm")) for s in listing)


def test_turn_comes_from_the_log_without_a_fold(tmp_path):
    wb = Workbench.demo(workdir=tmp_path)
    wb.jump(5)
    wb.back()                                                  # the cursor moved, the log head did not
    info = read_session(wb.db_path)
    assert info.turn == wb.head == 5 and info.readable


def test_new_session_paths_never_collide(tmp_path):
    first = new_session_path("demo-allmem", tmp_path)
    second = new_session_path("demo-allmem", tmp_path)
    assert (first.name, second.name) == ("demo-allmem-1.sqlite", "demo-allmem-2.sqlite")
    assert new_session_path("demo-allmem", tmp_path).name == "demo-allmem-3.sqlite"


@pytest.mark.parametrize("name", ["../x.sqlite", "/etc/passwd", "a/b.sqlite", "..", ".", "", "a\\..\\b"])
def test_a_link_cannot_name_a_file_outside_the_sessions_folder(tmp_path, name):
    (tmp_path / "x.sqlite").write_text("outside")
    folder = tmp_path / "sessions"
    folder.mkdir()
    with pytest.raises(SessionNameError, match="sessions folder"):
        resolve_session(name, folder)


def test_a_symlink_out_of_the_folder_is_refused(tmp_path):
    folder = tmp_path / "sessions"
    folder.mkdir()
    (tmp_path / "x.sqlite").write_text("outside")
    (folder / "link.sqlite").symlink_to(tmp_path / "x.sqlite")
    with pytest.raises(SessionNameError, match="outside"):
        resolve_session("link.sqlite", folder)
    with pytest.raises(SessionNameError, match="no session 'missing.sqlite'"):
        resolve_session("missing.sqlite", folder)


def test_resume_reopens_at_the_log_head_and_marks_it_opened(tmp_path):
    wb = Workbench.open(DEMO_PATH, engine="allmem", schedule="every-3-sessions", workdir=tmp_path, label="the demo")
    wb.jump(9)
    wb.back()
    again = Workbench.resume(wb.db_path, embedder=wb.engine.embedder)
    assert again.cursor == again.head == 9
    assert (again.source_label, again.conversation.id, again.engine_name, again.schedule_name) == \
        ("the demo", wb.conversation.id, "allmem", "every-3-sessions")
    assert again.engine.store.get_meta(LAST_OPENED)
    again.next()
    assert again.head == 10


def test_resume_says_what_is_missing(tmp_path):
    source = tmp_path / "copy.jsonl"
    shutil.copy(DEMO_PATH, source)
    wb = Workbench.open(source, workdir=tmp_path / "s")
    wb.jump(3)
    source.unlink()
    stored = wb.db_path.read_bytes()
    with pytest.raises(SessionError, match=r"replayed from .*copy\.jsonl, which is gone"):
        Workbench.resume(wb.db_path)
    assert wb.db_path.read_bytes() == stored
    with pytest.raises(SessionError, match="no session database"):
        Workbench.resume(tmp_path / "nothing.sqlite")
    (tmp_path / "junk.sqlite").write_bytes(b"junk" * 50)
    with pytest.raises(SessionError, match="not a readable session database"):
        Workbench.resume(tmp_path / "junk.sqlite")


def test_a_refused_open_leaves_no_empty_session(tmp_path):
    with pytest.raises(ValueError):
        Workbench.open(DEMO_PATH, engine="allmem", settings={"ablations": ["no-such-ablation"]}, workdir=tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_a_branch_made_by_the_store_alone_is_found_under_its_parent(tmp_path):
    """A branch without the workbench's `parent` meta: the `branched_from` URL the store records places it."""
    conversation = load_conversation(DEMO_PATH)
    engine = open_session(tmp_path / "a.sqlite", engine="naive", conversation=conversation.id, source=str(DEMO_PATH))
    replay(engine, type(conversation)(conversation.id, conversation.turns[:5], speakers=conversation.speakers),
           Schedule.parse("manual"))
    engine.store.branch(tmp_path / "b.sqlite", engine.store.last_seq(upto_turn=3))
    listing = list_sessions(tmp_path)
    assert [(s.name, s.depth, s.parent, s.turn) for s in listing] == [("a.sqlite", 0, None, 5),
                                                                      ("b.sqlite", 1, "a.sqlite", 3)]

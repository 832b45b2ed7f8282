"""The workbench session model: stepping folds the log, edits behind the head branch, open runs block ingest."""
from __future__ import annotations

import pytest

from workbench.model import Workbench


def test_stepping_folds_and_refuses_to_ingest_past_an_open_run(tmp_path):
    wb = Workbench.demo(workdir=tmp_path)
    wb.jump(12)
    seq = wb.engine.store.last_seq()
    wb.back()
    wb.back()
    assert wb.cursor == 10 and wb.head == 12 and wb.engine.store.last_seq() == seq   # the log is untouched
    assert len(wb.view.state.units) == 10
    wb.next()
    assert wb.cursor == 11 and wb.engine.store.last_seq() == seq                    # moved through the log
    wb.jump(12)
    wb.engine.propose(manual=True)
    with pytest.raises(RuntimeError, match="waiting for a decision"):
        wb.next()
    assert wb.head == 12
    wb.engine.apply({}, decided_by="test")
    wb.next()
    assert wb.head == 13


def test_edit_behind_the_head_branches(tmp_path):
    wb = Workbench.demo(workdir=tmp_path)
    wb.jump(12)
    original = wb.db_path
    wb.jump(8)
    wb.ensure_head()
    assert wb.db_path != original and wb.branches == [original]
    assert wb.head == 8 and wb.at_head

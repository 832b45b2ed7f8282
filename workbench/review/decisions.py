"""The reviewer's accept / reject choices for a run, kept in session state until the run is applied.

Pagination drops widget state, so the choices live in one dict per run (keyed by database and run id) that
survives reruns; every card's radio, the bulk buttons, the queue table and the Apply button read and write
that dict, never the widgets' own state.
"""
from __future__ import annotations

from collections.abc import Iterable

import streamlit as st

from engine.core.proposal import Proposal, Status

UNDECIDED, ACCEPT, REJECT = "Undecided", "Accept", "Reject"
CHOICES = (UNDECIDED, ACCEPT, REJECT)
_DECISIONS_KEY = "review_decisions"


def decisions(run_key: str) -> dict[int, bool]:
    """The reviewer's accept (True) / reject (False) choices for one run; undecided ids are absent."""
    store = st.session_state.setdefault(_DECISIONS_KEY, {})
    return store.setdefault(run_key, {})


def run_key(db_name: str, run_id: str) -> str:
    """Decisions belong to one run of one database (a branch restarts run numbering from its fold)."""
    return f"{db_name}:{run_id}"


def widget_key(run_key: str, pid: int) -> str:
    return f"decide:{run_key}:{pid}"


def set_decisions(run_key: str, choices: dict[int, bool | None]) -> None:
    """Record choices (None = undecided): the bulk buttons and every card's radio write here, and the radios,
    the queue table and the Apply button all read from here (`decision_radio`)."""
    current = decisions(run_key)
    for pid, value in choices.items():
        if value is None:
            current.pop(pid, None)
        else:
            current[pid] = value


def _radio_changed(run_key: str, pid: int) -> None:
    choice = st.session_state[widget_key(run_key, pid)]
    set_decisions(run_key, {pid: None if choice == UNDECIDED else choice == ACCEPT})


def choice_of(value: bool | None) -> str:
    return UNDECIDED if value is None else ACCEPT if value else REJECT


def decision_radio(run_key: str, pid: int) -> None:
    """A card's Accept / Reject / Undecided radio, set from the stored decision on every run.

    The browser keeps a radio's own value across reruns, so a bulk button that only changed the stored
    decisions left the cards showing the old choice, and the next click sent that stale choice back. Writing
    the stored decision into the widget's state before drawing it makes the radio show what will be applied.
    """
    key = widget_key(run_key, pid)
    st.session_state[key] = choice_of(decisions(run_key).get(pid))
    st.radio("Decision", CHOICES, key=key, on_change=_radio_changed, args=(run_key, pid))


def tally(proposals: Iterable[Proposal], chosen: dict[int, bool]) -> tuple[int, int, int]:
    """(accepted, rejected, undecided) among the pending proposals: what Apply will do."""
    pending = [p for p in proposals if p.status == Status.PENDING]
    accepted = sum(chosen.get(p.id) is True for p in pending)
    rejected = sum(chosen.get(p.id) is False for p in pending)
    return accepted, rejected, len(pending) - accepted - rejected


"""The Replay page's transcript: the turns around the cursor as escaped HTML, seen ones naming their node.

Its own module because the transcript is a view of its own beside what a turn caused: a window of turns
around the cursor, the current one marked, the upcoming ones dimmed and kept outside the scrolling box.
"""
from __future__ import annotations

import html
from datetime import datetime

from engine.core.conversation import Turn
from engine.core.state import MemoryState
from workbench.graph.style import status_tag


def when(iso: str) -> str:
    """Dataset time for people: '2024-05-11 19:34' (the ISO string itself if it does not parse)."""
    try:
        return datetime.fromisoformat(iso).strftime("%Y-%m-%d %H:%M")
    except ValueError:
        return iso


def transcript_window(total: int, cursor: int, before: int, after: int) -> tuple[int, int]:
    """Slice [start, stop) of turns to show: `before` seen turns up to the cursor and `after` upcoming ones."""
    start = max(0, cursor - 1 - before)
    return start, min(total, max(cursor, 1) + after)


_TRANSCRIPT_CSS = """<style>
.mw-tr { max-height: 470px; overflow-y: auto; display: flex; flex-direction: column-reverse;
         border: 1px solid #e0e0e0; border-radius: 6px; padding: 4px 8px; font-size: 0.92rem; }
.mw-tr .sess { margin: 8px 0 2px; font-weight: 600; color: #555; border-bottom: 1px solid #e6e6e6; }
.mw-next { max-height: 220px; overflow-y: auto; border: 1px dashed #e0e0e0; border-top: none;
           border-radius: 0 0 6px 6px; padding: 2px 8px; font-size: 0.92rem; }
.mw-tr .row, .mw-next .row { padding: 4px 6px; margin: 2px 0; border-left: 4px solid transparent; border-radius: 3px; }
.mw-tr .row.cur { background: #fff4cf; border-left-color: #e6a100; }
.mw-next .row.future { opacity: 0.55; }
.mw-next .sess { margin: 8px 0 2px; font-weight: 600; color: #555; border-bottom: 1px solid #e6e6e6; }
.mw-tr .meta, .mw-next .meta { font-size: 0.78rem; color: #666; }
.mw-tr .tag { font-weight: 700; color: #8a5a00; }
</style>"""


def transcript_html(turns: list[Turn], cursor: int, head: int, state: MemoryState, before: int = 10,
                    after: int = 4) -> str:
    """The turns around the cursor as escaped HTML, the current one marked and the upcoming ones dimmed.

    Seen turns name the node they became in `state` (the view at the cursor) and its status when off the surface;
    upcoming turns say whether the log already holds them (cursor behind the head) or not.
    """
    e = html.escape
    start, stop = transcript_window(len(turns), cursor, before, after)
    seen, upcoming, session = [], [], None
    for i in range(start, stop):
        t = turns[i]
        rows = seen if i < cursor else upcoming
        if t.session != session:
            session = t.session
            rows.append(f'<div class="sess">Session {e(t.session)} · {e(t.time[:10])}</div>')
        if i == cursor - 1:
            css, tag = "cur", '<span class="tag">▶ current turn</span> · '
        elif i >= cursor:
            css, tag = "future", "in the log, ahead of the cursor · " if i < head else "not yet ingested · "
        else:
            css, tag = "seen", ""
        u = state.units.get(state.turn_units.get(t.id, -1))
        unit = "" if u is None else f" · → {e(u.label)}{e(status_tag(u))}"
        caption = f" <i>[shares an image: {e(t.image_caption)}]</i>" if t.image_caption else ""
        rows.append(
            f'<div class="row {css}"><div class="meta">{tag}#{i + 1} · {e(t.id)} · session {e(t.session)} · '
            f'{e(when(t.time))}{unit}</div><div><b>{e(t.speaker)}</b>: {e(t.text)}{caption}</div></div>')
    shown = f"turns {start + 1}–{stop} of {len(turns)}" if stop > start else "no turns"
    # Seen turns scroll in a box anchored at its bottom, which is the current turn; the upcoming ones sit below
    # it, outside that box, so however long they are the current turn stays in view.
    ahead = f'<div class="mw-next">{"".join(upcoming)}</div>' if upcoming else ""
    return (f'{_TRANSCRIPT_CSS}<div class="meta" style="color:#666;font-size:0.8rem">Showing {shown}</div>'
            f'<div class="mw-tr"><div>{"".join(seen)}</div></div>{ahead}')

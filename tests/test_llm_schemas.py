"""Every role's reply a model is asked for is bounded, and its longest form fits the role's output budget.

In the last full-demo run through SmolLM2 (max_tokens 256), 100 of 102 All-Mem diagnoses were cut at the limit
and failed as JSON_PARSE_FAIL: nothing in the schema ended a string or a list. Here, for every role, the longest
reply the bounded schema admits (as llama.cpp's grammar writes it) is built, counted, and checked against the
role's budget, and against what the validation accepts.
"""
from __future__ import annotations

import json
import re

import pytest

from engine.llm import structured
from engine.llm.base import estimate_tokens, parse_and_validate
from engine.llm.schemas import BOUNDS, CAPS, SCHEMAS, TOKEN_CAPS, model_schema


def _walk(schema: dict, where: str = ""):
    """(location, sub-schema) of every node of a schema."""
    yield where or "<root>", schema
    for name, sub in schema.get("properties", {}).items():
        yield from _walk(sub, f"{where}.{name}" if where else name)
    if "items" in schema:
        yield from _walk(schema["items"], f"{where}[]")


@pytest.mark.parametrize("role", sorted(SCHEMAS))
def test_every_string_and_list_a_model_writes_is_bounded(role: str) -> None:
    assert role in BOUNDS and role in TOKEN_CAPS
    for where, node in _walk(model_schema(role)):
        if node.get("type") == "string" and "enum" not in node:
            assert "maxLength" in node, (role, where)
        if node.get("type") == "array":
            assert "maxItems" in node, (role, where)


@pytest.mark.parametrize("role", sorted(SCHEMAS))
def test_the_longest_reply_fits_the_token_cap_and_passes_the_caps(role: str) -> None:
    """One token per character bounds every counter the project has (the words x 4/3 estimate, MiniLM's
    WordPiece) and SmolLM2's byte-level BPE on ASCII text (tests/test_llm_live.py counts it with the server's
    own tokenizer); the longest reply is also accepted by the schema and the caps every backend is held to."""
    text = structured.longest_reply(model_schema(role))
    assert len(text) <= TOKEN_CAPS[role], (role, len(text), TOKEN_CAPS[role])
    assert TOKEN_CAPS[role] - len(text) < 64, f"{role}: a budget far above its longest reply ({len(text)})"
    assert estimate_tokens(text) <= len(text)
    _, code, error = parse_and_validate(text, SCHEMAS[role], CAPS.get(role, ()))
    assert code is None, (role, error)


def test_wordpiece_counts_no_more_than_characters() -> None:
    from engine.engines.gam.tokens import counter

    count = counter("minilm-wordpiece")
    for role in SCHEMAS:
        text = structured.longest_reply(model_schema(role))
        assert count(text) <= len(text), role


def test_a_role_without_bounds_has_no_longest_reply() -> None:
    with pytest.raises(ValueError, match="a string with no maxLength"):
        structured.longest_reply(SCHEMAS["descriptor"])
    with pytest.raises(ValueError, match="a list with no maxItems"):
        structured.longest_reply({"type": "array", "items": {"type": "boolean"}})


def test_bounds_are_written_without_touching_the_role_schemas() -> None:
    before = json.dumps(SCHEMAS, sort_keys=True)
    bounded = model_schema("diagnosis")
    assert bounded["properties"]["split_tasks"]["maxItems"] == 1
    node_ids = bounded["properties"]["merge_tasks"]["items"]["properties"]["node_ids"]
    assert (node_ids["minItems"], node_ids["maxItems"], node_ids["items"]["maxLength"]) == (2, 4, 8)
    reason = bounded["properties"]["update_tasks"]["items"]["properties"]["reason"]
    assert reason == {"type": "string", "maxLength": 120}
    assert json.dumps(SCHEMAS, sort_keys=True) == before
    custom = model_schema("descriptor", {"type": "object", "properties": {"summary": {"type": "string"}}})
    assert custom["properties"]["summary"]["maxLength"] == 240


def test_the_grammar_form_asks_for_plain_bounded_strings_and_stepped_confidences() -> None:
    """llama-cpp-python's converter lets a string hold raw control characters and ignores minimum/maximum;
    the form sent in json_object mode asks for what it does honour."""
    form = structured.grammar_schema(model_schema("diagnosis"))
    item = form["properties"]["split_tasks"]["items"]["properties"]
    pattern = item["reason"]["pattern"]
    assert pattern == '^[^"\\\\\\x00-\\x1f]{0,120}$'
    for text, ok in [("plain words, digits 1.25 and é", True), ("x" * 120, True), ("x" * 121, False),
                     ("a\nnew line", False), ('a "quote"', False), ("a \\ backslash", False)]:
        assert bool(re.fullmatch(pattern[1:-1], text)) is ok, text
    confidence = item["confidence"]["enum"]
    assert confidence[:3] == [0.0, 0.01, 0.02] and confidence[-1] == 1.0 and len(confidence) == 101
    assert max(len(json.dumps(v)) for v in confidence) == 4
    assert structured.grammar_schema({"type": "integer"}) == {"type": "integer"}
    assert structured.response_format("json_object", "d", model_schema("descriptor")) == {
        "type": "json_object", "schema": structured.grammar_schema(model_schema("descriptor"))}
    assert structured.response_format("json_schema", "d", model_schema("descriptor"))["json_schema"]["schema"] \
        == model_schema("descriptor")


def test_bounds_are_never_looser_than_the_caps() -> None:
    """A reply within a model's bounds is never refused by a cap (the caps bound what any backend writes)."""
    for role, bounds in BOUNDS.items():
        caps = {(c.field, k): v for c in CAPS.get(role, ()) for k, v in (("chars", c.max_chars),
                                                                         ("items", c.max_items)) if v is not None}
        for b in bounds:
            for kind, value in (("chars", b.max_chars), ("items", b.max_items)):
                cap = caps.get((b.field, kind))
                assert value is None or cap is None or value <= cap, (role, b.field, kind)

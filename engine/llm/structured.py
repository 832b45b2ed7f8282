"""How a chat endpoint is asked for output that follows a role's JSON schema, negotiated per server.

Servers differ: OpenAI and vLLM take ``response_format={"type": "json_schema", ...}``; llama.cpp's
server (llama-cpp-python) refuses that type (HTTP 500) but constrains decoding to a schema given as
``{"type": "json_object", "schema": ...}``; others take neither. `negotiate` asks the server once,
with a tiny probe per mode, which one it honours; the answer is cached per (endpoint, model) for the
process, recorded with every call (`params["structured"]`), and a setting (`MEMWB_OPENAI_STRUCTURED`)
overrides it. Whatever the mode, the reply is validated against the schema afterwards: a constrained
mode only makes a valid reply likelier, it is never trusted.

llama.cpp's server builds its grammar from the schema with llama-cpp-python's converter, which has two gaps
that made grammar-constrained replies fail anyway: its string characters include raw control characters
(a newline inside a string is invalid JSON: JSON_PARSE_FAIL though the grammar held), and it ignores a
number's ``minimum``/``maximum`` (a confidence of 2: SCHEMA_FAIL). `grammar_schema` rewrites a schema into
what that converter does honour before it is sent in `json_object` mode: a bounded string becomes a
``pattern`` of at most ``maxLength`` plain characters (no quote, backslash or control character, so no
escape either, and the length in characters is the length written), a bounded number an ``enum`` of its
values in steps of 0.01. `longest_reply` is the longest text such a grammar admits: what a role's output
budget must hold.
"""
from __future__ import annotations

import json
import re
from collections.abc import Callable

JSON_SCHEMA = "json_schema"        # OpenAI structured outputs, vLLM
JSON_OBJECT = "json_object"        # JSON mode with a `schema` field (llama.cpp's server: grammar-constrained)
PROMPT = "prompt"                  # plain text: the schema is written into the system message, then validated
AUTO = "auto"
MODES = (JSON_SCHEMA, JSON_OBJECT, PROMPT)
SETTINGS = (AUTO, *MODES)

# The probe: a schema every mode can be checked against with a few output tokens; its bounded string asks in
# the form the roles are asked in, so a server that refuses `maxLength` is found here, not on every call.
PROBE_SCHEMA = {"type": "object", "properties": {"ok": {"type": "boolean"},
                                                 "say": {"type": "string", "maxLength": 3}},
                "required": ["ok", "say"], "additionalProperties": False}
PROBE_MESSAGES = [{"role": "system", "content": "Reply with one JSON object and nothing else."},
                  {"role": "user", "content": 'Reply exactly {"ok": true, "say": "yes"}'}]
PROBE_MAX_TOKENS = 24
GRAMMAR_STEP = 0.01                # a bounded number is asked as one of its values in these steps
_PLAIN = r'[^"\\\x00-\x1f]'        # a string character llama.cpp's grammar may write with no escape
# llama.cpp's grammar writes at most 16 digits per part of a number (integral, decimals, exponent)
_LONGEST_NUMBER, _LONGEST_INTEGER = "-" + "9" * 16 + "." + "9" * 16 + "e-" + "9" * 16, "-" + "9" * 16

_DETECTED: dict[tuple[str, str], str] = {}


def check_setting(value: str) -> str:
    """`value` if it names a mode or `auto`, else a ValueError listing them."""
    if value not in SETTINGS:
        raise ValueError(f"unknown structured-output mode {value!r}; choose one of {', '.join(SETTINGS)}")
    return value


def response_format(mode: str, name: str, schema: dict) -> dict | None:
    """The `response_format` request field for `mode` (None: plain text)."""
    if mode == JSON_SCHEMA:
        return {"type": "json_schema", "json_schema": {"name": name, "schema": schema, "strict": True}}
    if mode == JSON_OBJECT:
        return {"type": "json_object", "schema": grammar_schema(schema)}
    return None


def grammar_schema(schema: dict) -> dict:
    """`schema` in the form llama-cpp-python's grammar converter honours (see the module's docstring)."""
    if not isinstance(schema, dict):
        return schema
    out = {k: ([grammar_schema(v) for v in value] if isinstance(value, list) and k in ("anyOf", "oneOf", "allOf")
               else {n: grammar_schema(v) for n, v in value.items()} if k == "properties"
               else grammar_schema(value) if k == "items" else value)
           for k, value in schema.items()}
    if "enum" in out or "const" in out:
        return out
    if out.get("type") == "string" and "maxLength" in out and "pattern" not in out:
        out["pattern"] = f"^{_PLAIN}{{{out.get('minLength', 0)},{out['maxLength']}}}$"
    elif out.get("type") == "number" and "minimum" in out and "maximum" in out:
        steps = round((out["maximum"] - out["minimum"]) / GRAMMAR_STEP)
        if 0 <= steps <= 1000:
            out["enum"] = [round(out["minimum"] + i * GRAMMAR_STEP, 2) for i in range(steps + 1)]
    return out


def longest_reply(schema: dict) -> str:
    """The longest JSON text the grammar of `grammar_schema(schema)` admits, as llama.cpp's grammar writes it
    (one optional space after each token): every string at its maxLength (in distinct plain characters), every
    list at its maxItems, every object with all its properties. Raises ValueError on a string or list with no
    bound, whose reply no budget holds."""
    counter = iter(range(10 ** 9))
    return _longest(grammar_schema(schema), counter)


def _longest(schema: dict, counter) -> str:
    if "enum" in schema or "const" in schema:
        return max((json.dumps(v) for v in schema.get("enum", [schema.get("const")])), key=len)
    kind = schema.get("type")
    if kind == "object":
        pairs = [f"{json.dumps(name)} : {_longest(sub, counter)}" for name, sub in schema["properties"].items()]
        return "{ " + ", ".join(pairs) + "} "
    if kind == "array":
        if "maxItems" not in schema:
            raise ValueError(f"a list with no maxItems: {json.dumps(schema)[:200]}")
        return "[ " + ", ".join(_longest(schema["items"], counter) for _ in range(schema["maxItems"])) + "] "
    if kind == "string":
        match = re.search(r"\{(\d+),(\d+)\}\$$", schema.get("pattern", ""))
        if match is None:
            raise ValueError(f"a string with no maxLength: {json.dumps(schema)[:200]}")
        n = int(match.group(2))
        return json.dumps((f"{next(counter)}:" + "x" * n)[:n]) + " "
    if kind == "boolean":
        return "false "
    if kind in ("number", "integer"):
        return (_LONGEST_NUMBER if kind == "number" else _LONGEST_INTEGER) + " "
    raise ValueError(f"no longest reply for {json.dumps(schema)[:200]}")


def messages_for(mode: str, messages: list[dict], schema: dict) -> list[dict]:
    """The messages sent in `mode`: in `prompt` mode the system message also carries the schema itself,
    since nothing else tells the model the shape of its reply."""
    if mode != PROMPT:
        return messages
    note = "The reply must validate against this JSON schema:\n" + json.dumps(schema, sort_keys=True)
    if messages and messages[0].get("role") == "system":
        return [{**messages[0], "content": f"{messages[0]['content']}\n{note}"}, *messages[1:]]
    return [{"role": "system", "content": note}, *messages]


def honours(text: str | None) -> bool:
    """Whether a probe reply follows `PROBE_SCHEMA` (a server that ignores a format answers something else)."""
    try:
        data = json.loads(text or "")
    except ValueError:
        return False
    return (isinstance(data, dict) and set(data) == {"ok", "say"} and isinstance(data["ok"], bool)
            and isinstance(data["say"], str) and len(data["say"]) <= 3)


def negotiate(endpoint: str, model: str, probe: Callable[[str], str | None]) -> str:
    """The first of json_schema, json_object whose probe reply honours the probe schema, else `prompt`.

    `probe(mode)` sends the probe in that mode and returns the reply text, or None when the server
    refused the request (an HTTP error status); a network failure or timeout propagates, so an
    unreachable server is not mistaken for one without structured output and nothing is cached."""
    key = (endpoint, model)
    if key not in _DETECTED:
        _DETECTED[key] = next((mode for mode in (JSON_SCHEMA, JSON_OBJECT) if honours(probe(mode))), PROMPT)
    return _DETECTED[key]


def forget(endpoint: str | None = None) -> None:
    """Drop the cached detections (of one endpoint, or all): the server behind a URL was replaced."""
    for key in [k for k in _DETECTED if endpoint is None or k[0] == endpoint]:
        del _DETECTED[key]

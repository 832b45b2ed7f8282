"""How a chat endpoint is asked for output that follows a role's JSON schema, negotiated per server.

Servers differ: OpenAI and vLLM take ``response_format={"type": "json_schema", ...}``; llama.cpp's
server (llama-cpp-python) refuses that type (HTTP 500) but constrains decoding to a schema given as
``{"type": "json_object", "schema": ...}``; others take neither. `negotiate` asks the server once,
with a tiny probe per mode, which one it honours; the answer is cached per (endpoint, model) for the
process, recorded with every call (`params["structured"]`), and a setting (`MEMWB_OPENAI_STRUCTURED`)
overrides it. Whatever the mode, the reply is validated against the schema afterwards: a constrained
mode only makes a valid reply likelier, it is never trusted.
"""
from __future__ import annotations

import json
from collections.abc import Callable

JSON_SCHEMA = "json_schema"        # OpenAI structured outputs, vLLM
JSON_OBJECT = "json_object"        # JSON mode with a `schema` field (llama.cpp's server: grammar-constrained)
PROMPT = "prompt"                  # plain text: the schema is written into the system message, then validated
AUTO = "auto"
MODES = (JSON_SCHEMA, JSON_OBJECT, PROMPT)
SETTINGS = (AUTO, *MODES)

# The probe: a schema every mode can be checked against with a few output tokens.
PROBE_SCHEMA = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"],
                "additionalProperties": False}
PROBE_MESSAGES = [{"role": "system", "content": "Reply with one JSON object and nothing else."},
                  {"role": "user", "content": 'Reply exactly {"ok": true}'}]
PROBE_MAX_TOKENS = 16

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
        return {"type": "json_object", "schema": schema}
    return None


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
    return isinstance(data, dict) and set(data) == {"ok"} and isinstance(data["ok"], bool)


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

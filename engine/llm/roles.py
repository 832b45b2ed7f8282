"""LLM roles an engine outside the repository brings with it: schema, prompt, offline rule and bounds.

The built-in roles are fixed tables (`engine.llm.schemas`, `engine.llm.prompts`, `engine.llm.offline`). An
engine installed as its own package (a third-party memory library behind an adapter) registers its roles
here once, at import, and then asks them through `LLM.call(role, payload)` like any built-in role: the reply
is validated against the role's schema and caps, the call is logged with the next commit, and `--llm
offline | openai | recorded` all answer it. Its prompt is its own (`render`: the library's prompt text,
built from the structured payload); the offline backend answers it with the role's `offline` rule.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from engine.llm import schemas
from engine.llm.schemas import Cap
from engine.llm.structured import longest_reply

Render = Callable[[dict], list[dict]]
OfflineRule = Callable[[dict, Any], dict]          # (payload, embedder) -> the reply's data


@dataclass(frozen=True)
class Role:
    """One role: `schema` its output, `render` its chat messages from a payload, `offline` the rule that answers
    it with no model (None: the offline backend fails it as UNSUPPORTED_ROLE), `caps` what any backend may write,
    `bounds` what a model is asked within, `token_cap` its output budget in tokens (None: the longest reply its
    bounded schema admits, one token per character rounded up to 64, as the built-in roles' budgets are set)."""

    name: str
    schema: dict
    render: Render
    offline: OfflineRule | None = None
    caps: tuple[Cap, ...] = ()
    bounds: tuple[Cap, ...] = ()
    token_cap: int | None = None


REGISTERED: dict[str, Role] = {}


def register_role(role: Role, *, replace: bool = False) -> None:
    """Make `role` askable through `LLM.call`; a name the workbench already has is refused unless `replace`
    (registering the same role twice, as a re-import does, is harmless)."""
    if (role.name in schemas.SCHEMAS and REGISTERED.get(role.name) != role) and not replace:
        raise ValueError(f"LLM role {role.name!r} already exists; pass replace=True to override it")
    REGISTERED[role.name] = role
    schemas.SCHEMAS[role.name] = role.schema
    schemas.CAPS[role.name] = role.caps
    schemas.BOUNDS[role.name] = role.bounds
    schemas.TOKEN_CAPS[role.name] = role.token_cap if role.token_cap is not None else \
        -(-len(longest_reply(schemas.model_schema(role.name))) // 64) * 64


def registered(role: str) -> Role | None:
    return REGISTERED.get(role)

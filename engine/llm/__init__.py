"""LLM access for the engines: the client, the backend interface and a backend registry.

Backends are built by name through `make_backend`, so the CLI and workbench
never import a backend module themselves. Factories import their module on
first use: `import engine.llm` must work without optional packages such as
`openai` installed. Another backend plugs in with
`register_backend(name, factory)`.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from engine.llm.base import LLM, BackendError, BackendReply, DeferredBackend, LLMBackend, LLMCall, LLMRequest
from engine.llm.recorded import NotRecorded, RecordedBackend, dump_calls_jsonl, load_calls_jsonl

if TYPE_CHECKING:
    from engine.llm.openai_backend import OpenAIBackend

BackendFactory = Callable[..., LLMBackend]


def _openai_factory(**settings: Any) -> LLMBackend:
    from engine.llm.openai_backend import OpenAIBackend

    return OpenAIBackend(**settings)


def _offline_factory(*, embedder: Any, **settings: Any) -> LLMBackend:
    from engine.llm.offline import OfflineBackend

    return OfflineBackend(embedder, **settings)


def _recorded_factory(*, calls: Any = None, path: Any = None, **settings: Any) -> LLMBackend:
    """Replay from `calls` (LLMCall records or dicts) or from a JSONL file at `path`."""
    if (calls is None) == (path is None):
        raise ValueError("the recorded backend needs exactly one of calls=... or path=...")
    if path is not None:
        return RecordedBackend.from_jsonl(path, **settings)
    return RecordedBackend(calls, **settings)


BACKENDS: dict[str, BackendFactory] = {
    "offline": _offline_factory,
    "openai": _openai_factory,
    "recorded": _recorded_factory,
}


def register_backend(name: str, factory: BackendFactory, *, replace: bool = False) -> None:
    """Make `make_backend(name, **settings)` call `factory(**settings)`."""
    if name in BACKENDS and not replace:
        raise ValueError(f"LLM backend {name!r} is already registered; pass replace=True to override")
    BACKENDS[name] = factory


def make_backend(name: str, **settings: Any) -> LLMBackend:
    """Build the backend registered under `name` with backend-specific settings."""
    try:
        factory = BACKENDS[name]
    except KeyError:
        raise ValueError(f"unknown LLM backend {name!r}; known backends: {sorted(BACKENDS)}") from None
    return factory(**settings)


def __getattr__(name: str) -> Any:
    """Resolve OpenAIBackend on first access so `openai` is only imported when used."""
    if name == "OpenAIBackend":
        from engine.llm.openai_backend import OpenAIBackend

        return OpenAIBackend
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "BACKENDS", "LLM", "BackendError", "BackendFactory", "BackendReply", "DeferredBackend", "LLMBackend", "LLMCall",
    "LLMRequest", "NotRecorded", "OpenAIBackend", "RecordedBackend", "dump_calls_jsonl", "load_calls_jsonl",
    "make_backend", "register_backend",
]

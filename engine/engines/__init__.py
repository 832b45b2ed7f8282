"""The engine registry: every memory engine by name, loaded on first use.

Each engine lives in its own folder here and exposes an engine class with
`name`, `schema` (an `EngineSchema`) and `Settings` (a dataclass whose fields
carry help text and bounds). Nothing outside an engine's folder imports from
it: the CLI, the workbench and the scripts go through `engine_class`,
`engine_schema` and `settings_class`. Another engine plugs in with
`register_engine(name, loader)`.
"""
from __future__ import annotations

from importlib import import_module
from typing import Callable

from engine.core.errors import WorkbenchError
from engine.core.schema import EngineSchema

EngineLoader = Callable[[], type]


def _from(module: str, attr: str) -> EngineLoader:
    return lambda: getattr(import_module(module), attr)


ENGINES: dict[str, EngineLoader] = {
    "allmem": _from("engine.engines.allmem", "AllMemEngine"),
    "naive": _from("engine.engines.rag", "NaiveEngine"),
    "hybrid": _from("engine.engines.rag", "HybridEngine"),
    "memloom": _from("engine.engines.memloom", "MemLoomEngine"),
    "recmem": _from("engine.engines.recmem", "RecMemEngine"),
    "gam": _from("engine.engines.gam", "GamEngine"),
}


class UnknownEngine(WorkbenchError, ValueError):
    pass


def register_engine(name: str, loader: EngineLoader, *, replace: bool = False) -> None:
    """Make `engine_class(name)` return `loader()`."""
    if name in ENGINES and not replace:
        raise ValueError(f"engine {name!r} is already registered; pass replace=True to override")
    ENGINES[name] = loader


def known_engines() -> list[str]:
    return list(ENGINES)


def engine_class(name: str) -> type:
    try:
        loader = ENGINES[name]
    except KeyError:
        raise UnknownEngine(f"unknown engine {name!r}; known engines: {', '.join(ENGINES)}") from None
    return loader()


def engine_schema(name: str) -> EngineSchema:
    return engine_class(name).schema


def settings_class(name: str) -> type:
    return engine_class(name).Settings


def process_classes() -> list[type]:
    """Every offline process class of every registered engine (each engine loaded through the registry), for
    tools that instrument processes without importing an engine's package."""
    from engine.runtime.process import BaseProcess  # here: the registry stays light to import

    for name in known_engines():
        engine_class(name)

    def below(cls: type) -> list[type]:
        return [sub for direct in cls.__subclasses__() for sub in (direct, *below(direct))]
    return below(BaseProcess)


__all__ = ["ENGINES", "UnknownEngine", "engine_class", "engine_schema", "known_engines", "process_classes",
           "register_engine", "settings_class"]

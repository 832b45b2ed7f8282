"""The engine registry: every memory engine by name, loaded on first use.

Each built-in engine lives in its own folder here and exposes an engine class with
`name`, `schema` (an `EngineSchema`) and `Settings` (a dataclass whose fields
carry help text and bounds). Nothing outside an engine's folder imports from
it: the CLI, the workbench and the scripts go through `engine_class`,
`engine_schema` and `settings_class`.

An engine from another package is found through the entry-point group
`memory_workbench.engines` (`ENTRY_POINT_GROUP`): an installed distribution
declares `NAME = "package.module:EngineClass"` and every command, page and
benchmark offers it like a built-in one (docs/WRITING_AN_ENGINE.md). A plugin
that fails to import, names no engine class, or declares a schema that does not
hold together is kept aside with its reason (`broken_engines`) and takes nothing
else down. In-process code may still add one with `register_engine(name, loader)`.
"""
from __future__ import annotations

from dataclasses import dataclass
from importlib import import_module
from importlib.metadata import entry_points
from typing import Callable

from engine.core.errors import WorkbenchError
from engine.core.schema import EngineSchema

EngineLoader = Callable[[], type]
ENTRY_POINT_GROUP = "memory_workbench.engines"
BUILT_IN = "memory-workbench"          # the package a built-in engine comes from


def _from(module: str, attr: str) -> EngineLoader:
    def load() -> type:
        return getattr(import_module(module), attr)
    load.target = f"{module}:{attr}"          # type: ignore[attr-defined]  # what `memwb engines` shows
    return load


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


class BrokenEngine(UnknownEngine):
    """An installed plugin engine that cannot be used (so no engine by that name is known); the message says which
    package declares it and why."""


@dataclass(frozen=True)
class EngineOrigin:
    """Where an engine came from: the distribution that declares it, its version and the entry point's target
    (`package.module:Class`); `error` is why a plugin is unusable ("" = usable)."""

    name: str
    package: str
    version: str
    target: str
    error: str = ""

    @property
    def built_in(self) -> bool:
        return self.package == BUILT_IN

    def describe(self) -> str:
        return f"{self.package} {self.version}" if self.version else self.package


@dataclass
class _Plugins:
    loaders: dict[str, EngineLoader]          # the usable plugins by name
    origins: list[EngineOrigin]               # every plugin entry point, usable or not

    def broken(self, name: str) -> EngineOrigin | None:
        return next((o for o in self.origins if o.name == name and o.error), None)


_plugins: _Plugins | None = None


def register_engine(name: str, loader: EngineLoader, *, replace: bool = False) -> None:
    """Make `engine_class(name)` return `loader()`."""
    if name in ENGINES and not replace:
        raise ValueError(f"engine {name!r} is already registered; pass replace=True to override")
    ENGINES[name] = loader


def engine_class_problems(cls: object, name: str) -> list[str]:
    """Why `cls` cannot serve as the engine `name` (empty when it can): what the registry refuses a plugin for
    (docs/WRITING_AN_ENGINE.md, rule "loads")."""
    from dataclasses import is_dataclass

    from engine.core.schema import EngineSettings
    from engine.runtime.engine import BaseEngine     # here: the registry stays light to import

    if not isinstance(cls, type) or not issubclass(cls, BaseEngine):
        return [f"{cls!r} is not a subclass of engine.runtime.engine.BaseEngine"]
    problems = []
    if getattr(cls, "name", None) != name:
        problems.append(f"{cls.__name__}.name is {getattr(cls, 'name', None)!r}, the entry point names {name!r}")
    schema = getattr(cls, "schema", None)
    if not isinstance(schema, EngineSchema):
        problems.append(f"{cls.__name__}.schema is not an engine.core.schema.EngineSchema")
    else:
        if schema.name != name:
            problems.append(f"schema.name is {schema.name!r}, the entry point names {name!r}")
        problems += schema.problems()
    settings = getattr(cls, "Settings", None)
    if not (isinstance(settings, type) and is_dataclass(settings) and issubclass(settings, EngineSettings)):
        problems.append(f"{cls.__name__}.Settings is not a dataclass subclassing engine.core.schema.EngineSettings")
    else:
        try:
            settings().check_bounds()
        except Exception as exc:          # a plugin's defaults may fail in any way: each is its reason
            problems.append(f"{cls.__name__}.Settings() with its defaults fails: {exc}")
    return problems


def _discover() -> _Plugins:
    """Load every plugin entry point once per process; a failure of one is recorded as its reason."""
    global _plugins
    if _plugins is not None:
        return _plugins
    found = _plugins = _Plugins({}, [])    # set first: a plugin that asks the registry as it imports sees the rest
    for ep in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda e: (e.name, e.value)):
        dist = ep.dist
        package, version = (dist.metadata["Name"], dist.version) if dist else ("?", "")
        error = ""
        if ep.name in ENGINES:
            error = f"the name {ep.name!r} is taken by a built-in engine"
        elif ep.name in found.loaders:
            first = next(o for o in found.origins if o.name == ep.name and not o.error)
            error = f"the name {ep.name!r} is already declared by {first.describe()}"
        else:
            try:
                cls = ep.load()
            except Exception as exc:      # ImportError, SyntaxError, AttributeError ...: the plugin's own fault
                error = f"cannot import {ep.value}: {type(exc).__name__}: {exc}"
            else:
                error = "; ".join(engine_class_problems(cls, ep.name))
                if not error:
                    found.loaders[ep.name] = (lambda c=cls: c)
        found.origins.append(EngineOrigin(ep.name, package, version, ep.value, error))
    return found


def rediscover() -> None:
    """Forget what discovery found, so the next look-up reads the installed packages again (after a pip install
    in the same process)."""
    global _plugins
    _plugins = None


def known_engines() -> list[str]:
    """Every usable engine: the built-in ones, then the installed plugins by name."""
    return [*ENGINES, *(n for n in _discover().loaders if n not in ENGINES)]


def broken_engines() -> list[EngineOrigin]:
    """The installed plugins that cannot be used, each with its reason."""
    return [o for o in _discover().origins if o.error]


def engine_origins() -> list[EngineOrigin]:
    """Where every engine came from, usable or not (what `memwb engines` lists)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        own = version(BUILT_IN)
    except PackageNotFoundError:          # the source tree on PYTHONPATH, not installed
        own = ""
    built_in = [EngineOrigin(n, BUILT_IN, own, getattr(loader, "target", "register_engine()"))
                for n, loader in ENGINES.items()]
    return built_in + _discover().origins


def engine_class(name: str) -> type:
    loader = ENGINES.get(name) or _discover().loaders.get(name)
    if loader is None:
        broken = _discover().broken(name)
        if broken is not None:
            raise BrokenEngine(f"engine {name!r} from {broken.describe()} cannot be used: {broken.error} "
                               f"(`memwb engines` lists every engine)")
        raise UnknownEngine(f"unknown engine {name!r}; known engines: {', '.join(known_engines())}")
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


__all__ = ["BUILT_IN", "ENGINES", "ENTRY_POINT_GROUP", "BrokenEngine", "EngineOrigin", "UnknownEngine",
           "broken_engines", "engine_class", "engine_class_problems", "engine_origins", "engine_schema",
           "known_engines", "process_classes", "rediscover", "register_engine", "settings_class"]

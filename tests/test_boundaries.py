"""Nothing outside an engine's own folder imports it: every other module goes through the registry.

The workbench, the pages, the scripts and the shared engine modules may import `engine.engines` (the
registry: `known_engines`, `engine_class`, `engine_schema`, `settings_class`) but never a submodule such as
`engine.engines.allmem` or `engine.engines.rag`. Imports are read with `ast`, so strings, comments and
docstrings that mention those modules do not count.
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

import engine.engines as registry

ROOT = Path(__file__).resolve().parents[1]
CHECKED = ("workbench", "pages", "scripts", "engine")
ENGINES_DIR = ROOT / "engine" / "engines"
FORBIDDEN = "engine.engines."


def checked_files() -> list[Path]:
    files = []
    for top in CHECKED:
        for path in sorted((ROOT / top).rglob("*.py")):
            if ENGINES_DIR in path.parents:
                continue
            files.append(path)
    return files


def _package(path: Path) -> str:
    return ".".join(path.relative_to(ROOT).with_suffix("").parts[:-1])


def _resolve(node: ast.ImportFrom, path: Path) -> str:
    """The absolute module a (possibly relative) `from … import …` names."""
    if not node.level:
        return node.module or ""
    parts = _package(path).split(".") if _package(path) else []
    base = parts[: len(parts) - (node.level - 1)] if node.level > 1 else parts
    return ".".join([*base, *([node.module] if node.module else [])])


def engine_imports(path: Path, source: str | None = None) -> list[str]:
    """`line: module` for every import of an engine's own package in `path` (or in `source`, read as if it
    were the file at `path`, which is what relative imports resolve against)."""
    text = path.read_text(encoding="utf-8") if source is None else source
    tree = ast.parse(text, filename=str(path))
    bad = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            bad += [f"{node.lineno}: import {a.name}" for a in node.names if a.name.startswith(FORBIDDEN)]
        elif isinstance(node, ast.ImportFrom):
            module = _resolve(node, path)
            if module.startswith(FORBIDDEN):
                bad.append(f"{node.lineno}: from {module} import …")
            elif module == "engine.engines":
                bad += [f"{node.lineno}: from engine.engines import {a.name}" for a in node.names
                        if a.name not in registry.__all__]
            elif module == "engine":
                bad += [f"{node.lineno}: from engine import engines.{a.name}" for a in node.names
                        if a.name.startswith("engines.")]
        elif isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", "")) in (
                "import_module", "__import__") and node.args and isinstance(node.args[0], ast.Constant) and \
                str(node.args[0].value).startswith(FORBIDDEN):
            bad.append(f"{node.lineno}: import_module({node.args[0].value!r})")
    return bad


def test_the_checked_folders_exist_and_hold_code():
    files = checked_files()
    assert {f.relative_to(ROOT).parts[0] for f in files} == set(CHECKED)
    assert ROOT / "pages" / "1_replay.py" in files and ROOT / "engine" / "session.py" in files
    assert not any(ENGINES_DIR in f.parents for f in files)


@pytest.mark.parametrize("path", checked_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_module_outside_an_engine_imports_it(path):
    assert engine_imports(path) == [], f"{path.relative_to(ROOT)} imports an engine's package; use the registry"


def test_the_check_catches_every_form():
    probe = ROOT / "workbench" / "probe.py"                # resolved as if it lived in workbench/
    samples = {
        "import engine.engines.allmem": True,
        "import engine.engines.rag.engine as rag": True,
        "from engine.engines.allmem.schema import EdgeType": True,
        "from engine.engines import allmem": True,
        "from ..engine.engines.rag import NaiveEngine": True,       # relative, from workbench/ up to the root
        "from engine.engines import engine_schema, known_engines": False,
        "import engine.engines": False,
        "from importlib import import_module\nimport_module('engine.engines.allmem')": True,
        "# from engine.engines.allmem import x\ntext = 'engine.engines.allmem'": False,
    }
    for source, forbidden in samples.items():
        bad = engine_imports(probe, source)
        assert bool(bad) == forbidden, (source, bad)
    inside = ROOT / "engine" / "probe.py"
    assert engine_imports(inside, "from .engines.allmem import AllMemEngine")
    assert engine_imports(inside, "from .engines import engine_class") == []

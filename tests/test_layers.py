"""The import direction of the code: one way, down the layers of `engine.layers`, and no circles.

Every import statement of engine/, workbench/ and pages/ is read from the source (type-only and
function-local ones included), so a violation fails here with the file, the line and the layers.
"""
from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx

from engine.layers import LAYERS, layer_of

ROOT = Path(__file__).resolve().parents[1]
TREES = ("engine", "workbench", "pages")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def project_modules() -> dict[str, Path]:
    return {module_name(p): p for tree in TREES for p in sorted((ROOT / tree).rglob("*.py"))}


def imports(path: Path, known: set[str]) -> list[tuple[str, int]]:
    """(imported project module, line) for every import statement in `path`: `from a.b import c` counts as
    a.b.c when that is a module, else as a.b."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out += [(a.name, node.lineno) for a in node.names if a.name in known]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for a in node.names:
                target = f"{node.module}.{a.name}"
                if target in known:
                    out.append((target, node.lineno))
                elif node.module in known:
                    out.append((node.module, node.lineno))
    return out


def import_graph() -> tuple[nx.DiGraph, dict[tuple[str, str], tuple[Path, int]]]:
    modules = project_modules()
    graph, where = nx.DiGraph(), {}
    graph.add_nodes_from(modules)
    for name, path in modules.items():
        for target, line in imports(path, set(modules)):
            if target != name:
                graph.add_edge(name, target)
                where.setdefault((name, target), (path.relative_to(ROOT), line))
    return graph, where


def test_every_module_has_a_layer():
    unplaced = [m for m in project_modules() if layer_of(m) is None and m not in ("engine", "engine.layers")]
    assert not unplaced, f"modules in no layer of engine.layers.LAYERS: {unplaced}"


def test_no_import_goes_up_a_layer():
    graph, where = import_graph()
    upward = []
    for src, dst in graph.edges:
        low, high = layer_of(src), layer_of(dst)
        if low is not None and high is not None and high > low:
            path, line = where[src, dst]
            upward.append(f"{path}:{line}: {src} ({LAYERS[low][0]}) imports {dst} ({LAYERS[high][0]})")
    assert not upward, "imports from a lower layer to a higher one:\n" + "\n".join(sorted(upward))


def test_no_import_circles():
    graph, where = import_graph()
    circles = [sorted(c) for c in nx.strongly_connected_components(graph) if len(c) > 1]
    lines = []
    for circle in sorted(circles):
        ties = [f"    {where[a, b][0]}:{where[a, b][1]}: {a} -> {b}"
                for a, b in sorted(graph.subgraph(circle).edges)]
        lines.append(f"circle of {len(circle)}: {', '.join(circle)}\n" + "\n".join(ties))
    assert not circles, "import circles:\n" + "\n".join(lines)


def test_the_walk_sees_the_imports_it_should():
    """The walk itself: it finds a known downward import and a function-local one (else the tests above could
    pass by reading nothing)."""
    graph, _ = import_graph()
    assert graph.has_edge("engine.runtime.engine", "engine.core.state")
    assert graph.has_edge("engine.store.database", "engine.store.postgres")        # imported inside a function
    assert graph.number_of_edges() > 200

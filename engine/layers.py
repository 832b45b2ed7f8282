"""The layers of the code, lowest first, written once.

A module may import from its own layer and the layers below it, never from a
layer above, and no set of modules may import each other in a circle.
`tests/test_layers.py` walks every import statement of `engine/`, `workbench/`
and `pages/` (type-only and function-local imports included: an arrow is an
arrow) against this table, and `docs/ARCHITECTURE.md` draws it. A package
prefix names a layer; the longest matching prefix places a module.
"""
from __future__ import annotations

LAYERS: tuple[tuple[str, str], ...] = (
    ("engine.core", "the model and the log: nodes, edges, proposals, schemas, turns, op records and their specs, "
                    "the fold, transactions, segmentations, text helpers"),
    ("engine.loaders", "dataset files (LoCoMo, LongMemEval, QMSum, JSONL) read into conversations"),
    ("engine.store", "persistence: the op-log store and its materialized tables, SQLite/PostgreSQL, the workspace, "
                     "its catalogue of sessions, the embedding cache, dump and load"),
    ("engine.retrieval", "retrieval signals and results: the surface index, BM25, fused relevance, link features, "
                         "provenance paths, why-this-rank"),
    ("engine.llm", "models: LLM roles, their schemas and backends (offline, openai, recorded), the embedder"),
    ("engine.runtime", "what every engine shares: the engine and process base classes, replay"),
    ("engine.engines", "the memory designs (All-Mem, MemLoom, RAG baselines ...) and their registry"),
    ("engine.eval", "measuring: metrics, boundary scores, answers, annotations, diagnostics, integrity checks"),
    ("engine.session", "opening a session: a database with the engine, embedder and LLM it was made with"),
    ("engine.bench", "the streaming benchmark, its datasets, tasks and sweeps"),
    ("engine.serve", "running the workbench's Streamlit server for `memwb ui`: signals forwarded, output redacted"),
    ("engine.cli", "the `memwb` command line"),
    ("workbench", "the Streamlit workbench: state, views and UI blocks over the engine library"),
    ("pages", "one script per workbench page"),
)

# Modules that belong to no layer: the package markers and this table.
UNLAYERED = ("engine", "engine.layers")


def layer_of(module: str) -> int | None:
    """The index in `LAYERS` of the layer holding `module` (its longest matching prefix), None if unlayered."""
    if module in UNLAYERED:
        return None
    best, index = -1, None
    for i, (prefix, _) in enumerate(LAYERS):
        if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > best:
            best, index = len(prefix), i
    return index

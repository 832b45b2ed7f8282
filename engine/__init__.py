"""Memory Workbench's engine: a plain Python library (no UI imports) for replaying, inspecting and steering
the long-term memory of LLM agents.

Its packages are layers, lowest first (`engine.layers` writes them once; a module imports only from its own
layer and those below): `core` (the model and the log), `loaders` (dataset files), `store` (the session
database), `retrieval` (signals and results), `llm` (LLM roles, backends, the embedder), `runtime` (what
every engine shares), `engines` (the memory designs), `eval` (metrics, annotations, checks), `session`
(opening one), `bench` and `cli`. docs/ARCHITECTURE.md draws them and follows one turn through.
"""

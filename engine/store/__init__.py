"""Persistence: the session database and the workspace around it.

The op-log store (`log_store.Store`: append records with their LLM calls in one transaction, materialize
the fold into the `node`, `edge` and `proposal` tables, fold checkpoints, id claims, branching), the
database format (`tables`), the database URL and its one write lock on SQLite or PostgreSQL (`database`,
`postgres`), the workspace folder and its catalogue of sessions, the shared embedding cache, and lossless
dump and load. It knows the model (`engine.core`) and nothing above it.
"""

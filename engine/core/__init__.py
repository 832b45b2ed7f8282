"""The model and the log: what a memory is made of and how it changes.

Nodes, edges and proposals (typed records), an engine's schema (kinds, statuses and their transitions,
edge types, operators, reason codes, stages, settings), turns and conversations, op records with one payload
class per kind (`payloads`), every op kind declared once (`ops`: apply, inverse, materialized rows, payload
version) and the fold that turns a log into a `MemoryState`, the transaction engines build records in,
segmentations, text helpers and the root error. Nothing here imports any other part of the library.
"""

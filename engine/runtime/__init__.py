"""What every engine shares: the engine base class and the offline-process skeleton.

`engine.BaseEngine` holds the store and the live fold, writes under the store's lock, commits records with
the LLM calls that caused them, runs and undoes offline processes generically (the op specs' inverses),
and gives read-only views at a past turn; `views` keeps the derived vectors, surface index and BM25 in
step; `process.BaseProcess` is propose → decide → apply as one run; `replay` drives a conversation through
an engine on a consolidation schedule.
"""

"""Retrieval signals and results, shared by every engine's retrieval stages.

The FAISS index of the retrieval surface, the sketch a large set is ranked from (an 8-bit scan rescored
exactly, and the moments its z-statistics come from), BM25, the fused z-score relevance of the surface and of
one kind of record, the link model's features,
the result type with its provenance paths and ranked source ids, and why-this-rank (signals per
candidate, a drop code per unit that was not returned). Engines are reached only through the protocols
in `memory` and `explain`, never imported.
"""

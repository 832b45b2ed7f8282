"""Baselines as engines: naive dense RAG and hybrid BM25 + dense over raw turns (DESIGN §3.5)."""
from engine.engines.rag.engine import HybridEngine, NaiveEngine

__all__ = ["HybridEngine", "NaiveEngine"]

"""Measuring memories and engines: retrieval, answer and token metrics, event-boundary scores, answering
from retrieved context, SCDS annotation cases, the causal diagnostic suite's rules, structure diagnostics
(visible ratio, Cov(H)) and the integrity check of a session database.
"""

"""The causal diagnostic suite (datasets/causal/): loading it (`suite`), its design rules (`rules`), and where
naive retrieval puts its root causes (`baselines`). `scripts/check_causal_suite.py` is the command line."""

"""The Benchmark page's parts: a stored result read back, its views (questions, misses, decisions, checks), a run started from the page, charts and LLM costs."""

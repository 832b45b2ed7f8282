"""Memory Workbench engine: a plain Python library (no UI imports)."""

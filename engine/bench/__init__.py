"""Benchmarks: the streaming and static protocols, every engine side by side, sweeps serial or on Ray.

`memwb bench` and the Benchmark page run them; the result file's format is in docs/BENCHMARK_FORMAT.md.
"""

"""mem0 (mem0ai, the open-source memory library) as a Memory Workbench engine, found through the entry-point
group `memory_workbench.engines` (`mem0 = "memwb_mem0.engine:Mem0Engine"`)."""

RECORDING = __path__[0] + "/recordings/demo.jsonl"     # the demo's calls through SmolLM2, for replays and tests

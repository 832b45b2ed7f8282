"""A memory engine for Memory Workbench, installed as its own package and found through the entry-point group
`memory_workbench.engines` (docs/WRITING_AN_ENGINE.md): every turn is a note; the offline `tidy` process proposes
that a newer note supersedes an older one of the same speaker it repeats."""

"""The Consolidation page's parts: the review queue, the gate's verdicts, decisions and their actions, a run's diff and review, the audit of a proposal and backends compared."""

"""The per-engine contract: every rule the workbench enforces on an engine, with the tests that check it.

Each rule is stated once, in docs/WRITING_AN_ENGINE.md under its own heading (`Rule.doc`); `memwb engine check
NAME` runs the rules' tests against one installed engine (the source checkout's `tests/`, with
`MEMWB_CONTRACT_ENGINES=NAME` narrowing every per-engine parametrisation to it) and prints each failure with the
rule it broke. tests/test_plugins.py keeps this table, the tests parametrised per engine and the document in step.
"""
from __future__ import annotations

from dataclasses import dataclass

DOC = "docs/WRITING_AN_ENGINE.md"
CONTRACT_ENGINES_VAR = "MEMWB_CONTRACT_ENGINES"     # comma-separated: the engines the per-engine tests run for


@dataclass(frozen=True)
class Rule:
    key: str
    title: str
    tests: tuple[str, ...]        # pytest node ids without parameters, relative to the checkout's root

    @property
    def doc(self) -> str:
        return f"{DOC}#rule-{self.key}"


def _in(module: str, *names: str) -> tuple[str, ...]:
    return tuple(f"tests/{module}.py::{n}" for n in names)


RULES: tuple[Rule, ...] = (
    Rule("loads", "the entry point loads a BaseEngine subclass whose name, schema and settings hold together",
         _in("test_engine_contract", "test_the_registry_loads_the_engine")),
    Rule("declared", "everything the engine writes is declared in its schema",
         _in("test_engine_contract", "test_replay_fills_memory_as_the_schema_says")),
    Rule("one-colour-per-kind", "one colour stands for one kind of node",
         _in("test_engine_contract", "test_each_colour_the_schema_draws_stands_for_one_kind_of_node")),
    Rule("writes-through-tx", "every change is a record written through a Tx, so time travel is a fold",
         _in("test_engine_contract", "test_at_turn_equals_a_fresh_fold", "test_store_tables_equal_the_fold")),
    Rule("undo", "undo of a run restores the exact prior state",
         _in("test_engine_contract", "test_undo_of_a_run_restores_the_exact_prior_state")),
    Rule("turn-hash", "ingest logs the turn with `self.ingested(turn)`",
         _in("test_engine_contract", "test_ingested_turns_carry_their_content_hash_and_a_changed_file_is_refused")),
    Rule("export", "export lists every node with its status and every edge",
         _in("test_engine_contract", "test_export_lists_every_node_with_its_status")),
    Rule("provenance", "every hop of a retrieved unit's path is a stored edge, starting on the surface",
         _in("test_engine_contract", "test_every_provenance_hop_is_an_edge_of_that_state")),
    Rule("execute-closes", "execute sets each accepted proposal applied (or skipped/failed with a reason code)",
         _in("test_engine_contract", "test_execute_closes_every_accepted_proposal")),
    Rule("reachable", "every off-surface node is reachable along a recovery link (`memwb check` is clean)",
         _in("test_engine_contract", "test_a_replayed_memory_passes_memwb_check")),
    Rule("retrieval-ablations", "a retrieval-only ablation writes the log the full system writes",
         _in("test_engine_contract", "test_a_retrieval_ablation_writes_the_log_the_full_system_writes")),
    Rule("explain-adds-up", "explain's signals add up to the score that ranked each candidate",
         _in("test_explain", "test_breakdown_adds_up_to_the_score_of_every_candidate")),
    Rule("explain-true-rank", "explain reports a missed gold turn at its true rank",
         _in("test_explain", "test_a_missed_gold_turn_is_reported_at_its_true_rank")),
    Rule("settings", "settings carry types and bounds that `--set` checks",
         _in("test_cli_settings", "test_set_is_stored_shown_and_checked")),
    Rule("workbench", "the workbench opens the engine from its name alone",
         _in("test_workbench_model", "test_opens_any_registered_engine")),
    Rule("pages", "every page draws the engine from its schema",
         _in("test_page_replay", "test_next_adds_a_node_and_explains_it",
             "test_the_engine_picker_loads_an_engine_without_a_process")
         + _in("test_page_graph", "test_graph_renders_with_the_schema_legend")
         + _in("test_page_retrieval", "test_free_query_shows_stages_paths_and_a_peer_engine")
         + _in("test_page_annotate", "test_page_opens_and_scores_for_every_engine")
         + _in("test_page_consolidation", "test_any_process_diagnoses_decides_applies_and_undoes",
               "test_an_engine_without_a_process_says_so_and_shows_the_audit_log")),
)


def rule_of(test_id: str) -> Rule | None:
    """The rule a test (`tests/x.py::name[params]`) checks."""
    base = test_id.split("[", 1)[0]
    return next((r for r in RULES if base in r.tests), None)

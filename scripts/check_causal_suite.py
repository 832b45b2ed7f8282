"""Check the causal diagnostic suite in datasets/causal/ against its design rules; print its counts.

The loading, the rules and the baseline report live in `engine.eval.causal_suite`; this is the command line.
Exit status 1 on any violation.

    python scripts/check_causal_suite.py [--suite DIR] [--retrieval] [--k 5] [-v]

`--retrieval` also ranks every scenario's turns for each question with BM25 and with dense
MiniLM (the naive baselines) and reports where the root causes land (informational, not a rule).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from engine.eval.causal_suite.baselines import retrieval_report  # noqa: E402
from engine.eval.causal_suite.rules import check_suite, distractors  # noqa: E402
from engine.eval.causal_suite.suite import counts, load_suite  # noqa: E402

SUITE_DIR = ROOT / "datasets" / "causal"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--suite", default=str(SUITE_DIR),
                    help="folder with train.jsonl, validation.jsonl, test.jsonl, cases/")
    ap.add_argument("--retrieval", action="store_true", help="also report naive BM25 / dense retrieval of chains")
    ap.add_argument("--k", type=int, default=5)
    ap.add_argument("-v", "--verbose", action="store_true", help="list every chain question with its distractors")
    args = ap.parse_args(argv)
    suite = load_suite(args.suite)
    table = counts(suite)
    for name, c in table.items():
        print(f"[{name}] {c['scenarios']} scenarios, {c['turns']} turns (per scenario {c['turns_range']}), "
              f"sessions {c['sessions_range']}, speakers {c['speakers_range']}, {c['questions']} questions")
        print(f"    categories {c['categories']}  kinds {c['kinds']}")
        print(f"    dependency {c['dependency_types']}  tasks {c['task_types']}  chain lengths {c['chain_lengths']}")
        print(f"    chains whose root cause and effect have different speakers: {c['chains_cross_speaker']}; "
              f"root causes said by someone named in the question: {c['roots_by_named_speaker']}")
    if args.verbose:
        for sc in suite.scenarios:
            for q in sc.case.questions if sc.case else []:
                focal = sc.turn(q.gold_causal_structure.attribution_target)
                found = [t.id for t in distractors(sc, q, focal)]
                print(f"  {sc.split:10} {q.sample_id:22} {q.gold_causal_structure.dependency_type:15} "
                      f"chain={len(q.gold_causal_structure.supporting_evidence_keys)} distractors={found}")
    if args.retrieval:
        for name, r in retrieval_report(suite, args.k).items():
            print(f"[naive {name}, top-{args.k}] {r['chain_questions']} chain questions: root cause found "
                  f"{r['root']:.0%}, effect found {r['effect']:.0%}, whole chain found {r['chain']:.0%}; "
                  f"{r['state_questions']} state questions: latest state found {r['latest']:.0%}, "
                  f"whole history found {r['history']:.0%}")
    problems = check_suite(suite)
    for p in problems:
        print(f"VIOLATION {p}")
    print(f"{len(problems)} violation(s)" if problems else "OK: every rule holds")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())

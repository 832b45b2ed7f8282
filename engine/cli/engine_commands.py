"""`memwb engines` (every engine and where it came from), `memwb engine new NAME` (a skeleton package) and
`memwb engine check NAME` (the per-engine contract against an installed engine)."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

from engine.eval.contract import CONTRACT_ENGINES_VAR, DOC, RULES, rule_of
from engine.core.errors import WorkbenchError
from engine.engines import engine_origins, engine_schema

ROOT = Path(__file__).resolve().parents[2]         # the source checkout that holds tests/ and docs/
NAME = re.compile(r"[a-z][a-z0-9_]*")


def cmd_engines(args) -> int:
    origins = engine_origins()
    if args.json:
        print(json.dumps([{"name": o.name, "package": o.package, "version": o.version, "target": o.target,
                           "usable": not o.error, "error": o.error} for o in origins], indent=2))
        return 0
    width = max(len(o.name) for o in origins)
    for o in origins:
        where = "built-in" if o.built_in else f"plugin from {o.describe()} ({o.target})"
        if o.error:
            print(f"{o.name:<{width}}  BROKEN   {where}: {o.error}")
        else:
            print(f"{o.name:<{width}}  {engine_schema(o.name).label:<24} {where}")
    broken = sum(1 for o in origins if o.error)
    if broken:
        print(f"memwb engines: {broken} installed plugin(s) cannot be used; every other engine works",
              file=sys.stderr)
    return 0


def cmd_engine(args) -> int:
    return {"new": _new, "check": _check}[args.engine_action](args)


def _new(args) -> int:
    from engine.cli.engine_skeleton import FILES

    name = args.name
    if not NAME.fullmatch(name):
        raise WorkbenchError(f"engine name {name!r}: use lower-case letters, digits and _, starting with a letter")
    dist = name.replace("_", "-")
    folder = Path(args.dir or ".") / f"memwb-{dist}-engine"
    if folder.exists():
        raise WorkbenchError(f"{folder} already exists; nothing was written")
    camel = "".join(part.capitalize() for part in name.split("_"))
    for path, text in FILES.items():
        target = folder / path.replace("{{name}}", name)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text.replace("{{name}}", name).replace("{{Name}}", camel).replace("{{dist}}", dist))
    print(f"wrote {folder}: install it with `pip install -e {folder}`, then `memwb engines` lists {name!r} and "
          f"`memwb engine check {name}` runs the contract ({DOC})")
    return 0


def _check(args) -> int:
    """Run the contract's tests for one engine in a pytest subprocess; one line per failure with its rule."""
    from engine.engines import engine_class

    engine_class(args.name)                  # an unknown or broken engine is refused here, with its reason
    tests = ROOT / "tests"
    if not (tests / "conftest.py").is_file():
        raise WorkbenchError(f"the contract runs the workbench's own tests, and {tests} holds none: install "
                             f"memory-workbench from its source checkout (pip install -e .)")
    ids = [t for rule in RULES for t in rule.tests]
    with tempfile.TemporaryDirectory(prefix="memwb-check-") as tmp:
        report = Path(tmp) / "junit.xml"
        env = {**os.environ, CONTRACT_ENGINES_VAR: args.name, "HF_HUB_OFFLINE": "1"}
        cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={report}", *ids]
        if args.k:
            cmd += ["-k", args.k]
        print(f"memwb engine check {args.name}: {len(RULES)} rules, {len(ids)} tests ({' '.join(cmd[2:5])} …)",
              file=sys.stderr, flush=True)
        proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
        if not report.is_file():
            raise WorkbenchError(f"pytest wrote no report (exit {proc.returncode}):\n{proc.stdout[-2000:]}"
                                 f"{proc.stderr[-2000:]}")
        cases = list(ET.parse(report).getroot().iter("testcase"))
    failed, skips = 0, Counter()
    for case in cases:
        test_id = f"{case.get('classname', '').replace('.', '/')}.py::{case.get('name')}"
        problem = case.find("failure")
        problem = problem if problem is not None else case.find("error")
        skip = case.find("skipped")
        if skip is not None:
            skips[(skip.get("message") or "").strip()[:200]] += 1
        if problem is None:
            continue
        failed += 1
        rule = rule_of(test_id)
        message = (problem.get("message") or "").strip().splitlines()
        print(f"FAIL {test_id}")
        print(f"  rule: {rule.title if rule else '(no rule names this test)'}")
        print(f"  documented: {rule.doc if rule else DOC}")
        print(f"  {message[0][:400] if message else problem.tag}")
    for reason, n in sorted(skips.items()):
        print(f"skipped {n}: {reason}")
    skipped = sum(skips.values())
    passed = len(cases) - failed - skipped
    print(f"memwb engine check {args.name}: {passed} passed, {failed} failed, {skipped} skipped "
          f"({'the engine keeps the contract' if not failed else 'see each rule in ' + DOC})")
    return 1 if failed or not passed else 0


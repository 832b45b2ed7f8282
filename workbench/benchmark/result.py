"""A benchmark result file (`memwb bench`'s result.json, docs/BENCHMARK_FORMAT.md) as the Benchmark page reads it.

Loading checks the parts the page draws from, so a file of another format, a truncated file or a record
missing a field is refused with one message naming the file and what is wrong, instead of failing halfway
through a chart.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from engine.bench.result import FORMAT
from engine.core.errors import WorkbenchError
from workbench.text import MISSING

RESULT_NAME = "result.json"

_TOP = {"format": str, "dataset": str, "protocol": str, "ks": list, "rounds": int, "systems": dict, "metrics": list,
        "categories": dict, "tasks": list, "rounds_detail": list, "summary": dict, "questions": list}
_ROUND = {"system": str, "round": int, "overall": dict}
_QUESTION = {"system": str, "conversation": str, "question_id": str, "question": str, "gold": list, "turn": int,
             "metrics": dict, "ranked": list, "results": list}
_TASK = {"conversation": str, "system": str}
_BOUNDARY = {"meeting": str, "system": str, "pk": (int, float), "window_diff": (int, float), "delta_b": (int, float)}


class BenchFileError(WorkbenchError, ValueError):
    """The file is not a readable benchmark result; the message names the file and what is wrong."""


@dataclass(frozen=True)
class BenchResult:
    path: Path
    data: dict

    @property
    def folder(self) -> Path:
        return self.path.parent

    @property
    def systems(self) -> list[str]:
        return list(self.data["systems"])

    def keeps_memory(self, system: str) -> bool:
        """Whether `system` is an engine with a memory (the full-history ceiling and fixed windows are not)."""
        return self.data["systems"].get(system, {}).get("engine") is not None

    @property
    def metrics(self) -> list[str]:
        return list(self.data["metrics"])

    @property
    def ks(self) -> list[int]:
        return list(self.data["ks"])

    @property
    def rounds_detail(self) -> list[dict]:
        return self.data["rounds_detail"]

    @property
    def questions(self) -> list[dict]:
        return self.data["questions"]

    @property
    def boundaries(self) -> list[dict]:
        return self.data.get("boundaries") or []

    @property
    def summary(self) -> dict:
        return self.data["summary"]

    @property
    def tasks(self) -> list[dict]:
        return self.data["tasks"]

    def category_label(self, key) -> str:
        """The dataset's own name of a category ("multi-hop"), else its key (the missing mark for none)."""
        if key is None:
            return MISSING
        return str(self.data["categories"].get(str(key), key))

    def session_db(self, conversation: str, system: str) -> Path | None:
        """The session database the task (conversation, system) ran in, resolved against the result's folder."""
        for task in self.tasks:
            if task.get("conversation") == conversation and task.get("system") == system and task.get("db"):
                db = Path(task["db"])
                return db if db.is_absolute() else self.folder / db
        return None

    def failed_tasks(self) -> list[dict]:
        return [t for t in self.tasks if t.get("error")]


def load_result(path: str | Path) -> BenchResult:
    """Read and check a result file; `BenchFileError` names the file and the first problem found."""
    path = Path(path).expanduser()
    if path.is_dir():
        path = path / RESULT_NAME
    if not path.is_file():
        raise BenchFileError(f"no benchmark result at {path}")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        raise BenchFileError(f"{path} is not a text file") from None
    except json.JSONDecodeError as exc:
        raise BenchFileError(f"{path} is not valid JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}") from None
    if not isinstance(data, dict):
        raise BenchFileError(f"{path} holds a JSON {type(data).__name__}, not a benchmark result object")
    if data.get("format") != FORMAT:
        found = f"format {data['format']!r}" if "format" in data else "no \"format\" field"
        raise BenchFileError(f"{path} has {found}; the Benchmark page reads {FORMAT!r} (memwb bench's result.json)")
    problem = _problem(data)
    if problem:
        raise BenchFileError(f"{path} is not a complete {FORMAT} result: {problem}")
    return BenchResult(path=path, data=data)


def _problem(data: dict) -> str | None:
    found = _fields(data, _TOP, "")
    if found:
        return found
    systems = set(data["systems"])
    for part, spec in (("rounds_detail", _ROUND), ("questions", _QUESTION), ("tasks", _TASK),
                       ("boundaries", _BOUNDARY)):
        records = data.get(part) or []
        if not isinstance(records, list):
            return f"{part!r} is a {type(records).__name__}, not a list"
        for i, record in enumerate(records):
            where = f"{part}[{i}]"
            if not isinstance(record, dict):
                return f"{where} is a {type(record).__name__}, not an object"
            found = _fields(record, spec, where + ": ")
            if found:
                return found
            if record["system"] not in systems and not (part == "boundaries" and record["system"].startswith("fixed")):
                return f"{where}: system {record['system']!r} is not one of the file's systems ({', '.join(systems)})"
    for name in data["metrics"]:
        if not isinstance(name, str):
            return f"\"metrics\" holds {name!r}, not a metric name"
    return None


def _fields(record: dict, spec: dict, where: str) -> str | None:
    for key, kind in spec.items():
        if key not in record:
            return f"{where}\"{key}\" is missing"
        if not isinstance(record[key], kind) or isinstance(record[key], bool):
            return f"{where}\"{key}\" is {json.dumps(record[key])[:40]}, not {_kind_name(kind)}"
    return None


def _kind_name(kind) -> str:
    names = {str: "a string", int: "an integer", list: "a list", dict: "an object"}
    return "a number" if isinstance(kind, tuple) else names[kind]


def workspace_results(folder: Path) -> list[Path]:
    """Result files under a benchmarks folder (one per run folder), newest first."""
    if not folder.is_dir():
        return []
    found = [p for p in folder.glob(f"*/{RESULT_NAME}") if p.is_file()]
    return sorted(found, key=lambda p: (-p.stat().st_mtime, p.parent.name))

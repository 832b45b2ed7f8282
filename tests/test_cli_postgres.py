"""`memwb` against a PostgreSQL URL gives what it gives against a SQLite file (subprocess, real server)."""
from __future__ import annotations

import json

from engine.loaders import load_conversation
from tests.test_cli import DEMO, memwb


def test_replay_retrieve_export_on_postgresql_equal_sqlite(make_db, tmp_path):
    questions = tmp_path / "questions.jsonl"
    questions.write_text("".join(json.dumps({"id": q.id, "query": q.question}) + "\n"
                                 for q in load_conversation(DEMO).questions))
    databases = {backend: make_db(backend) for backend in ("postgresql", "sqlite")}   # skips at once if no server
    results = {}
    for backend, db in databases.items():
        replayed = memwb("replay", DEMO, "--db", db, "--engine", "allmem", "--quiet").stdout
        retrieved = [json.loads(line) for line in
                     memwb("retrieve", "--db", db, "--queries", questions, "--k", "5", "--json").stdout.splitlines()]
        for r in retrieved:
            r.pop("stages")                      # milliseconds: the only part that is not deterministic
        results[backend] = {"replay": replayed, "retrieve": retrieved,
                            "export": json.loads(memwb("export", "--db", db, "--json").stdout),
                            "diagnostics": json.loads(memwb("diagnostics", "--db", db).stdout)}
    sqlite, postgresql = results["sqlite"], results["postgresql"]
    assert sqlite["replay"].startswith("turns=102 ") and "off_surface=" in sqlite["replay"]
    assert len(sqlite["retrieve"]) == 14 and all(len(r["source_ids"]) == 5 for r in sqlite["retrieve"])
    assert any(not u["visible"] for u in sqlite["export"]["units"])        # consolidation archived some units
    assert postgresql == sqlite

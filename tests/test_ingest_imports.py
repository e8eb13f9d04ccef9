"""An ingest without ``DATABASE_URL`` keeps its state in the corpus file, so it does not
import the shared state's SQLAlchemy (half a second of its start); with the URL set it
still opens the shared state (and fails in one sentence when that does not answer)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.test_cli_imports import loaded


def _papers(path: Path) -> Path:
    papers = [
        {"id": f"p{k}", "title": f"Paper {k} on sparse attention", "abstract": "Words. " * 5}
        for k in range(5)
    ]
    path.write_text("".join(json.dumps(p) + "\n" for p in papers))
    return path


def test_an_ingest_without_database_url_does_not_import_the_shared_state(tmp_path: Path):
    source = _papers(tmp_path / "p.jsonl")
    code, modules = loaded(["--db", str(tmp_path / "c.db"), "ingest", str(source)], tmp_path)
    assert code == 0
    assert "numpy" in modules  # the probe saw the ingest build its index
    assert sorted(modules & {"sqlalchemy", "alembic"}) == []


def test_an_ingest_with_database_url_opens_the_shared_state(tmp_path: Path):
    source = _papers(tmp_path / "p.jsonl")
    url = "postgresql://paperboy@127.0.0.1:9/nowhere"
    code, modules = loaded(
        ["--db", str(tmp_path / "c.db"), "ingest", str(source)], tmp_path, DATABASE_URL=url
    )
    assert code == 1  # the shared state does not answer: one sentence, nothing ingested
    assert "sqlalchemy" in modules

"""The CLI's cold start: ``paperboy --help`` loads none of the heavy packages, and a lookup
loads the engine but not the shared state (SQLAlchemy, Alembic) nor Slack's SDK or
scikit-learn (nor scipy, for a search). Each command runs in a fresh interpreter, as a user's would; what it imported
is read from ``sys.modules`` (no timing: the speed is in the report of the change)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.slack_harness import seeded_engine

#: What ``paperboy --help`` must not import (seconds of cold start on a loaded box).
HEAVY = ["sqlalchemy", "alembic", "sklearn", "scipy", "numpy", "slack_sdk", "slack_bolt"]
#: What a lookup does not need: the index needs numpy, nothing else of these. scipy's
#: sparse product is imported by builds, "similar papers" and the few queries MaxScore
#: leaves to it, not by a search it answers (0.1-0.2 s of a cold start).
NOT_FOR_LOOKUPS = ["sqlalchemy", "alembic", "sklearn", "slack_sdk", "slack_bolt"]

PROBE = """
import json, sys
from bot.cli import main
try:
    main(sys.argv[1:], prog_name="paperboy")
except SystemExit as end:
    code = end.code
print(json.dumps({"code": code, "modules": sorted({m.split(".")[0] for m in sys.modules})}))
"""


def loaded(args: list[str], cwd: Path, **env: str) -> tuple[int, set[str]]:
    """Run ``paperboy ARGS`` in a fresh interpreter: its exit code and the top-level
    packages it imported."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("PAPERBOY_", "SLACK_"))}
    environ.pop("DATABASE_URL", None)
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *args],
        cwd=cwd,
        env={**environ, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )
    report = json.loads(done.stdout.strip().splitlines()[-1])
    return report["code"], set(report["modules"])


@pytest.mark.parametrize("args", [["--help"], ["digest", "--help"], ["serve", "--help"]])
def test_help_imports_no_heavy_package(tmp_path: Path, args: list[str]) -> None:
    code, modules = loaded(args, tmp_path)
    assert code == 0
    assert "click" in modules  # the probe saw the CLI run
    assert sorted(modules & set(HEAVY)) == []


@pytest.mark.parametrize("command", ["search", "similar"])
def test_a_lookup_imports_the_engine_but_not_the_shared_state(
    tmp_path: Path, seeded_db_template: Path, command: str
) -> None:
    """Also with ``DATABASE_URL`` set: a lookup reads only the corpus file, so it does not
    open the shared state (the URL here points at no server: opening it would fail)."""
    engine = seeded_engine(tmp_path / "corpus.db", seeded_db_template)
    paper_id = engine.search("diffusion", limit=1).hits[0].paper["id"]
    args = ["search", "diffusion"] if command == "search" else ["similar", paper_id]
    url = "postgresql://paperboy@127.0.0.1:9/nowhere"
    code, modules = loaded(["--db", str(engine.db_path), *args], tmp_path, DATABASE_URL=url)
    assert code == 0
    assert "numpy" in modules  # the index was opened
    assert sorted(modules & set(NOT_FOR_LOOKUPS)) == []
    assert ("scipy" in modules) == (command == "similar")


def test_stats_without_a_shared_state_imports_none_of_it(
    tmp_path: Path, seeded_db_template: Path
) -> None:
    """``paperboy stats`` reads the corpus file and the feeds' state in it; without
    ``DATABASE_URL`` it has no shared corpus to compare with, so SQLAlchemy, Alembic and
    Slack's SDK (whose OAuth stores the shared state imports) are not loaded."""
    engine = seeded_engine(tmp_path / "corpus.db", seeded_db_template)
    code, modules = loaded(["--db", str(engine.db_path), "stats"], tmp_path)
    assert code == 0
    assert "numpy" in modules  # the index was opened
    assert sorted(modules & set(NOT_FOR_LOOKUPS)) == []

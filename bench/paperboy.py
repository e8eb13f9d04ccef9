"""How the benchmarks reach Paperboy: its ``paperboy`` CLI (child processes) or its Python API.

Kept in one place so that when the app's entry points change only this file needs adapting.
The CLI is the console script next to the running interpreter (``.venv/bin/paperboy``, installed
by ``pip install -e .``); without it, ``python -c 'from bot.cli import main; main()'`` from the
repo root does the same job.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import json
import os
import shutil
import sys
from pathlib import Path

from bench.corpora import REPO_DIR


def available() -> bool:
    """True once ``bot.engine.search.Engine`` can be imported (the lead is writing it)."""
    try:
        return importlib.util.find_spec("bot.engine.search") is not None and hasattr(
            importlib.import_module("bot.engine.search"), "Engine"
        )
    except Exception:  # a half-written module must not crash the anchor-only benchmarks
        return False


def cli() -> list[str]:
    """The command prefix that runs the ``paperboy`` CLI with the benchmark's interpreter."""
    script = Path(sys.executable).parent / "paperboy"
    if script.exists():
        return [str(script)]
    found = shutil.which("paperboy")
    if found:
        return [found]
    return [sys.executable, "-c", "import sys; from bot.cli import main; sys.exit(main())"]


def reset_db(db: Path) -> None:
    """Delete a benchmark database and everything Paperboy keeps beside it (WAL, index dir)."""
    for suffix in ("", "-wal", "-shm", "-journal"):
        Path(str(db) + suffix).unlink(missing_ok=True)
    for extra in db.parent.glob(db.name + ".index*"):
        if extra.is_dir():
            shutil.rmtree(extra, ignore_errors=True)
        else:
            extra.unlink(missing_ok=True)


def ingest_cmd(db: Path, corpus: Path) -> list[str]:
    """``paperboy --db DB ingest CORPUS``: store the papers and build the index."""
    return [*cli(), "--db", str(db), "ingest", str(corpus)]


def batch_search_cmd(db: Path, queries_file: Path, limit: int) -> list[str]:
    """``paperboy --db DB search --batch FILE --json --limit N``: one JSON line per query."""
    return [
        *cli(),
        "--db",
        str(db),
        "search",
        "--batch",
        str(queries_file),
        "--json",
        "--limit",
        str(limit),
    ]


def one_search_cmd(db: Path, query: str) -> list[str]:
    """``paperboy --db DB search QUERY``: what a user runs once (the cold-start probe)."""
    return [*cli(), "--db", str(db), "search", query]


def parse_batch_output(stdout: str) -> dict[str, list[str]]:
    """``{query: [ids best first]}`` from the batch search's JSON lines."""
    run: dict[str, list[str]] = {}
    for line in stdout.splitlines():
        if line.strip():
            record = json.loads(line)
            run[record["query"]] = [r["id"] for r in record["results"]]
    return run


def open_engine(db: Path):  # -> bot.engine.search.Engine
    """``Engine.open(db)`` without a seed directory, so the benchmark corpus is all it holds."""
    if str(REPO_DIR) not in sys.path:
        sys.path.insert(0, str(REPO_DIR))
    from bot.engine.search import Engine

    return Engine.open(db)


def code_fingerprint() -> str:
    """A short hash of the source the benchmarks exercise (engine + CLI), stamped on reports.

    The app is installed editable and developed in parallel, so a long benchmark can start on
    one version and finish on another; comparing the stamp taken at start and end catches that.
    The Slack front end is left out: it changes often and never runs here.
    """
    digest = hashlib.sha1()
    sources = [*(REPO_DIR / "bot" / "engine").rglob("*.py"), REPO_DIR / "bot" / "cli.py"]
    for path in sorted(p for p in sources if p.exists()):
        digest.update(path.relative_to(REPO_DIR).as_posix().encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:10]


def index_stamp(db: Path) -> str | None:
    """When Paperboy last (re)built the index beside ``db`` (its meta.json), or None.

    If this changes between ingest and the end of a run, some step rebuilt the index (e.g. the
    index format changed under it) and that step's time and memory include a full rebuild.
    """
    meta = Path(f"{db}.index") / "meta.json"
    try:
        return str(json.loads(meta.read_text(encoding="utf-8")).get("built_at"))
    except (OSError, ValueError):
        return None


def engine_env() -> dict[str, str]:
    """Environment for Paperboy children: never seed the benchmark DB from the repo's data/."""
    env = dict(os.environ)
    env["PAPERBOY_SEED_DIR"] = str(REPO_DIR / "bench" / "work" / "no-seed")
    return env

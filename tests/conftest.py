"""Shared fixtures: ``slack`` is the whole app behind HTTP with the Slack stand-in (see
``tests/slack_harness.py``)."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.engine.search import Engine
from bot.settings import SEED_DIR
from bot.state import StateStore, configure
from tests.postgres import PostgresCluster, find_bin_dir
from tests.slack_harness import SlackHarness, seeded_engine


@pytest.fixture(scope="session")
def seeded_db_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The seed corpus read and indexed once per test session; tests get copies."""
    path = tmp_path_factory.mktemp("seeded") / "template.db"
    seeded_engine(path)
    return path


@pytest.fixture(scope="session")
def sentences(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """The seed papers' sentences, for corpora made up by shuffling them (the index tests)."""
    seed = Engine.open(tmp_path_factory.mktemp("seed") / "seed.db", seed_dir=SEED_DIR)
    out = []
    for _, doc in seed.corpus.iter_documents():
        text = f"{doc['title']}. {doc['abstract']}"
        out += [s.strip() for s in re.split(r"(?<=[.!?])\s+", text) if len(s.split()) > 4]
    return out


@pytest.fixture
def slack(tmp_path: Path, seeded_db_template: Path) -> Iterator[SlackHarness]:
    harness = SlackHarness(tmp_path, template_db=seeded_db_template)
    try:
        yield harness
    finally:
        harness.close()


# -- the shared state on both backends (see tests/postgres.py) ------------------------------


@pytest.fixture(scope="session")
def postgres_cluster() -> Iterator[PostgresCluster]:
    """One throwaway PostgreSQL server for the session, with a migrated template database.

    Without PostgreSQL's binaries the tests that need it are skipped, except in CI
    (``CI=true``), where that is a failure: CI must test both backends.
    """
    bin_dir = find_bin_dir()
    if bin_dir is None:
        reason = "PostgreSQL is not installed (apt-get install postgresql)"
        if os.environ.get("CI") == "true":
            pytest.fail(f"{reason}, and CI must run the PostgreSQL tests")
        pytest.skip(reason)
    cluster = PostgresCluster(bin_dir).start()
    try:
        template = cluster.create_database()
        StateStore(template).close()  # migrated once; tests copy it
        cluster.template = template.rsplit("/", 1)[1]
        yield cluster
    finally:
        cluster.destroy()


@pytest.fixture
def postgres_url(postgres_cluster: PostgresCluster) -> str:
    """A fresh, migrated database of the session's PostgreSQL server."""
    return postgres_cluster.create_database(template=postgres_cluster.template)


@pytest.fixture(params=["sqlite", "postgresql"])
def state_backend(request: pytest.FixtureRequest) -> Iterator[str]:
    """Run the test with the shared state in SQLite (the corpus file) and in PostgreSQL
    (``DATABASE_URL``, as ``bot.state.configure`` sets it at a process's start)."""
    if request.param == "sqlite":
        yield "sqlite"
        return
    store = configure(request.getfixturevalue("postgres_url"))
    try:
        yield "postgresql"
    finally:
        configure(None)
        assert store is not None
        store.close()

"""Shared fixtures: ``slack`` is the whole app behind HTTP with the Slack stand-in (see
``tests/slack_harness.py``)."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import sync_playwright

from bot.engine.search import Engine
from bot.playground.playground import Playground
from bot.settings import SEED_DIR, Settings
from bot.state import StateStore, configure
from bot.state.shared_corpus import SharedCorpus
from tests.fake_slack import FakeSlack
from tests.playground_page import CHROMIUM
from tests.postgres import PostgresCluster, find_bin_dir
from tests.slack_harness import SlackHarness, seeded_engine


@pytest.fixture(autouse=True)
def patient_short_waits(monkeypatch: pytest.MonkeyPatch) -> None:
    """The app's two short waits (1 s for a member's choices before an answer goes with its
    buttons unmarked, 2 s for a shared post before its modal closes) are for a slow Slack or
    database; on a loaded CI machine the fake and SQLite can be that slow too. Tests that are
    not about those waits get 8 s; the tests of the waits set their own."""
    from bot.slack.listeners import feedback, views

    monkeypatch.setattr(feedback, "CHOICES_WAIT_SECONDS", 8.0)
    monkeypatch.setattr(views, "ACK_WAIT_SECONDS", 8.0)


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


# -- the playground, and its page in a headless Chromium (tests/playground_page.py) ------------


@pytest.fixture
def playground_options() -> dict[str, Any]:
    """Keyword arguments for ``Playground``; a test module overrides this fixture to change them."""
    return {}


@pytest.fixture
def playground(
    tmp_path: Path, seeded_db_template: Path, playground_options: dict[str, Any]
) -> Iterator[Playground]:
    """The playground over a copy of the seeded corpus, with the Slack stand-in, running."""
    engine = seeded_engine(tmp_path / "pg.db", seeded_db_template)
    settings = Settings(db_path=tmp_path / "pg.db")
    with Playground(settings, engine, slack=FakeSlack(), **playground_options) as running:
        yield running


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=CHROMIUM,
            args=[
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--no-first-run",
            ],
        )
        try:
            yield browser
        finally:
            browser.close()


@pytest.fixture
def page(browser: Any, playground: Playground) -> Iterator[Any]:
    """A fresh tab on the playground, loaded (its channel list drawn); fails the test on any
    uncaught error in the page's script."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    try:
        page = context.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda error: errors.append(str(error)))
        page.set_default_timeout(15_000)
        page.goto(playground.url)
        page.locator("#channel-list .room").first.wait_for()
        yield page
        assert not errors, errors
    finally:
        context.close()


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


@pytest.fixture(params=["sqlite", "postgresql"])
def shared(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SharedCorpus]:
    """The process's shared corpus (as ``DATABASE_URL`` sets it), on each backend: a
    PostgreSQL database, or a SQLite file that is no host's corpus file."""

    if request.param == "sqlite":
        target = f"sqlite:///{tmp_path / 'shared-state.db'}"
    else:
        target = request.getfixturevalue("postgres_url")
    store = configure(target)
    assert store is not None
    try:
        yield SharedCorpus(store)
    finally:
        configure(None)

"""Shared fixtures: ``slack`` is the whole app behind HTTP with the Slack stand-in (see
``tests/slack_harness.py``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.slack_harness import SlackHarness, seeded_engine


@pytest.fixture(scope="session")
def seeded_db_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The seed corpus read and indexed once per test session; tests get copies."""
    path = tmp_path_factory.mktemp("seeded") / "template.db"
    seeded_engine(path)
    return path


@pytest.fixture
def slack(tmp_path: Path, seeded_db_template: Path) -> Iterator[SlackHarness]:
    harness = SlackHarness(tmp_path, template_db=seeded_db_template)
    try:
        yield harness
    finally:
        harness.close()

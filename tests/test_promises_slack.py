"""README promises on the Slack side, each tested so that breaking it fails a test.

See tests/README.md for which deliberate break each test here was checked against.
"""

from __future__ import annotations

import json
import threading
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from pathlib import Path
from typing import Any

import pytest

from tests.slack_harness import SlackHarness, blocks_text, seeded_engine
from tests.slack_harness import http as get


class HeldLookups:
    """Wraps ``engine.search`` so that every lookup waits until the test lets it go."""

    def __init__(self, engine: Any) -> None:
        self.search = engine.search
        self.started = threading.Event()
        self.release = threading.Event()

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        self.started.set()
        if not self.release.wait(30):
            raise AssertionError("the test never released the lookup")
        return self.search(*args, **kwargs)


def test_papers_is_acknowledged_while_its_lookup_is_still_running(
    tmp_path: Path, seeded_db_template: Path
) -> None:
    """Slack gives up on a slash command after 3 s; a lookup may take longer, so ``/papers``
    answers the HTTP request (the ack) first and the lookup follows through the response_url.

    No timing: the lookup is held until the test has seen the ack. Had the app looked up
    first, the signed request would still be waiting for its answer when the test asks.
    """
    engine = seeded_engine(tmp_path / "paperboy.db", seeded_db_template)
    held = HeldLookups(engine)
    engine.search = held  # type: ignore[method-assign]
    with SlackHarness(tmp_path, engine=engine) as slack, ThreadPoolExecutor(1) as pool:
        try:
            sent = pool.submit(slack.slash, "diffusion models")
            assert held.started.wait(10), "the lookup never started"
            try:
                status, url = sent.result(timeout=8)
            except FutureTimeout:
                pytest.fail("/papers was not acknowledged while its lookup was running")
            assert status == 200
            assert slack.replies(url) == []  # the answer is not there yet: it is held
        finally:
            held.release.set()
        reply = slack.reply(url)
        assert "diffusion" in blocks_text(reply).lower()


def test_healthz_is_503_when_the_database_is_not_a_database(
    tmp_path: Path, seeded_db_template: Path
) -> None:
    """The load balancer's check: 200 while the database answers, 503 (one sentence, no
    traceback) when it does not, here a database file overwritten with garbage."""
    with SlackHarness(tmp_path, template_db=seeded_db_template) as slack:
        status, body = get(slack.url + "/healthz")
        assert status == 200, body
        db = Path(slack.engine.db_path)
        for extra in (db.with_name(db.name + "-wal"), db.with_name(db.name + "-shm")):
            extra.unlink(missing_ok=True)
        db.write_bytes(b"this is not a database, it is garbage " * 200)
        status, body = get(slack.url + "/healthz")
    assert status == 503, body
    assert "Traceback" not in body and json.loads(body)  # a JSON reason, not a stack trace

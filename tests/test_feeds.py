"""``arxiv:`` feeds in PAPERBOY_FEEDS, against a local arXiv API serving recorded Atom pages.

The pages (tests/data/arxiv) follow the API's answers to ``search_query=cat:cs.CL OR
cat:cs.LG`` sorted by ``lastUpdatedDate``, three to a page: ``cs-day1`` one day, ``cs-day2``
the next (two new papers and a new version of one), ``stat-day1`` a one-page feed. Nothing
sleeps: the client's clock and sleeper are a ``FakeTime`` that only moves when asked to wait,
so the tests read the waits it was asked for, in order with the requests the server saw.
"""

from __future__ import annotations

import json
import logging
import os
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from bot.cli import main
from bot.engine.search import Engine
from bot.settings import Settings, SettingsError
from bot.slack.client import make_client
from bot.slack.poster import SlackPoster
from digest import schedule
from digest.arxiv import ArxivClient
from digest.clock import Clock, clock_health
from digest.feeds import feed_status, ingest_feeds, run_feeds
from digest.schedule import FEEDS_HOUR_UTC, FEEDS_JOB
from tests.atom_server import Answer, AtomServer, recorded, refused_url
from tests.fake_slack import FakeSlack
from tests.slack_harness import BOT_TOKEN
from tests.waiting import Waiting

CS = "arxiv:cs.CL,cs.LG"
CS_QUERY = "cat:cs.CL OR cat:cs.LG"
STAT = "arxiv:stat.ML"
STAT_QUERY = "cat:stat.ML"
DAY1 = datetime(2026, 11, 27, 7, 0, tzinfo=UTC)  # when the recorded pages say they were made
DAY2 = datetime(2026, 11, 28, 7, 0, tzinfo=UTC)
CONTACT = "papers-team@example.org"
DAY1_IDS = [
    "2611.20431",
    "2611.20417",
    "2611.19876",
    "2611.20102",
    "2611.19544",
    "2611.18813",
    "2611.17002",
    "2611.14310",
    "2611.13998",
]


class FakeTime:
    """A monotonic clock that moves only when the client sleeps; every wait is noted."""

    def __init__(self, events: list[tuple[str, Any]]):
        self.now = 1_000.0
        self.events = events

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.events.append(("sleep", seconds))
        self.now += seconds

    @property
    def waits(self) -> list[float]:
        return [value for kind, value in self.events if kind == "sleep"]


@pytest.fixture
def events() -> list[tuple[str, Any]]:
    return []


@pytest.fixture
def server(events) -> Iterator[AtomServer]:
    with AtomServer() as server:
        server.on_request = lambda r: events.append(("GET", r.params.get("start")))
        yield server


@pytest.fixture
def engine(tmp_path: Path) -> Engine:
    return Engine.open(tmp_path / "feeds.db")


@pytest.fixture
def time(events) -> FakeTime:
    return FakeTime(events)


def client(server: AtomServer, time: FakeTime, max_pages: int = 3) -> ArxivClient:
    return ArxivClient(
        server.url,
        contact=CONTACT,
        page_size=3,
        max_pages=max_pages,
        clock=time.clock,
        sleep=time.sleep,
    )


def ids(engine: Engine) -> set[str]:
    return {row["id"] for row in engine.db.query("select id from papers")}


def arxiv_ids(*bases: str) -> set[str]:
    return {f"arxiv:{base}" for base in bases}


def state(engine: Engine, feed: str) -> dict[str, Any]:
    return next(row for row in feed_status(engine.db) if row["feed"] == feed)


# --- PAPERBOY_FEEDS --------------------------------------------------------------------------


def test_paperboy_feeds_takes_arxiv_categories_beside_files_and_urls() -> None:
    settings = Settings.from_env(
        {
            "PAPERBOY_FEEDS": "papers.jsonl, https://example.org/feed.jsonl "
            "arxiv:cs.LG,cs.CL stat.ml '/data/my papers.jsonl' arxiv:hep-th",
            "PAPERBOY_ARXIV_API_URL": "http://127.0.0.1:9/api/query",
            "PAPERBOY_ARXIV_CONTACT": CONTACT,
        }
    )
    assert settings.feeds == (
        "papers.jsonl",
        "https://example.org/feed.jsonl",
        "arxiv:cs.CL,cs.LG,stat.ML",  # one query; the categories in one order, as arXiv spells them
        "/data/my papers.jsonl",
        "arxiv:hep-th",
    )
    assert settings.arxiv_api_url == "http://127.0.0.1:9/api/query"
    assert (settings.arxiv_contact, settings.arxiv_max_pages) == (CONTACT, 10)
    # Today's syntax is unchanged.
    assert Settings.from_env({"PAPERBOY_FEEDS": "a.jsonl,b.csv"}).feeds == ("a.jsonl", "b.csv")


def test_an_unknown_category_is_one_sentence_that_names_it() -> None:
    with pytest.raises(SettingsError) as raised:
        Settings.from_env({"PAPERBOY_FEEDS": "arxiv:cs.LG,cs.XX,stat.MLL"})
    assert raised.value.problems == [
        "PAPERBOY_FEEDS names cs.XX, which is not an arXiv category: see "
        "https://arxiv.org/category_taxonomy.",
        "PAPERBOY_FEEDS names stat.MLL, which is not an arXiv category (did you mean stat.ML?): "
        "see https://arxiv.org/category_taxonomy.",
    ]
    with pytest.raises(SettingsError) as raised:
        Settings.from_env({"PAPERBOY_FEEDS": "arxiv:"})
    assert raised.value.problems == [
        "PAPERBOY_FEEDS has 'arxiv:' with no category after it: write, for example, "
        "arxiv:cs.LG,cs.CL,stat.ML."
    ]


def test_every_command_refuses_an_unknown_category_at_start(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(
        main, ["stats"], env={"PAPERBOY_FEEDS": "arxiv:cs.XX"}, catch_exceptions=False
    )
    assert result.exit_code == 2
    assert result.output.strip().startswith("PAPERBOY_FEEDS names cs.XX, which is not")
    assert list(tmp_path.iterdir()) == []


# --- fetching with arXiv's etiquette ---------------------------------------------------------


def test_a_first_run_pages_through_the_query_three_seconds_apart(server, engine, time) -> None:
    server.serve(CS_QUERY, "cs-day1", DAY1)
    report = ingest_feeds(engine, [CS], arxiv=client(server, time))
    assert report is not None and report.counts.added == 9
    assert ids(engine) == arxiv_ids(*DAY1_IDS)
    # One request at a time, each 3 s after the previous one ended; three pages (the cap).
    assert time.events == [("GET", "0"), ("sleep", 3.0), ("GET", "3"), ("sleep", 3.0), ("GET", "6")]
    first = server.requests[0]
    assert first.params == {
        "search_query": CS_QUERY,
        "sortBy": "lastUpdatedDate",
        "sortOrder": "descending",
        "start": "0",
        "max_results": "3",
    }
    agent = first.headers["User-Agent"]
    assert agent.startswith("Paperboy/") and f"mailto:{CONTACT}" in agent
    assert all(r.headers["User-Agent"] == agent for r in server.requests)
    assert "If-Modified-Since" not in first.headers  # nothing to compare with yet
    row = state(engine, CS)
    assert row["newest"] == "2026-11-26T18:59:41+00:00" and row["error"] is None
    assert row["papers"] == 9


def test_the_spacing_holds_across_feeds_and_counts_from_the_last_answer(
    server, engine, time
) -> None:
    server.serve(CS_QUERY, "cs-day1", DAY1)
    server.serve(STAT_QUERY, "stat-day1", DAY1)
    arxiv = client(server, time, max_pages=1)
    ingest_feeds(engine, [CS, STAT], arxiv=arxiv)
    assert time.events == [("GET", "0"), ("sleep", 3.0), ("GET", "0")]
    # Time that passed since the last answer counts: 2 s later, only 1 s is left to wait.
    time.now += 2
    server.serve(STAT_QUERY, "stat-day1", DAY2)  # changed, so it is fetched again
    ingest_feeds(engine, [STAT], arxiv=arxiv)
    assert time.waits == [3.0, 1.0]


def test_the_next_run_resumes_where_the_last_one_stopped(server, engine, time) -> None:
    server.serve(CS_QUERY, "cs-day1", DAY1)
    ingest_feeds(engine, [CS], arxiv=client(server, time))
    server.serve(CS_QUERY, "cs-day2", DAY2)
    server.requests.clear()
    report = ingest_feeds(engine, [CS], arxiv=client(server, time, max_pages=10))
    # Two pages: the second starts with the newest paper seen last time, then older ones.
    assert [r.start for r in server.requests] == [0, 3]
    assert report is not None
    counts = report.counts
    assert (counts.added, counts.updated, counts.unchanged) == (2, 1, 1)
    assert ids(engine) == arxiv_ids(*DAY1_IDS, "2611.21877", "2611.21650")
    assert server.requests[0].headers["If-Modified-Since"] == "Fri, 27 Nov 2026 07:00:00 GMT"
    assert state(engine, CS)["newest"] == "2026-11-27T18:45:00+00:00"
    # The new version replaced the old text, and the new papers are found by a lookup.
    [hit] = engine.search("sparse autoencoders protein", limit=1).hits
    assert hit.paper["title"].endswith("in Protein Language Models across Scales")
    [hit] = engine.search("annotator pluralism preference data", limit=1).hits
    assert hit.id == "arxiv:2611.21877"


def test_nothing_new_is_a_304_and_costs_one_request(server, engine, time, caplog) -> None:
    server.serve(CS_QUERY, "cs-day1", DAY1)
    ingest_feeds(engine, [CS], arxiv=client(server, time))
    server.requests.clear()
    caplog.set_level(logging.INFO, logger="digest.feeds")
    assert ingest_feeds(engine, [CS], arxiv=client(server, time)) is None
    [request] = server.requests
    assert request.headers["If-Modified-Since"] == "Fri, 27 Nov 2026 07:00:00 GMT"
    assert f"feed {CS}: nothing new since the last run" in caplog.messages
    row = state(engine, CS)
    assert (row["error"], row["papers"], row["newest"]) == (None, 0, "2026-11-26T18:59:41+00:00")


def test_a_capped_run_says_papers_were_skipped(server, engine, time, caplog) -> None:
    server.serve(CS_QUERY, "cs-day1", DAY1)
    ingest_feeds(engine, [CS], arxiv=client(server, time, max_pages=1))
    assert len(server.requests) == 1  # PAPERBOY_ARXIV_MAX_PAGES
    server.serve(CS_QUERY, "cs-day2", DAY2)
    ingest_feeds(engine, [CS], arxiv=client(server, time, max_pages=1))
    assert len(server.requests) == 2
    assert any("stopped after 1 pages" in m and "were skipped" in m for m in caplog.messages)


def test_an_empty_page_mid_results_is_asked_again(server, engine, time) -> None:
    server.serve(CS_QUERY, "cs-day1", DAY1)
    server.then(Answer(body=recorded("cs-day1/empty-start-3.xml")), start=3)
    report = ingest_feeds(engine, [CS], arxiv=client(server, time))
    assert [r.start for r in server.requests] == [0, 3, 3, 6]
    assert time.waits == [3.0, 3.0, 3.0]  # the retry waits its turn too
    assert report is not None and ids(engine) == arxiv_ids(*DAY1_IDS)


def test_a_page_that_stays_empty_fails_the_feed(server, engine, time, caplog) -> None:
    server.serve(CS_QUERY, "cs-day1", DAY1)
    for _ in range(3):
        server.then(Answer(body=recorded("cs-day1/empty-start-3.xml")), start=3)
    assert ingest_feeds(engine, [CS], arxiv=client(server, time)) is None
    assert [r.start for r in server.requests] == [0, 3, 3, 3]
    assert ids(engine) == set()  # nothing of the first page either
    assert state(engine, CS)["error"] == (
        "arXiv answered an empty page at result 3 of 231,847, 3 times"
    )


# --- failures: reported, retried next run, never half-ingested ------------------------------


def test_a_503_is_reported_and_the_next_run_fetches_the_feed(server, engine, time, caplog):
    server.serve(CS_QUERY, "cs-day1", DAY1)
    server.then(Answer(503, b"busy\n", {"Retry-After": "120"}))
    assert ingest_feeds(engine, [CS], arxiv=client(server, time)) is None
    sentence = (
        f"feed {CS} could not be fetched: arXiv answered HTTP 503 (Service Unavailable), "
        "asking to wait 120 s; it is tried again at the next run."
    )
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == [sentence]
    assert ids(engine) == set()
    row = state(engine, CS)
    assert row["error"].startswith("arXiv answered HTTP 503") and row["last_success"] is None
    stats = paperboy_stats(engine, _quiet_env() | {"PAPERBOY_FEEDS": CS})
    assert f"{CS}  failed at " in stats and "asking to wait 120 s (last success: never; " in stats
    again = datetime.fromisoformat(row["last_run"]) + timedelta(minutes=30)  # not the 120 s
    assert f"tried again from {again:%Y-%m-%d %H:%M} UTC)" in stats

    # The next run, when stats says (a run within the 120 s leaves the feed alone: see
    # test_a_run_before_the_retry_after_does_not_ask_the_server_again).
    report = ingest_feeds(engine, [CS], arxiv=client(server, time), now=again)
    assert report is not None and ids(engine) == arxiv_ids(*DAY1_IDS)
    row = state(engine, CS)
    assert (row["error"], row["failures"], row["papers"]) == (None, 0, 9)
    assert f"{CS}  ok at " in paperboy_stats(engine, _quiet_env() | {"PAPERBOY_FEEDS": CS})


def test_a_run_before_the_retry_after_does_not_ask_the_server_again(server, engine, time, caplog):
    """README: a failed feed is fetched again "never before the Retry-After the server asked
    for". A scheduler restarted meanwhile (a deploy, a crashed clock) runs the feeds at
    start-up (``run_feeds``): that run leaves the feed alone until then, and says so; the
    one after it fetches."""
    server.serve(CS_QUERY, "cs-day1", DAY1)
    server.then(Answer(503, b"busy\n", {"Retry-After": "7200"}))
    settings = Settings(feeds=(CS,))
    failed_at = datetime.now(UTC).replace(microsecond=0)
    arxiv = client(server, time)
    assert run_feeds(engine, settings, now=failed_at, arxiv=arxiv) == timedelta(hours=2)
    asked = len(server.requests)
    caplog.clear()
    caplog.set_level(logging.INFO, logger="digest.feeds")

    soon = failed_at + timedelta(minutes=5)  # the start-up run of a restarted scheduler
    assert run_feeds(engine, settings, now=soon, arxiv=arxiv) == timedelta(minutes=115)
    assert len(server.requests) == asked  # arXiv was not asked again
    row = state(engine, CS)
    assert (row["failures"], row["last_run"]) == (1, failed_at.isoformat(timespec="seconds"))
    until = failed_at + timedelta(seconds=7200)
    assert [r.getMessage() for r in caplog.records] == [
        f"feed {CS}: not fetched before {until:%Y-%m-%d %H:%M:%S} UTC, as the server asked "
        "(Retry-After)."
    ]

    assert run_feeds(engine, settings, now=until, arxiv=arxiv) is None
    assert ids(engine) == arxiv_ids(*DAY1_IDS)


def test_a_malformed_page_keeps_nothing_of_its_feed_and_the_others_go_in(
    server, engine, time, tmp_path, caplog
) -> None:
    server.serve(CS_QUERY, "cs-day1", DAY1)
    server.serve(STAT_QUERY, "stat-day1", DAY1)
    server.then(Answer(body=recorded("cs-day1/truncated-start-3.xml")), query=CS_QUERY, start=3)
    local = tmp_path / "local.jsonl"
    local.write_text(json.dumps({"id": "local-1", "title": "A paper from a file"}) + "\n")
    report = ingest_feeds(engine, [CS, STAT, str(local)], arxiv=client(server, time))
    assert report is not None
    # Not even the good first page of the broken feed went in; the others did.
    assert ids(engine) == arxiv_ids("2611.20555", "2611.20090", "2611.11020") | {"local-1"}
    assert any(
        m.startswith(f"feed {CS} could not be fetched: the page at result 3 is not well-formed XML")
        for m in caplog.messages
    )
    broken = state(engine, CS)
    assert broken["newest"] is None and "not well-formed XML" in broken["error"]
    # The next run takes it from where its last success left off: the beginning.
    ingest_feeds(engine, [CS, STAT, str(local)], arxiv=client(server, time))
    assert arxiv_ids(*DAY1_IDS) <= ids(engine)
    assert state(engine, CS)["error"] is None


def test_a_file_feeds_rejected_records_are_named_in_the_log(engine, tmp_path, caplog) -> None:
    """As ``paperboy ingest`` names them: the line and why, not only a count in the summary;
    the good records go in."""
    local = tmp_path / "local.jsonl"
    good = [json.dumps({"id": f"ok-{n}", "title": f"Paper {n}"}) for n in range(3)]
    bad = ['{"id": "broken", "title" "no colon"}', json.dumps({"id": "empty"})]
    local.write_text("\n".join([good[0], bad[0], good[1], bad[1], good[2]]) + "\n")
    report = ingest_feeds(engine, [str(local)])
    assert report is not None and ids(engine) == {"ok-0", "ok-1", "ok-2"}
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings == [
        f"feed {local}: 2 records rejected (line 2: not valid JSON (Expecting ':' delimiter at "
        "column 26); line 4: no title and no abstract)."
    ]


def test_an_unreachable_api_and_arxivs_error_entry_are_reported(
    server, engine, time, tmp_path, caplog
) -> None:
    dead = ArxivClient(refused_url(), page_size=3, clock=time.clock, sleep=time.sleep)
    assert ingest_feeds(engine, [STAT], arxiv=dead) is None
    assert "could not be reached" in state(engine, STAT)["error"]
    server.serve(STAT_QUERY, "stat-day1", DAY1)
    server.then(Answer(body=recorded("error.xml")))
    assert ingest_feeds(engine, [STAT], arxiv=client(server, time)) is None
    row = state(engine, STAT)
    assert row["error"] == "arXiv refused the query: start must be non-negative"
    assert row["failures"] == 2
    assert any("(2 runs failed in a row)" in m for m in caplog.messages)


def test_a_url_feed_asks_if_modified_since_and_a_304_is_nothing_new(engine, tmp_path, caplog):
    served = tmp_path / "www"
    served.mkdir()
    (served / "accepted.jsonl").write_text(json.dumps({"id": "w-1", "title": "Accepted"}) + "\n")
    seen: list[dict[str, str]] = []

    class Handler(SimpleHTTPRequestHandler):  # answers 304 to a matching If-Modified-Since
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, directory=str(served), **kwargs)

        def do_GET(self) -> None:  # noqa: N802
            seen.append(dict(self.headers.items()))
            super().do_GET()

        def log_message(self, *args: Any) -> None:
            pass

    http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=http.serve_forever, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{http.server_address[1]}/accepted.jsonl"
    caplog.set_level(logging.INFO, logger="digest.feeds")
    try:
        first = ingest_feeds(engine, [url])
        again = ingest_feeds(engine, [url])
    finally:
        http.shutdown()
        http.server_close()
    assert first is not None and first.counts.added == 1 and again is None
    assert "If-Modified-Since" not in seen[0] and "If-Modified-Since" in seen[1]
    assert seen[0]["User-Agent"].startswith("Paperboy/")
    assert f"feed {url}: nothing new since the last run" in caplog.messages
    assert state(engine, url)["error"] is None


def test_a_url_feed_that_asks_to_wait_is_left_alone_until_then(server, engine, caplog):
    """A URL feed's 503 with Retry-After is kept as arXiv's is: named in the sentence, and no
    run asks that server again before then."""
    url = server.url.replace("/api/query", "/accepted.jsonl")
    server.then(Answer(503, b"busy\n", {"Retry-After": "7200"}))
    settings = Settings(feeds=(url,))
    failed_at = datetime.now(UTC)
    # Two hours, as the server asked: longer than the first back-off (30 minutes).
    assert run_feeds(engine, settings, now=failed_at) == timedelta(hours=2)
    row = state(engine, url)
    assert row["error"] == "HTTP 503 (Service Unavailable), asking to wait 7200 s"
    assert row["retry_after"] == 7200
    asked = len(server.requests)
    for later in (timedelta(minutes=5), timedelta(minutes=35)):  # before and after 30 min
        assert run_feeds(engine, settings, now=failed_at + later) is not None
    assert len(server.requests) == asked


# --- the scheduler's feed job, as an operator runs it ----------------------------------------


@pytest.fixture
def fake() -> Iterator[FakeSlack]:
    with FakeSlack() as running:
        yield running


def test_the_scheduler_process_ingests_an_arxiv_feed_and_stats_shows_it(
    server, fake, tmp_path
) -> None:
    """``paperboy scheduler`` with PAPERBOY_FEEDS=arxiv:stat.ML against the local API: the
    feed job runs at start-up, the papers are searchable, ``paperboy stats`` shows the run."""
    server.serve(STAT_QUERY, "stat-day1", DAY1)
    db = tmp_path / "paperboy.db"
    env = {
        **os.environ,
        "PAPERBOY_DB": str(db),
        "SLACK_API_URL": fake.api_url,
        "SLACK_BOT_TOKEN": BOT_TOKEN,
        "SLACK_SIGNING_SECRET": "",
        "SLACK_APP_TOKEN": "",
        "PAPERBOY_FEEDS": "arxiv:stat.ML",
        "PAPERBOY_ARXIV_API_URL": server.url,
        "PAPERBOY_ARXIV_CONTACT": CONTACT,
        "PAPERBOY_ARXIV_MAX_PAGES": "1",  # one request: nothing to wait for in a real process
    }
    code = "from bot.cli import main; main(['scheduler'], prog_name='paperboy')"
    process = subprocess.Popen(
        [sys.executable, "-c", code], env=env, stderr=subprocess.PIPE, text=True
    )
    lines = StderrLines(process)
    try:
        lines.wait_for(lambda: lines.said("feed arxiv:stat.ML: 3 papers read"), timeout=60)
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=30) == 0, lines._describe()
    finally:
        process.kill()
        process.wait()
    [request] = server.requests
    assert f"mailto:{CONTACT}" in request.headers["User-Agent"]
    cli_env = {k: v for k, v in env.items() if k.startswith(("PAPERBOY_", "SLACK_"))}
    found = CliRunner().invoke(main, ["search", "heavy-tailed noise bandits"], env=cli_env)
    assert found.exit_code == 0, found.output
    assert "Gaussian Process Bandits with Heavy-Tailed Noise" in found.output
    stats = CliRunner().invoke(main, ["stats"], env=cli_env)
    assert "feeds     arxiv:stat.ML  ok at " in stats.output and ", 3 papers" in stats.output
    as_json = json.loads(CliRunner().invoke(main, ["stats", "--json"], env=cli_env).output)
    [row] = as_json["feeds"]
    assert (row["feed"], row["papers"], row["error"]) == ("arxiv:stat.ML", 3, None)


def test_a_feed_that_hangs_never_holds_the_digest_tick(server, fake, engine, tmp_path) -> None:
    """The clock's feed job is its own APScheduler job and fetches holding no database lock:
    while arXiv keeps a request waiting, the digest tick still runs and writes its heartbeat."""
    fetching, release, ticked = threading.Event(), threading.Event(), threading.Event()

    def hold(request: Any) -> None:
        fetching.set()
        release.wait(60)

    server.on_request = hold
    server.serve(STAT_QUERY, "stat-day1", DAY1)
    clock = feed_clock(engine, fake, server.url)
    real_tick = clock.tick

    def tick(now: datetime | None = None) -> Any:
        outcomes = real_tick(now)
        if fetching.is_set() and not release.is_set():
            ticked.set()  # a whole tick, heartbeat written, while the feed is held
        return outcomes

    clock.tick = tick  # type: ignore[method-assign]
    clock.start_background()
    try:
        assert fetching.wait(30), "the feed job did not start"
        assert ticked.wait(30), "no digest tick ran while the feed was being fetched"
    finally:
        release.set()
        clock.shutdown()
    assert clock_health(engine.db, datetime.now(UTC)).last_tick is not None
    assert arxiv_ids("2611.20555") <= ids(engine)


def feed_clock(engine: Engine, fake: FakeSlack, api_url: str) -> Clock:
    """The digest clock with PAPERBOY_FEEDS=arxiv:stat.ML at ``api_url``, ticking every second."""
    settings = Settings(
        db_path=engine.db_path,
        slack_api_url=fake.api_url,
        slack_bot_token=BOT_TOKEN,
        feeds=(STAT,),
        arxiv_api_url=api_url,
        arxiv_max_pages=1,
    )
    return Clock(engine, settings, SlackPoster(make_client(settings), engine), tick_seconds=1)


def run_feed_job(clock: Clock) -> Any:
    """Start the clock, wait for its feed job's run at start-up, and give that job back."""
    done = threading.Event()
    real_ingest = clock.ingest

    def ingest() -> None:
        real_ingest()
        done.set()

    clock.ingest = ingest  # type: ignore[method-assign]
    clock.start_background()
    assert done.wait(30), "the feed job did not run at start-up"
    return clock.scheduler.get_job(FEEDS_JOB)


def test_a_failed_feed_brings_the_feed_job_back_when_the_server_asks(
    server, fake, engine, monkeypatch
):
    # The daily run moved half a day away, so it cannot come before the two hours whatever
    # the hour the test runs at (at 02:00-04:00 UTC the 04:00 run rightly comes first).
    monkeypatch.setattr(schedule, "FEEDS_HOUR_UTC", (datetime.now(UTC).hour + 12) % 24)
    server.serve(STAT_QUERY, "stat-day1", DAY1)
    server.then(Answer(503, b"busy\n", {"Retry-After": "7200"}))
    clock = feed_clock(engine, fake, server.url)
    before = datetime.now(UTC)
    try:
        job = run_feed_job(clock)
        after = datetime.now(UTC)
    finally:
        clock.shutdown()
    # Two hours (Retry-After), not the first back-off (30 min) nor tomorrow at 04:00.
    assert before + timedelta(hours=2) <= job.next_run_time <= after + timedelta(hours=2)


def test_the_feed_job_keeps_its_daily_time_when_every_feed_went_in(server, fake, engine):
    server.serve(STAT_QUERY, "stat-day1", DAY1)
    clock = feed_clock(engine, fake, server.url)
    try:
        job = run_feed_job(clock)
    finally:
        clock.shutdown()
    assert (job.next_run_time.astimezone(UTC).hour, job.next_run_time.minute) == (FEEDS_HOUR_UTC, 0)
    assert arxiv_ids("2611.20555") <= ids(engine)


def test_failed_runs_come_back_sooner_and_back_off(engine) -> None:
    settings = Settings(feeds=(STAT,), arxiv_api_url=refused_url())
    now, waits = datetime(2026, 11, 28, 4, tzinfo=UTC), []
    for _ in range(6):  # each run when the last one said
        waits.append(run_feeds(engine, settings, now=now))
        now += waits[-1]
    assert waits == [timedelta(minutes=m) for m in (30, 60, 120, 240, 360, 360)]
    assert state(engine, STAT)["failures"] == 6


def test_each_failed_feed_comes_back_on_its_own_wait(engine) -> None:
    """stats says when each failed feed is tried again; the job comes back at the soonest
    of them and fetches only the feeds due (one failing for the 3rd time, 2 h, no longer
    holds back one that failed once, 30 min)."""
    settings = Settings(feeds=(STAT, CS), arxiv_api_url=refused_url())
    start = datetime(2026, 11, 28, 4, tzinfo=UTC)
    for hours in (0, 0.5, 1.5):  # STAT fails three runs in a row
        run_feeds(
            engine,
            Settings(feeds=(STAT,), arxiv_api_url=refused_url()),
            now=start + timedelta(hours=hours),
        )
    now = start + timedelta(hours=3.5)  # STAT due again; CS fails for the first time
    assert run_feeds(engine, settings, now=now) == timedelta(minutes=30)
    assert (state(engine, STAT)["failures"], state(engine, CS)["failures"]) == (4, 1)
    now += timedelta(minutes=30)  # CS due (30 min), STAT not (4 failures: 4 h)
    assert run_feeds(engine, settings, now=now) == timedelta(hours=1)  # CS's 2nd wait
    assert (state(engine, STAT)["failures"], state(engine, CS)["failures"]) == (4, 2)
    assert state(engine, STAT)["last_run"] == (start + timedelta(hours=3.5)).isoformat()


class StderrLines(Waiting):
    """A process's stderr, read on a thread; ``wait_for`` a line."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        self.lines: list[str] = []
        self._cond = threading.Condition()
        threading.Thread(target=self._read, args=(process,), daemon=True).start()

    def _read(self, process: subprocess.Popen[str]) -> None:
        assert process.stderr is not None
        for line in process.stderr:
            with self._cond:
                self.lines.append(line)
                self._cond.notify_all()

    def said(self, text: str) -> bool:
        return any(text in line for line in self.lines)

    def _describe(self) -> str:
        return "stderr ended with:\n" + "".join(self.lines[-30:])


def test_stats_lists_a_configured_feed_that_has_not_run_yet(engine) -> None:
    ingest_feeds(engine, ["missing.jsonl"])  # a file feed that is not there: one failure
    env = _quiet_env() | {"PAPERBOY_FEEDS": f"missing.jsonl,{CS}"}
    stats = paperboy_stats(engine, env)
    assert f"{CS}  not run yet (the scheduler runs the feeds once a day)" in stats
    assert re.search(r"missing.jsonl +failed at ", stats)
    assert [row["feed"] for row in feed_status(engine.db, [CS, "missing.jsonl"])] == [
        "missing.jsonl",
        CS,
    ]
    assert [row["feed"] for row in feed_status(engine.db)] == ["missing.jsonl"]


def test_stats_says_which_feeds_are_no_longer_configured(engine) -> None:
    """A feed taken out of PAPERBOY_FEEDS keeps its last run in the state, but stats says it
    is no longer fetched (it read like a live feed, "ok at ...", forever)."""
    ingest_feeds(engine, ["missing.jsonl"])
    env = _quiet_env() | {"PAPERBOY_FEEDS": CS}
    stats = paperboy_stats(engine, env)
    assert re.search(r"missing.jsonl +failed at .*; no longer in PAPERBOY_FEEDS\)$", stats, re.M)
    assert f"{CS}  not run yet" in stats and stats.count("no longer in PAPERBOY_FEEDS") == 1
    rows = feed_status(engine.db, [CS])
    assert [(row["feed"], row["configured"]) for row in rows] == [
        ("missing.jsonl", False),
        (CS, True),
    ]


def paperboy_stats(engine: Engine, env: dict[str, str] | None = None) -> str:
    command = ["--db", str(engine.db_path), "stats"]
    result = CliRunner().invoke(main, command, env=env or _quiet_env())
    assert result.exit_code == 0, result.output
    return result.output


def _quiet_env() -> dict[str, str]:
    return {"PAPERBOY_FEEDS": "", "SLACK_BOT_TOKEN": "", "SLACK_SIGNING_SECRET": ""}

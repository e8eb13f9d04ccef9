"""The feed ingest: ``PAPERBOY_FEEDS`` files, URLs and arXiv categories, read like ``paperboy
ingest`` does, by the scheduler's own job (``feeds-ingest``, beside the digest tick).

Every feed is fetched first, with no database lock held (an arXiv feed waits 3 s between its
pages), into one temporary file per feed; then all of them go into the corpus in one
``Engine.ingest``, where each file is its own savepoint. So a feed is taken whole or not at
all: a page that fails half-way leaves nothing of that feed, and the other feeds still go in.

What a run did is kept per feed in the ``feed_state`` table: where the next run resumes (the
newest paper seen, the server's Last-Modified for ``If-Modified-Since``), the last success,
the last error and how many runs failed in a row. A feed that failed is logged in one sentence,
shown by ``paperboy stats`` (``feed_status``) and fetched again at the next run (daily, at
start-up, and sooner after a failure: ``run_feeds``), from where its last success left off.

URLs are downloaded keeping their name, whose extension helps choose the reader.
"""

from __future__ import annotations

import logging
import shutil
import tempfile
import urllib.error
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from bot.engine.corpus import StorageError, write_transaction
from bot.engine.index import IndexBuildError
from bot.engine.search import Engine, IngestReport
from bot.english import count

from .arxiv import ArxivClient, FeedError, retry_after_seconds

log = logging.getLogger(__name__)

DOWNLOAD_TIMEOUT = 60
STATE_TABLE = "feed_state"
ARXIV_PREFIX = "arxiv:"
RETRY_FIRST = timedelta(minutes=30)
RETRY_LONGEST = timedelta(hours=6)
#: The soonest the feed job comes back (a feed due in seconds waits this long, not a busy loop).
RETRY_SOONEST = timedelta(minutes=1)
#: How many of a feed's rejected records its log line names (the count says the rest).
REJECTED_SHOWN = 3


class MissingFile(FeedError):
    """A feed that names a file that is not there."""


@dataclass
class _Fetched:
    """A feed ready to ingest: its file and what to remember if it goes in."""

    feed: str
    path: Path
    remember: dict[str, Any] = field(default_factory=dict)


def run_feeds(
    engine: Engine,
    settings: Any,
    now: datetime | None = None,
    arxiv: ArxivClient | None = None,
) -> timedelta | None:
    """The scheduler's feed job: every ``settings.feeds`` that is due, arXiv ones through
    the API (``arxiv``: a client of the settings' by default). A feed whose last run failed
    is due again ``retry_wait`` after it (what ``paperboy stats`` says; never before the
    server's Retry-After), on this run or a later one, each feed on its own. This is the
    one place that decides: the scheduler also runs the feeds at start-up, so a restarted
    one asks no server sooner.

    Returns how soon to run again when a feed failed (None when all went in): when the
    soonest failed feed is due. The daily run comes anyway; this only brings a failed feed
    back sooner.
    """
    # (to the second, as a run's time is kept: a feed failing now is due again in exactly
    # its wait)
    now = (now or datetime.now(UTC)).astimezone(UTC).replace(microsecond=0)
    rows = {row["feed"]: row for row in feed_status(engine.db)}
    due = []
    for feed in settings.feeds:
        row = rows.get(feed)
        again = retry_at(row) if row else None
        if again is None or again <= now:
            due.append(feed)
            continue
        asked = timedelta(seconds=int(row["retry_after"] or 0)) >= retry_wait(row)
        why = "as the server asked (Retry-After)" if asked else "after its failed runs"
        log.info("feed %s: not fetched before %s, %s.", feed, f"{again:%Y-%m-%d %H:%M:%S} UTC", why)
    ingest_feeds(engine, due, arxiv=arxiv or ArxivClient.from_settings(settings), now=now)
    _share(engine)
    retries = [retry_at(row) for row in feed_status(engine.db) if row["feed"] in settings.feeds]
    soonest = min((at for at in retries if at is not None), default=None)
    return None if soonest is None else max(soonest - now, RETRY_SOONEST)


def retry_at(row: dict[str, Any]) -> datetime | None:
    """When a feed whose last run failed is fetched again (None: it did not fail)."""
    failed_at = _from_iso(row.get("last_run")) if row.get("error") else None
    return failed_at + retry_wait(row) if failed_at else None


def retry_wait(row: dict[str, Any]) -> timedelta:
    """How long after a failed run its feed is tried again: half an hour, doubling with each
    failed run in a row up to six hours, never sooner than the server asked."""
    wait = min(RETRY_FIRST * 2 ** (int(row["failures"] or 1) - 1), RETRY_LONGEST)
    return max(wait, timedelta(seconds=int(row["retry_after"] or 0)))


def _share(engine: Engine) -> None:
    """With DATABASE_URL, what the feeds brought goes to the shared corpus, which every host
    follows; when it does not answer, the next run shares it (nothing is lost meanwhile)."""
    # (imported here: the shared state's packages are the scheduler's, not `paperboy stats`')
    from bot.replica import publish
    from bot.state import StateError

    try:
        shared = publish(engine)
    except StateError as error:
        log.error("feed ingest: the papers are saved here but not shared yet (%s)", error)
        return
    if shared is not None and shared.changed:
        log.info("feed ingest: shared %s with the other hosts", count(shared.changed, "paper"))


def ingest_feeds(
    engine: Engine,
    feeds: Sequence[str],
    *,
    arxiv: ArxivClient | None = None,
    now: datetime | None = None,
) -> IngestReport | None:
    """Fetch and ingest every one of ``feeds`` now, due or not (``run_feeds`` picks the due
    ones); None when there are none or none brought anything to read."""
    if not feeds:
        return None
    now = (now or datetime.now(UTC)).astimezone(UTC)
    arxiv = arxiv or ArxivClient()
    with tempfile.TemporaryDirectory(prefix="paperboy-feeds-") as tmp:
        fetched: list[_Fetched] = []
        for n, feed in enumerate(feeds):
            state = _state(engine.db, feed)
            try:
                got = _fetch(feed, Path(tmp) / f"{n:03d}", state, arxiv)
            except FeedError as error:
                _failed(engine.db, feed, state, error, now)
                continue
            if got is None:
                log.info("feed %s: nothing new since the last run", feed)
                _save(engine.db, feed, now, error=None, papers=0)
            else:
                fetched.append(got)
        if not fetched:
            return None
        try:
            report = engine.ingest([f.path for f in fetched])
        except IndexBuildError as error:  # the papers are saved; the index is built later
            log.error("feed ingest: %s", error)
            report = None
        except StorageError as error:  # nothing was saved (a full disk, a locked database)
            for f in fetched:
                _failed(engine.db, f.feed, _state(engine.db, f.feed), str(error), now)
            return None
    read = {r.path: r for r in report.files} if report else {}
    for f in fetched:
        result = read.get(str(f.path))
        if report is not None and result is None:  # the reader refused the whole file
            reason = next((e for e in report.file_errors if f.path.name in e), "unreadable")
            _failed(engine.db, f.feed, _state(engine.db, f.feed), reason, now)
            continue
        papers = result.papers if result else None
        _save(engine.db, f.feed, now, error=None, papers=papers, **f.remember)
        if result:
            log.info("feed %s: %s read", f.feed, count(result.papers, "paper"))
        if result and result.rejected:  # which records and why, as ``paperboy ingest`` says
            shown = [f"{r.location}: {r.reason}" for r in result.rejected[:REJECTED_SHOWN]]
            more = len(result.rejected) - len(shown)
            log.warning(
                "feed %s: %s rejected (%s%s).",
                f.feed,
                count(len(result.rejected), "record"),
                "; ".join(shown),
                f"; {more:,} more" if more else "",
            )
    if report is not None:
        log.info("feed ingest: %s", report.summary())
    return report


# -- fetching -----------------------------------------------------------------------------------


def _fetch(feed: str, target: Path, state: dict[str, Any], arxiv: ArxivClient) -> _Fetched | None:
    """The feed in a local file, or None when the server says nothing changed (304)."""
    if feed.startswith(ARXIV_PREFIX):
        return _fetch_arxiv(feed, target, state, arxiv)
    if urlsplit(feed).scheme in ("http", "https"):
        return _download(feed, target, state, arxiv)
    path = Path(feed).expanduser()
    if not path.is_file():
        raise MissingFile("no such file")
    return _Fetched(feed, path)


def _fetch_arxiv(
    feed: str, target: Path, state: dict[str, Any], arxiv: ArxivClient
) -> _Fetched | None:
    categories = feed[len(ARXIV_PREFIX) :].split(",")
    newest = _from_iso(state.get("newest"))
    got = arxiv.fetch(
        categories,
        since=newest,  # None on a first run: the newest max_pages pages
        if_modified_since=state.get("last_modified"),
    )
    if got.not_modified or not got.entries:
        return None
    if got.capped and newest is not None:
        log.warning(
            "feed %s: stopped after %d pages (PAPERBOY_ARXIV_MAX_PAGES) with newer papers "
            "left, so some papers since the last run were skipped",
            feed,
            got.pages,
        )
    path = target.with_suffix(".atom")
    path.write_bytes(got.atom())
    remember = {"newest": _iso(max(filter(None, (got.newest, newest)), default=None))}
    if got.last_modified:
        remember["last_modified"] = got.last_modified
    return _Fetched(feed, path, remember)


def _download(
    feed: str, target: Path, state: dict[str, Any], arxiv: ArxivClient
) -> _Fetched | None:
    """A URL feed downloaded, asking ``If-Modified-Since`` its last Last-Modified."""
    name = Path(urlsplit(feed).path).name or "feed"
    path = target.with_name(f"{target.name}-{name}")
    headers = {"User-Agent": arxiv.user_agent}
    if state.get("last_modified"):
        headers["If-Modified-Since"] = state["last_modified"]
    try:
        request = urllib.request.Request(feed, headers=headers)
        with (
            urllib.request.urlopen(request, timeout=DOWNLOAD_TIMEOUT) as answer,
            open(path, "wb") as out,
        ):
            shutil.copyfileobj(answer, out)
            last_modified = answer.headers.get("Last-Modified")
    except urllib.error.HTTPError as error:
        if error.code == 304:
            return None
        retry = (error.headers.get("Retry-After") or "").strip() if error.headers else ""
        wait = retry_after_seconds(retry)  # kept, as arXiv's is: no run asks before then
        asks = f", asking to wait {wait} s" if wait is not None else ""
        raise FeedError(f"HTTP {error.code} ({error.reason}){asks}", retry_after=wait) from None
    except OSError as error:
        raise FeedError(str(getattr(error, "reason", None) or error)) from None
    return _Fetched(feed, path, {"last_modified": last_modified} if last_modified else {})


# -- state --------------------------------------------------------------------------------------


def feed_status(db: Any, configured: Sequence[str] = ()) -> list[dict[str, Any]]:
    """Every feed's last run, for operators (``paperboy stats``): newest first, then the
    ``configured`` feeds that have not run yet (``last_run`` None); ``configured`` False for
    a feed no longer in that list (its state is kept, it is no longer fetched)."""
    rows = []
    if STATE_TABLE in db.table_names():
        rows = list(db.query(f"select * from {STATE_TABLE} order by last_run desc, feed"))
    known = {row["feed"] for row in rows}
    fresh = dict.fromkeys(("last_run", "last_success", "error", "failures", "papers"))
    rows += [{**fresh, "feed": feed} for feed in configured if feed not in known]
    wanted = set(configured)
    return [{**row, "configured": row["feed"] in wanted} for row in rows]


def _state(db: Any, feed: str) -> dict[str, Any]:
    rows = list(db.query(f"select * from {STATE_TABLE} where feed = ?", [feed]))
    return rows[0] if rows else {}


def _save(db: Any, feed: str, now: datetime, **values: Any) -> None:
    row: dict[str, Any] = {"feed": feed, "last_run": _iso(now), **values}
    if values.get("error") is None:
        row.update(last_success=_iso(now), failures=0, retry_after=None)
    with write_transaction(db):
        db[STATE_TABLE].upsert(row, pk="feed")


def _failed(
    db: Any, feed: str, state: dict[str, Any], error: str | FeedError, now: datetime
) -> None:
    """Logged in one sentence and kept for ``paperboy stats``; the next run tries again."""
    failures = int(state.get("failures") or 0) + 1
    what = f": {error}" if isinstance(error, MissingFile) else f" could not be fetched: {error}"
    in_a_row = f" ({failures} runs failed in a row)" if failures > 1 else ""
    log.error("feed %s%s; it is tried again at the next run%s.", feed, what, in_a_row)
    retry_after = getattr(error, "retry_after", None)
    _save(db, feed, now, error=str(error), failures=failures, retry_after=retry_after)


def _iso(when: datetime | None) -> str | None:
    return when.astimezone(UTC).isoformat(timespec="seconds") if when else None


def _from_iso(text: str | None) -> datetime | None:
    return datetime.fromisoformat(text) if text else None


#: How ``status_lines`` marks a feed taken out of ``PAPERBOY_FEEDS``.
NOT_CONFIGURED = "no longer in PAPERBOY_FEEDS"


def status_lines(rows: list[dict[str, Any]]) -> list[str]:
    """``feed_status`` for people: one line per feed, its failure and last success if it failed."""
    width = max((len(row["feed"]) for row in rows), default=0)
    lines = []
    for row in rows:
        when = _shown(row["last_run"])
        gone = row.get("configured") is False  # (kept in the state, no longer fetched)
        if row["last_run"] is None:
            told = "not run yet (the scheduler runs the feeds once a day)"
        elif row["error"]:
            failed = f"failed {row['failures']} runs in a row" if row["failures"] > 1 else "failed"
            last = _shown(row["last_success"]) if row["last_success"] else "never"
            again = retry_at(row)
            retry = f"; tried again from {_shown(_iso(again))}" if again else ""
            retry = f"; {NOT_CONFIGURED}" if gone else retry
            told = f"{failed} at {when}: {row['error']} (last success: {last}{retry})"
        else:
            papers = "" if row["papers"] is None else f", {count(row['papers'], 'paper')}"
            told = f"ok at {when}{papers}" + (f" ({NOT_CONFIGURED})" if gone else "")
        lines.append(f"{row['feed']:<{width}}  {told}")
    return lines


def _shown(text: str | None) -> str:
    when = _from_iso(text)
    return when.strftime("%Y-%m-%d %H:%M UTC") if when else "?"

"""The arXiv API client behind ``arxiv:`` feeds: the newest papers of some categories, politely.

One feed is one query (``cat:cs.LG OR cat:cs.CL``) sorted by ``lastUpdatedDate``, newest
first, so a new version of a paper comes back too. Pages are fetched until the papers are older
than the newest one the previous run saw (``since``), the results end, or ``max_pages`` pages
were read. arXiv's etiquette (https://info.arxiv.org/help/api/tou.html) is kept: one request at
a time and at least ``SPACING_SECONDS`` (3 s) between the end of one and the start of the next,
across every feed the client serves; a User-Agent that names Paperboy and a contact; the first
page asks ``If-Modified-Since`` and a 304 means nothing new. The API sometimes answers a page
with no entries although ``opensearch:totalResults`` says there are more (a known quirk): that
page is asked again, up to ``EMPTY_PAGE_RETRIES`` times.

Every failure (HTTP 503 or 429 with its Retry-After, a refused connection, a page that is not
an arXiv Atom feed, arXiv's own error entry) is a ``FeedError`` whose text says what happened;
the caller keeps nothing of that feed for this run and asks again next time. The clock and the
sleeper are injected, so tests check the waits without waiting.
"""

from __future__ import annotations

import logging
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from importlib import metadata
from typing import Any
from urllib.parse import urlencode, urlsplit
from xml.etree import ElementTree

from bot.engine.formats import CorpusFileError
from bot.engine.formats.arxiv_atom import feed_root

log = logging.getLogger(__name__)

API_URL = "https://export.arxiv.org/api/query"
PROJECT_URL = "https://github.com/paperboy"
SPACING_SECONDS = 3.0
PAGE_SIZE = 200  # arXiv allows up to 2,000 a request; smaller pages fail and retry cheaper
MAX_PAGES = 10
EMPTY_PAGE_RETRIES = 2
TIMEOUT_SECONDS = 60
MAX_PAGE_BYTES = 32 * 1024 * 1024

ATOM_NS = "http://www.w3.org/2005/Atom"
ATOM = f"{{{ATOM_NS}}}"
OPENSEARCH = "{http://a9.com/-/spec/opensearch/1.1/}"

ElementTree.register_namespace("arxiv", "http://arxiv.org/schemas/atom")
ElementTree.register_namespace("opensearch", "http://a9.com/-/spec/opensearch/1.1/")


class FeedError(Exception):
    """A feed could not be read this run; str() says why in a few words (no traceback)."""

    def __init__(self, message: str, retry_after: int | None = None):
        super().__init__(message)
        self.retry_after = retry_after


@dataclass
class Fetch:
    """What one run got for a feed: its entries (newest first), or nothing new (304)."""

    entries: list[ElementTree.Element] = field(default_factory=list)
    newest: datetime | None = None  # the latest <updated> among the entries
    last_modified: str | None = None  # the first page's Last-Modified, for If-Modified-Since
    not_modified: bool = False
    pages: int = 0
    capped: bool = False  # stopped at max_pages with papers newer than ``since`` left

    def atom(self) -> bytes:
        """The entries as one Atom document, the format ``paperboy ingest`` reads."""
        root = ElementTree.Element(f"{ATOM}feed")
        root.extend(self.entries)
        return ElementTree.tostring(root, encoding="utf-8", xml_declaration=True)


def user_agent(contact: str | None) -> str:
    """Who is asking, as arXiv wants to know: Paperboy, its version, and a contact."""
    try:
        version = metadata.version("paperboy")
    except metadata.PackageNotFoundError:
        version = "0"
    who = f"mailto:{contact}" if contact and "@" in contact and ":" not in contact else contact
    return f"Paperboy/{version} (+{PROJECT_URL}" + (f"; {who})" if who else ")")


def query(categories: Sequence[str]) -> str:
    """The ``search_query`` for papers in any of ``categories``."""
    return " OR ".join(f"cat:{category}" for category in categories)


def updated_at(entry: ElementTree.Element) -> datetime | None:
    """An entry's ``<updated>`` (what ``lastUpdatedDate`` sorts by), or None if unreadable."""
    text = (entry.findtext(f"{ATOM}updated") or entry.findtext(f"{ATOM}published") or "").strip()
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        return None


class ArxivClient:
    """Pages through the arXiv API for ``arxiv:`` feeds (see the module's docstring)."""

    def __init__(
        self,
        api_url: str = API_URL,
        *,
        contact: str | None = None,
        page_size: int = PAGE_SIZE,
        max_pages: int = MAX_PAGES,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Any] = time.sleep,
        timeout: float = TIMEOUT_SECONDS,
    ):
        self.api_url = api_url
        self.user_agent = user_agent(contact)
        self.page_size = page_size
        self.max_pages = max_pages
        self.clock = clock
        self.sleep = sleep
        self.timeout = timeout
        self._last_request: float | None = None  # when the previous request ended (clock)

    @classmethod
    def from_settings(cls, settings: Any) -> ArxivClient:
        return cls(
            settings.arxiv_api_url,
            contact=settings.arxiv_contact,
            max_pages=settings.arxiv_max_pages,
        )

    def url(self, categories: Sequence[str], start: int) -> str:
        params = {
            "search_query": query(categories),
            "sortBy": "lastUpdatedDate",
            "sortOrder": "descending",
            "start": start,
            "max_results": self.page_size,
        }
        return f"{self.api_url}?{urlencode(params)}"

    def fetch(
        self,
        categories: Sequence[str],
        *,
        since: datetime | None = None,
        if_modified_since: str | None = None,
    ) -> Fetch:
        """The entries updated at or after ``since`` (all ``max_pages`` allow when None)."""
        got = Fetch()
        start, total = 0, None
        while total is None or start < total:
            if got.pages == self.max_pages:
                got.capped = True
                break
            first = start == 0 and if_modified_since
            headers = {"If-Modified-Since": if_modified_since} if first else {}
            page = self._page(self.url(categories, start), start, headers)
            if page is None:
                got.not_modified = True
                return got
            entries, total, last_modified = page
            got.pages += 1
            if start == 0:
                got.last_modified = last_modified
            for entry in entries:
                when = updated_at(entry)
                if since is not None and when is not None and when < since:
                    return got  # the rest is older: the previous run had it
                got.entries.append(entry)
                if when is not None and (got.newest is None or when > got.newest):
                    got.newest = when
            start += len(entries)
        return got

    # -- one page -------------------------------------------------------------------------------

    def _page(
        self, url: str, start: int, headers: dict[str, str]
    ) -> tuple[list[ElementTree.Element], int, str | None] | None:
        """One page's entries, the total and its Last-Modified; None for 304 Not Modified.

        An empty page before the end of the results is asked again (arXiv's quirk)."""
        total = 0
        for attempt in range(EMPTY_PAGE_RETRIES + 1):
            if attempt:
                log.warning(
                    "arXiv answered an empty page at result %d of %d; asking again", start, total
                )
            answer = self._get(url, headers)
            if answer is None:
                return None
            body, last_modified = answer
            entries, total = parse_page(body, start)
            if entries or start >= total:
                return entries, total, last_modified
        raise FeedError(
            f"arXiv answered an empty page at result {start:,} of {total:,}, "
            f"{EMPTY_PAGE_RETRIES + 1} times"
        )

    def _get(self, url: str, headers: dict[str, str]) -> tuple[bytes, str | None] | None:
        """The body and Last-Modified of one GET, spaced from the previous request."""
        if self._last_request is not None:
            wait = self._last_request + SPACING_SECONDS - self.clock()
            if wait > 0:
                self.sleep(wait)
        request = urllib.request.Request(url, headers={"User-Agent": self.user_agent, **headers})
        host = urlsplit(url).netloc
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as answer:
                body = answer.read(MAX_PAGE_BYTES + 1)
                last_modified = answer.headers.get("Last-Modified")
        except urllib.error.HTTPError as error:
            if error.code == 304:
                return None
            raise http_error(error) from None
        except (urllib.error.URLError, OSError) as error:
            reason = getattr(error, "reason", None) or error
            raise FeedError(f"{host} could not be reached: {reason}") from None
        finally:
            self._last_request = self.clock()
        if len(body) > MAX_PAGE_BYTES:
            raise FeedError(f"{host} sent a page larger than {MAX_PAGE_BYTES // 2**20} MB")
        return body, last_modified


def http_error(error: urllib.error.HTTPError) -> FeedError:
    """arXiv's 503/429 (busy, or too many requests) with the wait it asks for, or any other."""
    retry = (error.headers.get("Retry-After") or "").strip() if error.headers else ""
    wait = retry_after_seconds(retry)
    asks = f", asking to wait {wait} s" if wait is not None else ""
    return FeedError(f"arXiv answered HTTP {error.code} ({error.reason}){asks}", retry_after=wait)


def retry_after_seconds(value: str) -> int | None:
    """``Retry-After`` in seconds: it is either a number of seconds or an HTTP date."""
    if value.isdigit():
        return int(value)
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0, round((when - datetime.now(UTC)).total_seconds()))


def parse_page(body: bytes, start: int) -> tuple[list[ElementTree.Element], int]:
    """A page's entries and ``opensearch:totalResults``; FeedError if it is not arXiv's Atom."""
    where = f"the page at result {start:,}"
    try:
        root = feed_root(body, where)
    except CorpusFileError as error:
        raise FeedError(str(error).rstrip(".")) from None
    entries = root.findall(f"{ATOM}entry")
    for entry in entries:
        if "/api/errors" in (entry.findtext(f"{ATOM}id") or ""):
            summary = " ".join((entry.findtext(f"{ATOM}summary") or "").split())
            raise FeedError(f"arXiv refused the query: {summary or 'no reason given'}")
    total_text = (root.findtext(f"{OPENSEARCH}totalResults") or "").strip()
    if not total_text.isdigit():
        raise FeedError(f"{where} has no opensearch:totalResults, so it is not arXiv's answer")
    return entries, int(total_text)

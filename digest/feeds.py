"""The daily feed ingest: ``PAPERBOY_FEEDS`` files or URLs, read like ``paperboy ingest`` does.

URLs are downloaded to a temporary file first (keeping the name, whose extension helps choose
the reader); one unreachable feed is logged and the others are still ingested.
"""

from __future__ import annotations

import logging
import shutil
import tempfile
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from urllib.parse import urlsplit

from bot.engine.search import Engine, IngestReport

log = logging.getLogger(__name__)

DOWNLOAD_TIMEOUT = 60
USER_AGENT = "Paperboy/0.1 (+https://github.com/paperboy; daily feed ingest)"


def ingest_feeds(engine: Engine, feeds: Sequence[str]) -> IngestReport | None:
    """Ingest every feed; None when there are none or none could be fetched."""
    if not feeds:
        return None
    with tempfile.TemporaryDirectory(prefix="paperboy-feeds-") as tmp:
        paths: list[Path] = []
        for n, feed in enumerate(feeds):
            if urlsplit(feed).scheme in ("http", "https"):
                name = Path(urlsplit(feed).path).name or "feed"
                target = Path(tmp) / f"{n:03d}-{name}"
                try:
                    request = urllib.request.Request(feed, headers={"User-Agent": USER_AGENT})
                    with (
                        urllib.request.urlopen(request, timeout=DOWNLOAD_TIMEOUT) as answer,
                        open(target, "wb") as out,
                    ):
                        shutil.copyfileobj(answer, out)
                except OSError as error:
                    log.error("feed %s could not be fetched: %s", feed, error)
                    continue
                paths.append(target)
            else:
                path = Path(feed).expanduser()
                if not path.is_file():
                    log.error("feed %s: no such file", feed)
                    continue
                paths.append(path)
        if not paths:
            return None
        report = engine.ingest(paths)
    for message in report.file_errors:
        log.error("feed ingest: %s", message)
    log.info("feed ingest: %s", report.summary())
    return report

"""A local stand-in for the arXiv API (``/api/query``) that answers from recorded Atom pages.

Pages live in ``tests/data/arxiv/<set>/start-<N>.xml`` (the page a query gets for
``start=N``); ``serve(query, set)`` says which set answers which ``search_query``. The server
keeps every request it got (path, parameters, headers) so tests can check what the client
asked, and answers like arXiv does otherwise: a ``Last-Modified`` on each page and 304 to an
``If-Modified-Since`` that is not older, 200 with an empty feed past the end. One-off answers
(a 503 with ``Retry-After``, an empty or truncated page, a refused connection) are queued with
``then``; ``on_request`` lets a test note the order of requests beside its own events.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from email.utils import format_datetime, parsedate_to_datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

DATA = Path(__file__).parent / "data" / "arxiv"


@dataclass
class Request:
    path: str
    params: dict[str, str]
    headers: dict[str, str]

    @property
    def start(self) -> int:
        return int(self.params.get("start", "0"))


@dataclass
class Answer:
    status: int = 200
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)
    hang_up: bool = False  # close the connection without answering


class AtomServer:
    """``with AtomServer() as server:`` an arXiv API on ``server.url`` (127.0.0.1, any port)."""

    def __init__(self) -> None:
        self.requests: list[Request] = []
        self.on_request: Callable[[Request], Any] | None = None
        self._sets: dict[str, tuple[Path, datetime]] = {}
        self._queued: list[tuple[str | None, int | None, Answer]] = []
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (http.server's name)
                server._handle(self)

            def log_message(self, *args: Any) -> None:
                pass

        self._http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._http.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._http.server_address[1]}/api/query"

    def __enter__(self) -> AtomServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._http.shutdown()
        self._http.server_close()
        self._thread.join(5)

    # -- what to answer -----------------------------------------------------------------------

    def serve(self, query: str, pages: str, last_modified: datetime) -> None:
        """Answer ``search_query=query`` from the page set ``pages``, modified then."""
        with self._lock:
            self._sets[query] = (DATA / pages, last_modified)

    def then(self, answer: Answer, *, query: str | None = None, start: int | None = None) -> None:
        """Answer the next matching request with ``answer`` (once), before any page."""
        with self._lock:
            self._queued.append((query, start, answer))

    def requests_for(self, query: str) -> list[Request]:
        with self._lock:
            return [r for r in self.requests if r.params.get("search_query") == query]

    # -- answering ----------------------------------------------------------------------------

    def _handle(self, handler: BaseHTTPRequestHandler) -> None:
        parts = urlsplit(handler.path)
        params = {k: v[-1] for k, v in parse_qs(parts.query).items()}
        request = Request(parts.path, params, dict(handler.headers.items()))
        with self._lock:
            self.requests.append(request)
        if self.on_request is not None:
            self.on_request(request)
        answer = self._answer(request)
        if answer.hang_up:
            handler.close_connection = True
            handler.connection.close()
            return
        handler.send_response(answer.status)
        for name, value in answer.headers.items():
            handler.send_header(name, value)
        handler.send_header("Content-Length", str(len(answer.body)))
        handler.end_headers()
        handler.wfile.write(answer.body)

    def _answer(self, request: Request) -> Answer:
        query = request.params.get("search_query")
        with self._lock:
            for n, (q, start, answer) in enumerate(self._queued):
                if q in (None, query) and start in (None, request.start):
                    del self._queued[n]
                    return answer
            served = self._sets.get(query or "")
        if request.path != "/api/query" or served is None:
            return Answer(404, b"not a query this server knows\n")
        folder, modified = served
        headers = {
            "Content-Type": "application/atom+xml; charset=utf-8",
            "Last-Modified": format_datetime(modified, usegmt=True),
        }
        since = request.headers.get("If-Modified-Since")
        if since and parsedate_to_datetime(since) >= modified:
            return Answer(304, b"", headers)
        page = folder / f"start-{request.start}.xml"
        if not page.is_file():  # past the recorded pages: an empty feed, as arXiv answers
            return Answer(200, empty_page(request.start), headers)
        return Answer(200, page.read_bytes(), headers)


def refused_url() -> str:
    """An API URL on a local port nothing listens on: connecting is refused."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}/api/query"


def recorded(name: str) -> bytes:
    """One recorded page's bytes (``cs-day1/empty-start-3.xml``)."""
    return (DATA / name).read_bytes()


def empty_page(start: int, total: int = 0) -> bytes:
    return (
        "<?xml version='1.0' encoding='UTF-8'?>\n"
        '<feed xmlns:opensearch="http://a9.com/-/spec/opensearch/1.1/" '
        'xmlns="http://www.w3.org/2005/Atom">\n'
        "  <id>https://arxiv.org/api/empty</id>\n"
        f"  <opensearch:totalResults>{total}</opensearch:totalResults>\n"
        f"  <opensearch:startIndex>{start}</opensearch:startIndex>\n"
        "</feed>\n"
    ).encode()

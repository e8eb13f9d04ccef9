"""``paperboy serve``: the Slack app over HTTP (waitress), over Socket Mode, or, with no Slack
credentials at all, as a local playground in the browser.

    SLACK_APP_TOKEN (+ SLACK_BOT_TOKEN)          -> Socket Mode (no public URL needed)
    SLACK_BOT_TOKEN + SLACK_SIGNING_SECRET       -> HTTP: POST /slack/events, GET /healthz
    none of them                                 -> playground at http://127.0.0.1:$PORT/
"""

from __future__ import annotations

import contextlib
import json
import logging
import signal
import sys
import threading
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Executor
from pathlib import Path
from typing import Any
from urllib.error import URLError

import waitress
from slack_bolt import App
from slack_bolt.adapter.wsgi import SlackRequestHandler
from slack_bolt.error import BoltError
from slack_sdk import WebClient
from waitress import wasyncore

from bot.engine.search import Engine
from bot.settings import Settings, SettingsError

from .app import build_app

log = logging.getLogger(__name__)

EVENTS_PATH = "/slack/events"
HEALTH_PATH = "/healthz"
# Enough request threads that a burst of slash commands is acknowledged at once: each
# request holds its thread only until ack() (lookups run on the app's own pool).
THREADS = 16

WSGIApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


# --- WSGI -------------------------------------------------------------------------------------


def plain(
    start_response: Callable[..., Any],
    status: str,
    body: str | bytes,
    kind: str = "text/plain; charset=utf-8",
) -> list[bytes]:
    data = body.encode() if isinstance(body, str) else body
    start_response(status, [("Content-Type", kind), ("Content-Length", str(len(data)))])
    return [data]


class Router:
    """The smallest WSGI router: exact paths to WSGI apps, 404 for anything else."""

    def __init__(self, routes: dict[str, WSGIApp]):
        self.routes = dict(routes)

    def __call__(
        self, environ: dict[str, Any], start_response: Callable[..., Any]
    ) -> Iterable[bytes]:
        handler = self.routes.get(environ.get("PATH_INFO") or "/")
        if handler is None:
            return plain(start_response, "404 Not Found", "Not Found")
        return handler(environ, start_response)


def health(engine: Engine) -> WSGIApp:
    """``GET /healthz``: 200 with the corpus size when the database answers, else 503."""

    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        try:
            body = {"ok": True, "papers": engine.corpus.count()}
            status = "200 OK"
        except Exception as error:  # the one place an unhealthy database is reported
            log.exception("health check failed")
            body, status = {"ok": False, "error": str(error)}, "503 Service Unavailable"
        return plain(start_response, status, json.dumps(body), "application/json")

    return app


def make_wsgi_app(
    settings: Settings,
    engine: Engine,
    *,
    client: WebClient | None = None,
    executor: Executor | None = None,
    app: App | None = None,
    routes: dict[str, WSGIApp] | None = None,
) -> Router:
    """Bolt at ``POST /slack/events`` plus ``GET /healthz`` (and any extra ``routes``)."""
    app = app or build_app(settings, engine, client=client, executor=executor)
    slack = SlackRequestHandler(app, path=EVENTS_PATH)
    return Router({EVENTS_PATH: slack, HEALTH_PATH: health(engine), **(routes or {})})


class HttpServer:
    """A waitress server, bound on creation (so ``url`` is known before serving).

    ``serve_forever()`` in the foreground for ``paperboy serve``; ``start()``/``stop()`` runs
    it on a background thread (tests, the playground's own requests). ``port=0`` picks a free
    port.
    """

    def __init__(
        self, wsgi_app: WSGIApp, host: str = "127.0.0.1", port: int = 0, threads: int = THREADS
    ):
        self._server = waitress.create_server(
            wsgi_app, host=host, port=port, threads=threads, ident="paperboy"
        )
        self._thread: threading.Thread | None = None

    @property
    def host(self) -> str:
        return str(self._server.effective_host)

    @property
    def port(self) -> int:
        return int(self._server.effective_port)

    @property
    def url(self) -> str:
        host = "127.0.0.1" if self.host in ("0.0.0.0", "") else self.host
        return f"http://{host}:{self.port}"

    def serve_forever(self) -> None:
        self._server.run()

    def start(self) -> HttpServer:
        self._thread = threading.Thread(target=self._server.run, name="paperboy-http", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Close the listening socket and connections from the server's own loop, then wait."""
        server = self._server
        if self._thread is None:
            return
        server.trigger.pull_trigger(lambda: wasyncore.close_all(server._map))
        self._thread.join(timeout=10)
        server.task_dispatcher.shutdown(timeout=5)
        self._thread = None

    def __enter__(self) -> HttpServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


def start_background(
    settings: Settings,
    engine: Engine,
    *,
    client: WebClient | None = None,
    executor: Executor | None = None,
    host: str = "127.0.0.1",
    port: int = 0,
) -> HttpServer:
    """The HTTP app on a background thread (a free loopback port by default), for tests."""
    wsgi = make_wsgi_app(settings, engine, client=client, executor=executor)
    return HttpServer(wsgi, host=host, port=port).start()


# --- paperboy serve -----------------------------------------------------------------------------


def run(settings: Settings) -> None:
    """Serve until interrupted. A configuration problem ends it with one sentence and exit 2."""
    logging.basicConfig(
        level=getattr(logging, settings.log_level, logging.INFO),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        settings.check_slack()
    except SettingsError as error:
        _fail(str(error), status=2)
    seed_dir = settings.seed_dir if settings.seed_dir and Path(settings.seed_dir).is_dir() else None
    engine = Engine.open(settings.db_path, seed_dir=seed_dir)
    log.info("corpus: %s papers in %s", f"{engine.corpus.count():,}", settings.db_path)
    with _sigterm_exits():
        _serve(settings, engine)


def _serve(settings: Settings, engine: Engine) -> None:
    if not settings.has_slack_credentials:
        from bot.playground.playground import run as run_playground

        run_playground(settings, engine)
        return
    try:
        if settings.slack_app_token:
            from .socket_mode import run_socket_mode

            run_socket_mode(settings, engine)
        else:
            _run_http(settings, engine)
    except BoltError as error:  # Bolt checks the token with auth.test at startup
        _fail(
            f"Slack did not accept SLACK_BOT_TOKEN ({error}); copy it again from your app's "
            "OAuth & Permissions page.",
            status=2,
        )
    except URLError as error:
        _fail(f"Could not reach Slack at {settings.slack_api_url} ({error.reason}).", status=1)


def _run_http(settings: Settings, engine: Engine) -> None:
    server = HttpServer(make_wsgi_app(settings, engine), host=settings.host, port=settings.port)
    print(
        f"Paperboy is listening on {server.url} for Slack ({EVENTS_PATH}) and health checks "
        f"({HEALTH_PATH}). Slack's Request URLs must be https://<your public host>{EVENTS_PATH}.",
        file=sys.stderr,
    )
    server.serve_forever()


@contextlib.contextmanager
def _sigterm_exits() -> Iterator[None]:
    """Platforms (Heroku, systemd, Docker) stop a process with SIGTERM: treat it like Ctrl-C,
    so waitress lets running requests finish and the playground's stand-in shuts down."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(0))
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _fail(message: str, status: int) -> None:
    print(f"paperboy serve: {message}", file=sys.stderr)
    raise SystemExit(status)

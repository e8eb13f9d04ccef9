"""``paperboy serve``: the Slack app over HTTP (waitress), over Socket Mode, or, with no Slack
credentials at all, as a local playground in the browser.

    SLACK_APP_TOKEN (+ SLACK_BOT_TOKEN)          -> Socket Mode (no public URL needed)
    SLACK_BOT_TOKEN + SLACK_SIGNING_SECRET       -> HTTP: POST /slack/events, GET /healthz,
                                                    GET /readyz
    SLACK_CLIENT_ID + SLACK_CLIENT_SECRET
      + SLACK_SIGNING_SECRET                     -> HTTP for many workspaces, installed at
                                                    GET /slack/install (``bot.slack.oauth``)
    none of them                                 -> playground at http://127.0.0.1:$PORT/

The playground is ``bot.playground``'s, which is built on this module: ``paperboy serve`` hands
it to :func:`run` (``playground=``), so this module never imports it.

In HTTP mode the port is bound first and everything slow happens after: checking the token
with Slack, opening the database (a fresh one is filled from the seed corpus), loading or
building the index, starting the digest clock (``--with-scheduler``). Until then ``/healthz``
answers 503 ``{"status": "warming up"}`` and a slash command is acknowledged with a short
"warming up" reply, so a platform that expects ``$PORT`` within seconds never kills the
process and Slack never shows a timeout.
"""

from __future__ import annotations

import contextlib
import errno
import io
import json
import logging
import resource
import signal
import socket
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Executor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.error import URLError
from urllib.parse import parse_qsl

import waitress
from slack_bolt import App
from slack_bolt.adapter.wsgi import SlackRequestHandler
from slack_bolt.context import BoltContext
from slack_bolt.request import BoltRequest
from slack_bolt.request.internals import build_context
from slack_bolt.response import BoltResponse
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError
from slack_sdk.http_retry import (
    BackoffRetryIntervalCalculator,
    ConnectionErrorRetryHandler,
    RateLimitErrorRetryHandler,
    RetryIntervalCalculator,
)
from slack_sdk.http_retry.builtin_handlers import ServerErrorRetryHandler
from slack_sdk.signature import SignatureVerifier
from waitress import wasyncore

from bot import replica
from bot.engine.corpus import DatabaseError, connect, is_writable
from bot.engine.search import Engine
from bot.logs import configure_logging, quiet_slack_sdk, say
from bot.settings import Settings, SettingsError
from bot.state import configure as configure_state
from bot.state import state_for
from bot.stopping import sigterm_exits
from digest.clock import Clock, clock_health

from .app import body_problem, build_app, is_json_body, log_acked, raw_request_fields
from .client import TOKEN_REFUSED, error_code
from .oauth import DATABASE_ERRORS, INSTALL_PATH, REDIRECT_PATH, html_response, page
from .poster import SlackPoster
from .socket_mode import run_socket_mode

log = logging.getLogger(__name__)

EVENTS_PATH = "/slack/events"
HEALTH_PATH = "/healthz"
READY_PATH = "/readyz"
# Enough request threads that a burst of slash commands is acknowledged at once: each
# request holds its thread only until ack() (lookups run on the app's own pool).
THREADS = 16
#: Slack's payloads are a few KB; anything this large is refused before it is read.
MAX_BODY = 1024 * 1024
WARMING_UP = "Paperboy is warming up, try again in a few seconds."
LOADING = "Paperboy is still loading the corpus on this server; try again in a minute."
#: ``auth.test`` at start is retried this often on 5xx and dropped connections, with
#: exponential backoff (0.5, 1, 2, 4, 8, 16 s plus jitter: about half a minute in all).
STARTUP_RETRIES = 6
STARTUP_INTERVAL: RetryIntervalCalculator = BackoffRetryIntervalCalculator(backoff_factor=0.5)

WSGIApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


class StartupError(Exception):
    """``paperboy serve`` cannot start; the message is one sentence, ``status`` the exit code."""

    def __init__(self, message: str, status: int = 1):
        super().__init__(message)
        self.status = status


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


def as_json(start_response: Callable[..., Any], status: str, body: Any) -> list[bytes]:
    return plain(start_response, status, json.dumps(body), "application/json")


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


class FormSafeRequestHandler(SlackRequestHandler):
    """Bolt's WSGI handler, reading every form the way Slack means it.

    Bolt takes any form body that merely *contains* the word "payload" for an interactive
    ``payload=`` form (``slack_bolt.request.internals.parse_body``), so ``/papers payload
    attacks`` (or a channel named "payload") parsed as ``{}``, matched no listener and got a
    404. A form without a ``payload`` field is re-read here as the plain form it is; the raw
    body (which Bolt's signature check hashes) is left as it came.
    """

    def dispatch(self, request: Any) -> BoltResponse:
        bolt_request = BoltRequest(
            body=request.get_body(), query=request.query_string, headers=request.get_headers()
        )
        raw = bolt_request.raw_body
        if bolt_request.body == {} and raw and not is_json_body(raw, bolt_request.content_type):
            form = dict(parse_qsl(raw, keep_blank_values=True))
            if "payload" not in form:
                bolt_request.body = form
                bolt_request.context = build_context(BoltContext(), form)
        return self.app.dispatch(bolt_request)


class WebApp(Router):
    """The web process's WSGI app: ``POST /slack/events``, ``GET /healthz`` and ``/readyz``,
    and extra routes.

    It answers from the moment the port is bound. Until :meth:`ready` hands it the engine and
    the Bolt app it is warming up: health checks get 503, Slack's requests a short
    "warming up" answer. Every request to ``/slack/events`` has its signature checked on the
    raw body before anything is parsed (slack_sdk's ``SignatureVerifier``), so junk from
    strangers costs a 401 and a log line, never a traceback.
    """

    def __init__(self, settings: Settings, routes: dict[str, WSGIApp] | None = None):
        super().__init__(
            {
                EVENTS_PATH: self.slack_events,
                HEALTH_PATH: self.health,
                READY_PATH: self.readiness,
                INSTALL_PATH: self.oauth_pages,
                REDIRECT_PATH: self.oauth_pages,
                **(routes or {}),
            }
        )
        self.settings = settings
        secret = settings.slack_signing_secret or ""
        self.verifier = SignatureVerifier(secret) if secret.strip() else None
        self.engine: Engine | None = None
        self.bolt: SlackRequestHandler | None = None
        self.clock: Any = None  # the in-process digest clock, with --with-scheduler

    def ready(self, engine: Engine, app: App) -> None:
        self.engine = engine
        self.bolt = FormSafeRequestHandler(app, path=EVENTS_PATH)

    @property
    def is_ready(self) -> bool:
        return self.bolt is not None

    # /slack/events

    def slack_events(
        self, environ: dict[str, Any], start_response: Callable[..., Any]
    ) -> Iterable[bytes]:
        if environ.get("REQUEST_METHOD") != "POST":
            start_response("405 Method Not Allowed", [("Allow", "POST"), ("Content-Length", "0")])
            return [b""]
        started = time.perf_counter()
        try:
            length = int(environ.get("CONTENT_LENGTH") or 0)
        except ValueError:
            return plain(start_response, "400 Bad Request", "Bad Content-Length")
        if length > MAX_BODY:
            return plain(start_response, "413 Payload Too Large", "Too large")
        body = environ["wsgi.input"].read(length) if length > 0 else b""
        problem = self._unsigned(body, environ)
        if problem:
            log.warning("refused a request to %s: %s", EVENTS_PATH, problem)
            return plain(start_response, "401 Unauthorized", "Invalid request signature")
        # Signed, so from Slack (or someone with the secret); still, a body Bolt cannot take
        # would cost a traceback and a 500: its shape is checked first.
        malformed = body_problem(body.decode("utf-8"), environ.get("CONTENT_TYPE"))
        if malformed:
            log.warning("refused a signed request to %s: %s", EVENTS_PATH, malformed)
            return plain(start_response, "400 Bad Request", "Malformed request body")
        if self.bolt is None:
            return self._warming_up(body, environ, start_response, started)
        forwarded = {**environ, "wsgi.input": io.BytesIO(body), "CONTENT_LENGTH": str(len(body))}
        return self.bolt(forwarded, start_response)

    def _unsigned(self, body: bytes, environ: dict[str, Any]) -> str | None:
        """Why the request is not from Slack, or None when its signature checks out."""
        if self.verifier is None:
            return "no signing secret is set"
        timestamp = environ.get("HTTP_X_SLACK_REQUEST_TIMESTAMP")
        signature = environ.get("HTTP_X_SLACK_SIGNATURE")
        if not timestamp or not signature:
            return "no signature"
        if not timestamp.strip().isdigit():
            return "the timestamp is not a number"
        try:
            text = body.decode("utf-8")  # what Slack signs; the verifier hashes text
        except UnicodeDecodeError:
            return "the body is not UTF-8"
        if not self.verifier.is_valid(text, timestamp.strip(), signature):
            return "wrong or expired signature"
        return None

    def _warming_up(
        self,
        body: bytes,
        environ: dict[str, Any],
        start_response: Callable[..., Any],
        started: float | None = None,
    ) -> Iterable[bytes]:
        """Slack's request before the engine is ready: the ack itself says to try again.

        A slash command's ack body is shown to the user; a modal's submission gets the
        sentence under its first input; a click and an event are acknowledged (a click's
        message stays as it is, so the user can click again). Each is logged once, as Bolt's
        acks are (``paperboy.requests``). The body's shape was checked (``body_problem``).
        """
        started = time.perf_counter() if started is None else started
        text = body.decode("utf-8")
        if is_json_body(text, environ.get("CONTENT_TYPE")):
            event = json.loads(text) if text else {}
            if event.get("type") == "url_verification":
                return as_json(start_response, "200 OK", {"challenge": event.get("challenge")})
            log_acked(raw_request_fields(event), started)
            return plain(start_response, "200 OK", "")
        form = dict(parse_qsl(text, keep_blank_values=True))
        if form.get("command"):
            log_acked(raw_request_fields(form), started)
            loading = (following := replica.current()) is not None and following.catching_up
            reply = {"response_type": "ephemeral", "text": LOADING if loading else WARMING_UP}
            return as_json(start_response, "200 OK", reply)
        payload = json.loads(form["payload"]) if "payload" in form else {}
        log_acked(raw_request_fields(payload), started)
        view = payload.get("view")
        if payload.get("type") == "view_submission" and isinstance(view, dict):
            blocks = view.get("blocks") or []
            inputs = [
                b.get("block_id")
                for b in blocks
                if isinstance(b, dict) and b.get("type") == "input"
            ]
            if inputs and inputs[0]:
                errors = {"response_action": "errors", "errors": {inputs[0]: WARMING_UP}}
                return as_json(start_response, "200 OK", errors)
        return plain(start_response, "200 OK", "")

    # /slack/install and /slack/oauth_redirect

    def oauth_pages(
        self, environ: dict[str, Any], start_response: Callable[..., Any]
    ) -> Iterable[bytes]:
        """Bolt's OAuth flow (``bot.slack.oauth``) when this deployment installs into many
        workspaces; 404 when it serves one. A database that does not answer is a 503 page
        with one sentence, not a traceback."""
        if not self.settings.multi_workspace:
            return plain(start_response, "404 Not Found", "Not Found")
        if environ.get("REQUEST_METHOD") != "GET":
            start_response("405 Method Not Allowed", [("Allow", "GET"), ("Content-Length", "0")])
            return [b""]
        if self.bolt is None:
            return self._page(start_response, 503, "Paperboy is warming up", WARMING_UP)
        try:
            return list(self.bolt(environ, start_response))
        except DATABASE_ERRORS as error:
            log.error("%s failed: the database did not answer (%s)", environ["PATH_INFO"], error)
            return self._page(
                start_response,
                503,
                "Paperboy was not installed",
                "Paperboy's database is not answering; please try again in a minute.",
            )

    @staticmethod
    def _page(
        start_response: Callable[..., Any], status: int, title: str, sentence: str
    ) -> list[bytes]:
        response = html_response(status, page(title, sentence))
        reason = "OK" if status == 200 else "Service Unavailable"
        return plain(
            start_response, f"{status} {reason}", response.body, "text/html; charset=utf-8"
        )

    # /healthz

    def health(
        self, environ: dict[str, Any], start_response: Callable[..., Any]
    ) -> Iterable[bytes]:
        """``GET /healthz``: 200 when Paperboy can serve, 503 with the reason when not."""
        if not self.is_ready:
            return as_json(start_response, "503 Service Unavailable", _warming_up_status())
        body = health_report(self.settings.db_path)
        if (following := replica.current()) is not None:
            body["replica"] = following.status()
        status = "200 OK" if body["status"] != "unhealthy" else "503 Service Unavailable"
        return as_json(start_response, status, body)

    def readiness(
        self, environ: dict[str, Any], start_response: Callable[..., Any]
    ) -> Iterable[bytes]:
        """``GET /readyz``: 200 when this process can answer Slack, for a platform's check
        that restarts a process or stops routing to it. Unlike ``/healthz`` it leaves out the
        digest clock: that is another process, which restarting this one does not mend."""
        if not self.is_ready:
            return as_json(start_response, "503 Service Unavailable", _warming_up_status())
        problem = corpus_problem(self.settings.db_path)
        if problem is not None:
            body = {"status": "unhealthy", "database": problem}
            return as_json(start_response, "503 Service Unavailable", body)
        return as_json(start_response, "200 OK", {"status": "ready"})


def _warming_up_status() -> dict[str, Any]:
    """``/healthz`` before the app is ready: warming up, or loading the shared corpus."""
    following = replica.current()
    if following is not None and following.catching_up:
        return {"status": "catching up", "replica": following.status()}
    return {"status": "warming up"}


def corpus_problem(db_path: Path) -> str | None:
    """Why this host's corpus file cannot be read (None: it can), for ``/readyz``: lookups
    need it; the shared database (``DATABASE_URL``) they do not, and a PostgreSQL outage
    gets its short apology from every web process rather than their restart."""
    try:
        with _fresh_read(db_path) as db:
            db.execute("select count(*) from papers").fetchone()
    except (sqlite3.Error, DatabaseError) as error:
        return f"{error}"
    return None


@contextlib.contextmanager
def _fresh_read(db_path: Path) -> Iterator[Any]:
    """A new read-only connection to the corpus file, closed after: the checks' own, since
    the app's connections keep working on a file deleted or replaced underneath them and
    would hide it. The engine's own read-only open: a WAL database in a folder this process
    may not write has no -shm file and cannot get one, which a bare mode=ro would fail on."""
    db = connect(db_path, read_only=True)
    with contextlib.closing(db.conn):
        db.execute("PRAGMA busy_timeout = 2000")
        yield db


def health_report(db_path: Path, now: datetime | None = None) -> dict[str, Any]:
    """What ``/healthz`` says (see the README): the database, the corpus and the digest clock.

    Read through a fresh read-only connection each time: the app's own connections keep
    working on a database file that was deleted or replaced underneath them, and would hide
    it. ``status`` is ``unhealthy`` (HTTP 503) when the database cannot be read or the clock's
    heartbeat is older than three ticks while digests are on; ``read-only`` (200) when this
    process may not write the database (lookups work, subscriptions cannot be saved).
    """
    body: dict[str, Any] = {"status": "ok"}
    try:
        with _fresh_read(db_path) as db:
            papers = db.execute("select count(*) from papers").fetchone()[0]
            row = db.execute("select value from meta where key = 'corpus_version'").fetchone()
            clock = clock_health(db, now or datetime.now(UTC))
    except (sqlite3.Error, DatabaseError) as error:  # DatabaseError: the state's database
        return {"status": "unhealthy", "database": f"{error}"}
    body["database"] = "ok"
    body["writable"] = is_writable(db_path)
    body["papers"] = papers
    body["corpus_version"] = int(row[0]) if row else None
    body["scheduler"] = {
        "last_tick": clock.last_tick.isoformat() if clock.last_tick else None,
        "digests_on": clock.digests_on,
        "stale": clock.stale,
    }
    if clock.stale:
        body["status"] = "unhealthy"
    elif not body["writable"]:
        body["status"] = "read-only"
    return body


def make_wsgi_app(
    settings: Settings,
    engine: Engine,
    *,
    client: WebClient | None = None,
    executor: Executor | None = None,
    app: App | None = None,
    routes: dict[str, WSGIApp] | None = None,
) -> WebApp:
    """Bolt at ``POST /slack/events`` plus ``GET /healthz`` (and any extra ``routes``), ready."""
    web = WebApp(settings, routes)
    web.ready(engine, app or build_app(settings, engine, client=client, executor=executor))
    return web


def server_options(settings: Settings) -> dict[str, Any]:
    """Waitress sized for Slack's traffic behind a proxy, and for slow clients without one.

    Many connections (poll(), not select(), so more than 1024 file descriptors work) and a
    short idle timeout, checked every few seconds, so half-open connections cannot use up
    the server; request threads only until ack().
    """
    return {
        "threads": settings.http_threads,
        "connection_limit": settings.http_connection_limit,
        "channel_timeout": settings.http_channel_timeout,
        "cleanup_interval": max(1, min(10, settings.http_channel_timeout // 2)),
        "asyncore_use_poll": True,
        "max_request_body_size": MAX_BODY,
    }


class HttpServer:
    """A waitress server, bound on creation (so ``url`` is known before serving).

    ``serve_forever()`` in the foreground; ``start()``/``stop()`` runs it on a background
    thread (``paperboy serve``, tests, the playground's own requests). ``port=0`` picks a free
    port. ``options`` are waitress adjustments (see :func:`server_options`).
    """

    def __init__(
        self,
        wsgi_app: WSGIApp,
        host: str = "127.0.0.1",
        port: int = 0,
        threads: int = THREADS,
        **options: Any,
    ):
        options.setdefault("threads", threads)
        try:
            self._server = waitress.create_server(
                wsgi_app, host=host, port=port, ident="paperboy", **options
            )
        except (OSError, ValueError) as error:
            raise _cannot_listen(error, host, port) from None
        self._thread: threading.Thread | None = None
        self._stopping = threading.Lock()
        self._stopped = False
        self._running = False  # waitress's loop is running (on a thread or in the foreground)

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
        self._run()

    def start(self) -> HttpServer:
        """Serve on a background thread; a second call (``with server.start():``) is a no-op:
        two loops over one waitress map would race for every socket, and the loser's read
        (EAGAIN) closes the connection under the winner's response."""
        if self._thread is not None:
            return self
        self._thread = threading.Thread(target=self._run, name="paperboy-http", daemon=True)
        self._running = True  # before the thread starts: a stop() right away must see it
        self._thread.start()
        return self

    def _run(self) -> None:
        self._running = True
        try:
            self._server.run()
        except OSError:
            if not self._stopped:
                raise
            # stop() closed the sockets from here while the loop waited in select() (its wake-up
            # pipe was broken): select's EBADF is how that loop ends.
        finally:
            self._running = False

    def request_stop(self) -> None:
        """Stop serving (from any thread but the server's own); ``wait()`` then returns."""
        self._shut_down()

    def wait(self) -> None:
        """Block until the server stops (signals still reach the calling main thread)."""
        while self._thread is not None and self._thread.is_alive():
            self._thread.join(timeout=1)

    def stop(self) -> None:
        """Stop serving and wait for the server's thread. Safe to call again, after
        ``request_stop()``, or once the server has ended."""
        self._shut_down()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=10)

    def _shut_down(self) -> None:
        """Close the server once, in an order that never writes to a closed trigger.

        Waitress's request threads wake its loop through a pipe (the "trigger") when they
        finish; ``close_all`` closes that pipe. So: stop accepting, let the requests in
        flight finish while the loop still runs, and only then close everything from the
        loop. A second caller waits for the first and does nothing: writing to the closed
        pipe fails with EBADF, or, once its descriptor number was reused, writes into
        whatever file now has it.
        """
        with self._stopping:
            if self._stopped:
                return
            self._stopped = True
            server = self._server
            if not self._running:
                server.task_dispatcher.shutdown(timeout=5)
                wasyncore.close_all(server._map)  # no loop runs: close it here
                return
            # The listening socket only (the server's own close() would close the trigger).
            woken = self._wake(lambda: wasyncore.dispatcher.close(server))
            server.task_dispatcher.shutdown(timeout=5)
            if not (woken and self._wake(lambda: wasyncore.close_all(server._map))):
                # The loop can no longer be woken: close everything from here; it ends at
                # its next poll, when it finds nothing left to serve.
                wasyncore.close_all(server._map, ignore_all=True)

    def _wake(self, thunk: Callable[[], Any]) -> bool:
        """Run ``thunk`` on the server's loop; False when its trigger is broken. Waitress
        closes the trigger itself when its pipe reports a hang-up (its write end closed under
        it by someone else): writing then would hit EBADF, or a file that reused the number.

        Not ``trigger.pull_trigger(thunk)``, which appends the thunk under the trigger's lock
        but writes the wake-up byte after releasing it: a byte already in the pipe (a finished
        request's) let the loop run a closing thunk in between, and the write then went to a
        closed descriptor, or to whatever file had just reused its number. The loop runs
        thunks under the same lock, so holding it across both steps closes that gap."""
        trigger = self._server.trigger
        with trigger.lock:
            if getattr(trigger, "_closed", False):
                log.warning("the HTTP server's wake-up pipe was closed under it; closing directly")
                return False
            try:
                trigger.thunks.append(thunk)
                trigger._physical_pull()
            except OSError as error:
                trigger.thunks.remove(thunk)
                log.warning("could not wake the HTTP server's loop (%s); closing directly", error)
                return False
        return True

    def __enter__(self) -> HttpServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


def _cannot_listen(error: OSError | ValueError, host: str, port: int) -> StartupError:
    """Why the port cannot be bound, in one sentence: a port in use is exit 1 (something else
    has it now), a HOST that is no address of this machine exit 2 (a setting to fix)."""
    if isinstance(error, OSError) and error.errno == errno.EADDRINUSE:
        return StartupError(
            f"Port {port} on {host} is already in use (another Paperboy, or another program): "
            "stop it, or set PORT to a free port."
        )
    if isinstance(error, ValueError | socket.gaierror) or error.errno == errno.EADDRNOTAVAIL:
        return StartupError(
            f"HOST {host!r} is not an address this machine can listen on: use 0.0.0.0 for "
            "every interface, or 127.0.0.1 for this machine only.",
            status=2,
        )
    return StartupError(f"Cannot listen on {host}:{port} ({error.strerror or error}).")


def playground_host(settings: Settings) -> str:
    """Loopback unless HOST names an address on purpose: the playground has no login."""
    return "127.0.0.1" if settings.host in ("0.0.0.0", "", "::") else settings.host


def check_can_listen(host: str, port: int) -> None:
    """Bind and release ``host:port`` once, so a bad HOST or a taken port is reported before
    anything is created on disk (the playground opens its database before it listens)."""
    try:
        family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
        with socket.socket(family, socket.SOCK_STREAM) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind((host, port))
    except (OSError, ValueError) as error:
        raise _cannot_listen(error, host, port) from None


# --- starting up --------------------------------------------------------------------------------


def check_slack_token(settings: Settings) -> dict[str, Any]:
    """``auth.test`` with the bot token, retried while Slack is unreachable or failing (5xx,
    dropped connections, 429) for about half a minute. Only Slack's verdict on the token
    itself blames the token; anything else names Slack's address. Returns Slack's answer."""
    client = WebClient(
        token=settings.slack_bot_token,
        base_url=settings.slack_api_url,
        timeout=10,
        retry_handlers=[
            _ConnectionErrors(STARTUP_RETRIES, STARTUP_INTERVAL),
            _ServerErrors(STARTUP_RETRIES, STARTUP_INTERVAL),
            RateLimitErrorRetryHandler(max_retry_count=2),
        ],
    )
    where = settings.slack_api_url
    try:
        with quiet_slack_sdk():  # one warning per retry (_Retrying), then one sentence
            return client.auth_test().data  # type: ignore[return-value]
    except SlackApiError as error:
        code = error_code(error)
        status = error.response.status_code
        if code in TOKEN_REFUSED:  # only these blame SLACK_BOT_TOKEN at start
            raise StartupError(
                f"Slack refused SLACK_BOT_TOKEN ({code}); copy it again from your app's "
                "OAuth & Permissions page.",
                status=2,
            ) from None
        if status >= 500 or status == 429:
            raise StartupError(
                f"Could not reach Slack at {where}: it kept answering HTTP {status}; "
                "check https://slack-status.com and start again.",
            ) from None
        raise StartupError(f"Slack at {where} refused auth.test ({code or status}).") from None
    except (URLError, OSError) as error:
        reason = getattr(error, "reason", None) or error
        raise StartupError(f"Could not reach Slack at {where} ({reason}).") from None


class _Retrying:
    """One warning of ours per retry of auth.test at start (slack_sdk's own are quieted)."""

    def prepare_for_next_attempt(self, *, state, request, response=None, error=None) -> None:  # noqa: ANN001
        cause = (
            f"HTTP {response.status_code}"
            if response is not None
            else getattr(error, "reason", error)
        )
        log.warning("auth.test failed (%s); trying again", cause)
        super().prepare_for_next_attempt(  # type: ignore[misc]
            state=state, request=request, response=response, error=error
        )


class _ConnectionErrors(_Retrying, ConnectionErrorRetryHandler):
    pass


class _ServerErrors(_Retrying, ServerErrorRetryHandler):
    """slack_sdk's server-error retries cover 500 and 503; a proxy's 502 and 504 are as
    transient."""

    def _can_retry(self, *, state, request, response=None, error=None) -> bool:  # noqa: ANN001
        return response is not None and response.status_code >= 500


def open_engine(settings: Settings) -> Engine:
    """The engine, warm: database opened (seeded when new) and the index loaded or built.

    A database that cannot be opened stops the start (one sentence); an index that cannot be
    built now (a full disk, say) is logged, and lookups try again and say why meanwhile.
    """
    try:
        # The shared state: DATABASE_URL's database, pooled for the request threads and the
        # post-ack workers; it must answer now, or the process does not start.
        configure_state(settings.database_url, pool_size=settings.http_threads + 8)
        engine = replica.open_engine(settings.db_path, settings.seed_dir)
        state_for(engine.db_path)  # opened (and migrated) now, not by the first request
    except DatabaseError as error:
        raise StartupError(str(error)) from None
    except (sqlite3.Error, OSError) as error:
        raise StartupError(f"Could not open the database {settings.db_path} ({error}).") from None
    # With DATABASE_URL: catch up with the shared corpus (a fresh host loads it all and builds
    # the index once; /healthz says "catching up" meanwhile), then follow it.
    replica.follow(engine, settings.corpus_sync_seconds)
    try:
        engine.warm_up()  # load or build the index now (and the ids), not on the first lookup
    except Exception as error:  # the engine says what went wrong in one sentence
        log.error("The index could not be loaded or built now: %s", error)
    log.info("corpus: %s papers in %s", f"{engine.corpus.count():,}", settings.db_path)
    return engine


def _raise_file_limit(connections: int) -> None:
    """Room for every allowed connection: the soft open-file limit is often 1024."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = connections + 256
    if soft != resource.RLIM_INFINITY and soft < wanted:
        limit = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (limit, hard))


# --- paperboy serve -----------------------------------------------------------------------------


#: ``paperboy worker`` is ``paperboy serve`` held to Socket Mode: without an app token it says so.
WORKER_NEEDS_APP_TOKEN = (
    "SLACK_APP_TOKEN is missing: `paperboy worker` runs Socket Mode with an app-level token "
    "(xapp-...) from your app's Basic Information page; `paperboy serve` runs over HTTP instead."
)


#: What ``run`` calls with no Slack credentials: ``bot.playground.playground.run``, chosen by
#: the command line (this module does not import the playground, which imports it).
Playground = Callable[[Settings, Engine], None]
NO_CREDENTIALS = (
    "No Slack credentials are set: set SLACK_BOT_TOKEN and SLACK_SIGNING_SECRET (or "
    "SLACK_APP_TOKEN for Socket Mode)."
)


def run(
    settings: Settings,
    *,
    with_scheduler: bool = False,
    socket_only: bool = False,
    playground: Playground | None = None,
) -> None:
    """Serve until interrupted. A configuration problem ends it with one sentence and exit 2.

    Socket Mode with SLACK_APP_TOKEN, else HTTP, else (no Slack credentials) ``playground``
    (``paperboy serve`` passes the local playground; without one it is a settings error);
    ``with_scheduler`` runs the digest clock in this process too. ``socket_only`` is
    ``paperboy worker``: Socket Mode or nothing, started exactly as ``serve`` starts it.
    """
    configure_logging(settings)
    name = "worker" if socket_only else "serve"
    try:
        if socket_only and not settings.slack_app_token:
            raise SettingsError(WORKER_NEEDS_APP_TOKEN)
        settings.check_slack()
    except SettingsError as error:
        _fail(str(error), status=2, settings=settings, name=name)
    if not settings.has_slack_credentials:
        mode = "playground"
    else:
        mode = "socket" if settings.slack_app_token else "http"
    with sigterm_exits():  # waitress lets running requests finish; the playground stops
        try:
            _serve(settings, mode, with_scheduler, playground, name)
        except StartupError as error:
            _fail(str(error), status=error.status, settings=settings, name=name)
        except KeyboardInterrupt:
            say(settings, f"paperboy {name}: stopped.")


def _serve(
    settings: Settings,
    mode: str,
    with_scheduler: bool,
    playground: Playground | None,
    name: str = "serve",
) -> None:
    if mode == "playground":
        if playground is None:
            raise StartupError(NO_CREDENTIALS, status=2)
        check_can_listen(playground_host(settings), settings.port)
        playground(settings, open_engine(settings))
        return
    if mode == "http":
        _run_http(settings, with_scheduler)
        return
    _run_socket_mode(settings, with_scheduler, name)


def _run_socket_mode(settings: Settings, with_scheduler: bool, name: str = "worker") -> None:
    """Check the token (with retries), open the database (a read-only one still answers
    lookups), start the clock if asked, then serve over Socket Mode until SIGTERM."""
    check_slack_token(settings)
    engine = open_engine(settings)
    main = threading.main_thread()
    clock = None
    if with_scheduler:
        # A token revoked while running stops the clock, which stops Socket Mode as SIGTERM
        # does; then we exit 1. Built before it starts: its first tick can refuse the token
        # (and send the signal) before start_background() has even returned.
        stop = lambda: signal.pthread_kill(main.ident or 0, signal.SIGTERM)  # noqa: E731
        clock = _clock(settings, engine, stop)
    try:
        if clock is not None:
            clock.start_background()
        # The token was just checked, with retries: Bolt need not check it again.
        run_socket_mode(settings, engine, verify_token=False, name=name)
    except URLError as error:
        where = settings.slack_api_url
        raise StartupError(f"Could not reach Slack at {where} ({error.reason}).") from None
    except SystemExit:  # the clock's SIGTERM came before Socket Mode took the signal over
        if clock is None or clock.fatal is None:
            raise
    finally:
        if clock is not None:
            clock.shutdown()
    _raise_if_fatal(clock)


def _run_http(settings: Settings, with_scheduler: bool) -> None:
    """Bind the port, then warm up behind it (see the module docstring), then serve."""
    _raise_file_limit(settings.http_connection_limit)
    web = WebApp(settings)
    server = HttpServer(web, host=settings.host, port=settings.port, **server_options(settings))
    say(
        settings,
        f"Paperboy is listening on {_bound(server)} for Slack ({EVENTS_PATH}) and health checks "
        f"({HEALTH_PATH}). Slack's Request URLs must be https://<your public host>{EVENTS_PATH}.",
    )
    server.start()
    try:
        if settings.multi_workspace:  # no one token: each workspace's comes as it installs
            log.info("Workspaces install Paperboy at https://<your public host>%s.", INSTALL_PATH)
        else:
            check_slack_token(settings)
        engine = open_engine(settings)
        # The token was just checked, with retries: Bolt need not check it again.
        app = build_app(settings, engine, verify_token=False)
        if with_scheduler:
            # A token revoked while running stops the clock, then the server, then we exit 1.
            web.clock = _clock(settings, engine, server.request_stop)
            web.clock.start_background()
        web.ready(engine, app)
        log.info("Paperboy is ready%s.", " (digests are sent from this process)" * with_scheduler)
        server.wait()
    finally:
        if web.clock is not None:
            web.clock.shutdown()
        server.stop()
    _raise_if_fatal(web.clock)


def _bound(server: HttpServer) -> str:
    """What the server binds, as bound: every interface says so (and how to reach it here)."""
    if server.host in ("0.0.0.0", "", "::"):
        return (
            f"port {server.port} on every interface ({server.host or '0.0.0.0'}; {server.url} here)"
        )
    return server.url


def _clock(settings: Settings, engine: Engine, stop: Callable[[], Any]) -> Any:
    """``--with-scheduler``: the digest clock for a background thread of this process (its
    token was checked just before), not started yet. ``stop`` is called when it dies for a
    refused token."""
    if settings.log_level != "DEBUG":  # a line per tick, every minute, is noise
        logging.getLogger("apscheduler").setLevel(logging.WARNING)
    poster = SlackPoster.from_settings(settings, engine)
    clock = Clock(engine, settings, poster, on_fatal=lambda error: stop())
    clock.token_checked()  # it checks again every few minutes (digest.clock.TOKEN_CHECK)
    return clock


def _raise_if_fatal(clock: Any) -> None:
    if clock is not None and clock.fatal is not None:
        raise StartupError(str(clock.fatal), status=1)


def _fail(message: str, status: int, settings: Settings, name: str = "serve") -> None:
    say(settings, f"paperboy {name}: {message}", logging.ERROR)
    raise SystemExit(status)

"""Socket Mode: the Slack app over a websocket that Paperboy opens to Slack, so it needs no
public URL and binds no port (the Procfile's ``worker:`` type: ``paperboy worker``, or
``paperboy serve`` with ``SLACK_APP_TOKEN``; both start through ``bot.slack.server.run``).

Bolt's built-in ``SocketModeHandler`` (no extra dependency) does the protocol: it asks
``apps.connections.open`` (at ``SLACK_API_URL``, with the ``xapp-`` token) for a websocket
URL, connects, and acknowledges every envelope by its ``envelope_id``; it reconnects when
Slack sends ``disconnect`` or the connection goes stale. What it leaves to the app is stopping:
on SIGTERM (how Heroku, systemd and Docker stop a process) :func:`close` acknowledges the
envelopes already received, says goodbye with a websocket close frame (code 1000) so Slack
stops routing to this connection at once, and releases the handler's threads.
"""

from __future__ import annotations

import contextlib
import logging
import signal
import struct
import threading
from collections.abc import Iterator
from concurrent.futures import Executor

from slack_bolt.adapter.socket_mode import SocketModeHandler
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError
from slack_sdk.socket_mode.builtin.frame_header import FrameHeader
from slack_sdk.socket_mode.builtin.internals import _build_data_frame_for_sending

from bot.engine.search import Engine
from bot.logs import say
from bot.settings import Settings, SettingsError

from .app import build_app
from .client import TOKEN_REFUSED, error_code

log = logging.getLogger(__name__)

#: How long to wait for Slack to answer our close frame before closing the socket anyway.
CLOSE_TIMEOUT = 3.0
NORMAL_CLOSURE = 1000
#: apps.connections.open errors that no retry will fix: the app token is gone or wrong.
REFUSED_TOKEN_ERRORS = TOKEN_REFUSED | {"not_allowed_token_type", "access_denied"}


def make_handler(
    settings: Settings,
    engine: Engine,
    *,
    client: WebClient | None = None,
    executor: Executor | None = None,
    verify_token: bool | None = None,
) -> SocketModeHandler:
    """The Bolt app (``build_app``) behind Bolt's built-in Socket Mode handler, not connected
    yet. ``apps.connections.open`` goes through the app's own client, so to ``SLACK_API_URL``
    with its retry handlers; slack_sdk sends the ``xapp-`` token for that one call.
    ``verify_token``: as for ``build_app`` (False when the caller has just checked it)."""
    if not settings.slack_app_token:
        raise SettingsError("SLACK_APP_TOKEN is not set.")
    app = build_app(settings, engine, client=client, executor=executor, verify_token=verify_token)
    return SocketModeHandler(app, settings.slack_app_token, web_client=app.client)


def close(handler: SocketModeHandler, timeout: float = CLOSE_TIMEOUT) -> None:
    """Close the connection the way a websocket client should, then free the handler.

    Envelopes already received are handled and acknowledged first (Slack shows the user an
    error for an unacknowledged command); then a close frame, and Slack's answering close is
    awaited for up to ``timeout`` seconds. slack_sdk's ``close()`` alone only drops the
    socket. Safe on a handler that never connected.
    """
    client = handler.client
    client.auto_reconnect_enabled = False  # Slack's answering close must not start a reconnect
    client.message_workers.shutdown(wait=True)
    session = client.current_session
    if session is not None and session.is_active():
        answered = threading.Event()
        client.on_close_listeners.append(lambda code, reason: answered.set())
        try:
            _send_close_frame(session)
            if not answered.wait(timeout):
                log.info("Slack did not answer the close frame within %.0f s", timeout)
        except OSError as error:  # the connection was already gone: nothing left to say
            log.info("could not send a close frame (%s)", error)
    handler.close()
    log.info("Socket Mode connection closed")


def _send_close_frame(session) -> None:  # slack_sdk.socket_mode.builtin.connection.Connection
    """A masked close frame with status 1000, built by slack_sdk's own frame writer (its
    built-in connection has no public method for it)."""
    frame = _build_data_frame_for_sending(
        struct.pack("!H", NORMAL_CLOSURE), FrameHeader.OPCODE_CLOSE
    )
    with session.sock_send_lock:
        if session.sock is not None:
            session.sock.sendall(frame)


def run_socket_mode(
    settings: Settings, engine: Engine, *, verify_token: bool | None = None
) -> None:
    """Serve Slack over Socket Mode until SIGTERM or Ctrl-C, then :func:`close` cleanly and
    return.

    ``apps.connections.open`` refusing the app token ends the process with one sentence:
    exit 2 at start, exit 1 when it happens on a reconnect (a revoked token). An unreachable
    Slack at start raises ``URLError`` for the caller to report.
    """
    handler = make_handler(settings, engine, verify_token=verify_token)
    refused: list[str] = []
    stopping = threading.Event()
    if _in_main_thread():  # the signal that wakes the main thread needs our SIGTERM handler
        _give_up_when_refused(handler, refused, stopping)
    say(settings, "Paperboy is connecting to Slack over Socket Mode (no port is opened).")
    refused_at_start: str | None = None
    with _stop_on_sigterm():
        try:
            handler.start()  # connect, then block until a signal
        except SlackApiError as error:
            refused_at_start = str(error_code(error))
        except (_Stop, KeyboardInterrupt):
            pass
        finally:
            stopping.set()
            close(handler)
    # The one sentence comes last, after close()'s log lines.
    if refused_at_start:
        _fail(
            settings,
            f"Slack did not accept SLACK_APP_TOKEN ({refused_at_start}); create an app-level "
            "token with the connections:write scope on your app's Basic Information page, and "
            "turn Socket Mode on.",
            status=2,
        )
    if refused:
        _fail(
            settings,
            f"Slack refused SLACK_APP_TOKEN when reconnecting ({refused[0]}); it was revoked or "
            "its app deleted: create a new app-level token and restart.",
            status=1,
        )


class _Stop(BaseException):
    """Raised in the main thread by SIGTERM to leave ``handler.start()``'s endless wait."""


@contextlib.contextmanager
def _stop_on_sigterm() -> Iterator[None]:
    """SIGTERM (how Heroku, systemd and Docker stop a process) raises :class:`_Stop` in the
    main thread, once: a second SIGTERM while closing is ignored, so closing completes."""
    if not _in_main_thread():
        yield
        return
    fired: list[int] = []

    def stop(signum: int, frame: object) -> None:
        if not fired:
            fired.append(signum)
            raise _Stop

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _give_up_when_refused(
    handler: SocketModeHandler, refused: list[str], stopping: threading.Event
) -> None:
    """Make a refused reconnect end the process (exit 1, so the platform alerts and restarts).

    slack_sdk reconnects from its own threads and, when ``apps.connections.open`` refuses
    the token, logs it and tries again every few seconds forever: a revoked token would leave
    a worker that looks alive and answers nothing. The failing thread stops the main one as
    SIGTERM would, waits for :func:`close`, and then ends quietly.
    """
    issue, main = handler.client.issue_new_wss_url, threading.main_thread()

    def issue_or_give_up() -> str:
        try:
            return issue()
        except SlackApiError as error:
            code = error_code(error)
            if code not in REFUSED_TOKEN_ERRORS or threading.current_thread() is main:
                raise  # at start, run_socket_mode reports it itself
            refused.append(str(code))
            signal.pthread_kill(main.ident or 0, signal.SIGTERM)
            stopping.wait()
            raise SystemExit from None  # ends this slack_sdk thread without a traceback

    handler.client.issue_new_wss_url = issue_or_give_up  # type: ignore[method-assign]


def _in_main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


def _fail(settings: Settings, message: str, status: int) -> None:
    say(settings, f"paperboy: {message}", logging.ERROR)
    raise SystemExit(status)

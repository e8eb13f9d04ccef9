"""The Slack app: one factory that wires a Bolt ``App`` to the engine (listeners live in
``bot/slack/listeners/``, one module per Slack surface, as in Bolt's starter template)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from concurrent.futures import Executor, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from slack_bolt import App
from slack_sdk import WebClient
from slack_sdk.http_retry import ConnectionErrorRetryHandler, RateLimitErrorRetryHandler

from bot.engine.search import Engine
from bot.settings import Settings

log = logging.getLogger(__name__)

RATE_LIMIT_RETRIES = 3  # each waits Slack's Retry-After first
CONNECTION_RETRIES = 2
# Bolt runs every listener's ack part on this pool; it stays free of slow work (see Services).
ACK_THREADS = 16
WORK_THREADS = 8


@dataclass
class Services:
    """What listeners need besides the Slack payload: the engine and settings, and a pool
    for the work that follows ``ack()``.

    Listeners acknowledge at once and hand lookups to :meth:`later`, a pool of their own, so
    a burst of slow lookups can never hold up the acknowledgement of the next request (Slack
    gives up after 3 seconds and shows the user ``dispatch_failed``).
    """

    engine: Engine
    settings: Settings
    executor: Executor = field(
        default_factory=lambda: ThreadPoolExecutor(WORK_THREADS, thread_name_prefix="paperboy")
    )

    def later(
        self, respond: Callable[..., Any] | None, work: Callable[..., Any], *args: Any
    ) -> None:
        """Run ``work(*args)`` on the pool; if it fails, log it and apologise via ``respond``."""
        self.executor.submit(self._guarded, respond, work, args)

    @staticmethod
    def _guarded(respond: Callable[..., Any] | None, work: Callable[..., Any], args: tuple) -> None:
        try:
            work(*args)
        except Exception:
            log.exception("%s failed", getattr(work, "__name__", work))
            if respond is not None:
                from .render import apology_message

                try:
                    respond(**apology_message(), response_type="ephemeral", replace_original=False)
                except Exception:
                    log.exception("could not send the apology either")


def is_local_api(api_url: str) -> bool:
    """True for the local stand-in (playground, tests): no real token to verify there."""
    return urlsplit(api_url).hostname in ("127.0.0.1", "localhost", "::1")


def make_client(settings: Settings) -> WebClient:
    """A Web API client that waits out rate limits (HTTP 429, Retry-After) and retries
    dropped connections, so a busy workspace delays a message instead of losing it."""
    client = WebClient(token=settings.slack_bot_token, base_url=settings.slack_api_url)
    handlers = [h for h in client.retry_handlers if not isinstance(h, ConnectionErrorRetryHandler)]
    client.retry_handlers = [
        *handlers,
        ConnectionErrorRetryHandler(max_retry_count=CONNECTION_RETRIES),
        RateLimitErrorRetryHandler(max_retry_count=RATE_LIMIT_RETRIES),
    ]
    return client


def build_app(
    settings: Settings,
    engine: Engine,
    *,
    client: WebClient | None = None,
    executor: Executor | None = None,
) -> App:
    """The Bolt app with every Paperboy listener registered.

    ``client`` defaults to :func:`make_client`; ``executor`` (the pool for work after
    ``ack()``) defaults to a private thread pool.
    """
    from . import listeners

    client = client or make_client(settings)
    services = Services(engine, settings, **({"executor": executor} if executor else {}))
    app = App(
        # The token travels in the client; passing it twice only makes Bolt warn.
        client=client,
        signing_secret=settings.slack_signing_secret or "",  # Socket Mode needs none
        process_before_response=False,
        # The stand-in has no real tokens; against Slack, a bad token fails at startup.
        token_verification_enabled=not is_local_api(settings.slack_api_url),
        listener_executor=ThreadPoolExecutor(ACK_THREADS, thread_name_prefix="paperboy-ack"),
        name="paperboy",
    )
    listeners.register(app, services)
    return app

"""Slack listeners, one module per surface (Bolt starter template layout).

``commands`` answers ``/papers``, ``actions`` the buttons, ``views`` the modals' submissions,
``events`` the App Home; each has a ``register(app, services)``. A listener is small: ack, parse the payload, call the engine,
render, reply. ``subscriptions`` (topics and digests) registers its own listeners when it
provides a ``register`` function.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from slack_bolt import App

    from bot.slack.app import Services

log = logging.getLogger(__name__)

SUBSCRIPTIONS_MODULE = "bot.slack.listeners.subscriptions"


def register(app: App, services: Services) -> None:
    from . import actions, commands, events, views

    commands.register(app, services)
    actions.register(app, services)
    views.register(app, services)
    events.register(app, services)
    subscriptions = load_subscriptions()
    if subscriptions is not None and hasattr(subscriptions, "register"):
        subscriptions.register(app, services)


def load_subscriptions() -> Any | None:
    """The subscriptions listener module, or None while it does not exist yet.

    Only the module itself being absent counts as "not there"; a module that exists but
    fails to import is a bug, and its error is raised.
    """
    try:
        return importlib.import_module(SUBSCRIPTIONS_MODULE)
    except ModuleNotFoundError as error:
        if error.name != SUBSCRIPTIONS_MODULE:
            raise
        return None


def reply(respond: Callable[..., Any], message: dict[str, Any], **options: Any) -> None:
    """Send ``message`` through ``respond`` (the response_url), checking Slack's answer.

    A response_url answers a rejected message with an HTTP error, not an exception, so it
    is checked here: the failure is logged and the plain ``text`` is sent instead, so the
    user gets an answer even if the blocks were refused.
    """
    answer = respond(**message, **options)
    status = getattr(answer, "status_code", 200)
    if status == 200:
        return
    log.error("response_url refused the reply (%s %s)", status, getattr(answer, "body", ""))
    fallback = respond(
        text=message.get("text") or "Sorry, that reply could not be shown.", **options
    )
    if getattr(fallback, "status_code", 200) != 200:
        log.error("response_url refused the plain-text reply too (%s)", fallback.status_code)

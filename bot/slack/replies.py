"""Replying through ``respond()`` (a request's response_url), checked."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

log = logging.getLogger(__name__)

#: A reply only the member sees.
EPHEMERAL: dict[str, Any] = {"response_type": "ephemeral"}
#: A private reply to a click (or after one): below the message clicked, which stays as it was.
EPHEMERAL_BELOW: dict[str, Any] = {**EPHEMERAL, "replace_original": False}


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

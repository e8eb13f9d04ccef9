"""Logging set up once, the same way for every command, from the settings.

``PAPERBOY_LOG_FORMAT=json`` writes one JSON object per line (for Papertrail, Datadog, Loki,
CloudWatch...): ``time``, ``level``, ``logger``, ``message``, any structured fields the record
carries (each Slack request's ``team``, ``user``, ``command``/``action_id``/``callback_id``
and ``latency_ms``, see ``bot/slack/app.py``), and ``exception`` with the traceback as one
string, so a line is always one event.
"""

from __future__ import annotations

import contextlib
import json
import logging
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

from .settings import Settings

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
#: What every LogRecord has; anything else on a record came in through ``extra=``.
_STANDARD = set(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime"}


class JsonFormatter(logging.Formatter):
    """One JSON object per record, on one line."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key, value in vars(record).items():
            if key not in _STANDARD and not key.startswith("_"):
                entry[key] = value
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        elif record.stack_info:
            entry["exception"] = self.formatStack(record.stack_info)
        return json.dumps(entry, ensure_ascii=False, default=str)


def configure_logging(settings: Settings) -> None:
    """Log to stderr at ``PAPERBOY_LOG_LEVEL``, as text or JSON (``PAPERBOY_LOG_FORMAT``);
    a no-op when logging is already set up."""
    if getattr(settings, "log_format", "text") == "json":
        handler = logging.StreamHandler()
        handler.setFormatter(JsonFormatter())
        logging.basicConfig(level=settings.log_level, handlers=[handler])
    else:
        logging.basicConfig(level=settings.log_level, format=TEXT_FORMAT)


def say(settings: Settings, message: str, level: int = logging.INFO) -> None:
    """A line for the operator: printed to stderr, or logged when the logs are JSON (so
    every line of the process's output parses)."""
    if getattr(settings, "log_format", "text") == "json":
        logging.getLogger("paperboy").log(level, message)
    else:
        print(message, file=sys.stderr)


@contextlib.contextmanager
def quiet_slack_sdk() -> Iterator[None]:
    """slack_sdk logs an ERROR and two INFO lines for every failed attempt; while Paperboy
    checks the token at start (and says one warning per retry itself, then one sentence),
    those are noise. Kept at ``PAPERBOY_LOG_LEVEL=DEBUG``."""
    logger = logging.getLogger("slack_sdk.web.base_client")
    if logging.getLogger().getEffectiveLevel() <= logging.DEBUG:
        yield
        return
    previous = logger.level
    logger.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        logger.setLevel(previous)

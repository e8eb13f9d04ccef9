"""Logging set up once, the same way for every command, from the settings."""

from __future__ import annotations

import logging

from .settings import Settings

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def configure_logging(settings: Settings) -> None:
    """Log to stderr at ``PAPERBOY_LOG_LEVEL`` (a no-op when logging is already set up)."""
    logging.basicConfig(level=settings.log_level, format=TEXT_FORMAT)

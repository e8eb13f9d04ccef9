"""What every ``paperboy`` command shares: the ``--db`` option and settings from the environment.

Its own module so that command groups living elsewhere (``digest/commands.py``) use the same
option without importing ``bot.cli``, which imports them.
"""

from __future__ import annotations

from pathlib import Path

import click

from .settings import Settings, SettingsError


def db_option(func):
    return click.option(
        "--db",
        "db_path",
        type=click.Path(dir_okay=False, path_type=Path),
        default=None,
        help="SQLite database (default: $PAPERBOY_DB or ./paperboy.db).",
    )(func)


def load_settings() -> Settings:
    """Settings from the environment; a bad value ends the command with one sentence."""
    try:
        return Settings.from_env()
    except SettingsError as error:
        raise click.ClickException(str(error)) from None

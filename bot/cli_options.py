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


class BadSettings(click.ClickException):
    """Exit 2 with one line per bad setting, and no traceback."""

    exit_code = 2

    def __init__(self, problems: list[str]):
        super().__init__(" ".join(problems))
        self.problems = problems

    def show(self, file=None) -> None:
        for problem in self.problems:
            click.echo(problem, err=True)


def load_settings() -> Settings:
    """Settings from the environment, all checked: every bad value is named, then exit 2.

    Every command calls this before doing anything, so they all fail alike.
    """
    try:
        return Settings.from_env()
    except SettingsError as error:
        raise BadSettings(error.problems) from None

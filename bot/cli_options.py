"""What every ``paperboy`` command shares: the ``--db`` option and settings from the environment.

Its own module so that command groups living elsewhere (``digest/commands.py``) use the same
option without importing ``bot.cli``, which imports them.
"""

from __future__ import annotations

import signal
import threading
from pathlib import Path

import click

from .settings import Settings, SettingsError

NO_DATABASE = (
    "There is no database at {path}: check the path, or create one with `paperboy ingest FILE` "
    "(or `paperboy serve`, which starts it from the seed corpus)."
)


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


def exit_on_sigterm() -> None:
    """Platforms (Heroku, systemd, Docker) stop a process with SIGTERM: a long-running command
    calls this first thing, so a stop at any moment, start-up included (imports, seeding a new
    database, building the index, waiting for Slack's auth.test), exits 0 rather than dying
    by the signal (status 143). Only the main thread may set it (click's test runner may not
    be on it)."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _exit_0)


def _exit_0(signum: int, frame: object) -> None:
    raise SystemExit(0)


def load_settings() -> Settings:
    """Settings from the environment, all checked: every bad value is named, then exit 2.

    Every command calls this before doing anything, so they all fail alike.
    """
    try:
        return Settings.from_env()
    except SettingsError as error:
        raise BadSettings(error.problems) from None


def open_engine(
    settings: Settings,
    db_path: Path,
    *,
    write: bool,
    seed: bool = True,
    allow_read_only: bool = False,
):
    """The engine for a command; database problems end it with one sentence (exit 1).

    Only commands that write (``write=True``: ingest, serve, worker, scheduler, digest send)
    create a database, filling a new one from the seed corpus when ``seed``, and they refuse
    one this user may not write, unless ``allow_read_only`` (a Slack app, which can still
    answer lookups from it; see ``Engine.read_only``). The others never create a database,
    say so when there is none, and read a read-only one.
    """
    from .engine.corpus import DatabaseError, NoDatabase
    from .engine.search import Engine
    from .state import configure as configure_state

    seed_dir = settings.seed_dir if write and seed else None
    if seed_dir and not db_path.exists() and not seed_dir.is_dir():
        click.echo(
            f"The seed folder {seed_dir} does not exist, so the new database starts empty: "
            "add papers with `paperboy ingest FILE`.",
            err=True,
        )
        seed_dir = None
    try:
        configure_state(settings.database_url)  # DATABASE_URL, when set, holds the state
        engine = Engine.open(db_path, seed_dir=seed_dir, create=write)
    except NoDatabase:
        raise click.ClickException(NO_DATABASE.format(path=db_path)) from None
    except DatabaseError as error:
        raise click.ClickException(str(error)) from None
    if write and engine.read_only and not allow_read_only:
        raise click.ClickException(
            f"Cannot write to the database at {db_path}: this user may not write it or its "
            "folder (run paperboy as the database's owner, or fix the permissions)."
        )
    return engine

"""How a long-running process stops: platforms (Heroku, systemd, Docker) send SIGTERM, which
Paperboy treats like Ctrl-C, so waitress lets running requests finish, the scheduler lets a
tick finish its digest, and the process exits 0 rather than dying by the signal (status 143).
"""

from __future__ import annotations

import contextlib
import functools
import signal
import threading
from collections.abc import Callable, Iterator
from typing import Any


@contextlib.contextmanager
def sigterm_exits() -> Iterator[None]:
    """SIGTERM raises ``SystemExit(0)`` inside the block; the handler that was there before is
    put back after it (a command run in-process, as tests do, leaves the process as it was).
    Only the main thread may set it; elsewhere this does nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _exit_0)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def stops_on_sigterm(command: Callable[..., Any]) -> Callable[..., Any]:
    """A long-running command, all of it under :func:`sigterm_exits`: a stop at any moment,
    start-up included (imports, seeding a new database, building the index, waiting for
    Slack's auth.test), is a clean exit 0."""

    @functools.wraps(command)
    def run(*args: Any, **kwargs: Any) -> Any:
        with sigterm_exits():
            return command(*args, **kwargs)

    return run


def _exit_0(signum: int, frame: object) -> None:
    raise SystemExit(0)

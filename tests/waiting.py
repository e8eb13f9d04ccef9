"""Waiting on what another thread does, without sleeping: the stand-ins' ``wait_for``."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


class Waiting:
    """``wait_for`` for a stand-in whose threads notify ``_cond`` on every change they record;
    ``_describe`` says what was recorded, for the timeout's message."""

    _cond: threading.Condition
    wait_timeout: float = 5.0

    def wait_for(self, predicate: Callable[[], T], timeout: float | None = None) -> T:
        """Block until ``predicate()`` is truthy, re-checked on every recorded change and at
        least every 50 ms (for predicates on what the stand-in does not record, such as a
        database's rows)."""
        timeout = self.wait_timeout if timeout is None else timeout
        deadline = time.monotonic() + timeout
        with self._cond:
            while not (value := predicate()):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError(f"condition not met within {timeout}s; {self._describe()}")
                self._cond.wait(min(remaining, 0.05))
            return value

    def _describe(self) -> str:
        return "nothing recorded"

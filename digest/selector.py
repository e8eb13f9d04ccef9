"""A batch's digests chosen chunk by chunk, partly in a second process, while this one delivers.

``select_digests`` is CPU-bound (seconds for a thousand members with feedback), and so is
delivering (rendering, claiming, recording): in one process they queue for one GIL on one
core. ``Selections`` splits the members into chunks and hands out each chunk's plans as soon
as they are chosen, so the first chunks are claimed, posted and recorded while later ones are
still being chosen; and most chunks are chosen by a helper process (``SelectionHelper``:
``python -m digest.selector``), on the machine's other core.

The helper is started by the first large batch and kept for the next ones (its imports and
its caches cost seconds). This process chooses the first chunk (the helper is given the next
ones meanwhile), and every chunk while the helper is not answering yet or is gone (it died,
hung, or answered with an error), so a batch never depends on it. The helper only reads (the corpus, its index and the shared state), as any process
choosing digests does; what it returns is exactly what ``select_digests`` returns here.
"""

from __future__ import annotations

import logging
import socket
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from multiprocessing.connection import Connection
from pathlib import Path
from queue import Empty, SimpleQueue
from typing import Any

from bot.engine.search import Engine
from bot.state import configure, configured

from .plan import DigestPlan
from .selection import select_digests_apart
from .subscriptions import MemberKey

log = logging.getLogger("digest.selector")  # its name when run as `python -m` too

#: Seconds the helper may take to start (imports, opening the engine), and to choose a chunk,
#: before it counts as gone (it is then stopped, and this process chooses instead).
START_TIMEOUT = 120.0
CHUNK_TIMEOUT = 120.0
#: Chunks asked of the helper before its first answer comes back.
IN_FLIGHT = 2

Plans = dict[MemberKey, DigestPlan]


class HelperGone(Exception):
    """The helper process cannot choose (it died, hung or failed): choose here instead."""


class SelectionHelper:
    """``select_digests`` in a child process: ``send(keys, limit)`` asks, ``receive()`` waits
    for the answers in turn. Started at once; ``ready()`` waits until it has opened the
    engine. Not thread-safe: one caller at a time."""

    def __init__(self, db_path: str | Path):
        ours, theirs = socket.socketpair()
        with theirs:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "digest.selector", str(theirs.fileno())],
                pass_fds=[theirs.fileno()],
                stdin=subprocess.DEVNULL,
            )
        self._conn = Connection(ours.detach())
        store = configured()
        url = store.url.render_as_string(hide_password=False) if store is not None else None
        self._ready = False
        try:
            self._conn.send((str(db_path), url))
        except OSError:
            self.close()

    @property
    def alive(self) -> bool:
        return not self._conn.closed and self.process.poll() is None

    def answering(self, wait: float = 0.0) -> bool:
        """Whether it has opened the engine, waiting at most ``wait`` seconds for it;
        ``HelperGone`` if it never will."""
        if self._conn.closed:
            raise HelperGone("stopped")
        if not self._ready and self._conn.poll(wait):
            self.ready()
        return self._ready

    def ready(self) -> None:
        """Wait until the helper has opened the engine; ``HelperGone`` if it cannot."""
        if not self._ready:
            self._answer(START_TIMEOUT)
            self._ready = True

    def send(self, keys: Sequence[MemberKey], limit: int) -> None:
        """Ask for the plans of ``keys`` (answered in the order asked: ``receive``)."""
        self.ready()
        try:
            self._conn.send((list(keys), limit))
        except (OSError, ValueError) as error:
            self.close()
            raise HelperGone(repr(error)) from error

    def receive(self) -> Plans:
        return self._answer(CHUNK_TIMEOUT)

    def _answer(self, timeout: float) -> Any:
        try:
            if not self._conn.poll(timeout):
                raise HelperGone(f"no answer in {timeout:.0f} s")
            status, value = self._conn.recv()
        except (OSError, EOFError, ValueError) as error:
            self.close()
            raise HelperGone(repr(error)) from error
        except HelperGone:
            self.close()
            raise
        if status != "ok":
            self.close()  # what it was asked next would come back out of turn
            raise HelperGone(value)
        return value

    def close(self) -> None:
        """Stop the helper (it also stops by itself when this end closes)."""
        if not self._conn.closed:
            self._conn.close()
        if self.process.poll() is None:
            try:
                self.process.wait(5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


class Selections:
    """The plans of ``keys``, ``chunk`` members at a time, in the order they are chosen
    (iterate: one ``Plans`` a chunk). A thread of this process chooses the first chunk, and
    the others while the helper (``helper()``, called at once) is not answering yet or is
    gone; another thread hands chunks to the helper. Run ``stop()`` when done (in a ``finally``):
    it waits for both threads. An error choosing here ends the iteration early and is kept in
    ``error``: the chunks chosen before it are still delivered, then the caller raises it."""

    def __init__(
        self,
        engine: Engine,
        keys: Sequence[MemberKey],
        limit: int,
        chunk: int,
        helper: Callable[[], SelectionHelper] | None,
    ):
        self.engine = engine
        self.limit = limit
        self.error: BaseException | None = None
        self._todo = deque(
            list(keys[start : start + chunk]) for start in range(0, len(keys), chunk)
        )
        self._chunks = len(self._todo)
        self._given = 0
        self._done: SimpleQueue[Plans | None] = SimpleQueue()
        self._cond = threading.Condition()
        self._in_helper = 0
        self._chosen_here = 0
        self._stopped = False
        self._threads = [threading.Thread(target=self._choose_here, name="digest-select")]
        chosen = None
        if helper is not None:
            try:
                chosen = helper()
            except (OSError, HelperGone) as error:
                log.warning("the digest selection helper did not start (%s); choosing here", error)
        try:
            self._helper_serving = chosen is not None and chosen.answering()
        except HelperGone:
            chosen = None
        if chosen is not None:
            self._threads.append(
                threading.Thread(target=self._choose_there, args=(chosen,), name="digest-helper")
            )
        for thread in self._threads:
            thread.start()

    def __iter__(self) -> Iterator[Plans]:
        return self

    def __next__(self) -> Plans:
        if self._given == self._chunks:
            raise StopIteration
        while True:
            try:
                plans = self._done.get(timeout=1.0)
                break
            except Empty:
                if not any(thread.is_alive() for thread in self._threads) and self._done.empty():
                    raise RuntimeError("digest selection: chunks lost") from None
        if plans is None:  # stopped, or an error here
            raise StopIteration
        self._given += 1
        return plans

    def stop(self) -> None:
        with self._cond:
            self._stopped = True
            self._cond.notify_all()
        self._done.put(None)
        for thread in self._threads:
            thread.join()

    def _take(self, here: bool) -> list[MemberKey] | None:
        with self._cond:
            while not self._stopped:
                if self._todo and (not here or not self._helper_serving or not self._chosen_here):
                    if here:
                        self._chosen_here += 1
                    else:
                        self._in_helper += 1
                    return self._todo.popleft()
                if not self._todo and (not here or not self._in_helper):
                    return None
                self._cond.wait()
            return None

    def _choose_here(self) -> None:
        while (keys := self._take(here=True)) is not None:
            try:
                plans = select_digests_apart(self.engine, keys, limit=self.limit)
            except BaseException as error:
                self.error = error
                with self._cond:
                    self._stopped = True
                    self._cond.notify_all()
                self._done.put(None)
                return
            self._done.put(plans)

    def _choose_there(self, chosen: SelectionHelper) -> None:
        asked: deque[list[MemberKey]] = deque()  # sent to the helper, not yet answered
        try:
            started = time.monotonic()
            while not chosen.answering(wait=0.1):
                with self._cond:
                    if self._stopped or not self._todo:
                        return  # all chosen here before it answered: it serves the next batch
                if time.monotonic() - started > START_TIMEOUT:
                    chosen.close()
                    raise HelperGone(f"not started in {START_TIMEOUT:.0f} s")
            with self._cond:
                self._helper_serving = True
            while True:
                # One chunk asked ahead, so the helper never waits for the next one.
                while len(asked) < IN_FLIGHT and (keys := self._take(here=False)):
                    asked.append(keys)
                    chosen.send(keys, self.limit)
                if not asked:
                    break
                plans = chosen.receive()
                with self._cond:
                    asked.popleft()
                    self._in_helper -= 1
                    self._cond.notify_all()
                self._done.put(plans)
        except HelperGone as error:
            log.warning("the digest selection helper is gone (%s); choosing here", error)
        except Exception:
            log.exception("the digest selection helper failed; choosing here")
            chosen.close()  # its answers may be out of turn now
        finally:
            with self._cond:
                self._todo.extendleft(reversed(asked))  # chosen here after all
                self._in_helper -= len(asked)
                self._helper_serving = False
                self._cond.notify_all()


def _serve(fd: int) -> None:
    """The helper's side: open the engine, then answer ``(keys, limit)`` requests with
    ``select_digests``' plans until the parent closes the connection."""
    conn = Connection(fd)
    try:
        db_path, url = conn.recv()
        configure(url)
        engine = Engine.open(db_path, create=False)
        engine.index  # noqa: B018 - opened before the first request
        conn.send(("ok", None))
    except EOFError:
        return
    except Exception as error:
        log.exception("the digest selection helper could not start")
        conn.send(("error", repr(error)))
        return
    while True:
        try:
            keys, limit = conn.recv()
        except (EOFError, OSError):
            return
        try:
            answer = ("ok", select_digests_apart(engine, keys, limit=limit))
        except Exception as error:
            log.exception("choosing digests failed in the helper")
            answer = ("error", repr(error))
        try:
            conn.send(answer)
        except OSError:
            return


if __name__ == "__main__":
    from bot.logs import configure_logging
    from bot.settings import Settings

    configure_logging(Settings.from_env())  # the parent's PAPERBOY_LOG_LEVEL and _FORMAT
    _serve(int(sys.argv[1]))

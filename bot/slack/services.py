"""What every listener is given besides Slack's payload (``Services``), and how the work after
``ack()`` runs and fails (:meth:`Services.later`, :meth:`Services.guarded`).

Its own module, below ``app`` and the listeners, so that both import it at the top.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Callable
from concurrent.futures import Executor, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from slack_bolt.request.internals import extract_team_id

from bot.engine.search import Engine
from bot.settings import Settings
from bot.state import StateUnavailable

from .render import apology_message, read_only_message, stopping_message
from .replies import EPHEMERAL_BELOW

log = logging.getLogger(__name__)

WORK_THREADS = 8


@dataclass
class Services:
    """What listeners need besides the Slack payload: the engine and settings, and a pool
    for the work that follows ``ack()``.

    Listeners acknowledge at once and hand lookups to :meth:`later`, a pool of their own, so
    a burst of slow lookups can never hold up the acknowledgement of the next request (Slack
    gives up after 3 seconds and shows the user ``dispatch_failed``).
    """

    engine: Engine
    settings: Settings
    executor: Executor = field(
        default_factory=lambda: ThreadPoolExecutor(WORK_THREADS, thread_name_prefix="paperboy")
    )

    def later(
        self, respond: Callable[..., Any] | None, work: Callable[..., Any], *args: Any
    ) -> None:
        """Run ``work(*args)`` on the pool; if it fails, log it and apologise via ``respond``.

        A request that carries no response_url (``respond`` cannot answer) is only logged:
        there is nothing to answer through, and the work's reply would fail. One acknowledged
        while the process stops (its pool shut down) is told to try again: raised here, after
        the ``ack()``, it would have turned Slack's 200 into a 404 (see :func:`open_modal`)."""
        if respond is not None and getattr(respond, "response_url", "") is None:
            log.warning(
                "%s not done: the request has no response_url to answer through",
                getattr(work, "__name__", work),
            )
            return
        self.submit(self.executor, respond, work, args)

    @staticmethod
    def submit(
        pool: Executor, respond: Callable[..., Any] | None, work: Callable[..., Any], args: tuple
    ) -> None:
        """Run ``work(*args)`` on ``pool`` through :meth:`guarded`, never raising: called
        after ``ack()``, where a raise turns Slack's 200 into a 404 (see :func:`open_modal`).
        A pool shut down (the process stopping) gets the member a "try again" instead."""
        try:
            pool.submit(Services.guarded, respond, work, args)
        except RuntimeError as error:
            name = getattr(work, "__name__", work)
            if "shutdown" not in str(error):  # e.g. "can't start new thread": it is queued,
                log.exception("%s is waiting for a free thread", name)  # and runs later
                return
            log.warning("%s not done: Paperboy is stopping", name)
            if respond is not None:
                try:
                    respond(**stopping_message(), **EPHEMERAL_BELOW)
                except Exception:
                    log.exception("could not say so either")

    @staticmethod
    def guarded(respond: Callable[..., Any] | None, work: Callable[..., Any], args: tuple) -> None:
        """Run ``work(*args)`` here, telling its failure: the one place a listener's failure
        is told. A write refused because the database is read-only says so (the operator's
        fault, not the member's); anything else is logged with its traceback and apologised
        for. :meth:`later` runs it on the pool; a listener with a pool of its own (the share
        picker) submits it there."""
        name = getattr(work, "__name__", work)
        try:
            work(*args)
            return
        except Exception as error:
            if is_read_only_error(error):
                log.warning("%s: nothing saved, the database is read-only (%s)", name, error)
                message = read_only_message()
            elif isinstance(error, StateUnavailable):  # an outage: its one sentence says it all
                log.error("%s: %s", name, error)
                message = apology_message()
            else:
                log.exception("%s failed", name)
                message = apology_message()
        if respond is not None:
            try:
                respond(**message, **EPHEMERAL_BELOW)
            except Exception:
                log.exception("could not send the apology either")


def open_modal(client: Any, body: dict[str, Any], view: dict[str, Any]) -> None:
    """Open ``view`` for the member who clicked, on the listener's own thread right after its
    ``ack()`` (the trigger_id expires 3 seconds after the click), telling a failure by direct
    message through :meth:`Services.guarded` instead of raising it.

    Raising is not an option there: when a listener that has already acknowledged raises,
    Bolt's thread runner resets the acknowledgement it holds, and if that happens before its
    10 ms poll has seen the ``ack()`` (a views.open refused at once), it waits out the
    3-second timeout and answers Slack with a 404, which Slack shows as a failure."""
    user_id = (body.get("user") or {}).get("id") or ""
    trigger_id = body.get("trigger_id") or ""
    Services.guarded(by_dm(client, user_id), _views_open, (client, trigger_id, view))


def _views_open(client: Any, trigger_id: str, view: dict[str, Any]) -> None:
    client.views_open(trigger_id=trigger_id, view=view)


def is_read_only_error(error: BaseException) -> bool:
    """Whether SQLite refused a write because the database (or its folder) is read-only."""
    if not isinstance(error, sqlite3.OperationalError):
        return False
    code = getattr(error, "sqlite_errorcode", None)
    if code is not None:
        return code & 0xFF == sqlite3.SQLITE_READONLY
    return "readonly database" in str(error)


def request_team(body: dict[str, Any]) -> str:
    """The workspace a request came from: the member's data is theirs in that workspace,
    since one user id can be a member of several (Enterprise Grid, or two installs). Read by
    Bolt's own rule, the one that sets ``context.team_id`` (the installing workspace for a
    modal opened over Slack Connect, ``authorizations`` for a shared channel's events), so
    every listener stores and reads a member's data under the same workspace. ``""`` when
    Slack did not say."""
    return str(extract_team_id(body) or "")


def by_dm(client: Any, user_id: str) -> Callable[..., Any]:
    """A ``respond`` for what a member did in a modal or on the Home tab, which have no
    conversation to answer in: :meth:`Services.later`'s apology goes to their DM (as Bolt's
    error handler sends it for those surfaces)."""

    def respond(**message: Any) -> None:
        client.chat_postMessage(channel=user_id, text=message["text"], blocks=message.get("blocks"))

    return respond

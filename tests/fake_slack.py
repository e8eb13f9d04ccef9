"""The playground's Slack stand-in plus what only tests need: every call recorded, failures on
demand (rate limits, ``ok: false`` answers, dropped sockets, revoked tokens), Socket Mode URLs,
private channels, and :meth:`FakeSlack.wait_for` to block on what the app does instead of
sleeping. The strictness (Block Kit limits, token kinds, ``not_in_channel``) is the
product's, in ``bot/playground/fake_slack.py``."""

from __future__ import annotations

import copy
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from bot.playground import fake_slack
from bot.playground.fake_slack import _error, _ok, _Reply, _token_problem
from tests.waiting import Waiting


@dataclass(frozen=True)
class Call:
    """One request to /api/<method>, recorded before it is answered (failed ones included)."""

    method: str
    params: dict[str, Any]
    at: float
    token: str | None = None  # the token it was made with (which workspace's bot)


@dataclass(frozen=True)
class Response:
    """One JSON payload POSTed to a response_url, as Bolt's ``respond()`` sends it."""

    token: str
    payload: dict[str, Any]


@dataclass
class _Failure:
    method: str
    times: int
    status: int = 200
    error: str = "internal_error"
    retry_after: int = 1
    user: str | None = None
    channel: str | None = None
    disconnect: bool = False

    def matches(self, method: str, params: dict[str, Any]) -> bool:
        users = {
            params.get("user"),
            params.get("user_id"),
            *str(params.get("users") or "").split(","),
        }
        return (
            self.method == method
            and (self.user is None or self.user in users)
            and (self.channel is None or self.channel == params.get("channel"))
        )


class FakeSlack(Waiting, fake_slack.FakeSlack):
    """The stand-in with recording, failure injection and waiting (see the module docstring).

    Its lock is wrapped in a Condition notified on every recorded call and response, so a
    test blocks in ``wait_for`` (``tests/waiting.py``) until the app has done what it waits for.
    """

    def __init__(self, *, clock: Callable[[], float] = time.time) -> None:
        super().__init__(clock=clock)
        self._cond = threading.Condition(self._lock)
        self._calls: list[Call] = []
        self._responses: list[Response] = []
        self._failures: list[_Failure] = []
        self._revoked: set[str] = set()  # tokens (or "*": every token) answered token_revoked
        self._socket_mode_url: Callable[[], str] | str | None = None

    # configuration

    def fail_next(
        self,
        method: str,
        times: int = 1,
        *,
        status: int | None = None,
        error: str | None = None,
        retry_after: int = 1,
        user: str | None = None,
        channel: str | None = None,
    ) -> None:
        """Fail the next ``times`` matching calls to ``method``.

        Without ``error``: HTTP 429 ``ratelimited`` with a Retry-After header. With ``error``:
        HTTP 200 ``{"ok": false, "error": error}``, as Slack answers most failures. ``user`` and
        ``channel`` restrict it to calls naming that user (user/user_id/users) or channel.
        """
        status = status or (200 if error else 429)
        error = error or ("ratelimited" if status == 429 else "internal_error")
        failure = _Failure(method, times, status, error, retry_after, user, channel)
        with self._cond:
            self._failures.append(failure)

    def disconnect_next(self, method: str, times: int = 1) -> None:
        """Close the socket without answering, to exercise connection-error retries."""
        with self._cond:
            self._failures.append(_Failure(method, times, disconnect=True))

    def revoke_token(self, token: str = "*") -> None:
        """From now on every call with ``token`` (by default any token) fails with
        ``token_revoked``, as when an admin uninstalls the app or rotates its token."""
        with self._cond:
            self._revoked.add(token)

    def restore_token(self, token: str = "*") -> None:
        """Undo ``revoke_token``: the operator put a valid token back."""
        with self._cond:
            self._revoked.discard(token)

    def add_channel(self, channel: str, *, private: bool = False, member: bool = False) -> None:
        """Declare a channel: ``private`` ones refuse a bot that is not a ``member`` (as Slack
        does even with chat:write.public); ``member`` is the bot invited already."""
        with self._cond:
            (self._private.add if private else self._private.discard)(channel)
            (self._joined.add if member else self._joined.discard)(channel)

    def set_socket_mode_url(self, url: Callable[[], str] | str | None) -> None:
        """Where ``apps.connections.open`` sends a Socket Mode app: a ``ws://`` URL, or a
        function returning a fresh one per call (Slack issues a new ticket every time).
        None (the default) answers it as Slack does an app without Socket Mode."""
        with self._cond:
            self._socket_mode_url = url

    # inspection

    @property
    def calls(self) -> list[Call]:
        with self._cond:
            return list(self._calls)

    def calls_to(self, method: str) -> list[Call]:
        with self._cond:
            return [c for c in self._calls if c.method == method]

    def calls_by_team(self, team_id: str) -> list[Call]:
        """The calls made with a token of that workspace (see ``team_of_token``)."""
        with self._cond:
            return [c for c in self._calls if c.token and self.team_of_token(c.token) == team_id]

    @property
    def responses(self) -> list[Response]:
        with self._cond:
            return list(self._responses)

    def is_member(self, channel: str) -> bool:
        """Whether the bot is in the conversation (what conversations.history requires)."""
        with self._cond:
            return self._is_member(channel)

    def home_view(self, user_id: str) -> dict[str, Any] | None:
        """The App Home view last published for ``user_id``."""
        with self._cond:
            return copy.deepcopy(self._home_views.get(user_id))

    def modals(self) -> list[dict[str, Any]]:
        """Every modal opened with views.open, oldest first (with the ``id`` Slack gave it)."""
        with self._cond:
            return copy.deepcopy(list(self._modals.values()))

    def _describe(self) -> str:
        calls = [
            f"{c.method}({', '.join(f'{k}={v!r:.40}' for k, v in c.params.items())})"
            for c in self._calls
        ]
        replies = [f"{r.payload!r:.80}" for r in self._responses]
        return f"{len(calls)} call(s) recorded: {calls[-20:]}; {len(replies)} response(s): {replies[-10:]}"

    # request handling (server threads): record, maybe fail, else answer as the stand-in does

    def _handle_api(
        self, method: str, token: str | None, params: dict[str, Any] | None
    ) -> _Reply | None:
        with self._cond:
            self._calls.append(Call(method, params or {}, self._clock(), token))
            # Waiters wake only when this block releases the lock, i.e. after the state change.
            self._cond.notify_all()
            if params is not None and token and _token_problem(method, token) is None:
                if "*" in self._revoked or token in self._revoked:
                    return _Reply(200, _error("token_revoked"))
                failure = next((f for f in self._failures if f.matches(method, params)), None)
                if failure is not None:
                    failure.times -= 1
                    if failure.times <= 0:
                        self._failures.remove(failure)
                    if failure.disconnect:
                        return None
                    retry = {"Retry-After": str(failure.retry_after)}
                    headers = retry if failure.status == 429 else {}
                    return _Reply(failure.status, _error(failure.error), headers)
            return super()._handle_api(method, token, params)

    def _handle_response(self, token: str, payload: Any) -> _Reply:
        with self._cond:
            if token in self._response_targets and isinstance(payload, dict):
                self._responses.append(Response(token, payload))
                self._cond.notify_all()
            return super()._handle_response(token, payload)

    def _api_apps_connections_open(self, params: dict[str, Any]) -> dict[str, Any]:
        """A Socket Mode websocket URL (see :meth:`set_socket_mode_url`)."""
        url = self._socket_mode_url
        if url is None:
            return super()._api_apps_connections_open(params)
        return _ok(url=url() if callable(url) else url)

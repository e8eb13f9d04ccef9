"""A local stand-in for Slack's Socket Mode websocket server, for the tests.

    sockets = SocketModeServer().start()
    fake.set_socket_mode_url(sockets.new_url)   # apps.connections.open answers with it
    ...                                         # the app connects and gets a hello
    envelope_id, url = sockets.slash(fake, "diffusion")
    sockets.ack(envelope_id)                    # waits for the app's {"envelope_id": ...}
    sockets.close_codes                         # the close frame's code, per connection

Built on the ``websockets`` library's sync server, so framing, pings and the close handshake
are the library's. What is here is Slack's side of the protocol, as documented in "Using
Socket Mode" (docs.slack.dev/apis/events-api/using-socket-mode): a single-use ticket in the
URL, ``hello`` on connect, envelopes carrying an ``envelope_id`` and the same payload Slack
would POST over HTTP (a slash command's form fields as a JSON object, an interaction's
``payload`` already decoded), acknowledgements echoing the ``envelope_id``, and
``disconnect`` to send the app to a fresh connection.
"""

from __future__ import annotations

import json
import threading
import uuid
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any
from urllib.parse import parse_qs, urlsplit

from websockets.exceptions import ConnectionClosed
from websockets.sync.server import Request, Response, ServerConnection, serve

from bot.playground.fake_slack import APP_ID
from tests.fake_slack import FakeSlack
from tests.slack_harness import block_actions, event_callback, slash_command, view_submission
from tests.waiting import Waiting


@dataclass
class Connection:
    """One websocket the app opened; ``close_code`` is None until it ends, then the code of
    the close frame the app sent (None if it only dropped the socket)."""

    websocket: ServerConnection
    ticket: str
    received: list[dict[str, Any]] = field(default_factory=list)
    ended: bool = False
    close_code: int | None = None


class SocketModeServer(Waiting):
    """Slack's Socket Mode endpoint on a free 127.0.0.1 port; see the module docstring.
    ``wait_for`` re-checks on every connection and message."""

    wait_timeout = 10.0

    def __init__(self, app_id: str = APP_ID) -> None:
        self.app_id = app_id
        self._cond = threading.Condition()
        self._tickets: set[str] = set()
        self._connections: list[Connection] = []
        self._acks: dict[str, dict[str, Any]] = {}
        self.refused = 0  # handshakes with an unknown or already used ticket
        self._server: Any = None
        self._thread: threading.Thread | None = None

    # lifecycle

    def start(self) -> SocketModeServer:
        self._server = serve(
            self._handle,
            "127.0.0.1",
            0,
            process_request=self._check_ticket,
            compression=None,  # Slack's endpoint does not negotiate permessage-deflate either
        )
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="socket-mode-server", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is None:
            return
        self._server.shutdown()
        if self._thread is not None:
            self._thread.join(timeout=10)
        self._server = self._thread = None

    def __enter__(self) -> SocketModeServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        return int(self._server.socket.getsockname()[1])

    def new_url(self) -> str:
        """A fresh single-use URL, as ``apps.connections.open`` hands out."""
        ticket = uuid.uuid4().hex
        with self._cond:
            self._tickets.add(ticket)
        return f"ws://127.0.0.1:{self.port}/link/?ticket={ticket}&app_id={self.app_id}"

    # what the app did

    @property
    def connections(self) -> list[Connection]:
        with self._cond:
            return list(self._connections)

    @property
    def close_codes(self) -> list[int | None]:
        """For every connection that has ended, the close code the app sent."""
        with self._cond:
            return [c.close_code for c in self._connections if c.ended]

    def wait_connected(self, count: int = 1, timeout: float = 10.0) -> Connection:
        """The newest open connection, once at least ``count`` have been opened."""
        return self.wait_for(
            lambda: len(self._connections) >= count and self._open_connection(), timeout
        )

    def ack(self, envelope_id: str, timeout: float = 10.0) -> dict[str, Any]:
        """The app's acknowledgement of ``envelope_id`` (waits for it)."""
        return self.wait_for(lambda: self._acks.get(envelope_id), timeout)

    # what Slack sends

    def push(
        self, kind: str, payload: dict[str, Any], *, accepts_response_payload: bool = False
    ) -> str:
        """Send an envelope on the newest open connection; returns its envelope_id."""
        envelope_id = str(uuid.uuid4())
        envelope: dict[str, Any] = {
            "envelope_id": envelope_id,
            "type": kind,
            "payload": payload,
            "accepts_response_payload": accepts_response_payload,
        }
        if kind == "events_api":
            envelope.update(retry_attempt=0, retry_reason="")
        self.wait_connected().websocket.send(json.dumps(envelope))
        return envelope_id

    def slash(
        self,
        fake: FakeSlack,
        text: str,
        *,
        user: str = "U1",
        channel: str = "C1",
        command: str = "/papers",
    ) -> tuple[str, str]:
        """``/papers <text>`` typed in Slack; returns (envelope_id, its response_url)."""
        payload, response_url = slash_command(
            fake, text, user=user, channel=channel, command=command, app_id=self.app_id
        )
        return self.push("slash_commands", payload, accepts_response_payload=True), response_url

    def click(
        self,
        fake: FakeSlack,
        action_id: str,
        value: str,
        *,
        user: str = "U1",
        channel: str = "C1",
        message_ts: str = "1700000000.000100",
    ) -> tuple[str, str]:
        """A button clicked on an ephemeral reply; returns (envelope_id, its response_url)."""
        payload, response_url = block_actions(
            fake,
            action_id,
            value,
            user=user,
            channel=channel,
            message_ts=message_ts,
            app_id=self.app_id,
        )
        return self.push("interactive", payload), response_url

    def submit_view(
        self, view: dict[str, Any], answers: dict[str, str | None], *, user: str = "U1"
    ) -> str:
        """A modal's submit button (see ``slack_harness.view_submission``); returns the
        envelope_id. Slack accepts a response payload for it (``response_action``) in the ack."""
        payload = view_submission(view, answers, user=user, app_id=self.app_id)
        return self.push("interactive", payload, accepts_response_payload=True)

    def event(self, event: dict[str, Any]) -> str:
        """An Events API callback in an ``events_api`` envelope; returns the envelope_id."""
        return self.push("events_api", event_callback(event, app_id=self.app_id))

    def disconnect(self, reason: str = "refresh_requested") -> None:
        """Ask the app to move to a new connection, as Slack does every few hours."""
        message = {"type": "disconnect", "reason": reason, "debug_info": {"host": "applink-1"}}
        self.wait_connected().websocket.send(json.dumps(message))

    # server side

    def _check_ticket(self, websocket: ServerConnection, request: Request) -> Response | None:
        ticket = (parse_qs(urlsplit(request.path).query).get("ticket") or [""])[0]
        with self._cond:
            if ticket in self._tickets:
                self._tickets.discard(ticket)  # a URL works once
                websocket.ticket = ticket  # type: ignore[attr-defined]
                return None
            self.refused += 1
            self._cond.notify_all()
        return websocket.respond(HTTPStatus.UNAUTHORIZED, "invalid or used ticket\n")

    def _handle(self, websocket: ServerConnection) -> None:
        connection = Connection(websocket, getattr(websocket, "ticket", ""))
        with self._cond:
            self._connections.append(connection)
            hello = {
                "type": "hello",
                "num_connections": len(self._open_connections()),
                "debug_info": {"host": "applink-1", "approximate_connection_time": 18060},
                "connection_info": {"app_id": self.app_id},
            }
            self._cond.notify_all()
        try:
            websocket.send(json.dumps(hello))
            for raw in websocket:
                message = json.loads(raw)
                with self._cond:
                    connection.received.append(message)
                    if isinstance(message, dict) and message.get("envelope_id"):
                        self._acks.setdefault(message["envelope_id"], message)
                    self._cond.notify_all()
        except ConnectionClosed:
            pass
        finally:
            close = websocket.protocol.close_rcvd
            with self._cond:
                connection.ended = True
                connection.close_code = close.code if close is not None else None
                self._cond.notify_all()

    def _open_connections(self) -> list[Connection]:
        return [c for c in self._connections if not c.ended]

    def _open_connection(self) -> Connection | None:
        open_ = self._open_connections()
        return open_[-1] if open_ else None

    def _describe(self) -> str:
        return (
            f"{len(self._connections)} connection(s), close codes {self.close_codes}, "
            f"{len(self._acks)} ack(s), {self.refused} refused handshake(s)"
        )

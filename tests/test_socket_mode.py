"""Socket Mode end to end with no network: the app asks the Slack stand-in's
``apps.connections.open`` for a URL, connects to a local websocket server speaking Socket
Mode (``tests/socket_mode_server.py``), acknowledges envelopes by ``envelope_id`` and answers
through the response_url, and closes its connection with a close frame when stopped."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from bot.cli import main
from bot.engine.search import Engine
from bot.settings import Settings
from bot.slack import render
from bot.slack.socket_mode import close, make_handler, run_socket_mode
from tests.fake_slack import FakeSlack
from tests.slack_harness import BOT_TOKEN, assert_valid, blocks_text, buttons, seeded_engine
from tests.socket_mode_server import SocketModeServer
from tests.test_cli import DROP_WRITE, read_only  # noqa: F401 - a fixture

APP_TOKEN = "xapp-1-A0PAPERBOY-1-0123456789abcdef"


def paper_ids(message: dict[str, Any]) -> list[str]:
    """The ids the "Similar papers" buttons carry, in order: the papers shown."""
    return [b["value"] for k, b in buttons(message).items() if k.startswith("similar:")]


def reply_to(fake: FakeSlack, response_url: str, n: int = 1) -> dict[str, Any]:
    """The ``n``-th payload the app POSTed to ``response_url``, checked like Slack does."""
    token = response_url.rsplit("/", 1)[-1]
    replies = fake.wait_for(
        lambda: [r.payload for r in fake.responses if r.token == token][n - 1 :], timeout=10
    )
    assert_valid(replies[0])
    return replies[0]


@dataclass
class SocketApp:
    fake: FakeSlack
    sockets: SocketModeServer
    engine: Engine
    settings: Settings


@pytest.fixture
def stand_ins() -> Iterator[tuple[FakeSlack, SocketModeServer]]:
    with FakeSlack() as fake, SocketModeServer() as sockets:
        fake.set_socket_mode_url(sockets.new_url)
        yield fake, sockets


@pytest.fixture
def socket_app(
    tmp_path: Path, seeded_db_template: Path, stand_ins: tuple[FakeSlack, SocketModeServer]
) -> Iterator[SocketApp]:
    """Paperboy's handler (``make_handler``) connected through the stand-ins."""
    fake, sockets = stand_ins
    engine = seeded_engine(tmp_path / "paperboy.db", seeded_db_template)
    settings = Settings(
        db_path=engine.db_path,
        slack_bot_token=BOT_TOKEN,
        slack_app_token=APP_TOKEN,
        slack_api_url=fake.api_url,
    )
    executor = ThreadPoolExecutor(4, thread_name_prefix="socket-test-work")
    handler = make_handler(settings, engine, executor=executor)
    handler.connect()
    try:
        sockets.wait_connected()
        yield SocketApp(fake, sockets, engine, settings)
    finally:
        close(handler)
        executor.shutdown(wait=True)


# --- in process --------------------------------------------------------------------------------


def test_the_app_connects_with_the_url_apps_connections_open_gave_it(
    socket_app: SocketApp,
) -> None:
    (call,) = socket_app.fake.calls_to("apps.connections.open")
    (connection,) = socket_app.sockets.connections
    assert connection.ticket  # the single-use ticket from that URL
    assert socket_app.sockets.refused == 0


def test_a_lookup_is_acked_by_envelope_id_and_answered_through_its_response_url(
    socket_app: SocketApp,
) -> None:
    fake, sockets = socket_app.fake, socket_app.sockets
    envelope_id, url = sockets.slash(fake, "diffusion")
    assert sockets.ack(envelope_id) == {"envelope_id": envelope_id}
    reply = reply_to(fake, url)
    assert reply["response_type"] == "ephemeral"
    expected = [h.id for h in socket_app.engine.search("diffusion", limit=5).hits]
    assert expected and paper_ids(reply) == expected
    assert "diffusion" in blocks_text(reply).lower()


def test_button_clicks_go_through_the_socket(socket_app: SocketApp) -> None:
    fake, sockets, engine = socket_app.fake, socket_app.sockets, socket_app.engine
    _, url = sockets.slash(fake, "diffusion models")
    first = reply_to(fake, url)

    envelope_id, more_url = sockets.click(fake, "more", buttons(first)["more"]["value"])
    assert sockets.ack(envelope_id) == {"envelope_id": envelope_id}
    page = reply_to(fake, more_url)
    assert page["replace_original"] is True
    assert paper_ids(page) == [h.id for h in engine.search("diffusion models", 5, 5).hits]

    paper_id = paper_ids(first)[0]
    envelope_id, similar_url = sockets.click(fake, "similar:1", paper_id)
    sockets.ack(envelope_id)
    similar = reply_to(fake, similar_url)
    assert "Papers similar to" in blocks_text(similar)
    assert paper_ids(similar) == [h.id for h in engine.similar(paper_id, limit=5).hits]


def test_a_modal_submission_is_answered_in_its_ack(socket_app: SocketApp) -> None:
    """Over Socket Mode, a view_submission's answer (``response_action``) travels in the ack's
    ``payload``, where HTTP puts it in the response body."""
    fake, sockets, engine = socket_app.fake, socket_app.sockets, socket_app.engine
    paper_id = engine.search("diffusion").hits[0].id
    envelope_id, _ = sockets.click(fake, "share:1", paper_id, user="U7", channel="DU7")
    sockets.ack(envelope_id)
    fake.wait_for(lambda: fake.modals())
    modal = fake.modals()[-1]
    envelope_id = sockets.submit_view(modal, {render.SHARE_CHANNEL_BLOCK: "C42"}, user="U7")
    ack = sockets.ack(envelope_id)
    assert ack["envelope_id"] == envelope_id
    assert ack["payload"]["response_action"] == "update"
    assert "Shared in <#C42>" in blocks_text(ack["payload"]["view"])
    (message,) = fake.messages_in("C42")
    assert paper_ids(message) == [paper_id]


def test_events_arrive_as_events_api_envelopes(socket_app: SocketApp) -> None:
    fake, sockets = socket_app.fake, socket_app.sockets
    envelope_id = sockets.event({"type": "app_home_opened", "user": "U9", "tab": "home"})
    assert sockets.ack(envelope_id) == {"envelope_id": envelope_id}
    fake.wait_for(lambda: fake.home_view("U9"))


def test_a_disconnect_envelope_moves_the_app_to_a_fresh_url(socket_app: SocketApp) -> None:
    fake, sockets = socket_app.fake, socket_app.sockets
    sockets.disconnect()
    sockets.wait_connected(count=2)
    assert len(fake.calls_to("apps.connections.open")) == 2  # a new ticket, not the old URL
    assert sockets.refused == 0
    envelope_id, url = sockets.slash(fake, "transformers")
    sockets.ack(envelope_id)
    assert paper_ids(reply_to(fake, url))


def test_close_says_goodbye_with_a_close_frame(
    tmp_path: Path, seeded_db_template: Path, stand_ins: tuple[FakeSlack, SocketModeServer]
) -> None:
    fake, sockets = stand_ins
    engine = seeded_engine(tmp_path / "c.db", seeded_db_template)
    settings = Settings(
        db_path=engine.db_path,
        slack_bot_token=BOT_TOKEN,
        slack_app_token=APP_TOKEN,
        slack_api_url=fake.api_url,
    )
    handler = make_handler(settings, engine)
    handler.connect()
    sockets.wait_connected()
    close(handler)
    assert sockets.wait_for(lambda: sockets.close_codes) == [1000]
    assert not handler.client.is_connected()
    assert len(fake.calls_to("apps.connections.open")) == 1  # and it did not reconnect


# --- the Slack stand-in is as strict as Slack about tokens -----------------------------------


@pytest.mark.parametrize(
    ("token", "error"),
    [
        (BOT_TOKEN, "not_allowed_token_type"),  # a bot token cannot open a socket
        ("xoxp-1-user", "invalid_auth"),
        ("not-a-token", "invalid_auth"),
    ],
)
def test_apps_connections_open_wants_an_app_level_token(
    stand_ins: tuple[FakeSlack, SocketModeServer], token: str, error: str
) -> None:
    fake, _ = stand_ins
    with pytest.raises(SlackApiError) as refused:
        WebClient(base_url=fake.api_url).apps_connections_open(app_token=token)
    assert refused.value.response["error"] == error
    url = WebClient(base_url=fake.api_url).apps_connections_open(app_token=APP_TOKEN)["url"]
    assert url.startswith("ws://127.0.0.1:")


def test_an_app_level_token_opens_sockets_and_nothing_else(
    stand_ins: tuple[FakeSlack, SocketModeServer],
) -> None:
    fake, _ = stand_ins
    with pytest.raises(SlackApiError) as refused:
        WebClient(token=APP_TOKEN, base_url=fake.api_url).chat_postMessage(channel="C1", text="hi")
    assert refused.value.response["error"] == "not_allowed_token_type"


def test_an_app_without_socket_mode_is_refused() -> None:
    with FakeSlack() as fake, pytest.raises(SlackApiError) as refused:
        WebClient(base_url=fake.api_url).apps_connections_open(app_token=APP_TOKEN)
    assert refused.value.response["error"] == "access_denied"


# --- run_socket_mode and paperboy worker -------------------------------------------------------


def test_a_refused_app_token_is_one_sentence_and_exit_2(
    tmp_path: Path, seeded_db_template: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    engine = seeded_engine(tmp_path / "r.db", seeded_db_template)
    with FakeSlack() as fake:
        fake.fail_next("apps.connections.open", error="invalid_auth")
        settings = Settings(
            db_path=engine.db_path,
            slack_bot_token=BOT_TOKEN,
            slack_app_token=APP_TOKEN,
            slack_api_url=fake.api_url,
        )
        with pytest.raises(SystemExit) as exit_info:
            run_socket_mode(settings, engine)
    assert exit_info.value.code == 2
    message = capsys.readouterr().err.strip().splitlines()[-1]
    assert "SLACK_APP_TOKEN" in message and "invalid_auth" in message


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({"SLACK_BOT_TOKEN": BOT_TOKEN}, "SLACK_APP_TOKEN is missing"),
        ({"SLACK_APP_TOKEN": APP_TOKEN}, "SLACK_BOT_TOKEN is missing"),
        ({"SLACK_BOT_TOKEN": BOT_TOKEN, "SLACK_APP_TOKEN": "xoxb-2"}, "'xapp-'"),
    ],
)
def test_worker_refuses_missing_tokens_in_one_sentence(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, env: dict[str, str], expected: str
) -> None:
    for name in ("SLACK_BOT_TOKEN", "SLACK_APP_TOKEN", "SLACK_SIGNING_SECRET"):
        monkeypatch.delenv(name, raising=False)
    db = tmp_path / "none.db"
    result = CliRunner().invoke(main, ["--db", str(db), "worker"], env=env)
    assert result.exit_code == 2
    assert expected in result.output and len(result.output.strip().splitlines()) == 1
    assert not db.exists()  # refused before any database is touched


# --- a real process ----------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _listening_ports(pid: int) -> set[int]:
    """TCP ports the process listens on, from /proc (Linux): its sockets' inodes matched
    against the kernel's tables of sockets in state LISTEN (0A)."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:  # closed since the listing
            continue
        if target.startswith("socket:["):
            inodes.add(target[len("socket:[") : -1])
    ports = set()
    for table in ("tcp", "tcp6"):
        path = Path(f"/proc/{pid}/net/{table}")
        for line in path.read_text().splitlines()[1:] if path.exists() else []:
            fields = line.split()
            if fields[3] == "0A" and fields[9] in inodes:
                ports.add(int(fields[1].rsplit(":", 1)[1], 16))
    return ports


def _start(command: str, fake: FakeSlack, db: Path, **env: str) -> subprocess.Popen[str]:
    """``paperboy <command>`` in its own process, against the stand-ins."""
    environ = {
        **os.environ,
        "PAPERBOY_DB": str(db),
        "SLACK_BOT_TOKEN": BOT_TOKEN,
        "SLACK_APP_TOKEN": APP_TOKEN,
        "SLACK_API_URL": fake.api_url,
        **env,
    }
    environ.pop("SLACK_SIGNING_SECRET", None)
    code = f"from bot.cli import main; main([{command!r}], prog_name='paperboy')"
    return subprocess.Popen(
        [sys.executable, "-c", code], env=environ, stderr=subprocess.PIPE, text=True
    )


@pytest.mark.parametrize("command", ["worker", "serve"])
def test_a_socket_mode_process_binds_no_port_and_closes_its_socket_on_sigterm(
    tmp_path: Path,
    seeded_db_template: Path,
    stand_ins: tuple[FakeSlack, SocketModeServer],
    command: str,
) -> None:
    """The Procfile's ``worker:`` process: answers over the socket, never listens on $PORT
    (a platform would wait for it there), and on SIGTERM says goodbye and exits 0."""
    fake, sockets = stand_ins
    engine = seeded_engine(tmp_path / "w.db", seeded_db_template)
    port = _free_port()
    process = _start(command, fake, engine.db_path, PORT=str(port))
    try:
        sockets.wait_connected(timeout=30)
        envelope_id, url = sockets.slash(fake, "diffusion models")
        sockets.ack(envelope_id)
        first = reply_to(fake, url)
        expected = [h.id for h in engine.search("diffusion models", limit=5).hits]
        assert paper_ids(first) == expected
        envelope_id, more_url = sockets.click(fake, "more", buttons(first)["more"]["value"])
        sockets.ack(envelope_id)
        assert reply_to(fake, more_url)["replace_original"] is True

        if Path(f"/proc/{process.pid}/fd").is_dir():
            assert _listening_ports(process.pid) == set()
        with socket.socket() as probe:
            assert probe.connect_ex(("127.0.0.1", port)) != 0  # nothing on $PORT

        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=20) == 0
        assert sockets.wait_for(lambda: sockets.close_codes) == [1000]
        stderr = process.stderr.read() if process.stderr else ""
        assert "Traceback" not in stderr
    finally:
        process.kill()
        process.wait()


def test_an_app_token_revoked_while_running_ends_the_worker_with_one_sentence(
    tmp_path: Path, seeded_db_template: Path, stand_ins: tuple[FakeSlack, SocketModeServer]
) -> None:
    """slack_sdk alone would retry the refused reconnect forever: a worker that looks alive
    and answers nothing. Exit 1 instead, so the platform restarts it and alerts. (The worker
    starts on a fresh database, filled from the seed corpus, like ``serve``.)"""
    fake, sockets = stand_ins
    process = _start("worker", fake, tmp_path / "fresh.db")
    try:
        sockets.wait_connected(timeout=60)
        envelope_id, url = sockets.slash(fake, "diffusion")
        sockets.ack(envelope_id)
        assert paper_ids(reply_to(fake, url))  # answered from the seed corpus
        fake.fail_next("apps.connections.open", times=100, error="token_revoked")
        sockets.disconnect()  # Slack asks the app to reconnect; its token is revoked by now
        assert process.wait(timeout=20) == 1
        stderr = process.stderr.read() if process.stderr else ""
        assert "Traceback" not in stderr
        last = stderr.strip().splitlines()[-1]
        assert "SLACK_APP_TOKEN" in last and "token_revoked" in last
        assert sockets.wait_for(lambda: sockets.close_codes) == [1000]
    finally:
        process.kill()
        process.wait()


def test_the_worker_starts_as_serve_does(
    read_only: tuple[Path, Any],  # noqa: F811 - the fixture imported above
    stand_ins: tuple[FakeSlack, SocketModeServer],
) -> None:
    """``paperboy worker`` is ``serve`` held to Socket Mode: Slack's 500 at start is retried,
    a database this user may only read still answers lookups, ``--with-scheduler`` is
    accepted, and with JSON logs every line it writes is JSON."""
    folder, lock = read_only
    lock()
    fake, sockets = stand_ins
    fake.fail_next("auth.test", status=500)
    prefix = DROP_WRITE if os.geteuid() == 0 else []
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("PAPERBOY_", "SLACK_"))}
    environ.update(
        PAPERBOY_DB=str(folder / "ro.db"),
        PAPERBOY_LOG_FORMAT="json",
        SLACK_BOT_TOKEN=BOT_TOKEN,
        SLACK_APP_TOKEN=APP_TOKEN,
        SLACK_API_URL=fake.api_url,
    )
    process = subprocess.Popen(
        [*prefix, sys.executable, "-m", "bot.cli", "worker", "--with-scheduler"],
        env=environ,
        cwd=folder,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        sockets.wait_connected(timeout=60)
        envelope_id, url = sockets.slash(fake, "diffusion")
        sockets.ack(envelope_id)
        assert paper_ids(reply_to(fake, url))
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=20) == 0
    finally:
        process.kill()
        process.wait()
    stderr = process.stderr.read() if process.stderr else ""
    at_start = [call for call in fake.calls_to("auth.test") if not call.params]
    assert len(at_start) == 2  # one 500, then retried (later ones: Bolt's, per team)
    lines = [json.loads(line) for line in stderr.splitlines() if line.strip()]
    messages = [line["message"] for line in lines]
    assert any("connecting to Slack over Socket Mode" in m for m in messages), messages

"""The web process as a platform runs it: ``paperboy serve`` binds ``$PORT`` before warming up,
checks Slack at start with retries, refuses junk before parsing it, survives slow clients and
reports its health. Subprocess tests run ``python -m bot.cli serve`` against the local Slack
stand-in; the rest drive the app over HTTP through the test harness."""

from __future__ import annotations

import json
import os
import queue
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, closing, contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest
from slack_sdk.http_retry import FixedValueRetryIntervalCalculator

from bot.engine.index import build_lock, index_dir_for
from bot.engine.search import Engine
from bot.playground.fake_slack import TEAM_ID
from bot.settings import Settings
from bot.slack import render, server
from bot.slack.render.digest import DIGEST_EVENT
from digest.clock import write_heartbeat
from digest.subscriptions import Subscriptions
from tests.fake_slack import FakeSlack
from tests.slack_harness import (
    BOT_TOKEN,
    SIGNING_SECRET,
    SlackHarness,
    buttons,
    free_port,
    http,
    seeded_engine,
    sign,
    signed_headers,
    slash_form,
)
from tests.socket_mode_server import SocketModeServer
from tests.test_cli import DROP_WRITE, read_only  # noqa: F401 - a fixture

ROOT = Path(__file__).resolve().parent.parent


# --- helpers ------------------------------------------------------------------------------------


def copy_db_without_index(template: Path, target: Path) -> None:
    """The seeded papers but no index: the server has to build it while warming up."""
    with closing(sqlite3.connect(template)) as source, closing(sqlite3.connect(target)) as copy:
        source.backup(copy)


class Serve:
    """``python -m bot.cli serve`` in a subprocess; its stderr lines arrive on ``lines``."""

    def __init__(self, env: dict[str, str], *args: str, prefix: list[str] | None = None):
        self.process = subprocess.Popen(
            [*(prefix or []), sys.executable, "-m", "bot.cli", "serve", *args],
            env=env,
            cwd=ROOT,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.lines: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.lines.put(line)

    def wait_for_line(self, text: str, timeout: float = 30) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                line = self.lines.get(timeout=0.1)
            except queue.Empty:
                if self.process.poll() is not None and self.lines.empty():
                    break
                continue
            self.seen.append(line)
            if text in line:
                return line
        raise AssertionError(f"no {text!r} from serve; it said: {''.join(self.seen)}")

    def stop(self) -> int:
        self.process.send_signal(signal.SIGTERM)
        return self.exit_code()

    def exit_code(self, timeout: float = 120) -> int:
        """Wait for the process to end; then ``seen`` holds everything it said. The guard is
        the one the playground's port test uses: a process that fails at start still
        imports the whole app first (7-10 s at a load average of 10 on this 2-core box, more
        under CI's), and 20 s was exceeded in a loaded full run."""
        code = self.process.wait(timeout=timeout)
        self._reader.join(timeout=10)
        while not self.lines.empty():
            self.seen.append(self.lines.get())
        return code


@contextmanager
def serve(env: dict[str, str], *args: str, prefix: list[str] | None = None) -> Iterator[Serve]:
    running = Serve(env, *args, prefix=prefix)
    try:
        yield running
    finally:
        if running.process.poll() is None:
            running.process.kill()
        running.process.wait()


def wait_until_healthy(url: str, timeout: float = 60) -> dict[str, Any]:
    """Poll /healthz (another process: nothing to wait on but its answers)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status, body = http(url + "/healthz")
        if status == 200:
            return json.loads(body)
        time.sleep(0.05)
    raise AssertionError(f"/healthz still says {status} {body}")


def serve_env(tmp_path: Path, fake: FakeSlack, db: Path, port: int) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLACK_", "PAPERBOY_", "PORT"))}
    env.update(
        PAPERBOY_DB=str(db),
        PORT=str(port),
        HOST="127.0.0.1",
        SLACK_BOT_TOKEN=BOT_TOKEN,
        SLACK_SIGNING_SECRET=SIGNING_SECRET,
        SLACK_API_URL=fake.api_url,
        PAPERBOY_SEED_DIR=str(tmp_path / "no-seeds"),
    )
    return env


def http_settings(db: Path, fake: FakeSlack) -> Settings:
    """What ``serve_env`` sets, for ``server.run`` in this process (on a free port)."""
    return Settings(
        db_path=db,
        port=0,
        host="127.0.0.1",
        slack_bot_token=BOT_TOKEN,
        slack_signing_secret=SIGNING_SECRET,
        slack_api_url=fake.api_url,
    )


# --- warming up behind a bound port -------------------------------------------------------------


def test_port_answers_and_commands_are_told_to_wait_while_the_index_builds(
    tmp_path: Path, seeded_db_template: Path
) -> None:
    db = tmp_path / "web.db"
    copy_db_without_index(seeded_db_template, db)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with FakeSlack() as fake, serve(serve_env(tmp_path, fake, db, port)) as web:
        # Another builder holds the index lock: the server cannot get past its warm-up.
        with build_lock(index_dir_for(db)):
            web.wait_for_line("listening on")
            status, body = http(url + "/healthz")
            assert (status, json.loads(body)) == (503, {"status": "warming up"})
            status, body = http(url + "/readyz")
            assert (status, json.loads(body)) == (503, {"status": "warming up"})
            form, response_url = slash_form(fake, "diffusion")
            status, body = http(url + "/slack/events", form, signed_headers(form))
            assert status == 200
            assert json.loads(body) == {"response_type": "ephemeral", "text": server.WARMING_UP}
            status, _ = http(url + "/slack/events", form, signed_headers(form, "wrong"))
            assert status == 401  # the signature is checked while warming up too
        report = wait_until_healthy(url)
        assert report["status"] == "ok" and report["papers"] == 38
        form, response_url = slash_form(fake, "diffusion")
        status, body = http(url + "/slack/events", form, signed_headers(form))
        assert (status, body) == (200, "")
        token = response_url.rsplit("/", 1)[-1]
        (reply,) = fake.wait_for(lambda: [r for r in fake.responses if r.token == token])
        assert "papers match" in json.dumps(reply.payload)
        assert web.stop() == 0
    assert "Traceback" not in "".join(web.seen)


# --- Slack down at start --------------------------------------------------------------------------


def test_one_server_error_from_slack_at_start_is_retried(
    tmp_path: Path, seeded_db_template: Path
) -> None:
    db = tmp_path / "web.db"
    copy_db_without_index(seeded_db_template, db)
    shutil.copytree(Path(f"{seeded_db_template}.index"), index_dir_for(db))
    port = free_port()
    with ExitStack() as stack, FakeSlack() as fake:
        fake.fail_next("auth.test", status=500)
        web = stack.enter_context(serve(serve_env(tmp_path, fake, db, port)))
        web.wait_for_line("listening on")
        wait_until_healthy(f"http://127.0.0.1:{port}")
        assert len(fake.calls_to("auth.test")) == 2
        assert web.stop() == 0


@pytest.fixture
def quick_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(server, "STARTUP_INTERVAL", FixedValueRetryIntervalCalculator(0.01))


@pytest.mark.parametrize("failure", ["status", "disconnect"])
def test_slack_unreachable_at_start_names_slack_not_the_token(
    tmp_path: Path,
    seeded_db_template: Path,
    quick_retries: None,
    failure: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    db = tmp_path / "web.db"
    copy_db_without_index(seeded_db_template, db)
    with FakeSlack() as fake:
        if failure == "status":
            fake.fail_next("auth.test", times=100, status=502)
        else:
            fake.disconnect_next("auth.test", times=100)
        settings = http_settings(db, fake)
        with pytest.raises(SystemExit) as exit_info:
            server.run(settings)
        assert len(fake.calls_to("auth.test")) == server.STARTUP_RETRIES + 1
        api_url = fake.api_url
    assert exit_info.value.code == 1
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith(f"paperboy serve: Could not reach Slack at {api_url}")
    assert "TOKEN" not in err


@pytest.mark.parametrize("error", ["invalid_auth", "token_revoked", "not_authed"])
def test_a_refused_token_at_start_is_blamed_at_once(
    tmp_path: Path, quick_retries: None, error: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with FakeSlack() as fake:
        fake.fail_next("auth.test", error=error)
        settings = http_settings(tmp_path / "never.db", fake)
        with pytest.raises(SystemExit) as exit_info:
            server.run(settings)
        assert len(fake.calls_to("auth.test")) == 1
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert "SLACK_BOT_TOKEN" in err and error in err and "Traceback" not in err
    assert not (tmp_path / "never.db").exists()  # refused before the database was touched


# --- junk before authentication -----------------------------------------------------------------


JUNK = {
    "malformed payload": (b"payload=%7Bnot+json", {}),
    "a JSON body sent as a form": (b'{"type": "block_actions"', {}),
    "non-UTF-8 bytes": (b"command=%2Fpapers&text=\xff\xfe\xfa", {}),
    "a timestamp that is not a number": (
        b"command=%2Fpapers&text=x",
        {"X-Slack-Request-Timestamp": "abc", "X-Slack-Signature": "v0=abc"},
    ),
    "no signature at all": (b"command=%2Fpapers&text=x", {"X-Slack-Request-Timestamp": "1"}),
}


@pytest.mark.parametrize("case", list(JUNK))
def test_unsigned_junk_is_refused_before_it_is_parsed(
    slack: SlackHarness, case: str, caplog: pytest.LogCaptureFixture
) -> None:
    body, extra = JUNK[case]
    headers = {
        "Content-Type": "application/x-www-form-urlencoded",
        "X-Slack-Request-Timestamp": str(int(time.time())),
        "X-Slack-Signature": "v0=" + "0" * 64,
        **extra,
    }
    status, _ = slack.request("/slack/events", body, headers)
    assert status == 401
    assert not [r for r in caplog.records if r.exc_info or r.levelname in ("ERROR", "CRITICAL")]
    # And the same junk, properly signed except for its encoding, still costs no traceback.
    if case == "non-UTF-8 bytes":
        headers["X-Slack-Signature"] = sign(
            SIGNING_SECRET, headers["X-Slack-Request-Timestamp"], body
        )
        assert slack.request("/slack/events", body, headers)[0] == 401
        assert not [r for r in caplog.records if r.exc_info]


def test_oversized_bodies_are_refused_unread(slack: SlackHarness) -> None:
    with socket.create_connection(("127.0.0.1", slack.server.port), timeout=10) as connection:
        connection.sendall(
            b"POST /slack/events HTTP/1.1\r\nHost: x\r\n"
            + f"Content-Length: {server.MAX_BODY + 1}\r\n\r\n".encode()
        )
        status_line = connection.makefile("rb").readline()
    assert status_line.split()[1] == b"413"


# --- slow clients -------------------------------------------------------------------------------


def test_half_open_connections_do_not_stop_slash_commands_being_acknowledged(
    slack: SlackHarness,
) -> None:
    host, port = "127.0.0.1", slack.server.port
    stalled: list[socket.socket] = []
    try:
        for _ in range(150):  # waitress's default connection_limit was 100
            connection = socket.create_connection((host, port), timeout=5)
            connection.sendall(b"POST /slack/events HTTP/1.1\r\nHost: x\r\nContent-Length: 50\r\n")
            stalled.append(connection)
        status, response_url = slack.slash("diffusion")
        assert status == 200
        assert "papers match" in json.dumps(slack.reply(response_url))
    finally:
        for connection in stalled:
            connection.close()


def test_server_sizing_comes_from_settings() -> None:
    settings = Settings.from_env(
        {
            "PAPERBOY_HTTP_THREADS": "4",
            "PAPERBOY_HTTP_CONNECTIONS": "250",
            "PAPERBOY_HTTP_TIMEOUT": "12",
        }
    )
    options = server.server_options(settings)
    assert options["threads"] == 4
    assert options["connection_limit"] == 250
    assert options["channel_timeout"] == 12
    defaults = server.server_options(Settings())
    assert defaults["connection_limit"] >= 1000 and defaults["asyncore_use_poll"]


# --- health -----------------------------------------------------------------------------------


@pytest.mark.parametrize("damage", ["removed", "corrupted"])
def test_health_is_503_when_the_database_fails(
    slack: SlackHarness, damage: str, caplog: pytest.LogCaptureFixture
) -> None:
    assert http(slack.url + "/healthz")[0] == 200
    db = slack.engine.db_path
    if damage == "removed":
        for path in (db, Path(f"{db}-wal"), Path(f"{db}-shm")):
            path.unlink(missing_ok=True)
    else:
        with open(db, "r+b") as handle:
            handle.write(b"this is not a database" * 10)
    status, body = http(slack.url + "/healthz")
    assert status == 503
    report = json.loads(body)
    assert report["status"] == "unhealthy" and report["database"]
    status, body = http(slack.url + "/readyz")  # this process cannot serve either
    assert status == 503 and json.loads(body)["database"] == report["database"]
    assert db.exists() == (damage == "corrupted")  # the check never creates a database
    assert not [r for r in caplog.records if r.exc_info]  # one line, no traceback


def test_health_is_503_when_the_digest_clock_stops_ticking(slack: SlackHarness) -> None:
    def health() -> tuple[int, dict[str, Any]]:
        status, body = http(slack.url + "/healthz")
        return status, json.loads(body)

    status, report = health()
    assert status == 200 and report["scheduler"]["digests_on"] is False  # no clock needed yet
    status, response_url = slack.slash("subscribe diffusion models")
    slack.reply(response_url)
    status, report = health()  # a digest is on and no clock has ever ticked
    assert status == 503 and report["status"] == "unhealthy"
    assert report["scheduler"] == {"last_tick": None, "digests_on": True, "stale": True}
    # The web process itself is fine: a platform's check that restarts it looks at /readyz.
    assert http(slack.url + "/readyz") == (200, '{"status": "ready"}')
    now = datetime.now(UTC).replace(microsecond=0)
    write_heartbeat(slack.engine.db, now, 60)  # what the clock writes every tick
    status, report = health()
    assert status == 200 and report["scheduler"]["stale"] is False
    assert datetime.fromisoformat(report["scheduler"]["last_tick"]) == now
    write_heartbeat(slack.engine.db, now - timedelta(seconds=3 * 60 + 5), 60)
    status, report = health()
    assert status == 503 and report["scheduler"]["stale"] is True


# --- one box: serve --with-scheduler ---------------------------------------------------------------


def due_member(db: Path, user: str = "U1") -> None:
    """A member with a topic whose digest is due now (joined an hour ago, time = now)."""
    engine = Engine.open(db)
    now = datetime.now(UTC)
    subscriptions = Subscriptions(engine.db)
    subscriptions.add_topic(user, "diffusion models", now)
    subscriptions.set_tz(user, "UTC", now)
    subscriptions.set_days(user, "daily", now)
    subscriptions.set_time(user, f"{now:%H:%M}", now)
    joined = (now - timedelta(hours=1)).isoformat(timespec="seconds")
    engine.db.execute("update members set created_at = ?", [joined])
    engine.db.conn.commit()


def test_serve_with_scheduler_sends_digests_from_the_web_process(
    tmp_path: Path, seeded_db_template: Path
) -> None:
    db = tmp_path / "box.db"
    copy_db_without_index(seeded_db_template, db)
    due_member(db)
    port = free_port()
    with FakeSlack() as fake, serve(serve_env(tmp_path, fake, db, port), "--with-scheduler") as web:
        fake.set_user("U1", tz="UTC")
        web.wait_for_line("listening on")
        (digest,) = fake.wait_for(lambda: fake.messages_in("DU1"), timeout=30)
        assert digest["metadata"]["event_type"] == DIGEST_EVENT
        report = wait_until_healthy(f"http://127.0.0.1:{port}")
        assert report["scheduler"]["digests_on"] and report["scheduler"]["last_tick"]
        assert web.stop() == 0


@pytest.mark.parametrize("transport", ["http", "socket-mode"])
def test_a_token_revoked_while_serving_with_the_scheduler_ends_the_process(
    tmp_path: Path, seeded_db_template: Path, transport: str
) -> None:
    """One box (``serve --with-scheduler``), over HTTP or Socket Mode: the clock dying for a
    revoked token ends the process (exit 1, said once) instead of leaving a web or worker
    process that answers lookups but sends no digests."""
    db = tmp_path / "box.db"
    copy_db_without_index(seeded_db_template, db)
    due_member(db)
    with FakeSlack() as fake, SocketModeServer() as sockets:
        fake.set_user("U1", tz="UTC")
        fake.fail_next("chat.postMessage", error="token_revoked", times=10)
        env = serve_env(tmp_path, fake, db, free_port())
        if transport == "socket-mode":
            fake.set_socket_mode_url(sockets.new_url)
            env.pop("SLACK_SIGNING_SECRET")
            env["SLACK_APP_TOKEN"] = "xapp-1-A0PAPERBOY-1-0123456789abcdef"
        with serve(env, "--with-scheduler") as web:
            assert web.exit_code(timeout=60) == 1
    last = [line for line in web.seen if line.strip()][-1]
    assert last.startswith("paperboy serve: Slack refused the bot token (token_revoked)")
    assert "Traceback" not in "".join(web.seen)
    assert "".join(web.seen).count("Slack refused the bot token") == 1  # said once


# --- JSON logs --------------------------------------------------------------------------------


def test_json_logs_are_one_object_per_line_with_each_requests_fields(
    tmp_path: Path, seeded_db_template: Path
) -> None:
    db = tmp_path / "web.db"
    copy_db_without_index(seeded_db_template, db)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with FakeSlack() as fake:
        env = {**serve_env(tmp_path, fake, db, port), "PAPERBOY_LOG_FORMAT": "json"}
        with serve(env) as web:
            web.wait_for_line("listening on")
            wait_until_healthy(url)
            form, response_url = slash_form(fake, "secret diffusion plans")
            assert http(url + "/slack/events", form, signed_headers(form))[0] == 200
            token = response_url.rsplit("/", 1)[-1]
            fake.wait_for(lambda: [r for r in fake.responses if r.token == token])
            assert http(url + "/slack/events", b"junk", {"X-Slack-Signature": "v0=1"})[0] == 401
            assert web.stop() == 0
    lines = [line for line in web.seen if line.strip()]
    records = [json.loads(line) for line in lines]  # every line is one JSON object
    assert all({"time", "level", "logger", "message"} <= set(r) for r in records)
    (request,) = [r for r in records if r["logger"] == "paperboy.requests"]
    assert request["command"] == "/papers"
    assert request["team"] == TEAM_ID and request["user"] == "U1"
    assert isinstance(request["latency_ms"], int | float) and request["latency_ms"] >= 0
    assert "secret" not in json.dumps(request)  # what was typed stays private
    assert any("refused a request" in r["message"] for r in records)


def test_each_click_is_logged_with_its_action_id(
    slack: SlackHarness, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level("INFO", logger="paperboy.requests")
    status, response_url = slack.slash("diffusion", user="U7")
    reply = slack.reply(response_url)
    similar = buttons(reply)["similar:1"]
    _, similar_url = slack.click("similar:1", similar["value"], user="U7")
    slack.reply(similar_url)  # sent after the click's line is logged (Bolt may answer before)
    records = [r for r in caplog.records if r.name == "paperboy.requests"]
    fields = [(getattr(r, "command", None), getattr(r, "action_id", None)) for r in records]
    assert fields == [("/papers", None), (None, "similar:1")]
    assert all(r.user == "U7" and r.team == TEAM_ID and r.latency_ms >= 0 for r in records)


def test_while_warming_up_modals_and_url_checks_are_answered_too(tmp_path: Path) -> None:
    """A modal submitted during warm-up shows the sentence under its first input (Slack would
    otherwise close it and lose what was typed); Slack's URL check is answered at once."""
    settings = Settings(
        db_path=tmp_path / "never.db",
        slack_bot_token=BOT_TOKEN,
        slack_signing_secret=SIGNING_SECRET,
    )
    web = server.WebApp(settings)  # never made ready: the engine is still "loading"
    with server.HttpServer(web) as running:
        view = {
            "id": "V1",
            "callback_id": "share",
            "blocks": [
                {"type": "section", "text": {"type": "mrkdwn", "text": "Share"}},
                {"type": "input", "block_id": "share_channel", "element": {"type": "x"}},
            ],
        }
        body = urlencode(
            {"payload": json.dumps({"type": "view_submission", "view": view})}
        ).encode()
        status, answer = http(running.url + "/slack/events", body, signed_headers(body))
        assert status == 200
        assert json.loads(answer) == {
            "response_action": "errors",
            "errors": {"share_channel": server.WARMING_UP},
        }
        click = urlencode({"payload": json.dumps({"type": "block_actions"})}).encode()
        assert http(running.url + "/slack/events", click, signed_headers(click)) == (200, "")
        check = json.dumps({"type": "url_verification", "challenge": "c-123"}).encode()
        headers = {**signed_headers(check), "Content-Type": "application/json"}
        status, answer = http(running.url + "/slack/events", check, headers)
        assert (status, json.loads(answer)) == (200, {"challenge": "c-123"})
        status, answer = http(running.url + "/healthz")
        assert (status, json.loads(answer)) == (503, {"status": "warming up"})
    assert not (tmp_path / "never.db").exists()


def test_socket_mode_requests_are_logged_like_http_ones(
    tmp_path: Path, seeded_db_template: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from bot.slack.socket_mode import close, make_handler

    caplog.set_level("INFO", logger="paperboy.requests")
    engine = seeded_engine(tmp_path / "socket.db", seeded_db_template)
    with FakeSlack() as fake, SocketModeServer() as sockets:
        fake.set_socket_mode_url(sockets.new_url)
        settings = Settings(
            db_path=engine.db_path,
            slack_bot_token=BOT_TOKEN,
            slack_app_token="xapp-1-A0PAPERBOY-1-0123456789abcdef",
            slack_api_url=fake.api_url,
        )
        handler = make_handler(settings, engine)
        handler.connect()
        try:
            sockets.wait_connected()
            envelope_id, _ = sockets.slash(fake, "diffusion", user="U9")
            assert sockets.ack(envelope_id) == {"envelope_id": envelope_id}
        finally:
            close(handler)
    (record,) = [r for r in caplog.records if r.name == "paperboy.requests"]
    assert (record.command, record.user, record.team) == ("/papers", "U9", TEAM_ID)
    assert record.latency_ms >= 0


def test_health_says_read_only_for_a_database_in_a_read_only_folder(
    tmp_path: Path,
    read_only: tuple[Path, Any],  # noqa: F811 - the fixture imported above
) -> None:
    """A WAL database whose folder this user may not write has no ``-shm`` file and cannot
    get one: /healthz still reads it (lookups do too) and says ``read-only``, with 200."""
    folder, lock = read_only
    before = lock()
    port = free_port()
    prefix = DROP_WRITE if os.geteuid() == 0 else []  # root: held to the file modes
    with (
        FakeSlack() as fake,
        serve(serve_env(tmp_path, fake, folder / "ro.db", port), prefix=prefix) as web,
    ):
        web.wait_for_line("listening on")
        web.wait_for_line("is ready")
        status, body = http(f"http://127.0.0.1:{port}/healthz")
        assert web.stop() == 0
    report = json.loads(body)
    assert (status, report["status"]) == (200, "read-only"), report
    assert report["database"] == "ok" and report["writable"] is False
    assert report["papers"] > 0
    assert {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()} == before


def test_a_read_only_database_answers_reads_and_says_why_writes_cannot_be_saved(
    tmp_path: Path,
    read_only: tuple[Path, Any],  # noqa: F811 - the fixture imported above
) -> None:
    """Reads (topics, digest preview, help, lookups) answer as usual without writing; every
    write says in one sentence that nothing can be saved, never "something went wrong"."""
    folder, lock = read_only
    engine = Engine.open(folder / "ro.db")
    Subscriptions(engine.db).add_topic("U1", "diffusion models", datetime.now(UTC))
    engine.db.close()
    del engine
    before = lock()
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    prefix = DROP_WRITE if os.geteuid() == 0 else []  # root: held to the file modes
    reads = {
        "topics": "diffusion models",
        "digest preview": "Preview",
        "help": "/papers",
        "diffusion": "papers match",
        "digest": "Your digest",
    }
    writes = ["subscribe graph neural networks", "unsubscribe 1", "digest on", "digest off"]
    writes += ["digest time 08:30", "digest days mon", "digest channel dm", "digest now"]
    answers: dict[str, dict[str, Any]] = {}
    with (
        FakeSlack() as fake,
        serve(serve_env(tmp_path, fake, folder / "ro.db", port), prefix=prefix) as web,
    ):
        web.wait_for_line("is ready")
        for text in [*reads, *writes]:
            form, response_url = slash_form(fake, text)
            status, body = http(url + "/slack/events", form, signed_headers(form))
            assert (status, body) == (200, ""), text
            token = response_url.rsplit("/", 1)[-1]
            (reply,) = fake.wait_for(lambda t=token: [r for r in fake.responses if r.token == t])
            answers[text] = reply.payload
        assert web.stop() == 0
    for text, expected in reads.items():
        assert expected in json.dumps(answers[text]), (text, answers[text])
        assert "went wrong" not in json.dumps(answers[text]), text
    for text in writes:
        assert answers[text]["text"] == render.READ_ONLY, (text, answers[text])
    assert not fake.calls_to("chat.postMessage")  # digest now sent nothing
    assert "Traceback" not in "".join(web.seen)
    assert {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()} == before


# --- the port -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "host, code, sentence",
    [
        ("127.0.0.1", 1, "is already in use"),  # the port is taken (see below)
        ("999.1.1.1", 2, "HOST '999.1.1.1' is not an address this machine can listen on"),
        ("192.0.2.1", 2, "HOST '192.0.2.1' is not an address this machine can listen on"),
    ],
)
def test_a_port_in_use_or_a_bad_host_is_one_sentence(
    tmp_path: Path, host: str, code: int, sentence: str
) -> None:
    with socket.socket() as taken, FakeSlack() as fake:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        env = serve_env(tmp_path, fake, tmp_path / "never.db", port) | {"HOST": host}
        with serve(env) as web:
            assert web.exit_code() == code
        assert fake.calls_to("auth.test") == []  # nothing else was tried
    said = [line for line in web.seen if line.strip()]
    assert len(said) == 1 and said[0].startswith("paperboy serve: ") and sentence in said[0]
    assert not (tmp_path / "never.db").exists()


def test_the_banner_says_what_is_bound(tmp_path: Path) -> None:
    port = free_port()
    with FakeSlack() as fake:
        env = serve_env(tmp_path, fake, tmp_path / "b.db", port) | {"HOST": "0.0.0.0"}
        with serve(env) as web:
            line = web.wait_for_line("listening on")
            assert web.stop() == 0
    assert f"port {port} on every interface (0.0.0.0; http://127.0.0.1:{port} here)" in line


@pytest.mark.parametrize(
    "host, code, sentence",
    [
        ("127.0.0.1", 1, "is already in use"),
        ("not a host", 2, "HOST 'not a host' is not an address this machine can listen on"),
    ],
)
def test_the_playground_checks_its_port_before_it_creates_a_database(
    tmp_path: Path, host: str, code: int, sentence: str
) -> None:
    """No Slack credentials: the playground opens (and would create) the database before it
    listens, so the port and HOST are checked first and a failed start leaves no file behind."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLACK_", "PAPERBOY_", "PORT"))}
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        env |= {"PORT": str(taken.getsockname()[1]), "HOST": host}
        done = subprocess.run(
            [sys.executable, "-m", "bot.cli", "serve"],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert done.returncode == code, done.stderr
    said = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(said) == 1 and said[0].startswith("paperboy serve: ") and sentence in said[0]
    assert list(tmp_path.iterdir()) == []


def test_json_logs_cover_the_playground_and_the_scheduler_start_lines(
    tmp_path: Path, seeded_db_template: Path
) -> None:
    """Their start lines were printed as text among the JSON lines (found in a trial): with
    ``PAPERBOY_LOG_FORMAT=json`` every line either process says parses."""
    db = tmp_path / "j.db"
    copy_db_without_index(seeded_db_template, db)
    with FakeSlack() as fake:
        env = {**serve_env(tmp_path, fake, db, free_port()), "PAPERBOY_LOG_FORMAT": "json"}
        clock = subprocess.Popen(
            [sys.executable, "-m", "bot.cli", "scheduler"],
            env=env,
            cwd=ROOT,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            assert clock.stderr is not None
            first = clock.stderr.readline()  # its start line, once the engine is open
        finally:
            clock.send_signal(signal.SIGTERM)
            _, rest = clock.communicate(timeout=60)
        playground_env = {k: v for k, v in env.items() if not k.startswith("SLACK_")}
        with serve(playground_env) as playground:
            playground.wait_for_line("local playground")
            assert playground.stop() == 0
    start = json.loads(first)
    assert start["message"].startswith("paperboy scheduler: ") and start["level"] == "INFO"
    for line in [*rest.splitlines(), *playground.seen]:
        if line.strip():
            json.loads(line)  # every line one JSON object
    said = [json.loads(line)["message"] for line in playground.seen if line.strip()]
    assert any(m.startswith("No Slack credentials set") for m in said)

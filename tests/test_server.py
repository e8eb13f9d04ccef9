"""``paperboy serve``: the HTTP app, its health check, the three modes and the playground's
own endpoints (the browser test drives the page itself)."""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest

from bot.playground.playground import USER_ID, Playground, signature, slack_escape
from bot.playground.playground import run as run_playground
from bot.settings import Settings
from bot.slack import server
from bot.slack.app import build_app
from bot.slack.client import is_local_api, make_client
from bot.slack.render.digest import DIGEST_EVENT
from digest import schedule
from digest.schedule import TICK_JOB
from digest.subscriptions import Subscriptions
from tests.fake_slack import FakeSlack
from tests.slack_harness import SlackHarness, blocks_text, seeded_engine, sign
from tests.slack_harness import http as get


def post_json(url: str, data: Any, content_type: str = "application/json") -> tuple[int, Any]:
    request = urllib.request.Request(
        url, data=json.dumps(data).encode(), headers={"Content-Type": content_type}
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def test_health_check_reports_the_corpus(slack: SlackHarness) -> None:
    status, body = get(slack.url + "/healthz")
    assert status == 200
    report = json.loads(body)
    version = slack.engine.corpus.version
    assert report == {
        "status": "ok",
        "database": "ok",
        "writable": True,
        "papers": 38,
        "corpus_version": version,
        "scheduler": {"last_tick": None, "digests_on": False, "stale": False},
    }


def test_unknown_paths_are_404(slack: SlackHarness) -> None:
    assert get(slack.url + "/nope")[0] == 404
    assert get(slack.url + "/slack/events")[0] == 405  # Slack only ever POSTs


def test_signature_helpers_agree_with_slacks_documented_example() -> None:
    # From Slack's "Verifying requests from Slack" guide.
    body = (
        b"token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&"
        b"channel_id=G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&"
        b"command=%2Fwebhook-collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands"
        b"%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&trigger_id=398738663015.47445629121"
        b".803a0bc887a14d10d2c447fce8b6703c"
    )
    expected = "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503"
    secret = "8f742231b10e8888abcd99yyyzzz85a5"
    assert sign(secret, "1531420618", body) == expected
    assert signature(secret, "1531420618", body) == expected


def test_client_waits_out_rate_limits_and_retries_dropped_connections() -> None:
    from slack_sdk.http_retry import ConnectionErrorRetryHandler, RateLimitErrorRetryHandler

    client = make_client(Settings(slack_bot_token="xoxb-1"))
    kinds = [type(h) for h in client.retry_handlers]
    assert kinds.count(ConnectionErrorRetryHandler) == 1
    assert RateLimitErrorRetryHandler in kinds
    assert client.base_url == "https://slack.com/api/"
    assert is_local_api("http://127.0.0.1:1234/api/") and not is_local_api("https://slack.com/api/")


# --- paperboy serve's modes -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("settings", "missing"),
    [
        (Settings(slack_bot_token="xoxb-1"), "SLACK_SIGNING_SECRET"),
        (Settings(slack_signing_secret="s"), "SLACK_BOT_TOKEN"),
        (Settings(slack_bot_token="not-a-token", slack_signing_secret="s"), "xoxb-"),
    ],
)
def test_half_configured_slack_is_one_sentence_and_exit_2(
    settings: Settings, missing: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        server.run(settings)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip()
    assert missing in err and "Traceback" not in err and len(err.splitlines()) == 1


def test_http_mode_serves_bolt_behind_waitress(
    tmp_path: Path, seeded_db_template: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``paperboy serve``'s own server answers a signed slash command (and the health check)."""
    seen: dict[str, Any] = {}

    def serve_once(self: server.HttpServer) -> None:  # instead of waiting for a signal
        seen["health"] = get(self.url + "/healthz")
        harness.url = self.url  # Slack's requests now go to the server run() started
        status, response_url = harness.slash("diffusion models")
        seen["slash"] = status, harness.reply(response_url)

    monkeypatch.setattr(server.HttpServer, "wait", serve_once)
    with SlackHarness(tmp_path, template_db=seeded_db_template) as harness:
        settings = harness.with_settings(db_path=tmp_path / "serve.db", port=0)
        seeded_engine(settings.db_path, seeded_db_template)
        server.run(settings)
    assert seen["health"][0] == 200
    status, reply = seen["slash"]
    assert status == 200 and "diffusion" in blocks_text(reply).lower()


def test_socket_mode_is_used_with_an_app_token(
    tmp_path: Path, seeded_db_template: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from slack_bolt.adapter.socket_mode import SocketModeHandler

    started: list[SocketModeHandler] = []
    monkeypatch.setattr(SocketModeHandler, "start", lambda self: started.append(self))
    seeded_engine(tmp_path / "s.db", seeded_db_template)
    with FakeSlack() as fake:
        settings = Settings(
            db_path=tmp_path / "s.db",
            slack_bot_token="xoxb-1",
            slack_app_token="xapp-1",
            slack_api_url=fake.api_url,
        )
        server.run(settings)
    (handler,) = started
    assert handler.app_token == "xapp-1"


def test_no_credentials_starts_the_playground(
    tmp_path: Path, seeded_db_template: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    seen: dict[str, Any] = {}

    def serve_once(self: Playground) -> None:
        self.server.start()
        seen["host"] = self.server.host
        seen["page"] = get(self.url)
        seen["health"] = get(self.url + "healthz")
        self.server.stop()

    monkeypatch.setattr(Playground, "serve_forever", serve_once)
    seeded_engine(tmp_path / "p.db", seeded_db_template)
    server.run(Settings(db_path=tmp_path / "p.db", port=0), playground=run_playground)
    assert seen["host"] == "127.0.0.1"  # loopback by default: the playground has no login
    assert seen["page"][0] == 200 and "Local playground" in seen["page"][1]
    assert seen["health"][0] == 200
    assert "local playground" in capsys.readouterr().err


@pytest.mark.parametrize(
    "host, bound",
    [("0.0.0.0", "127.0.0.1"), ("::", "127.0.0.1"), ("127.0.0.2", "127.0.0.2")],
)
def test_the_playground_binds_loopback_unless_host_names_an_address(
    tmp_path: Path,
    seeded_db_template: Path,
    monkeypatch: pytest.MonkeyPatch,
    host: str,
    bound: str,
) -> None:
    """README: HOST's every-interface default (and ``::``) means loopback for the playground,
    which has no login; an address HOST names on purpose is bound as given."""
    seen: dict[str, Any] = {}

    def serve_once(self: Playground) -> None:
        self.server.start()
        seen["host"], seen["page"] = self.server.host, get(self.url)
        self.server.stop()

    monkeypatch.setattr(Playground, "serve_forever", serve_once)
    engine = seeded_engine(tmp_path / "p.db", seeded_db_template)
    run_playground(Settings(db_path=tmp_path / "p.db", host=host, port=0), engine)
    assert seen["host"] == bound
    assert seen["page"][0] == 200


# --- the playground's endpoints -------------------------------------------------------------


def test_playground_command_goes_through_signed_slack_requests(playground: Playground) -> None:
    status, hello = post_json(playground.url + "playground/hello", {"tz": "Europe/Berlin"})
    assert status == 200 and hello["user"] == USER_ID
    status, answer = post_json(
        playground.url + "playground/command", {"text": "language models", "channel": "C0GENERAL"}
    )
    assert status == 200 and answer["ok"], answer
    fake = playground.fake
    (event,) = fake.wait_for(lambda: [e for e in fake.events_since(0) if e.kind == "response"])
    assert event.channel == "C0GENERAL" and event.user == USER_ID
    assert "papers match" in blocks_text(event.to_dict())

    more = next(
        el
        for b in event.blocks
        if b["type"] == "actions"
        for el in b["elements"]
        if el["action_id"] == "more"
    )
    status, answer = post_json(
        playground.url + "playground/action",
        {
            "action_id": "more",
            "value": more["value"],
            "channel": "C0GENERAL",
            "message_ts": event.ts,
            "ephemeral": True,
        },
    )
    assert status == 200 and answer["ok"]
    replaced = fake.wait_for(
        lambda: [e for e in fake.events_since(event.seq) if e.kind == "response"]
    )
    assert replaced[0].replace_original and replaced[0].ts == event.ts

    status, feed = 200, json.loads(get(playground.url + f"playground/events?since={event.seq}")[1])
    assert [e["seq"] for e in feed["events"]] == [replaced[0].seq]


def test_playground_refuses_cross_site_posts(playground: Playground) -> None:
    status, _ = post_json(playground.url + "playground/command", {"text": "x"}, "text/plain")
    assert status == 415
    assert get(playground.url + "playground/command")[0] == 405


def test_bad_signature_from_a_stranger_is_refused_by_the_playground_app(
    playground: Playground,
) -> None:
    body = b"command=%2Fpapers&text=diffusion"
    request = urllib.request.Request(
        playground.url + "slack/events",
        data=body,
        headers={"X-Slack-Request-Timestamp": "1", "X-Slack-Signature": "v0=00"},
    )
    with pytest.raises(urllib.error.HTTPError) as error:
        urllib.request.urlopen(request, timeout=10)
    assert error.value.code == 401


def test_build_app_needs_no_network_against_the_stand_in(slack: SlackHarness) -> None:
    # token_verification is off for the loopback stand-in: no auth.test at startup.
    calls = len(slack.fake.calls_to("auth.test"))
    build_app(slack.settings, slack.engine)
    assert len(slack.fake.calls_to("auth.test")) == calls


def test_manifest_and_procfile_match_the_server() -> None:
    root = Path(__file__).resolve().parent.parent
    manifest = (root / "bot" / "slack" / "manifest.yml").read_text()
    assert manifest.count("request_url: https://YOUR-HOST" + server.EVENTS_PATH) == 2
    assert "url: https://YOUR-HOST" + server.EVENTS_PATH in manifest
    assert "- command: /papers" in manifest
    procfile = (root / "Procfile").read_text().splitlines()
    assert procfile == [
        "web: paperboy serve",
        "worker: paperboy worker",
        "clock: paperboy scheduler",
    ]


def test_serve_stops_cleanly_on_sigterm(tmp_path: Path, seeded_db_template: Path) -> None:
    """Heroku, systemd and Docker stop processes with SIGTERM: the server must exit 0."""
    seeded_engine(tmp_path / "t.db", seeded_db_template)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {**os.environ, "PAPERBOY_DB": str(tmp_path / "t.db"), "PORT": str(port)}
    for name in ("SLACK_BOT_TOKEN", "SLACK_SIGNING_SECRET", "SLACK_APP_TOKEN"):
        env.pop(name, None)
    code = (
        "from bot.settings import Settings; from bot.slack.server import run; "
        "from bot.playground.playground import run as playground; "
        "run(Settings.from_env(), playground=playground)"
    )
    process = subprocess.Popen(
        [sys.executable, "-c", code], env=env, stderr=subprocess.PIPE, text=True
    )
    try:
        for line in process.stderr:  # the banner is printed once the port is bound
            if "open http://" in line:
                break
        assert get(f"http://127.0.0.1:{port}/healthz")[0] == 200
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=15) == 0
    finally:
        process.kill()
        process.wait()


def test_playground_sends_command_text_escaped_like_slack() -> None:
    assert slack_escape("digest channel #general") == "digest channel <#C0GENERAL|general>"
    assert slack_escape("a & <b> #unknown") == "a &amp; &lt;b&gt; #unknown"


# --- modals and digests in the playground -------------------------------------------------------


def test_playground_draws_modals_and_submits_them_as_signed_view_submissions(
    playground: Playground,
) -> None:
    fake, dm = playground.fake, "D" + USER_ID
    paper_id = playground.engine.search("diffusion").hits[0].id
    click = {"action_id": "share:1", "value": paper_id, "channel": dm, "message_ts": "1.000001"}
    status, answer = post_json(playground.url + "playground/action", click)
    assert status == 200 and answer["ok"]
    (event,) = fake.wait_for(lambda: [e for e in fake.events_since(0) if e.kind == "view"])
    feed = json.loads(get(playground.url + "playground/events?since=0")[1])["events"]
    assert [e["view"]["id"] for e in feed if e["kind"] == "view"] == [event.view["id"]]

    view_id = event.view["id"]
    status, answer = post_json(
        playground.url + "playground/view", {"view_id": view_id, "values": {"share_channel": ""}}
    )
    assert status == 200 and json.loads(answer["body"])["response_action"] == "errors"
    # Slack's channel picker cannot send a channel that does not exist; nor can the page.
    made_up = {"share_channel": "C0MADEUP", "share_comment": ""}
    status, answer = post_json(
        playground.url + "playground/view", {"view_id": view_id, "values": made_up}
    )
    assert (status, answer["status"], answer["ok"]) == (200, 400, False)
    assert "no such channel" in answer["body"] and not fake.messages_in("C0MADEUP")
    values = {"share_channel": "C0READING", "share_comment": "for <b>Thursday</b>"}
    status, answer = post_json(
        playground.url + "playground/view", {"view_id": view_id, "values": values}
    )
    assert status == 200 and answer["ok"]
    assert json.loads(answer["body"])["response_action"] == "update"
    (shared,) = fake.messages_in("C0READING")
    assert "> for &lt;b&gt;Thursday&lt;/b&gt;" in blocks_text(shared)
    assert not fake.messages_in(dm)
    status, answer = post_json(playground.url + "playground/view", {"view_id": "VNOPE"})
    assert status == 200 and answer["status"] == 404


def test_playground_sends_scheduled_digests_to_the_paperboy_dm(
    tmp_path: Path, seeded_db_template: Path
) -> None:
    engine = seeded_engine(tmp_path / "pg.db", seeded_db_template)
    with Playground(
        Settings(db_path=tmp_path / "pg.db"), engine, tick_seconds=1, slack=FakeSlack()
    ) as running:
        assert running.scheduler.get_job(TICK_JOB) is not None
        post_json(running.url + "playground/hello", {"tz": "UTC"})
        status, _ = post_json(
            running.url + "playground/command", {"text": "subscribe diffusion models"}
        )
        assert status == 200
        fake = running.fake
        fake.wait_for(lambda: [e for e in fake.events_since(0) if e.kind == "response"])
        # Make today's slot a minute-or-less ago, for a member who joined before it.
        now = datetime.now(UTC)
        subscriptions = Subscriptions(engine.db)
        subscriptions.set_days(USER_ID, "daily", now)
        subscriptions.set_time(USER_ID, f"{now:%H:%M}", now)
        joined = (now - timedelta(hours=1)).isoformat(timespec="seconds")
        engine.db.execute("update members set created_at = ?", [joined])
        (digest,) = fake.wait_for(lambda: fake.messages_in("D" + USER_ID), timeout=15)
        assert digest["metadata"]["event_type"] == DIGEST_EVENT
        assert "Your paper digest" in blocks_text(digest)
    assert not running.scheduler.running  # stopped with the playground


def test_only_the_playground_runs_a_scheduler_in_the_web_process(
    tmp_path: Path, seeded_db_template: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from apscheduler.schedulers.background import BackgroundScheduler
    from slack_bolt.adapter.socket_mode import SocketModeHandler

    built: list[dict[str, Any]] = []
    real = schedule.build_scheduler
    monkeypatch.setattr(
        schedule, "build_scheduler", lambda *a, **k: built.append(k) or real(*a, **k)
    )
    monkeypatch.setattr(server.HttpServer, "wait", lambda self: None)
    monkeypatch.setattr(server.HttpServer, "serve_forever", lambda self: None)
    monkeypatch.setattr(SocketModeHandler, "start", lambda self: None)
    seeded_engine(tmp_path / "w.db", seeded_db_template)
    with FakeSlack() as fake:
        http = Settings(
            db_path=tmp_path / "w.db",
            port=0,
            slack_bot_token="xoxb-1",
            slack_signing_secret="s",
            slack_api_url=fake.api_url,
        )
        server.run(http)  # HTTP mode
        server.run(dataclasses.replace(http, slack_app_token="xapp-1"))  # Socket Mode
    assert built == []
    # No credentials: the playground.
    server.run(Settings(db_path=tmp_path / "w.db", port=0), playground=run_playground)
    (options,) = built
    assert isinstance(options["scheduler"], BackgroundScheduler)
    assert options["tick_seconds"] == schedule.TICK_SECONDS


# --- stopping the HTTP server ------------------------------------------------------------------


def _refuses(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) != 0


def test_stopping_twice_or_after_the_server_ended_is_safe(tmp_path: Path) -> None:
    """The clock's request_stop(), then the caller's stop(), then a test's teardown: a second
    stop must not write to waitress's trigger after the first one closed it (EBADF, or a byte
    written into whatever file was opened on that descriptor number since)."""
    hello = lambda environ, start_response: server.plain(start_response, "200 OK", "hi")  # noqa: E731
    running = server.HttpServer(hello).start()
    assert urllib.request.urlopen(running.url, timeout=10).read() == b"hi"
    running.request_stop()
    running.wait()
    bystander = tmp_path / "bystander"  # likely opened on a descriptor the server freed
    with open(bystander, "wb") as handle:
        running.request_stop()
        running.stop()
        running.stop()
        handle.flush()
    assert bystander.read_bytes() == b""
    assert _refuses(running.port)
    # stop() before the loop ends by itself, then request_stop(): as safe
    other = server.HttpServer(hello).start()
    other.stop()
    other.request_stop()
    other.stop()
    assert _refuses(other.port)


def test_starting_twice_runs_one_loop(tmp_path: Path) -> None:
    """``with HttpServer(app).start() as s:`` starts once: two loops over one waitress map
    race for every socket, and the loser's EAGAIN closes the connection mid-answer."""
    import threading

    hello = lambda environ, start_response: server.plain(start_response, "200 OK", "hi")  # noqa: E731

    def loops() -> int:
        return sum(t.name == "paperboy-http" and t.is_alive() for t in threading.enumerate())

    before = loops()
    with server.HttpServer(hello).start() as running:
        assert running.start() is running
        assert loops() == before + 1
        for _ in range(20):
            assert urllib.request.urlopen(running.url, timeout=10).read() == b"hi"
    assert _refuses(running.port)


def _listening(running: server.HttpServer) -> bool:
    listener = running._server.socket  # None, or a closed socket, once stopping closed it
    return listener is not None and listener.fileno() != -1


def _stop_with_a_request_in_flight() -> tuple[list[Any], list[str]]:
    """One server stopped while it answers a slow request: the answers the client got, and
    every warning logged meanwhile. Run in a fresh interpreter (below)."""
    import logging
    import threading

    warnings: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if record.name != "waitress.queue":  # "Task queue depth is 1" on a loaded machine
                warnings.append(f"{record.name}: {record.getMessage()}")

    handler = Collect(logging.WARNING)
    logging.getLogger().addHandler(handler)
    entered, release = threading.Event(), threading.Event()

    def slow(environ: dict[str, Any], start_response: Any) -> list[bytes]:
        entered.set()
        release.wait(10)
        return server.plain(start_response, "200 OK", "finished")

    running = server.HttpServer(slow).start()
    answers: list[Any] = []

    def ask() -> None:
        try:
            answers.append(urllib.request.urlopen(running.url, timeout=20).read())
        except Exception as error:  # noqa: BLE001 - recorded for the assertion
            answers.append(repr(error))

    client = threading.Thread(target=ask)
    client.start()
    assert entered.wait(10)
    stopper = threading.Thread(target=running.stop)
    stopper.start()
    # Wait for the listening socket to close rather than probing it: a probe accepted just
    # before would be one more connection for waitress to serve while it stops.
    deadline = time.monotonic() + 20
    while _listening(running) and time.monotonic() < deadline:
        stopper.join(0.01)
    refused = _refuses(running.port)  # no new connections once stopping has begun
    release.set()
    stopper.join(20)
    client.join(20)
    logging.getLogger().removeHandler(handler)
    return [*answers, refused], warnings


def test_stop_lets_the_request_in_flight_finish() -> None:
    """A request being answered while the server stops gets its whole answer; waitress's
    threads finish before the loop and its trigger are closed, so none of them writes to a
    closed trigger (which we would log as a warning).

    In a fresh interpreter: in the whole suite's process, a descriptor closed twice by
    something else (the fault ``test_stop_ends_the_server_even_when_its_wake_up_pipe_was_
    closed_under_it`` simulates) can land on this server's trigger and log that warning."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    spawn = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=1, mp_context=spawn) as fresh:
        answers, warnings = fresh.submit(_stop_with_a_request_in_flight).result(timeout=120)
    assert answers == [b"finished", True]
    assert not warnings, warnings


def test_bolt_starts_without_warnings_when_the_token_is_in_the_environment(
    slack: SlackHarness, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Bolt reads SLACK_BOT_TOKEN from the environment by itself; given a client as well, it
    warned "`token` will be unused" at every start. Its client still talks to SLACK_API_URL
    with Paperboy's retries."""
    from slack_sdk.http_retry import ConnectionErrorRetryHandler, RateLimitErrorRetryHandler

    monkeypatch.setenv("SLACK_BOT_TOKEN", slack.settings.slack_bot_token or "")
    with caplog.at_level("DEBUG"):
        app = build_app(slack.settings, slack.engine)
    bolt = [r for r in caplog.records if r.name.startswith("slack_bolt")]
    assert not [r for r in bolt if r.levelno >= 30], [r.getMessage() for r in bolt]
    assert app.client.base_url == slack.fake.api_url
    assert app.client.token == slack.settings.slack_bot_token
    kinds = [type(h) for h in app.client.retry_handlers]
    assert kinds.count(ConnectionErrorRetryHandler) == 1 and RateLimitErrorRetryHandler in kinds
    # Checking the token at start asks SLACK_API_URL (not slack.com), with Bolt's error.
    from slack_bolt.error import BoltError

    calls = len(slack.fake.calls_to("auth.test"))
    build_app(slack.settings, slack.engine, verify_token=True)
    assert len(slack.fake.calls_to("auth.test")) == calls + 1
    slack.fake.fail_next("auth.test", error="invalid_auth")
    with pytest.raises(BoltError, match="invalid_auth"):
        build_app(slack.settings, slack.engine, verify_token=True)


def test_stop_ends_the_server_even_when_its_wake_up_pipe_was_closed_under_it() -> None:
    """Seen intermittently in teardowns: the write end of waitress's trigger pipe closed by
    something else in the process. Waitress then closes the trigger; stop() must still end
    the loop and free the port, without writing to the dead pipe."""
    hello = lambda environ, start_response: server.plain(start_response, "200 OK", "hi")  # noqa: E731
    running = server.HttpServer(hello).start()
    assert urllib.request.urlopen(running.url, timeout=10).read() == b"hi"
    trigger = running._server.trigger  # the outside fault, simulated: its write end goes
    os.close(trigger.trigger)
    trigger._fds = [fd for fd in trigger._fds if fd != trigger.trigger]  # not closed twice
    running.stop()
    assert _refuses(running.port)
    assert running._thread is not None and not running._thread.is_alive()


def test_stop_never_writes_its_wake_up_byte_after_the_loop_closed_the_pipe(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A finished request's wake-up byte already in the pipe lets the loop run the closing
    thunk as soon as it is queued; the stopper's own byte, written after, went to a closed
    descriptor (EBADF, or a file that had just reused the number). The byte is made to arrive
    first every time: written just before ours, with time for the loop to act on it."""
    hello = lambda environ, start_response: server.plain(start_response, "200 OK", "hi")  # noqa: E731
    running = server.HttpServer(hello).start()
    trigger = running._server.trigger
    pull = trigger._physical_pull

    def after_a_byte_already_in_the_pipe() -> None:
        os.write(trigger.trigger, b"x")
        time.sleep(0.3)
        pull()

    trigger._physical_pull = after_a_byte_already_in_the_pipe
    with caplog.at_level("WARNING"):
        running.stop()
    assert not [r.getMessage() for r in caplog.records if r.name == "bot.slack.server"]
    assert _refuses(running.port)
    assert running._thread is not None and not running._thread.is_alive()


@pytest.mark.parametrize(
    ("body", "content_type"),
    [
        (b"{", "application/json"),
        (b"[]", "application/json"),
        (b'"x"', "application/json"),
        (b"{", "application/x-www-form-urlencoded"),
        (b"payload=%7Bnot+json", "application/x-www-form-urlencoded"),
        (b"payload=null", "application/x-www-form-urlencoded"),
        (b"payload=%5B1%5D", "application/x-www-form-urlencoded"),
    ],
)
def test_a_signed_but_malformed_body_is_a_400_and_one_log_line(
    slack: SlackHarness, caplog: pytest.LogCaptureFixture, body: bytes, content_type: str
) -> None:
    with caplog.at_level("INFO"):
        status, answer = slack.post(body, content_type=content_type)
    assert (status, answer) == (400, "Malformed request body")
    # waitress warns "Task queue depth is N" when the machine is loaded: not this request's doing.
    problems = [r for r in caplog.records if r.levelno >= 30 and r.name != "waitress.queue"]
    assert [r.name for r in problems] == ["bot.slack.server"], caplog.text
    assert "refused a signed request" in problems[0].getMessage()
    assert not [r for r in caplog.records if r.exc_info], caplog.text


def problems_in(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    """Warnings and errors, without waitress's "Task queue depth is 1": a request sent just
    after the server started, on a loaded machine, can find none of its threads idle yet."""
    return [r for r in caplog.records if r.levelno >= 30 and r.name != "waitress.queue"]


def test_a_slash_command_without_a_response_url_is_acked_and_logged_once(
    slack: SlackHarness, caplog: pytest.LogCaptureFixture
) -> None:
    form = {"command": "/papers", "text": "diffusion", "user_id": "U1", "team_id": "T1"}
    with caplog.at_level("INFO"):
        status, answer = slack.post(urlencode(form).encode())
        # The listener runs on after the ack: wait for its first word, then for any work
        # it queued.
        deadline = time.monotonic() + 10
        while not problems_in(caplog) and time.monotonic() < deadline:
            time.sleep(0.01)
        slack.executor.shutdown(wait=True)
    assert (status, answer) == (200, "")
    problems = problems_in(caplog)
    assert len(problems) == 1 and "no response_url" in problems[0].getMessage(), caplog.text
    assert not [r for r in caplog.records if r.exc_info], caplog.text


def test_requests_acked_while_warming_up_are_logged_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Like every request Bolt acks, each one answered during warm-up is one
    ``paperboy.requests`` line with team, user, what was asked and the ack latency; a
    malformed one is refused as after warm-up."""
    from tests.slack_harness import SIGNING_SECRET

    settings = Settings(db_path=tmp_path / "w.db", slack_signing_secret=SIGNING_SECRET)
    web = server.WebApp(settings)  # never made ready: warming up throughout
    form = {"command": "/papers", "text": "secret plans", "user_id": "U7", "team_id": "T7"}
    click = {
        "type": "block_actions",
        "team": {"id": "T7"},
        "user": {"id": "U8"},
        "actions": [{"action_id": "more"}],
    }
    with (
        server.HttpServer(web, **server.server_options(settings)) as http,
        caplog.at_level("INFO", logger="paperboy.requests"),
    ):
        posts = [
            (urlencode(form).encode(), "application/x-www-form-urlencoded"),
            (
                urlencode({"payload": json.dumps(click)}).encode(),
                "application/x-www-form-urlencoded",
            ),
            (b"payload=null", "application/x-www-form-urlencoded"),
        ]
        answers = []
        for body, kind in posts:
            ts = str(int(datetime.now(UTC).timestamp()))
            headers = {
                "Content-Type": kind,
                "X-Slack-Request-Timestamp": ts,
                "X-Slack-Signature": sign(SIGNING_SECRET, ts, body),
            }
            request = urllib.request.Request(http.url + "/slack/events", body, headers)
            try:
                with urllib.request.urlopen(request, timeout=10) as answer:
                    answers.append((answer.status, json.loads(answer.read() or b"null")))
            except urllib.error.HTTPError as error:
                answers.append((error.code, None))
    assert answers[0] == (200, {"response_type": "ephemeral", "text": server.WARMING_UP})
    assert answers[1] == (200, None) and answers[2] == (400, None)
    logged = [r for r in caplog.records if r.name == "paperboy.requests"]
    assert len(logged) == 2, caplog.text
    command, clicked = logged
    assert (command.team, command.user, command.command) == ("T7", "U7", "/papers")
    assert isinstance(command.latency_ms, float)
    assert (clicked.team, clicked.user, clicked.action_id) == ("T7", "U8", "more")
    assert "secret plans" not in caplog.text


@pytest.mark.parametrize("text", ["payload attacks", "adversarial payloads"])
def test_a_slash_command_mentioning_payload_is_answered(slack: SlackHarness, text: str) -> None:
    """Bolt alone reads any form containing the word "payload" as an interactive payload
    form, finds none and answers 404: the lookup must be answered like any other."""
    status, url = slack.slash(text)
    assert status == 200
    reply = slack.reply(url)
    assert f"“{text}”" in blocks_text(reply)  # answered as the lookup it is
    assert reply["response_type"] == "ephemeral"


def test_requests_no_listener_takes_are_one_log_line_and_events_are_acknowledged(
    slack: SlackHarness, caplog: pytest.LogCaptureFixture
) -> None:
    """An event Paperboy does not act on (a DM edited: ``message_changed``) gets 200, since
    Slack retries any other answer and turns off the events of an app that keeps failing;
    a command that is not Paperboy's gets 404. Either is one log line, not Bolt's
    multi-line "[Suggestion] @app.command..." advice."""
    caplog.set_level("DEBUG", logger="bot")
    edited = {
        "type": "message",
        "subtype": "message_changed",
        "channel": "DU1",
        "channel_type": "im",
        "message": {"type": "message", "user": "U1", "text": "diffusion", "ts": "1.0"},
        "ts": "2.0",
    }
    assert slack.event(edited)[0] == 200
    status, _ = slack.slash("hello", command="/weather")
    assert status == 404
    assert "Suggestion" not in caplog.text and "@app." not in caplog.text
    unhandled = [r.getMessage() for r in caplog.records if "no listener takes" in r.getMessage()]
    assert len(unhandled) == 2 and "/weather" in unhandled[1]
    assert all(len(line.splitlines()) == 1 for line in unhandled)
    assert slack.fake.calls_to("chat.postMessage") == []

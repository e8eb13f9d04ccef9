"""Driving ``paperboy serve`` from a benchmark: its environment, starting it (ready once
``/healthz`` answers) and stopping it, and ``/papers`` slash commands signed as Slack signs
them, answered through a Slack stand-in that notes when each answer arrives.

One place for what ``bench.slack_speed``, ``bench.two_web`` and ``bench.replica`` all do, so a
change to how the app starts or how Slack signs requests is made once. (The tests have their
own helpers in ``tests/slack_harness.py``; tests never import bench.)
"""

from __future__ import annotations

import http.client
import json
import os
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from slack_sdk.signature import SignatureVerifier

from bench.corpora import REPO_DIR
from bot.playground.fake_slack import APP_ID, TEAM_ID
from tests.fake_slack import FakeSlack

SIGNING_SECRET = "bench-5f1c0e7a9d2b4c6e8f0a1b3c5d7e9f10"
BOT_TOKEN = "xoxb-bench"
EVENTS_PATH = "/slack/events"
HEALTH_PATH = "/healthz"
ACK_TIMEOUT_S = 10.0
ANSWER_TIMEOUT_S = 30.0
STARTUP_TIMEOUT_S = 120.0
#: Where ``PAPERBOY_SEED_DIR`` points unless a bench asks for the seeds: nothing, so a
#: benchmark corpus is never topped up from data/.
NO_SEEDS = REPO_DIR / "bench" / "work" / "no-seed"


# --- the Slack side ------------------------------------------------------------------------


if not hasattr(FakeSlack, "_handle_response"):  # the hook below would silently never run
    raise ImportError("FakeSlack._handle_response is gone; adapt TimedFakeSlack")


class TimedFakeSlack(FakeSlack):
    """FakeSlack that notes when the first POST to each response_url arrived (perf_counter)."""

    def __init__(self) -> None:
        super().__init__()
        self.arrived: dict[str, float] = {}

    def _handle_response(self, token: str, payload: Any) -> Any:
        now = time.perf_counter()
        with self._cond:  # re-entrant: the parent records the payload and notifies waiters
            self.arrived.setdefault(token, now)
            return super()._handle_response(token, payload)

    def wait_answer(self, token: str, timeout: float) -> float:
        """perf_counter time at which the first answer for ``token`` arrived (waits for it)."""
        return self.wait_for(lambda: self.arrived.get(token), timeout)

    def first_payload(self, token: str) -> dict[str, Any] | None:
        return next((r.payload for r in self.responses if r.token == token), None)


def slack_escape(text: str) -> str:
    """What Slack sends for what the user typed (``should_escape``: &, <, > as entities)."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def signed_slash(fake: FakeSlack, query: str, user: str) -> tuple[bytes, dict[str, str], str]:
    """(body, headers, response_url token) of ``/papers query`` as Slack would POST it."""
    response_url = fake.response_url(channel="C0BENCH", user=user)
    form = {
        "token": "gIkuvaNzQIHg97ATvDxqgjtO",
        "team_id": TEAM_ID,
        "team_domain": "paperboy",
        "channel_id": "C0BENCH",
        "channel_name": "general",
        "user_id": user,
        "user_name": user.lower(),
        "command": "/papers",
        "text": slack_escape(query),
        "api_app_id": APP_ID,
        "is_enterprise_install": "false",
        "response_url": response_url,
        "trigger_id": "13345224609.738474920.8088930838d88f008e0",
    }
    body = urlencode(form).encode()
    ts = str(int(time.time()))
    headers = {
        "Content-Type": "application/x-www-form-urlencoded",
        "X-Slack-Request-Timestamp": ts,
        "X-Slack-Signature": SignatureVerifier(SIGNING_SECRET).generate_signature(
            timestamp=ts, body=body
        ),
        "User-Agent": "Slackbot 1.0 (+https://api.slack.com/robots)",
    }
    return body, headers, response_url.rsplit("/", 1)[-1]


@dataclass
class Sample:
    """One slash command: its acknowledgement and answer times, or what went wrong."""

    query: str
    token: str | None = None  # its response_url's
    ack_ms: float | None = None
    answer_ms: float | None = None
    status: int | None = None
    error: str | None = None
    text: str | None = None
    wrong: bool = False


def slash(port: int, fake: TimedFakeSlack, query: str, user: str, *, answer: bool) -> Sample:
    """Send ``/papers query`` from ``user`` to the server on ``port``: ack = send start to
    HTTP 200; with ``answer``, also answer = send start to the stand-in receiving the
    response_url POST (and the answer's fallback text)."""
    body, headers, token = signed_slash(fake, query, user)
    sample = Sample(query, token)
    started = time.perf_counter()
    try:
        sample.status = http_call(port, "POST", EVENTS_PATH, body, headers)
    except OSError as error:
        sample.error = f"ack: {type(error).__name__}: {error}"
        return sample
    sample.ack_ms = (time.perf_counter() - started) * 1000
    if sample.status != 200:
        sample.error = f"ack: HTTP {sample.status}"
        return sample
    if not answer:
        return sample
    try:
        arrived = fake.wait_answer(token, ANSWER_TIMEOUT_S)
    except TimeoutError:
        sample.error = f"no answer within {ANSWER_TIMEOUT_S:.0f}s"
        return sample
    sample.answer_ms = (arrived - started) * 1000
    sample.text = (fake.first_payload(token) or {}).get("text")
    return sample


# --- HTTP ----------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def http_call(
    port: int, method: str, path: str, body: bytes | None = None, headers: dict | None = None
) -> int:
    """One request on a new connection (as a fresh client would); returns the HTTP status."""
    return http_answer(port, method, path, body, headers)[0]


def http_answer(
    port: int, method: str, path: str, body: bytes | None = None, headers: dict | None = None
) -> tuple[int, bytes]:
    """One request on a new connection; the HTTP status and body."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=ACK_TIMEOUT_S)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        answer = conn.getresponse()
        return answer.status, answer.read()
    finally:
        conn.close()


def health(port: int) -> tuple[int, dict[str, Any]]:
    """``GET /healthz``: its status (0 while nothing listens) and JSON body."""
    try:
        status, body = http_answer(port, "GET", HEALTH_PATH)
    except OSError:
        return 0, {}
    return status, json.loads(body) if body.startswith(b"{") else {}


# --- the servers ---------------------------------------------------------------------------


def serve_env(
    db: Path,
    fake: FakeSlack,
    port: int | None = None,
    *,
    seed_dir: Path = NO_SEEDS,
    **settings: str,
) -> dict[str, str]:
    """The environment of a ``paperboy`` child over ``db`` that talks to ``fake``: this
    process's, without its Slack/Paperboy settings, plus ``settings`` (e.g. DATABASE_URL)."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("SLACK_", "PAPERBOY_")) and k not in ("PORT", "DATABASE_URL")
    }
    env.update(
        PYTHONPATH=str(REPO_DIR),
        PAPERBOY_DB=str(db),
        PAPERBOY_SEED_DIR=str(seed_dir),
        SLACK_BOT_TOKEN=BOT_TOKEN,
        SLACK_SIGNING_SECRET=SIGNING_SECRET,
        SLACK_API_URL=fake.api_url,
        HOST="127.0.0.1",
        **settings,
    )
    if port:
        env["PORT"] = str(port)
    return env


@dataclass
class Server:
    name: str
    port: int
    proc: subprocess.Popen
    log_path: Path

    def peak_rss_mb(self) -> float | None:
        try:
            with open(f"/proc/{self.proc.pid}/status", encoding="ascii") as fh:
                for line in fh:
                    if line.startswith("VmHWM:"):
                        return float(line.split()[1]) / 1024
        except OSError:
            return None
        return None

    def cpu_s(self) -> float:
        """User + system CPU seconds the server has used so far (0 where /proc is missing)."""
        try:
            with open(f"/proc/{self.proc.pid}/stat", encoding="ascii") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
        except OSError:
            return 0.0
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self) -> None:
        """SIGTERM (``paperboy serve`` exits cleanly on it), then SIGKILL after 10 s."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)


#: Every server started, for ``stop_children`` (and a watchdog) to stop.
CHILDREN: list[Server] = []


def start_server(
    name: str,
    cmd: list[str],
    env: dict[str, str],
    port: int,
    log_path: Path,
    cwd: Path | None = None,
) -> Server:
    """Start a server child with its output in ``log_path``; returns once ``GET /healthz``
    answers 200 (raises when it exits first or takes over ``STARTUP_TIMEOUT_S``)."""
    with open(log_path, "wb") as out:
        proc = subprocess.Popen(cmd, env=env, cwd=cwd, stdout=out, stderr=subprocess.STDOUT)
    server = Server(name, port, proc, log_path)
    CHILDREN.append(server)
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while health(port)[0] != 200:
        if proc.poll() is not None:
            raise RuntimeError(f"{name} exited with {proc.returncode}; see {log_path}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"{name} did not answer {HEALTH_PATH} in {STARTUP_TIMEOUT_S}s")
        time.sleep(0.1)
    return server


def stop_children() -> None:
    for server in CHILDREN:
        server.stop()

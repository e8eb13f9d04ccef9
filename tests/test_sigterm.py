"""SIGTERM at any moment of a long-running command's start-up is a clean stop: exit 0, no
traceback (platforms stop processes with SIGTERM, and a restart during a deploy often comes
while the process is still starting)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from bot.cli import main

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def closed_port() -> Iterator[int]:
    """A port where connections are refused for the whole test: bound but never listening,
    so no other test's server (another xdist worker's) can take it meanwhile."""
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        yield holder.getsockname()[1]


def test_sigterm_while_the_scheduler_waits_for_slack_exits_0(
    tmp_path: Path, closed_port: int
) -> None:
    """Slack unreachable: the scheduler sits in its auth.test retries (after seeding a new
    database), and is stopped there."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PAPERBOY_", "SLACK_"))}
    env |= {
        "SLACK_BOT_TOKEN": "xoxb-test",
        "SLACK_API_URL": f"http://127.0.0.1:{closed_port}/api/",
        "PYTHONPATH": str(ROOT),
    }
    process = subprocess.Popen(
        [sys.executable, "-m", "bot.cli", "scheduler"],
        cwd=tmp_path,
        env=env,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        said = []
        assert process.stderr is not None
        for line in process.stderr:
            said.append(line)
            if "auth.test failed" in line:  # the first retry: it is waiting now
                break
        process.send_signal(signal.SIGTERM)
        code = process.wait(timeout=30)
        said.append(process.stderr.read())
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert code == 0, "".join(said)
    assert "Traceback" not in "".join(said)


@pytest.mark.parametrize(
    "args", [["serve"], ["serve", "--with-scheduler"], ["worker"]], ids=" ".join
)
def test_the_sigterm_handler_is_in_place_before_serve_or_worker_starts_up(
    args: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The start-up itself (imports, binding, auth.test, the index) is stood in for by a run
    that is stopped by SIGTERM halfway: the command exits 0. (Without the handler the signal
    would end this very test process, so the stand-in refuses to send it then.)"""
    from bot.slack import server

    previous = signal.getsignal(signal.SIGTERM)
    monkeypatch.setenv("SLACK_BOT_TOKEN", "xoxb-test")
    monkeypatch.setenv("SLACK_SIGNING_SECRET", "secret")
    monkeypatch.setenv("SLACK_APP_TOKEN", "xapp-test")

    def starting_up(settings, **options) -> None:
        if signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
            raise AssertionError("no SIGTERM handler while starting up")
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)  # the handler interrupts this
        raise AssertionError("SIGTERM did not stop the start-up")

    monkeypatch.setattr(server, "run", starting_up)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # as in a fresh process
    try:
        result = CliRunner().invoke(main, args)
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert result.exit_code == 0, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)


@pytest.mark.parametrize(
    "args",
    [["scheduler"], ["digest", "send"], ["serve"], ["worker"]],
    ids=" ".join,
)
def test_a_command_run_in_process_puts_the_sigterm_handler_back(
    args: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, closed_port: int
) -> None:
    """Tests (and anything embedding the CLI) run the commands in-process: the handler they
    install for their run is theirs only, and the one before is in place again after."""
    from bot.slack import server

    def mine(signum: int, frame: object) -> None:  # pragma: no cover - never sent
        raise AssertionError("not sent")

    monkeypatch.setenv("PAPERBOY_DB", str(tmp_path / "p.db"))
    monkeypatch.setenv("SLACK_BOT_TOKEN", "xoxb-test")
    monkeypatch.setenv("SLACK_API_URL", f"http://127.0.0.1:{closed_port}/api/")
    monkeypatch.setattr("digest.clock.CHECK_BACKOFF", ())  # Slack is unreachable: no waiting
    seen: list[object] = []
    monkeypatch.setattr(
        server, "run", lambda settings, **options: seen.append(signal.getsignal(signal.SIGTERM))
    )
    previous = signal.signal(signal.SIGTERM, mine)
    try:
        result = CliRunner().invoke(main, args)
        after = signal.getsignal(signal.SIGTERM)
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    assert after is mine
    assert all(handler is not mine for handler in seen)  # its own while it ran

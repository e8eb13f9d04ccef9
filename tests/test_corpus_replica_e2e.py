"""The corpus on every host, end to end: real ``paperboy serve`` processes, each in a fresh,
empty working directory of its own (nothing shared but one throwaway PostgreSQL), find the
papers ``paperboy ingest`` adds from a third directory, also across a PostgreSQL restart;
a host started later catches up by itself. Slack is the local stand-in; lookups are signed
slash commands, as Slack sends them."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from bot import replica
from bot.settings import Settings
from bot.slack import server
from bot.slack.server import HttpServer, WebApp
from bot.state import configure
from bot.state.shared_corpus import SharedCorpus
from tests.fake_slack import FakeSlack
from tests.slack_harness import (
    BOT_TOKEN,
    SIGNING_SECRET,
    free_port,
    http,
    signed_headers,
    slash_form,
)

REPO = Path(__file__).resolve().parents[1]
SEEDS = REPO / "data"
SYNC_SECONDS = "1"  # the tests' interval; the default is 15 s


def env_for(folder: Path, fake: FakeSlack, database_url: str, port: int = 0) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLACK_", "PAPERBOY_", "PORT"))}
    env.update(
        PYTHONPATH=str(REPO),
        DATABASE_URL=database_url,
        PAPERBOY_DB=str(folder / "paperboy.db"),
        PAPERBOY_SEED_DIR=str(SEEDS),
        PAPERBOY_CORPUS_SYNC_SECONDS=SYNC_SECONDS,
        SLACK_BOT_TOKEN=BOT_TOKEN,
        SLACK_SIGNING_SECRET=SIGNING_SECRET,
        SLACK_API_URL=fake.api_url,
        HOST="127.0.0.1",
    )
    if port:
        env["PORT"] = str(port)
    return env


class Web:
    """``paperboy serve`` started in ``folder`` (its working directory), logging to a file."""

    def __init__(self, folder: Path, fake: FakeSlack, database_url: str):
        folder.mkdir()
        self.folder = folder
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = folder / "serve.log"
        with open(self.log, "ab") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "bot.cli", "serve"],
                cwd=folder,
                env=env_for(folder, fake, database_url, self.port),
                stdout=log,
                stderr=log,
            )

    def health(self) -> tuple[int, dict[str, Any]]:
        try:
            status, body = http(self.url + "/healthz")
        except OSError:  # not listening yet
            return 0, {}
        return status, json.loads(body) if body.startswith("{") else {}

    def lookup(self, fake: FakeSlack, query: str) -> str:
        """``/papers QUERY`` through this process; the answer's text."""
        form, response_url = slash_form(fake, query)
        status, _ = http(self.url + "/slack/events", form, signed_headers(form))
        assert status == 200
        token = response_url.rsplit("/", 1)[-1]
        (reply,) = fake.wait_for(lambda: [r for r in fake.responses if r.token == token], 20)
        return json.dumps(reply.payload, ensure_ascii=False)

    def said(self) -> str:
        return self.log.read_text(errors="replace")


@contextmanager
def running(*webs: Web) -> Iterator[None]:
    try:
        yield
    finally:
        for web in webs:
            if web.process.poll() is None:
                web.process.send_signal(signal.SIGTERM)
        for web in webs:
            try:
                web.process.wait(30)
            except subprocess.TimeoutExpired:
                web.process.kill()


def poll(check, what: str, timeout: float = 90) -> Any:
    """Another process's answers are all there is to wait on: ask until ``check()`` is
    truthy (every 0.1 s), or fail naming ``what``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if value := check():
            return value
        time.sleep(0.1)
    raise AssertionError(f"{what} did not happen within {timeout} s")


def caught_up(web: Web, head: int) -> bool:
    status, body = web.health()
    position = (body.get("replica") or {}).get("position", -1)
    return status == 200 and position >= head


def ingest(folder: Path, fake: FakeSlack, database_url: str, papers: list[dict]) -> str:
    """``paperboy ingest`` run in ``folder`` (an operator's laptop): its stderr and stdout."""
    folder.mkdir(exist_ok=True)
    data = folder / f"papers-{time.monotonic_ns()}.jsonl"
    data.write_text("".join(json.dumps(p) + "\n" for p in papers))
    done = subprocess.run(
        [sys.executable, "-m", "bot.cli", "ingest", str(data)],
        cwd=folder,
        env=env_for(folder, fake, database_url),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr + done.stdout
    return done.stderr + done.stdout


def quokka(n: int, word: str) -> dict:
    return {
        "id": f"quokka-{n}",
        "title": f"{word.title()} quokkas navigate mazes ({n})",
        "abstract": f"We study how {word} quokkas navigate mazes on Rottnest island.",
        "authors": ["Ada Quokka"],
        "venue": "TestConf",
        "year": 2026,
    }


def test_a_paper_ingested_anywhere_is_found_through_every_web_process(
    tmp_path: Path, postgres_url: str, postgres_cluster
) -> None:
    shared = SharedCorpus(configure(postgres_url))
    try:
        with FakeSlack() as fake:
            # The first host finds the shared corpus empty: it starts from the seed papers
            # and shares them; the second, as fresh, loads them from PostgreSQL instead.
            a = Web(tmp_path / "host-a", fake, postgres_url)
            with running(a):
                poll(lambda: a.health()[0] == 200, "host A ready")
                seeded = shared.head()
                assert seeded == shared.count() == 38
                b = Web(tmp_path / "host-b", fake, postgres_url)
                with running(b):
                    _, health = poll(lambda: (h := b.health())[0] == 200 and h, "host B ready")
                    assert health["papers"] == 38
                    assert health["replica"]["behind"] == 0

                    said = ingest(tmp_path / "laptop", fake, postgres_url, [quokka(1, "hungry")])
                    assert "shared corpus: 1 added" in said
                    head = shared.head()
                    for web in (a, b):
                        poll(lambda w=web: caught_up(w, head), f"{web.folder.name} caught up")
                        assert "Hungry quokkas navigate mazes" in web.lookup(fake, "quokkas")

                    # PostgreSQL restarts mid-run: the syncs fail meanwhile, then carry on.
                    postgres_cluster.stop()
                    try:
                        poll(lambda: "error" in (b.health()[1].get("replica") or {}), "an error")
                    finally:
                        postgres_cluster.start()
                    ingest(tmp_path / "laptop", fake, postgres_url, [quokka(2, "sleepy")])
                    head = shared.head()
                    for web in (a, b):
                        poll(lambda w=web: caught_up(w, head), f"{web.folder.name} caught up")
                        answer = web.lookup(fake, "sleepy quokkas")
                        assert "Sleepy quokkas navigate mazes" in answer

                    # A host started now, on an empty disk, catches up by itself.
                    c = Web(tmp_path / "host-c", fake, postgres_url)
                    with running(c):
                        poll(lambda: c.health()[0] == 200, "host C ready")
                        assert c.health()[1]["papers"] == 40
                        assert "Sleepy quokkas navigate mazes" in c.lookup(fake, "sleepy quokka")
    finally:
        configure(None)
    logs = {web.folder.name: web.said() for web in (a, b, c)}
    for name, said in logs.items():
        assert "Traceback" not in said, (name, said[-3000:])
    assert "shared corpus: could not sync" in logs["host-b"]


def test_health_and_lookups_say_the_corpus_is_loading_until_the_first_sync_lands(
    tmp_path: Path, postgres_url: str
) -> None:
    store = configure(postgres_url)
    try:
        engine = replica.open_engine(tmp_path / "fresh.db", None)
        loading = replica.Replica(engine, SharedCorpus(store))
        replica._current = loading  # as ``follow`` sets it before its first sync
        with FakeSlack() as fake:
            settings = Settings(
                db_path=tmp_path / "fresh.db",
                host="127.0.0.1",
                port=0,
                slack_bot_token=BOT_TOKEN,
                slack_signing_secret=SIGNING_SECRET,
                slack_api_url=fake.api_url,
            )
            web = WebApp(settings)
            options = server.server_options(settings)
            with HttpServer(web, host="127.0.0.1", port=0, **options) as running_server:
                status, body = http(running_server.url + "/healthz")
                assert status == 503
                assert json.loads(body) == {
                    "status": "catching up",
                    "replica": {
                        "position": 0,
                        "shared": 0,
                        "behind": 0,
                        "last_sync": None,
                        "loaded": 0,
                    },
                }
                form, _ = slash_form(fake, "diffusion")
                status, body = http(
                    running_server.url + "/slack/events", form, signed_headers(form)
                )
                assert json.loads(body)["text"] == server.LOADING
                loading.sync()  # the first sync lands: plain warming up from here on
                status, body = http(running_server.url + "/healthz")
                assert json.loads(body) == {"status": "warming up"}
    finally:
        replica._current = None
        configure(None)

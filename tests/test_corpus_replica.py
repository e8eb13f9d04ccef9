"""The corpus on every host (issue 10): papers published to the shared corpus (PostgreSQL, or
a SQLite state file of its own) reach another host's corpus file and index through its sync,
on both backends. The processes end to end are in ``tests/test_corpus_replica_e2e.py``."""

from __future__ import annotations

import json
import os
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from bot import replica
from bot.cli import main
from bot.engine.index import read_current
from bot.engine.paper import Paper
from bot.engine.search import Engine
from bot.settings import Settings
from bot.state import StateUnavailable, configure, open_state
from bot.state.shared_corpus import SharedCorpus
from digest.feeds import run_feeds

SEEDS = Path(__file__).resolve().parents[1] / "data"


def paper(n: int, abstract: str | None = None, **fields) -> dict:
    return {
        "id": f"p{n}",
        "title": f"Quokka navigation number {n}",
        "abstract": abstract or f"We study how quokkas navigate mazes, experiment {n}.",
        "authors": ["Ada Quokka"],
        "venue": "TestConf",
        "year": 2026,
        **fields,
    }


def write_jsonl(path: Path, papers: list[dict]) -> Path:
    path.write_text("".join(json.dumps(p) + "\n" for p in papers))
    return path


def host(tmp_path: Path, name: str, seeds: Path | None = None) -> Engine:
    """A host's engine: its own folder, its own corpus file."""
    folder = tmp_path / name
    folder.mkdir(exist_ok=True)
    return replica.open_engine(folder / "paperboy.db", seeds)


def ids(engine: Engine, query: str) -> list[str]:
    return [hit.id for hit in engine.search(query, limit=50).hits]


def test_an_ingest_on_one_host_is_found_on_another_after_its_sync(
    tmp_path: Path, shared: SharedCorpus
) -> None:
    laptop, web = host(tmp_path, "laptop"), host(tmp_path, "web")
    laptop.ingest([write_jsonl(tmp_path / "a.jsonl", [paper(1), paper(2)])])
    assert replica.publish(laptop).added == 2
    follower = replica.Replica(web, shared)
    assert ids(web, "quokka") == []
    assert follower.sync().added == 2
    assert sorted(ids(web, "quokka")) == ["p1", "p2"]
    # Nothing new: nothing applied, nothing rebuilt.
    generation = read_current(web.index_dir)
    assert follower.sync() is None
    assert read_current(web.index_dir) == generation
    # A paper keeps the time it was first added, so digests on every host agree on "new".
    assert web.paper("p1")["added_at"] == laptop.paper("p1")["added_at"]
    old = Paper(id="p0", title="Quokka navigation, the first study", abstract="Quokkas.")
    shared.publish([(old, "2020-01-02T03:04:05+00:00")])
    follower.sync()
    assert web.paper("p0")["added_at"] == "2020-01-02T03:04:05+00:00"


def test_a_changed_paper_arrives_through_a_delta_and_is_never_found_by_its_old_text(
    tmp_path: Path, shared: SharedCorpus
) -> None:
    laptop, web = host(tmp_path, "laptop"), host(tmp_path, "web")
    # Enough papers that two changes stay a delta (the index rebuilds past 15% of them).
    laptop.ingest([write_jsonl(tmp_path / "a.jsonl", [paper(n) for n in range(1, 41)])])
    replica.publish(laptop)
    follower = replica.Replica(web, shared)
    follower.sync()
    segments = len(read_current(web.index_dir)["segments"])
    changed = paper(3, abstract="Wombats burrow under the quokkas' mazes.")
    laptop.ingest([write_jsonl(tmp_path / "b.jsonl", [changed, paper(41)])])
    done = replica.publish(laptop)
    assert (done.added, done.updated, done.unchanged) == (1, 1, 0)
    counts = follower.sync()
    assert (counts.added, counts.updated) == (1, 1)
    assert ids(web, "wombats") == ["p3"]
    assert "p3" not in ids(web, "experiment")
    assert "p41" in ids(web, "experiment")
    # A delta segment beside the first one, not a rebuild.
    assert len(read_current(web.index_dir)["segments"]) == segments + 1


def test_publishing_again_bumps_nothing_and_a_failed_publish_is_retried_by_the_next(
    tmp_path: Path, shared: SharedCorpus
) -> None:
    laptop = host(tmp_path, "laptop")
    laptop.ingest([write_jsonl(tmp_path / "a.jsonl", [paper(1), paper(2)])])
    replica.publish(laptop)
    head = shared.head()
    assert replica.publish(laptop).changed == 0
    # Unchanged papers written again (another host's copy) keep their sequence numbers.
    again = shared.publish((p, None) for p, _ in laptop.corpus.papers_changed_since(-1))
    assert (again.changed, again.unchanged, shared.head()) == (0, 2, head)
    # An ingest whose publish never happened (the database was down) goes with the next.
    laptop.ingest([write_jsonl(tmp_path / "b.jsonl", [paper(3)])])
    laptop.ingest([write_jsonl(tmp_path / "c.jsonl", [paper(4)])])
    assert replica.publish(laptop).added == 2
    assert shared.count() == 4 and shared.head() == head + 2


def test_a_fresh_host_loads_everything_in_pages_and_builds_once(
    tmp_path: Path, shared: SharedCorpus
) -> None:
    laptop = host(tmp_path, "laptop")
    laptop.ingest([write_jsonl(tmp_path / "a.jsonl", [paper(n) for n in range(1, 24)])])
    replica.publish(laptop)
    fresh = host(tmp_path, "fresh", seeds=SEEDS)  # the shared corpus has papers: no seeds
    assert fresh.corpus.count() == 0
    follower = replica.Replica(fresh, shared)
    follower.page = 5
    assert follower.catching_up
    follower.sync()
    assert not follower.catching_up
    assert fresh.corpus.count() == 23 and len(ids(fresh, "quokka")) == 23
    assert len(read_current(fresh.index_dir)["segments"]) == 1  # one build, no deltas
    assert follower.status() == {
        "position": shared.head(),
        "shared": shared.head(),
        "behind": 0,
        "last_sync": follower.last_sync,
    }


def test_the_first_hosts_seed_the_empty_shared_corpus_once_even_at_the_same_moment(
    tmp_path: Path, shared: SharedCorpus
) -> None:
    engines = [Engine.open(tmp_path / f"h{n}.db", SEEDS) for n in range(4)]
    results: list = []
    start = threading.Barrier(len(engines))

    def seed(engine: Engine) -> None:
        start.wait()
        results.append(replica.seed_shared(engine, shared))

    threads = [threading.Thread(target=seed, args=(e,)) for e in engines]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    seeded = [r for r in results if r is not None]
    assert len(seeded) == 1 and seeded[0].added == engines[0].corpus.count() == shared.count()
    # A host opened later finds papers there, seeds nothing and keeps no seeds of its own.
    later = host(tmp_path, "later", seeds=SEEDS)
    assert later.corpus.count() == 0
    replica.Replica(later, shared).sync()
    assert later.corpus.count() == shared.count()


def test_the_host_that_seeded_has_its_own_papers_applied_already(
    tmp_path: Path, shared: SharedCorpus
) -> None:
    first = host(tmp_path, "first", seeds=SEEDS)
    version = first.corpus.version
    assert shared.count() == first.corpus.count() > 0
    follower = replica.Replica(first, shared)
    assert follower.position() == shared.head()  # the rows it seeded are its own papers
    assert follower.sync() is None
    assert first.corpus.version == version
    assert replica.publish(first).changed == 0  # nothing of its own left to share


def test_the_clocks_feeds_are_shared_and_a_share_that_failed_goes_with_the_next_run(
    tmp_path: Path,
    shared: SharedCorpus,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = host(tmp_path, "clock")
    feed = write_jsonl(tmp_path / "feed.jsonl", [paper(1), paper(2)])
    real_publish = SharedCorpus.publish

    def refused(self, papers, **options):
        raise StateUnavailable("The database is not answering (restarting); try again.")

    monkeypatch.setattr(SharedCorpus, "publish", refused)
    run_feeds(clock, Settings(feeds=(str(feed),)))
    assert clock.corpus.count() == 2 and shared.count() == 0
    assert "the papers are saved here but not shared yet" in caplog.text
    assert not [r for r in caplog.records if r.exc_info]
    monkeypatch.setattr(SharedCorpus, "publish", real_publish)
    write_jsonl(feed, [paper(1), paper(2), paper(3)])  # the next day's feed
    run_feeds(clock, Settings(feeds=(str(feed),)))
    assert shared.count() == 3


def test_without_a_shared_state_nothing_is_shared(tmp_path: Path) -> None:
    engine = replica.open_engine(tmp_path / "one.db", SEEDS)
    assert engine.corpus.count() > 0
    assert replica.publish(engine) is None
    assert replica.follow(engine) is None
    assert replica.lag(engine) is None


# -- the command line, with DATABASE_URL (PostgreSQL) -----------------------------------------


@pytest.fixture
def database_env(postgres_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    monkeypatch.setenv("DATABASE_URL", postgres_url)
    for name in list(os.environ):
        if name.startswith("PAPERBOY_"):
            monkeypatch.delenv(name)
    yield postgres_url
    configure(None)


def test_paperboy_ingest_shares_the_papers_and_stats_shows_the_lag(
    tmp_path: Path, database_env: str
) -> None:
    runner = CliRunner()
    laptop = tmp_path / "laptop.db"
    data = write_jsonl(tmp_path / "a.jsonl", [paper(1), paper(2), paper(3)])
    done = runner.invoke(main, ["--db", str(laptop), "ingest", str(data)])
    assert done.exit_code == 0, done.output
    assert "shared corpus: 3 added, 0 updated" in done.stderr
    shared = SharedCorpus(open_state(database_env))
    assert shared.count() == 3
    # The host that ingested has the papers it shared: not "3 changes behind".
    stats = runner.invoke(main, ["--db", str(laptop), "stats", "--json"])
    assert json.loads(stats.stdout)["replica"] == {"position": 3, "shared": 3, "behind": 0}
    text = runner.invoke(main, ["--db", str(laptop), "stats"])
    assert "replica   up to date with the shared corpus (applied 3 of 3)" in text.stdout
    # Another host's ingest: this one is behind by that until it syncs.
    desk = tmp_path / "desk.db"
    more = write_jsonl(tmp_path / "b.jsonl", [paper(4)])
    assert runner.invoke(main, ["--db", str(desk), "ingest", str(more)]).exit_code == 0
    text = runner.invoke(main, ["--db", str(laptop), "stats"])
    assert "replica   1 change behind the shared corpus (applied 3 of 4)" in text.stdout


def test_an_ingest_the_database_refuses_says_so_and_running_it_again_shares_it(
    tmp_path: Path, database_env: str, postgres_cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    runner = CliRunner()
    laptop = tmp_path / "laptop.db"
    data = write_jsonl(tmp_path / "a.jsonl", [paper(1), paper(2)])
    real_publish = SharedCorpus.publish

    def refused(self, papers, **options):
        raise StateUnavailable("The database postgresql://x is not answering (down).")

    monkeypatch.setattr(SharedCorpus, "publish", refused)
    done = runner.invoke(main, ["--db", str(laptop), "ingest", str(data)])
    assert done.exit_code == 1
    assert "Error: The papers were saved in" in done.stderr
    assert "Run the same `paperboy ingest` again to share them." in done.stderr
    assert "Traceback" not in done.output
    monkeypatch.setattr(SharedCorpus, "publish", real_publish)
    again = runner.invoke(main, ["--db", str(laptop), "ingest", str(data)])
    assert again.exit_code == 0, again.output
    assert "0 added, 0 updated, 2 unchanged" in again.stdout
    assert SharedCorpus(open_state(database_env)).count() == 2


def test_migrate_state_copies_the_corpus_too_idempotently(
    tmp_path: Path, seeded_db_template: Path, postgres_url: str
) -> None:
    path = tmp_path / "paperboy.db"
    shutil.copy(seeded_db_template, path)
    runner = CliRunner()
    first = runner.invoke(main, ["--db", str(path), "migrate-state", "--to", postgres_url])
    assert first.exit_code == 0, first.output
    shared = SharedCorpus(open_state(postgres_url))
    papers = Engine(path).corpus.count()
    assert shared.count() == papers and f"{papers} papers." in first.stdout
    head = shared.head()
    second = runner.invoke(main, ["--db", str(path), "migrate-state", "--to", postgres_url])
    assert second.exit_code == 0, second.output
    assert (shared.count(), shared.head()) == (papers, head)

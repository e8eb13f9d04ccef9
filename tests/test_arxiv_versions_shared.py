"""An older arXiv version never overwrites a newer one across hosts either (the shared corpus,
``DATABASE_URL``): the version travels with the paper (``corpus_papers.arxiv_version``,
revision s050), so a host that received v3 by replication and then reads an old v2 dump keeps
v3 and publishes nothing, and a newer version replicated replaces the older one with its
number. On both backends of the shared corpus, as ``tests/test_corpus_replica.py``.

The feeds are those of ``tests/test_arxiv_versions.py``: one entry, arXiv 2501.01234."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sqlalchemy import inspect, select, text

from bot import replica
from bot.engine.corpus import open_database
from bot.engine.formats.arxiv_atom import ArxivPaper
from bot.engine.paper import Paper
from bot.engine.search import Engine
from bot.state.shared_corpus import SharedCorpus, corpus_papers
from bot.state.store import HEAD, StateStore
from tests.test_arxiv_versions import ABSTRACTS, feed

ID = "arxiv:2501.01234"


def host(tmp_path: Path, name: str) -> Engine:
    folder = tmp_path / name
    folder.mkdir(exist_ok=True)
    return replica.open_engine(folder / "paperboy.db", None)


def counts(report) -> tuple[int, int, int]:
    return report.counts.added, report.counts.updated, report.counts.unchanged


def local(engine: Engine) -> tuple[str, int | None]:
    """The host's stored paper: its abstract and the arXiv version it was stored from."""
    row = engine.corpus.get(ID)
    return row["abstract"], row["arxiv_version"]


def shared_row(shared: SharedCorpus) -> dict:
    with shared.store.read() as conn:
        query = select(corpus_papers).where(corpus_papers.c.id == ID)
        return dict(conn.execute(query).mappings().one())


def test_an_old_version_read_after_a_newer_one_arrived_by_replication_stays_out(
    tmp_path: Path, shared: SharedCorpus
) -> None:
    """(a) Host B has v3 from host A's feed; its own old v2 dump changes nothing, there or in
    the shared corpus."""
    a, b = host(tmp_path, "a"), host(tmp_path, "b")
    a.ingest([feed(tmp_path, "feed3.xml", 3)])
    assert replica.publish(a).added == 1
    assert replica.Replica(b, shared).sync().added == 1
    assert local(b) == (ABSTRACTS[3], 3)
    version, head = b.corpus.version, shared.head()

    assert counts(b.ingest([feed(tmp_path, "dump.xml", 2)])) == (0, 0, 1)

    assert local(b) == (ABSTRACTS[3], 3)
    assert b.corpus.version == version  # nothing changed here: no segment, nothing to share
    assert replica.publish(b).changed == 0
    assert shared.head() == head and shared_row(shared)["abstract"] == ABSTRACTS[3]
    # A record whose url names the old version is as old.
    record = {"id": ID, "title": "Stepwise", "url": "https://arxiv.org/abs/2501.01234v2"}
    (tmp_path / "old.jsonl").write_text(json.dumps(record) + "\n")
    assert counts(b.ingest([tmp_path / "old.jsonl"])) == (0, 0, 1)
    assert replica.publish(b).changed == 0 and shared.head() == head
    assert local(a) == (ABSTRACTS[3], 3)


def test_a_newer_version_arrives_by_replication_with_its_version(
    tmp_path: Path, shared: SharedCorpus
) -> None:
    """(b) Host B has v2; host A's v3 replaces it there, number and all, so B's old v2 dump
    read afterwards changes nothing."""
    a, b = host(tmp_path, "a"), host(tmp_path, "b")
    a.ingest([feed(tmp_path, "feed2.xml", 2)])
    replica.publish(a)
    follower = replica.Replica(b, shared)
    follower.sync()
    assert local(b) == (ABSTRACTS[2], 2)

    a.ingest([feed(tmp_path, "feed3.xml", 3)])
    assert replica.publish(a).updated == 1
    assert shared_row(shared)["arxiv_version"] == 3
    done = follower.sync()

    assert (done.added, done.updated) == (0, 1)
    assert local(b) == (ABSTRACTS[3], 3)
    assert b.corpus.get(ID)["arxiv_updated"] == "2025-02-01T10:00:00+00:00"
    assert [hit.id for hit in b.search("experiments").hits] == [ID]
    assert follower.position() == shared.head()
    head = shared.head()
    assert counts(b.ingest([feed(tmp_path, "dump.xml", 2)])) == (0, 0, 1)
    assert replica.publish(b).changed == 0 and shared.head() == head


def test_an_old_version_shared_before_the_newer_one_arrived_leaves_the_shared_row(
    tmp_path: Path, shared: SharedCorpus
) -> None:
    """Host B reads the v2 dump before its sync brought A's v3: the shared corpus keeps v3,
    and B's next sync replaces its v2 with it."""
    a, b = host(tmp_path, "a"), host(tmp_path, "b")
    a.ingest([feed(tmp_path, "feed3.xml", 3)])
    replica.publish(a)
    head = shared.head()

    assert counts(b.ingest([feed(tmp_path, "dump.xml", 2)])) == (1, 0, 0)
    done = replica.publish(b)

    assert (done.changed, done.unchanged) == (0, 1)
    assert shared.head() == head
    assert (shared_row(shared)["abstract"], shared_row(shared)["arxiv_version"]) == (
        ABSTRACTS[3],
        3,
    )
    assert replica.Replica(b, shared).sync().updated == 1
    assert local(b) == (ABSTRACTS[3], 3)


def test_the_shared_corpus_compares_versions_and_keeps_seq_for_the_same_paper(
    shared: SharedCorpus,
) -> None:
    """A row from before versions travelled (none known) takes any version; the same paper
    with its version known keeps its ``seq`` (nothing for replicas to apply), and an older
    version after that is unchanged."""
    fields = {"id": ID, "title": "Stepwise", "url": "https://arxiv.org/abs/2501.01234"}
    shared.publish([(Paper(**fields, abstract=ABSTRACTS[3]), None)])
    head = shared.head()
    assert shared_row(shared)["arxiv_version"] is None

    same = ArxivPaper(**fields, abstract=ABSTRACTS[3], version=3, updated="2025-02-01T10:00:00")
    assert shared.publish([(same, None)]).unchanged == 1
    row = shared_row(shared)
    assert (row["seq"], row["arxiv_version"], row["arxiv_updated"]) == (
        head,
        3,
        "2025-02-01T10:00:00",
    )
    older = ArxivPaper(**fields, abstract=ABSTRACTS[2], version=2)
    assert shared.publish([(older, None)]).unchanged == 1
    assert (shared.head(), shared_row(shared)["abstract"]) == (head, ABSTRACTS[3])
    # Rows come back with their version, for the replica's upsert to compare.
    [change] = shared.changes(0, head)
    assert isinstance(change.paper, ArxivPaper)
    assert (change.paper.version, change.paper.updated) == (3, "2025-02-01T10:00:00")
    assert change.paper.content_hash() == row["content_hash"]


# -- the schema: revision s050, and its SQLite twin (corpus migration m090) ------------------


def test_a_corpus_files_shared_table_has_the_shape_postgresql_has(tmp_path: Path) -> None:
    """A SQLite file is a complete Paperboy database the state store adopts as it is: its
    ``corpus_papers`` (m050, m090) has the columns of ``bot/state/shared_corpus.py``."""
    db = open_database(tmp_path / "paperboy.db")
    try:
        present = {c.name for c in db["corpus_papers"].columns}
    finally:
        db.close()
    assert present == {c.name for c in corpus_papers.columns}


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_a_state_from_before_s050_gets_the_columns(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    if backend == "sqlite":
        target: str = f"sqlite:///{tmp_path / 'state.db'}"
    else:
        target = request.getfixturevalue("postgres_url")
    store = StateStore(target)
    try:
        with store.write() as conn:
            for name in ("arxiv_updated", "arxiv_version"):
                conn.execute(text(f"alter table corpus_papers drop column {name}"))
            conn.execute(text("update alembic_version set version_num = 's040_member_keys'"))
    finally:
        store.close()
    store = StateStore(target)
    try:
        assert store.revision() == HEAD == "s050_corpus_arxiv_version"
        with store.read() as conn:
            present = {c["name"] for c in inspect(conn).get_columns("corpus_papers")}
        assert {"arxiv_version", "arxiv_updated"} <= present
        shared = SharedCorpus(store)
        paper = ArxivPaper(id=ID, title="Stepwise", abstract=ABSTRACTS[3], version=3)
        assert shared.publish([(paper, None)]).added == 1
        [change] = shared.changes(0, shared.head())
        assert change.paper.version == 3
    finally:
        store.close()

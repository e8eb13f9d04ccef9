"""An older arXiv version never overwrites a newer one across ingests (found in an operator's
trial: a saved Atom dump listed beside a live ``arxiv:`` feed undid the feed's updates).

The feeds are recorded arXiv API answers cut down to one entry each, ingested through the
real ``Engine`` as ``paperboy ingest`` and the scheduler's feed job do."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bot.engine.paper import Paper
from bot.engine.search import Engine

FEED = """<?xml version="1.0" encoding="UTF-8"?>
<feed xmlns="http://www.w3.org/2005/Atom">
  <id>http://arxiv.org/api/cHxbiOdZaP56ODnBPIenZhzg5f8</id>
  <updated>{updated}</updated>
  <title type="html">ArXiv Query: search_query=cat:cs.LG</title>
{entries}</feed>
"""

ENTRY = """  <entry>
    <id>{id}</id>
    <updated>{updated}</updated>
    <published>2025-01-02T18:00:00Z</published>
    <title>Stepwise Search for Language Agents</title>
    <summary>{summary}</summary>
    <author><name>Ada Lovelace</name></author>
    <author><name>Alan Turing</name></author>
    <link href="{id}" rel="alternate" type="text/html"/>
    <category term="cs.LG" scheme="http://arxiv.org/schemas/atom"/>
  </entry>
"""

ABSTRACTS = {
    1: "We study stepwise search for language agents.",
    2: "We study stepwise search for language agents, and fix a proof.",
    3: "We study stepwise search for language agents, fix a proof and add experiments.",
}
UPDATED = {1: "2025-01-02T18:00:00Z", 2: "2025-01-05T09:00:00Z", 3: "2025-02-01T10:00:00Z"}


def feed(tmp_path: Path, name: str, *versions: int, versioned_ids: bool = True) -> Path:
    """An Atom file with an entry per version of arXiv 2501.01234, in the order given."""
    entries = "".join(
        ENTRY.format(
            id=f"http://arxiv.org/abs/2501.01234{f'v{v}' if versioned_ids else ''}",
            updated=UPDATED[v],
            summary=ABSTRACTS[v],
        )
        for v in versions
    )
    path = tmp_path / name
    path.write_text(FEED.format(updated=UPDATED[max(versions)], entries=entries))
    return path


@pytest.fixture
def engine(tmp_path: Path) -> Engine:
    return Engine(tmp_path / "x.db")


def counts(report) -> tuple[int, int, int]:
    return report.counts.added, report.counts.updated, report.counts.unchanged


def abstract(engine: Engine) -> str:
    return engine.corpus.get("arxiv:2501.01234")["abstract"]


def test_an_older_version_after_a_newer_one_is_unchanged(engine, tmp_path) -> None:
    assert counts(engine.ingest([feed(tmp_path, "feed3.xml", 3)])) == (1, 0, 0)
    version = engine.corpus.version

    report = engine.ingest([feed(tmp_path, "feed.xml", 2)])

    assert counts(report) == (0, 0, 1)
    assert abstract(engine) == ABSTRACTS[3]
    assert engine.corpus.version == version  # nothing changed: no new index segment
    # ... and stays so: the next day's dump is as old as ever.
    assert counts(engine.ingest([feed(tmp_path, "feed.xml", 2)])) == (0, 0, 1)
    assert counts(engine.ingest([feed(tmp_path, "feed1.xml", 1)])) == (0, 0, 1)
    assert abstract(engine) == ABSTRACTS[3]


def test_a_newer_version_updates(engine, tmp_path) -> None:
    assert counts(engine.ingest([feed(tmp_path, "feed.xml", 2)])) == (1, 0, 0)

    assert counts(engine.ingest([feed(tmp_path, "feed3.xml", 3)])) == (0, 1, 0)
    assert abstract(engine) == ABSTRACTS[3]


def test_the_same_version_again_is_unchanged(engine, tmp_path) -> None:
    assert counts(engine.ingest([feed(tmp_path, "feed3.xml", 3)])) == (1, 0, 0)

    assert counts(engine.ingest([feed(tmp_path, "again.xml", 3)])) == (0, 0, 1)
    assert abstract(engine) == ABSTRACTS[3]


def test_the_newer_version_wins_in_one_ingest_of_two_files(engine, tmp_path) -> None:
    newer, older = feed(tmp_path, "feed3.xml", 3), feed(tmp_path, "feed.xml", 2)

    assert counts(engine.ingest([newer, older])) == (1, 0, 1)
    assert abstract(engine) == ABSTRACTS[3]


def test_without_versions_the_later_updated_wins(engine, tmp_path) -> None:
    assert counts(engine.ingest([feed(tmp_path, "new.xml", 3, versioned_ids=False)])) == (1, 0, 0)

    old = feed(tmp_path, "old.xml", 2, versioned_ids=False)
    assert counts(engine.ingest([old])) == (0, 0, 1)
    assert abstract(engine) == ABSTRACTS[3]


def test_a_paper_stored_without_a_version_is_updated_by_any_version(engine, tmp_path) -> None:
    # A paper ingested with no version known (from a JSON Lines file, or by a Paperboy from
    # before versions were kept) is updated by any version, which is then known.
    record = {
        "id": "arxiv:2501.01234",
        "title": "Stepwise Search for Language Agents",
        "abstract": "An abstract from somewhere else.",
        "url": "https://arxiv.org/abs/2501.01234",
    }
    (tmp_path / "papers.jsonl").write_text(json.dumps(record) + "\n")
    assert counts(engine.ingest([tmp_path / "papers.jsonl"])) == (1, 0, 0)

    assert counts(engine.ingest([feed(tmp_path, "feed.xml", 2)])) == (0, 1, 0)
    assert counts(engine.ingest([feed(tmp_path, "feed1.xml", 1)])) == (0, 0, 1)
    assert abstract(engine) == ABSTRACTS[2]


def test_a_record_whose_url_names_an_older_version_is_unchanged(engine, tmp_path) -> None:
    engine.ingest([feed(tmp_path, "feed3.xml", 3)])
    record = {
        "id": "arxiv:2501.01234",
        "title": "Stepwise Search for Language Agents",
        "abstract": ABSTRACTS[2],
        "url": "https://arxiv.org/abs/2501.01234v2",
    }
    (tmp_path / "papers.jsonl").write_text(json.dumps(record) + "\n")

    assert counts(engine.ingest([tmp_path / "papers.jsonl"])) == (0, 0, 1)
    assert abstract(engine) == ABSTRACTS[3]


def test_a_paper_read_without_a_version_forgets_the_stored_one(engine, tmp_path) -> None:
    # Its row is written with no version (a changed paper whose version is not known), so the
    # next version read is newer than nothing.
    engine.ingest([feed(tmp_path, "feed3.xml", 3)])
    record = {"id": "arxiv:2501.01234", "title": "Stepwise", "abstract": "Elsewhere."}
    (tmp_path / "papers.jsonl").write_text(json.dumps(record) + "\n")
    assert counts(engine.ingest([tmp_path / "papers.jsonl"])) == (0, 1, 0)
    assert engine.corpus.get("arxiv:2501.01234")["arxiv_version"] is None

    assert counts(engine.ingest([feed(tmp_path, "feed.xml", 2)])) == (0, 1, 0)
    assert engine.corpus.get("arxiv:2501.01234")["arxiv_version"] == 2


def test_a_version_noted_for_an_unchanged_paper_gives_way_to_a_change_after_it(engine) -> None:
    # In one batch: the stored paper again with its version (noted, the row as it is), then a
    # change read without a version: the row's version is not known, not the one noted.
    fields = {"id": "arxiv:2501.01234", "title": "Stepwise"}
    v3 = Paper(**fields, abstract=ABSTRACTS[3], url="https://arxiv.org/abs/2501.01234v3")
    changed = Paper(**fields, abstract="Rewritten.", url="https://arxiv.org/abs/2501.01234")
    engine.corpus.upsert([v3])
    engine.db.execute("update papers set arxiv_version = null")  # stored before versions were

    counted = engine.corpus.upsert([v3, changed])

    assert (counted.updated, counted.unchanged) == (1, 1)
    row = engine.corpus.get("arxiv:2501.01234")
    assert (row["abstract"], row["arxiv_version"]) == ("Rewritten.", None)

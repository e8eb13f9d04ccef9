"""arXiv API Atom feeds (``bot/engine/formats/arxiv_atom.py``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.engine.formats import (
    parse_arxiv_id,
    read_corpus_file,
)
from tests.formats_support import FIXTURES, error_for, locations, read


def test_atom_feed_entries_become_papers() -> None:
    result = read("arxiv_feed.xml")

    assert result.format == "arxiv-atom"
    assert [p.id for p in result.papers] == [
        "arxiv:2501.01234",
        "arxiv:hep-th/9901001",
        "arxiv:2412.09999",
    ]
    old = result.papers[1]
    assert old.title == "An Old-Style Identifier"
    assert old.url == "https://arxiv.org/abs/hep-th/9901001"
    assert (old.venue, old.year, old.authors, old.keywords) == (
        "arXiv",
        1999,
        ["Edward Witten"],
        ["hep-th"],
    )


def test_atom_keeps_the_highest_version_in_place() -> None:
    first, _, newest_first = read("arxiv_feed.xml").papers

    # v2 came after v1 in the feed: it replaces v1.
    assert first.title == "Stepwise Search for Language Agents"
    assert first.abstract == (
        "We study stepwise search for language agents with a generalized "
        "$(L_0,L_1)$-smoothness assumption, and fix a proof."
    )
    assert first.authors == ["Ada Lovelace", "Alan Turing"]
    assert first.keywords == ["cs.LG", "cs.AI", "stat.ML"]
    assert first.url == "https://arxiv.org/abs/2501.01234"
    assert first.year == 2025
    # v3 came before v1: the older v1 does not overwrite it.
    assert newest_first.title == "Newest Version First"


def test_atom_rejects_entries_without_id_or_title() -> None:
    assert locations(read("arxiv_feed.xml")) == [("entry 3", "no <id>"), ("entry 5", "no <title>")]


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("http://arxiv.org/abs/2501.01234v2", ("2501.01234", 2)),
        ("http://arxiv.org/abs/2501.01234", ("2501.01234", 0)),
        ("https://arxiv.org/abs/0704.0001v12", ("0704.0001", 12)),
        ("http://arxiv.org/abs/hep-th/9901001v1", ("hep-th/9901001", 1)),
        ("http://arxiv.org/abs/math.GT/0309136v2", ("math.GT/0309136", 2)),
        ("urn:uuid:60a76c80-d399-11d9-b93C-0003939e0af6", None),
    ],
)
def test_parse_arxiv_id(raw: str, expected: tuple[str, int] | None) -> None:
    assert parse_arxiv_id(raw) == expected


def test_malformed_atom_names_the_line() -> None:
    assert error_for(FIXTURES / "arxiv_malformed.xml") == (
        "arxiv_malformed.xml is not well-formed XML: mismatched tag at line 6, column 5."
    )


def test_xml_that_is_not_atom_is_refused() -> None:
    assert error_for(FIXTURES / "not_atom.xml") == (
        "not_atom.xml is XML but not an Atom feed (its root is <rss>)."
    )


def test_atom_api_error_entry_is_rejected_with_its_message(tmp_path: Path) -> None:
    path = tmp_path / "error.xml"
    path.write_text(
        '<feed xmlns="http://www.w3.org/2005/Atom"><entry>'
        "<id>http://arxiv.org/api/errors#incorrect_id_format_for_1234</id><title>Error</title>"
        "<summary>incorrect id format for 1234</summary></entry></feed>",
        encoding="utf-8",
    )
    result = read_corpus_file(path)

    assert result.papers == []
    assert locations(result) == [("entry 1", "arXiv API error: incorrect id format for 1234")]

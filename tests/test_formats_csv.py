"""CSV and TSV files with a title or abstract column (``bot/engine/formats/csv_rows.py``)."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from bot.engine.formats import (
    read_corpus_file,
)
from tests.formats_support import FIXTURES, error_for, locations, read


def test_csv_maps_columns_case_insensitively_and_rejects_bad_rows() -> None:
    result = read("papers.csv")

    assert result.format == "csv"
    assert [p.id for p in result.papers] == ["c1", "c2", "c6"]
    c1, c2, _ = result.papers
    assert c1.title == "Sparse Attention Revisited"
    assert c1.authors == ["Ada Lovelace", "Alan Turing"]
    assert c1.keywords == ["attention", "sparsity"]
    assert (c1.venue, c1.year, c1.url) == ("ICML", 2024, "https://example.org/c1")
    assert c2.title == "A title, with a comma"
    assert c2.abstract == "An abstract spanning two lines."
    assert locations(result) == [
        ("line 5", "has 3 fields but the header has 8"),
        ("line 6", "no title and no abstract"),
        ("line 7", "year is not a number ('soon')"),
        ("line 9", "has 3 fields but the header has 8"),  # a row spanning lines 9-10
    ]


@pytest.mark.parametrize(
    ("name", "title", "year"),
    [
        ("papers.tsv", "Tab Separated", 2022),
        ("semicolon.csv", "Semicolon Paper", 2021),
        ("crlf.csv", "Windows, CRLF", None),
    ],
)
def test_csv_sniffs_delimiter(name: str, title: str, year: int | None) -> None:
    result = read(name)

    assert result.format == "csv"
    assert result.rejected == []
    assert [(p.title, p.year) for p in result.papers] == [(title, year)]


def test_tsv_splits_authors_on_semicolons_and_keeps_commas_in_text() -> None:
    paper = read("papers.tsv").papers[0]

    assert paper.authors == ["A. One", "B. Two"]
    assert paper.abstract == "An abstract, with commas, in a TSV."
    assert paper.id.startswith("paper-")  # no venue to prefix with


def test_csv_without_title_or_abstract_column_lists_its_columns() -> None:
    assert error_for(FIXTURES / "wrong_columns.csv") == (
        "wrong_columns.csv has no 'title' or 'abstract' column (columns: name, summary, when)."
    )


def test_gzipped_csv(tmp_path: Path) -> None:
    path = tmp_path / "papers.csv.gz"
    path.write_bytes(gzip.compress((FIXTURES / "papers.csv").read_bytes()))
    result = read_corpus_file(path)

    assert result.format == "csv"
    assert [p.id for p in result.papers] == ["c1", "c2", "c6"]

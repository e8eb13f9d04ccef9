"""Which reader a file gets, and the one-sentence error for a file unusable as a whole
(``bot/engine/formats/detect.py``, ``source.py``)."""

from __future__ import annotations

import gzip
import shutil
from pathlib import Path

import pytest

from bot.engine.formats import (
    read_corpus_file,
)
from tests.formats_support import FIXTURES, error_for


@pytest.mark.parametrize(
    ("source", "disguise", "fmt"),
    [
        ("paperlists_sample.jsonl", "export.txt", "jsonl"),
        ("papers.json", "papers.dat", "json"),
        ("papers.csv", "table.txt", "csv"),
        ("arxiv_feed.xml", "feed.txt", "arxiv-atom"),
        ("seed_good.txt", "abstracts.csv.bak", "seed"),
    ],
)
def test_format_is_detected_from_content_not_extension(
    tmp_path: Path, source: str, disguise: str, fmt: str
) -> None:
    path = tmp_path / disguise
    shutil.copy(FIXTURES / source, path)

    assert read_corpus_file(path).format == fmt


def test_gzip_is_detected_by_magic_bytes_not_name(tmp_path: Path) -> None:
    path = tmp_path / "seed.txt"
    path.write_bytes(gzip.compress((FIXTURES / "seed_good.txt").read_bytes()))
    result = read_corpus_file(path)

    assert result.format == "seed"
    assert len(result.papers) == 3


def test_utf8_bom_is_tolerated(tmp_path: Path) -> None:
    path = tmp_path / "bom.csv"
    path.write_bytes(b"\xef\xbb\xbf" + (FIXTURES / "papers.csv").read_bytes())

    assert [p.id for p in read_corpus_file(path).papers] == ["c1", "c2", "c6"]


def test_binary_file_is_refused() -> None:
    assert error_for(FIXTURES / "notes.pdf") == "notes.pdf is not a corpus file: it looks binary."


def test_a_non_utf8_csv_row_is_one_rejected_record_with_its_line() -> None:
    result = read_corpus_file(FIXTURES / "latin1.csv")

    assert result.papers == []
    assert [str(r) for r in result.rejected] == [
        f"{FIXTURES / 'latin1.csv'}, line 2: not UTF-8 text (byte 0xe9 at column 4); "
        "save the file as UTF-8"
    ]


def test_a_file_whose_first_line_is_not_utf8_is_refused_whole(tmp_path: Path) -> None:
    path = tmp_path / "latin1-header.csv"
    path.write_bytes(b"titr\xe9,abstract\nA,B\n")

    assert error_for(path) == (
        "latin1-header.csv is not a corpus file: it looks binary "
        "(byte 0xe9 on line 1 is not UTF-8 text)."
    )


@pytest.mark.parametrize("name", ["empty.jsonl", "blank.csv"])
def test_empty_file_is_refused(name: str) -> None:
    assert error_for(FIXTURES / name) == f"{name} is empty."


def test_empty_gzip_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "nothing.jsonl.gz"
    path.write_bytes(gzip.compress(b""))

    assert error_for(path) == "nothing.jsonl.gz is empty."


def test_damaged_gzip_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "cut.jsonl.gz"
    path.write_bytes((FIXTURES / "paperlists_sample.jsonl.gz").read_bytes()[:200])

    assert error_for(path).startswith("cut.jsonl.gz is a damaged gzip file")


def test_unknown_text_lists_the_accepted_formats() -> None:
    message = error_for(FIXTURES / "memo.dat")

    assert message.startswith("memo.dat is not a corpus file: Paperboy reads JSON, JSON Lines, CSV")
    assert "arXiv Atom" in message and '"ICML 2025 Papers"' in message
    assert ". " not in message and message.endswith(".")  # one sentence


def test_html_page_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "query.xml"
    path.write_text("<!DOCTYPE html>\n<html><body>Rate limited</body></html>", encoding="utf-8")

    assert error_for(path) == "query.xml is an HTML page, not a corpus file."


def test_missing_file_is_refused(tmp_path: Path) -> None:
    assert error_for(tmp_path / "gone.jsonl") == "gone.jsonl does not exist."

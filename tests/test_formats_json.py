"""JSON documents and JSON Lines, paperlists dumps among them (``bot/engine/formats/json_lines.py``,
``records.py``)."""

from __future__ import annotations

import gzip
import hashlib
import json
import shutil
from pathlib import Path

import pytest

from bot.engine.formats import (
    read_corpus_file,
)
from bot.engine.formats.common import collapse, printable
from tests.formats_support import FIXTURES, error_for, locations, read


def test_paperlists_jsonl_sample_reads_every_field() -> None:
    result = read("paperlists_sample.jsonl")

    assert result.format == "jsonl"
    assert result.rejected == []
    assert [p.id for p in result.papers] == [
        "3dv2025-05T81ScPFb",
        "3dv2025-0CNSbBa85A",
        "3dv2025-IviNrUpXHc",
        "3dv2025-KhjlXNbYea",
    ]
    flash3d = result.papers[0]
    assert flash3d.title.startswith("Flash3D: Feed-Forward Generalisable 3D Scene")
    assert (flash3d.venue, flash3d.year) == ("3DV", 2025)
    assert flash3d.authors[0] == "Stanislaw Szymanowicz" and len(flash3d.authors) == 7
    assert flash3d.keywords == [
        "Novel View Synthesis",
        "3D Gaussian Splatting",
        "Monocular 3D Reconstruction",
    ]
    assert flash3d.url == "https://openreview.net/forum?id=05T81ScPFb"
    assert flash3d.title_derived is False
    assert "Erik Sandström" in result.papers[1].authors
    assert "3$\\times$-9$\\times$" in result.papers[2].abstract  # LaTeX kept as-is
    assert "\n" not in result.papers[3].abstract  # its abstract had newlines


def test_gzipped_jsonl_reads_the_same_as_plain() -> None:
    plain = read("paperlists_sample.jsonl")
    packed = read("paperlists_sample.jsonl.gz")

    assert (FIXTURES / "paperlists_sample.jsonl.gz").read_bytes()[:2] == b"\x1f\x8b"
    assert packed.format == "jsonl"
    assert packed.papers == plain.papers


def test_jsonl_rejects_bad_lines_and_keeps_good_ones() -> None:
    result = read("mixed.jsonl")

    assert [p.id for p in result.papers] == ["3dv2025-05T81ScPFb", "3dv2025-0CNSbBa85A", "t1"]
    assert locations(result) == [
        ("line 2", "not valid JSON (Expecting ',' delimiter at column 42)"),
        ("line 4", "not a JSON object (got list)"),
        ("line 5", "no title and no abstract"),
        ("line 8", "duplicate id '3dv2025-05T81ScPFb' (first at line 1)"),
    ]


def test_jsonl_with_broken_first_line_still_reads_the_rest(tmp_path: Path) -> None:
    path = tmp_path / "broken-start.jsonl"
    path.write_text('{"id": "x", "title": \n{"id": "y", "title": "Fine"}\n', encoding="utf-8")
    result = read_corpus_file(path)

    assert result.format == "jsonl"
    assert [p.id for p in result.papers] == ["y"]
    assert [r.location for r in result.rejected] == ["line 1"]


def test_json_list_saved_as_jsonl_is_read_as_json(tmp_path: Path) -> None:
    path = tmp_path / "misnamed.jsonl"
    shutil.copy(FIXTURES / "papers_wrapped.json", path)

    result = read_corpus_file(path)
    assert result.format == "json"
    assert [p.id for p in result.papers] == ["p1", "p2"]


def test_jsonl_accepts_a_title_with_no_abstract() -> None:
    title_only = read("mixed.jsonl").papers[2]

    assert title_only.title == "Title only, no abstract"
    assert title_only.abstract == ""
    assert title_only.year == 2020


def test_json_list_maps_fields_and_rejects_records_by_number() -> None:
    result = read("papers.json")

    assert result.format == "json"
    assert locations(result) == [
        ("record 3", "no title and no abstract"),
        ("record 4", "not a JSON object (got string)"),
        ("record 5", "year is not a number ('twenty')"),
    ]
    first, no_id, derived = result.papers
    assert first.id == "icml2024-abc"
    assert first.title == "A Paper With Spaced Title"
    assert first.abstract == "We bound the $(L_0,L_1)$-smoothness constant."
    assert first.authors == ["Ada Lovelace", "Alan Turing"]
    assert first.keywords == ["optimization", "smoothness"]
    assert first.url == "https://example.org/abc"  # from "site"
    assert first.year == 2024  # from the string "2024"
    assert no_id.authors == ["Grace Hopper", "Edsger Dijkstra", "Barbara Liskov"]
    assert no_id.url == "https://example.org/x.pdf"  # from "pdf"
    assert no_id.abstract == ""


def test_json_record_without_id_gets_a_stable_venue_prefixed_id() -> None:
    no_id = read("papers.json").papers[1]
    digest = hashlib.sha1(b"no id here|2025").hexdigest()[:12]

    assert no_id.id == f"iclr2025-{digest}"
    assert read("papers.json").papers[1].id == no_id.id


def test_json_record_without_title_gets_a_derived_one() -> None:
    derived = read("papers.json").papers[2]

    assert derived.title == "FooNet: Fast Object Observation Network"
    assert derived.title_derived is True
    assert derived.id.startswith("cvpr2023-")


def test_json_object_with_papers_list() -> None:
    result = read("papers_wrapped.json")

    assert result.format == "json"
    assert [(p.id, p.title, p.url) for p in result.papers] == [
        ("p1", "First", "https://example.org/1"),
        ("p2", "Second", ""),
    ]


def test_malformed_json_document_names_the_line() -> None:
    message = error_for(FIXTURES / "malformed.json")

    assert message == (
        "malformed.json is not valid JSON: Expecting ',' delimiter at line 3, column 34."
    )


def test_json_object_without_papers_list_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text('{"name": "x", "items": []}', encoding="utf-8")

    assert (
        error_for(path)
        == "config.json is a JSON object without a 'papers' list (keys: name, items)."
    )


def test_single_paper_object_is_one_record(tmp_path: Path) -> None:
    path = tmp_path / "one.json"
    path.write_text('{"id": "solo", "title": "Alone", "year": 2001}\n', encoding="utf-8")
    result = read_corpus_file(path)

    assert result.format == "json"
    assert [(p.id, p.year) for p in result.papers] == [("solo", 2001)]


def test_gzipped_json_list(tmp_path: Path) -> None:
    path = tmp_path / "papers.json.gz"
    path.write_bytes(gzip.compress((FIXTURES / "papers.json").read_bytes()))
    result = read_corpus_file(path)

    assert result.format == "json"
    assert [p.id for p in result.papers] == [p.id for p in read("papers.json").papers]


def test_author_lists_are_cleaned_name_by_name_whatever_sits_next_to_the_separators(
    tmp_path: Path,
) -> None:
    """A clean list is taken whole (``records._plain_names``); a name with spaces or bars at
    its ends, doubled spaces, controls, or an empty one sends the list the long way."""
    cases = [
        (["Ada Lovelace", "Bo Li"], ["Ada Lovelace", "Bo Li"]),
        (["Bo|Li", "Cy|Dee"], ["Bo|Li", "Cy|Dee"]),
        ([" Ada", "Bo"], ["Ada", "Bo"]),
        (["Ada ", "Bo"], ["Ada", "Bo"]),
        (["Ada", " Bo"], ["Ada", "Bo"]),
        (["Ada |", "| Bo"], ["Ada |", "| Bo"]),
        (["Ada", "", "Bo"], ["Ada", "Bo"]),
        ([""], []),
        (["|Ada", "Bo|"], ["|Ada", "Bo|"]),
        (["Ada  Lovelace"], ["Ada Lovelace"]),
        (["Ada\tLovelace", "Bo\nLi"], ["Ada Lovelace", "Bo Li"]),
        (["Ada\x1b[31m"], ["Ada"]),
        (["Ada", 7, None, {"name": " Cy "}], ["Ada", "7", "Cy"]),
    ]
    path = tmp_path / "names.jsonl"
    path.write_text(
        "".join(
            json.dumps({"id": f"p{k}", "title": "T", "authors": authors}) + "\n"
            for k, (authors, _) in enumerate(cases)
        )
    )
    result = read_corpus_file(path)
    assert result.rejected == []
    assert [p.authors for p in result.papers] == [want for _, want in cases]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("  a  b   c    d     e ", "a b c d e"),
        ("a" + " " * 9 + "b", "a b"),
        (" lead", "lead"),
        ("trail ", "trail"),
        ("   ", ""),
        ("", ""),
        ("tab\there\n", "tab here"),
        ("Zoë  Ünïcødé ", "Zoë Ünïcødé"),
        ("nb\xa0sp  x", "nb sp x"),
        ("\x1b[31mred\x1b[0m  text", "red text"),
        ("del\x7f  x", "del x"),
        ("unit\x1fsep", "unit sep"),
        ("~ tilde", "~ tilde"),
    ],
)
def test_collapse_leaves_single_spaces_and_no_control_characters(text, expected) -> None:
    """Text that is printable but for its spaces takes its own way (runs of spaces halved);
    ASCII is checked printable byte by byte (DEL and the unit separator are not)."""
    assert collapse(text) == expected
    assert printable(text) == text.isprintable()


def test_a_year_no_paper_can_have_rejects_the_record_by_number(tmp_path) -> None:
    """``year: 99999`` or ``-5`` (found in a trial: ``stats`` then listed a year 99999)."""
    path = tmp_path / "years.jsonl"
    rows = [
        {"title": f"Paper {y}", "year": y} for y in (2024, 99999, -5, "1999", "20225", 0, "--5")
    ]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    result = read_corpus_file(path)
    assert [p.year for p in result.papers] == [2024, 1999, None]  # 0: "unknown"
    assert locations(result) == [
        ("line 2", "year 99999 is not a year a paper can have (1000-2199)"),
        ("line 3", "year -5 is not a year a paper can have (1000-2199)"),
        ("line 5", "year 20225 is not a year a paper can have (1000-2199)"),
        ("line 7", "year is not a number ('--5')"),
    ]

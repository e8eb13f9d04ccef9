"""Seed text files (``bot/engine/formats/seed_text.py``): a venue-and-year header, one abstract per paragraph."""

from __future__ import annotations

import hashlib

import pytest

from bot.engine.formats import (
    parse_seed_header,
    read_corpus_file,
)
from tests.formats_support import DATA, FIXTURES, error_for, locations, read, seed_paragraphs


def test_seed_reads_venue_year_and_derived_titles() -> None:
    result = read("seed_good.txt")

    assert result.format == "seed"
    assert result.path == str(FIXTURES / "seed_good.txt")
    assert len(result.papers) == 3
    for paper in result.papers:
        assert paper.venue == "NeurIPS"
        assert paper.year == 2024
        assert paper.title_derived is True
        assert paper.authors == [] and paper.keywords == []
    titles = [p.title for p in result.papers]
    assert titles[0] == "QLASS: Q-guided Language Agent Stepwise Search"
    assert titles[1].startswith("Celcomen: a novel generative graph neural network")
    assert titles[2].startswith("CodeSteer: an effective method for guiding LLM")


def test_seed_rejects_short_paragraph_with_its_line_number() -> None:
    result = read("seed_good.txt")

    assert locations(result) == [("line 20", "too short to be an abstract (20 characters)")]
    assert str(result.rejected[0]).endswith(
        "seed_good.txt, line 20: too short to be an abstract (20 characters)"
    )


def test_seed_joins_wrapped_paragraph_lines() -> None:
    celcomen = read("seed_good.txt").papers[1]
    original = seed_paragraphs(DATA / "iclr2025.txt")[1]

    assert celcomen.abstract == original
    assert "\n" not in celcomen.abstract


def test_seed_ids_are_venue_year_and_abstract_hash_so_reingest_is_stable() -> None:
    first = read("seed_good.txt")
    again = read("seed_good.txt")
    qlass = first.papers[0]
    digest = hashlib.sha1(qlass.abstract.encode("utf-8")).hexdigest()[:12]

    assert qlass.id == f"neurips2024-{digest}"
    assert [p.id for p in first.papers] == [p.id for p in again.papers]
    # The same abstract in the real ICML file hashes the same; only the venue prefix differs.
    icml = read_corpus_file(DATA / "icml2025.txt")
    assert icml.papers[0].id == f"icml2025-{digest}"


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        ("ICML 2025 Papers", ("ICML", 2025)),
        ("NeurIPS 2024", ("NeurIPS", 2024)),
        ("ICLR 2025 Papers", ("ICLR", 2025)),
        ("ICML 2025 accepted papers", ("ICML", 2025)),
        ("  CVPR 2023  ", ("CVPR", 2023)),
        ("ICML Papers", None),
        ("Papers from 2023 and 2024", None),
        (
            "In 2023 we studied the problem of learning to rank documents with very long contexts.",
            None,
        ),
    ],
)
def test_parse_seed_header(header: str, expected: tuple[str, int] | None) -> None:
    assert parse_seed_header(header) == expected


def test_seed_header_with_trailing_words_sets_venue() -> None:
    result = read("seed_accepted.txt")

    assert result.format == "seed"
    assert (result.papers[0].venue, result.papers[0].year) == ("ICLR", 2025)
    assert result.papers[0].id.startswith("iclr2025-")


def test_seed_header_without_year_says_what_the_first_line_should_be() -> None:
    message = error_for(FIXTURES / "seed_no_year.txt")

    assert message.startswith("seed_no_year.txt looks like a seed file")
    assert "'ICML Papers' has no year" in message
    assert '"ICML 2025 Papers"' in message


@pytest.mark.parametrize("name", ["icml2025.txt", "iclr2025.txt"])
def test_real_seed_files_every_paper_gets_a_short_title(name: str) -> None:
    result = read_corpus_file(DATA / name)
    paragraphs = seed_paragraphs(DATA / name)

    assert result.rejected == []
    assert len(result.papers) == len(paragraphs) == 19
    assert len({p.id for p in result.papers}) == 19
    for paper in result.papers:
        assert paper.title.strip(), paper.abstract[:80]
        assert len(paper.title) <= 100, paper.title
        assert "*" not in paper.title, paper.title
        assert paper.title_derived is True

"""Reading every corpus format: good files, bad records, broken files and format detection."""

from __future__ import annotations

import gzip
import hashlib
import json
import re
import shutil
from pathlib import Path

import pytest

from bot.engine.formats import (
    HEAD_BYTES,
    CorpusFileError,
    CorpusStream,
    ReadResult,
    derive_title,
    open_corpus_file,
    parse_arxiv_id,
    parse_seed_header,
    read_corpus_file,
    strip_emphasis,
)
from bot.engine.paper import Paper, Rejected

FIXTURES = Path(__file__).parent / "fixtures" / "formats"
DATA = Path(__file__).resolve().parents[1] / "data"


def read(name: str) -> ReadResult:
    return read_corpus_file(FIXTURES / name)


def locations(result: ReadResult) -> list[tuple[str, str]]:
    return [(r.location, r.reason) for r in result.rejected]


def error_for(path: Path) -> str:
    with pytest.raises(CorpusFileError) as caught:
        read_corpus_file(path)
    return str(caught.value)


def seed_paragraphs(path: Path) -> list[str]:
    """The abstracts of a real seed file, whitespace-collapsed, header dropped."""
    chunks = path.read_text(encoding="utf-8").split("\n\n")[1:]
    return [" ".join(chunk.split()) for chunk in chunks if chunk.strip()]


# --------------------------------------------------------------------------------------------
# Seed format


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


# --------------------------------------------------------------------------------------------
# derive_title


def test_derive_title_named_method_with_expansion() -> None:
    qlass = seed_paragraphs(DATA / "icml2025.txt")[0]

    assert derive_title(qlass) == "QLASS: Q-guided Language Agent Stepwise Search"


def test_derive_title_named_method_with_appositive_is_shortened() -> None:
    celcomen = seed_paragraphs(DATA / "iclr2025.txt")[1]
    title = derive_title(celcomen)

    assert title.startswith("Celcomen: a novel generative graph neural network")
    assert title.endswith("…")
    assert len(title) <= 100


@pytest.mark.parametrize(
    ("abstract", "expected"),
    [
        (
            "Graphs are common. We introduce the Joint Embedding Predictive Transformer (JEPT) "
            "to learn a policy.",
            "JEPT: Joint Embedding Predictive Transformer",
        ),
        (
            "Unlearning matters. We introduce a new graph unlearning method,**Cognac**, which "
            "can unlearn the effect of a manipulation set.",
            "Cognac: a new graph unlearning method",
        ),
        (
            'We introduce the "Belief State Transformer", a next-token predictor.',
            "Belief State Transformer: a next-token predictor",
        ),
        (
            "Then, we introduce *EffOrt*, a methodology that modifies the learning step.",
            "EffOrt: a methodology that modifies the learning step",
        ),
    ],
)
def test_derive_title_named_method_variants(abstract: str, expected: str) -> None:
    assert derive_title(abstract) == expected


def test_derive_title_ignores_common_acronyms_of_the_problem() -> None:
    abstract = (
        "Scaling laws guide training. We propose a method for Large Language Models (LLMs) "
        "that predicts loss curves."
    )

    assert derive_title(abstract) == "Scaling laws guide training"


def test_derive_title_first_sentence_does_not_split_at_initials_or_et_al() -> None:
    abstract = "This is hard, as shown by A. Smith et al. in prior work. Here is more."

    assert derive_title(abstract) == "This is hard, as shown by A. Smith et al. in prior work"


def test_derive_title_strips_markdown_emphasis() -> None:
    abstract = (
        "Streams need *continual learning* (CL) and **fast** updates. We study them in depth "
        "with several experiments."
    )

    assert derive_title(abstract) == "Streams need continual learning (CL) and fast updates"


def test_seed_abstracts_lose_markdown_emphasis_but_keep_ids_and_named_titles(
    tmp_path: Path,
) -> None:
    abstract = (
        "Image utility matters. We introduce a new engagement model, **EngageNet**, trained on "
        "*EngagingImageNet*; data are not *i.i.d.* and we term this **cross capabilities**, "
        "an _open_ problem, for $x^*$ and $y^*$ with $(L_0,L_1)$ bounds (see my_repo)."
    )
    path = tmp_path / "seed.txt"
    path.write_text(f"ICML 2025 Papers\n\n{abstract}\n", encoding="utf-8")

    [paper] = read_corpus_file(path).papers

    assert paper.abstract == (
        "Image utility matters. We introduce a new engagement model, EngageNet, trained on "
        "EngagingImageNet; data are not i.i.d. and we term this cross capabilities, "
        "an open problem, for $x^*$ and $y^*$ with $(L_0,L_1)$ bounds (see my_repo)."
    )
    assert paper.title.startswith("EngageNet: ")  # found by its ** markers, before stripping
    # The id hashes the abstract as written, so databases made before keep their ids.
    assert paper.id == "icml2025-" + hashlib.sha1(abstract.encode()).hexdigest()[:12]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("*EngageNet*-based rewards", "EngageNet-based rewards"),
        ("ImageReward, *etc.* are", "ImageReward, etc. are"),
        ("a _really_ good idea", "a really good idea"),
        ("a __Strong claim__ here", "a Strong claim here"),
        ("$x^*$ and $y^*$", "$x^*$ and $y^*$"),
        ("2*3*4 and a * b * c", "2*3*4 and a * b * c"),
        ("$\\text{AP}_{50}$ and x_i, y_j", "$\\text{AP}_{50}$ and x_i, y_j"),
        (
            "the __init__ method of proactive_t2i_agents",
            "the __init__ method of proactive_t2i_agents",
        ),
        ("``Law of the Weakest Link,''", "``Law of the Weakest Link,''"),
    ],
)
def test_strip_emphasis_only_where_it_clearly_is_emphasis(text: str, expected: str) -> None:
    assert strip_emphasis(text) == expected


@pytest.mark.parametrize("name", ["icml2025.txt", "iclr2025.txt"])
def test_real_seed_abstracts_carry_no_markdown_emphasis(name: str) -> None:
    for paper in read_corpus_file(DATA / name).papers:
        assert not re.search(r"\*\S|\S\*", paper.abstract), paper.abstract


def test_derive_title_keeps_latex_intact() -> None:
    abstract = "We bound the $(L_0,L_1)$-smoothness constant of deep networks. More follows."

    assert derive_title(abstract) == "We bound the $(L_0,L_1)$-smoothness constant of deep networks"


def test_derive_title_cuts_long_sentence_at_a_word_boundary() -> None:
    words = "representation learning with very many carefully chosen words " * 4
    abstract = f"Modern {words.strip()}. Second sentence."
    title = derive_title(abstract)
    stem = title.removesuffix("…")

    assert title.endswith("…")
    assert len(title) <= 100
    assert abstract.startswith(stem)
    assert abstract[len(stem)] == " "


def test_derive_title_of_nothing_is_not_empty() -> None:
    assert derive_title("   ") == "Untitled"


# --------------------------------------------------------------------------------------------
# JSON and JSON Lines


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


# --------------------------------------------------------------------------------------------
# CSV


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


# --------------------------------------------------------------------------------------------
# arXiv Atom


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


# --------------------------------------------------------------------------------------------
# Detection and whole-file errors


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


# --------------------------------------------------------------------------------------------
# Streaming: open_corpus_file


def record(number: int) -> dict[str, object]:
    """A distinct paper whose text does not compress away (so gzip streams are long)."""
    words = " ".join(hashlib.sha1(f"{number}-{i}".encode()).hexdigest()[:9] for i in range(20))
    return {
        "id": f"p{number}",
        "venue": "ICML",
        "year": 2024,
        "title": f"Paper number {number}",
        "abstract": f"We study {words}.",
        "authors": ["Ada Lovelace", "Alan Turing"],
    }


def jsonl_bytes(count: int) -> bytes:
    return "".join(json.dumps(record(n)) + "\n" for n in range(1, count + 1)).encode()


def drain(stream: CorpusStream) -> tuple[list[Paper | Rejected], CorpusFileError | None]:
    """Every item until the end or a CorpusFileError, and that error."""
    items: list[Paper | Rejected] = []
    try:
        for item in stream.items:
            items.append(item)
    except CorpusFileError as error:
        return items, error
    return items, None


def test_open_corpus_file_streams_the_records_lazily() -> None:
    stream = open_corpus_file(FIXTURES / "paperlists_sample.jsonl")

    assert isinstance(stream, CorpusStream)
    assert (stream.path, stream.format) == (str(FIXTURES / "paperlists_sample.jsonl"), "jsonl")
    assert iter(stream.items) is stream.items  # an iterator, not a list
    first = next(stream.items)
    assert isinstance(first, Paper) and first.id == "3dv2025-05T81ScPFb"
    assert [p.id for p in stream.items] == [p.id for p in read("paperlists_sample.jsonl").papers][
        1:
    ]


def stream_or_error(path: Path) -> tuple[str, str, list[Paper | Rejected]] | str:
    try:
        stream = open_corpus_file(path)
        return stream.path, stream.format, list(stream.items)
    except CorpusFileError as error:
        return str(error)


def read_or_error(path: Path) -> tuple[str, str, list[Paper | Rejected]] | str:
    try:
        result = read_corpus_file(path)
    except CorpusFileError as error:
        return str(error)
    return result.path, result.format, [*result.papers, *result.rejected]


@pytest.mark.parametrize(
    "path",
    [*sorted(FIXTURES.iterdir()), DATA / "icml2025.txt", DATA / "iclr2025.txt"],
    ids=lambda p: p.name,
)
def test_stream_and_read_corpus_file_agree(path: Path) -> None:
    streamed = stream_or_error(path)
    read_whole = read_or_error(path)

    if isinstance(streamed, str):  # the same whole-file error either way
        assert streamed == read_whole
        return
    assert not isinstance(read_whole, str)
    assert streamed[:2] == read_whole[:2]
    papers = [item for item in streamed[2] if isinstance(item, Paper)]
    rejected = [item for item in streamed[2] if isinstance(item, Rejected)]
    assert [*papers, *rejected] == read_whole[2]  # same records, same exact locations


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("notes.pdf", "notes.pdf is not a corpus file: it looks binary."),
        ("empty.jsonl", "empty.jsonl is empty."),
        ("wrong_columns.csv", "wrong_columns.csv has no 'title' or 'abstract' column"),
        ("seed_no_year.txt", "seed_no_year.txt looks like a seed file"),
        ("memo.dat", "memo.dat is not a corpus file"),
    ],
)
def test_whole_file_problems_are_raised_by_open_not_by_the_items(name: str, message: str) -> None:
    with pytest.raises(CorpusFileError) as caught:
        open_corpus_file(FIXTURES / name)

    assert str(caught.value).startswith(message)


def test_undecodable_line_late_in_a_file_is_rejected_in_its_place(tmp_path: Path) -> None:
    path = tmp_path / "late.jsonl"
    others = "".join(json.dumps(record(n)) + "\n" for n in range(200, 203)).encode()
    path.write_bytes(jsonl_bytes(100) + b'{"id": "bad", "title": "Caf\xe9"}\n' + others)
    assert path.stat().st_size > 4 * HEAD_BYTES

    items, error = drain(open_corpus_file(path))

    assert error is None
    assert [i.id for i in items[:100]] == [f"p{n}" for n in range(1, 101)]
    assert items[100] == Rejected(
        str(path), "line 101", "not UTF-8 text (byte 0xe9 at column 28); save the file as UTF-8"
    )
    assert [i.id for i in items[101:]] == ["p200", "p201", "p202"]


@pytest.mark.parametrize("fmt", ["jsonl", "csv", "seed"])
def test_a_few_latin1_lines_among_utf8_ones_reject_only_their_records(
    tmp_path: Path, fmt: str
) -> None:
    """Gzipped or not, in the head or far past it: each record decided on its own."""
    good = [record(n) | {"abstract": f"Über {n}: " + "résumé of the method. " * 8} for n in (1, 2)]
    bad = record(3) | {"abstract": "Caf" + "\xe9 " * 40}
    ordered = [good[0], bad, good[1]]
    if fmt == "jsonl":
        lines = [json.dumps(r, ensure_ascii=False) for r in ordered]
        text = "\n".join(lines) + "\n"
    elif fmt == "csv":
        rows = [f'{r["id"]},{r["title"]},"{r["abstract"]}"' for r in ordered]
        text = "id,title,abstract\n" + "\n".join(rows) + "\n"
    else:
        text = "ICML 2025 Papers\n\n" + "\n\n".join(r["abstract"] for r in ordered) + "\n"
    data = text.encode("utf-8")
    latin = bad["abstract"].encode("utf-8")
    data = data.replace(latin, bad["abstract"].encode("latin-1"))
    for name, payload in ((f"mixed.{fmt}", data), (f"mixed.{fmt}.gz", gzip.compress(data))):
        path = tmp_path / name
        path.write_bytes(payload)
        result = read_corpus_file(path)
        assert len(result.papers) == 2, name
        assert all("Über" in p.abstract for p in result.papers)
        (rejected,) = result.rejected
        line = {"jsonl": 2, "csv": 3, "seed": 5}[fmt]
        assert rejected.location == f"line {line}"
        assert rejected.reason.startswith("not UTF-8 text (byte 0xe9 at column")


def test_truncated_gzip_yields_what_it_has_then_names_the_last_good_line(tmp_path: Path) -> None:
    packed = gzip.compress(jsonl_bytes(2000))
    path = tmp_path / "cut.jsonl.gz"
    path.write_bytes(packed[: len(packed) // 2])

    stream = open_corpus_file(path)
    assert stream.format == "jsonl"
    assert isinstance(next(stream.items), Paper)
    items, error = drain(stream)

    assert error is not None
    match = re.fullmatch(
        r"cut\.jsonl\.gz is a damaged gzip file: it breaks off after line (\d+) \(.+\)\.",
        str(error),
    )
    assert match, str(error)
    assert 100 < int(match[1]) < 2000
    assert len(items) + 1 == int(match[1])  # every complete line came through, in order
    assert [p.id for p in items][-1] == f"p{match[1]}"
    assert error_for(path) == str(error)


def test_nul_byte_late_in_a_file_is_binary_with_its_line(tmp_path: Path) -> None:
    path = tmp_path / "nul.jsonl"
    path.write_bytes(jsonl_bytes(60) + b"\x00\x00\x00\n")

    items, error = drain(open_corpus_file(path))

    assert len(items) == 60
    assert str(error) == "nul.jsonl is not a corpus file: it looks binary (line 61 has a NUL byte)."


@pytest.mark.parametrize("fmt", ["jsonl", "csv", "seed"])
def test_big_gzipped_files_stream_the_same_as_plain(tmp_path: Path, fmt: str) -> None:
    records = [record(n) for n in range(1, 400)]
    if fmt == "jsonl":
        text = "".join(json.dumps(r) + "\n" for r in records)
    elif fmt == "csv":
        text = "id,title,abstract,authors\n" + "".join(
            f'{r["id"]},{r["title"]},"{r["abstract"]}",Ada Lovelace; Alan Turing\n' for r in records
        )
    else:
        text = "NeurIPS 2024 Papers\n\n" + "".join(f"{r['abstract']}\n\n" for r in records)
    plain = tmp_path / f"big.{fmt}.txt"
    plain.write_text(text, encoding="utf-8")
    packed = tmp_path / f"big.{fmt}.txt.gz"
    packed.write_bytes(gzip.compress(text.encode()))
    assert len(text) > 10 * HEAD_BYTES

    streamed = open_corpus_file(packed)
    items = list(streamed.items)

    assert streamed.format == fmt
    assert items == list(open_corpus_file(plain).items)
    assert len(items) == 399 and all(isinstance(item, Paper) for item in items)


def test_stream_context_manager_closes_the_file(tmp_path: Path) -> None:
    path = tmp_path / "papers.jsonl.gz"
    path.write_bytes(gzip.compress(jsonl_bytes(50)))

    with open_corpus_file(path) as stream:
        assert isinstance(next(stream.items), Paper)

    assert list(stream.items) == []  # closed: nothing more comes


def test_first_line_longer_than_the_head_is_still_detected(tmp_path: Path) -> None:
    long = record(1) | {"abstract": "word " * (2 * HEAD_BYTES)}
    path = tmp_path / "long.jsonl"
    path.write_text(json.dumps(long) + "\n" + json.dumps(record(2)) + "\n", encoding="utf-8")

    result = read_corpus_file(path)

    assert result.format == "jsonl"
    assert [p.id for p in result.papers] == ["p1", "p2"]


def test_big_jsonl_with_broken_first_line_still_streams(tmp_path: Path) -> None:
    path = tmp_path / "broken-start.jsonl"
    path.write_bytes(b'{"id": "x", "title": \n' + jsonl_bytes(300))

    result = read_corpus_file(path)

    assert result.format == "jsonl"
    assert len(result.papers) == 300
    assert [r.location for r in result.rejected] == ["line 1"]


def test_big_pretty_printed_json_named_jsonl_is_still_json(tmp_path: Path) -> None:
    path = tmp_path / "pretty.jsonl"
    path.write_text(json.dumps({"papers": [record(n) for n in range(300)]}, indent=2))
    assert path.stat().st_size > 10 * HEAD_BYTES

    result = read_corpus_file(path)

    assert result.format == "json"
    assert len(result.papers) == 300 and result.rejected == []


def test_big_csv_without_title_column_is_refused_before_streaming(tmp_path: Path) -> None:
    path = tmp_path / "wide.csv"
    path.write_text("name,summary\n" + "x,y\n" * 10_000, encoding="utf-8")

    with pytest.raises(CorpusFileError, match=r"^wide.csv has no 'title' or 'abstract' column"):
        open_corpus_file(path)


@pytest.mark.parametrize("newline", ["\r", "\r\n"])
def test_old_mac_and_windows_line_ends_number_lines_the_same(tmp_path: Path, newline: str) -> None:
    lines = [json.dumps(record(1)), "not json", "", json.dumps(record(2)), "[1]"]
    path = tmp_path / "ends.jsonl"
    path.write_bytes(newline.join(lines).encode())

    result = read_corpus_file(path)

    assert [p.id for p in result.papers] == ["p1", "p2"]
    assert [r.location for r in result.rejected] == ["line 2", "line 5"]


def test_utf16_tab_separated_export_streams(tmp_path: Path) -> None:
    path = tmp_path / "excel.txt"
    text = "title\tabstract\r\n" + "".join(
        f"Paper {n}\tAbstract with ümlauts {n}\r\n" for n in range(2000)
    )
    path.write_bytes(text.encode("utf-16"))
    assert path.stat().st_size > 10 * HEAD_BYTES

    result = read_corpus_file(path)

    assert result.format == "csv"
    assert len(result.papers) == 2000 and result.rejected == []
    assert result.papers[-1].abstract == "Abstract with ümlauts 1999"


def test_jsonl_line_with_an_integer_too_long_is_rejected_not_fatal(tmp_path: Path) -> None:
    path = tmp_path / "huge-int.jsonl"
    path.write_text(
        json.dumps(record(1)) + '\n{"id": ' + "9" * 5000 + "}\n" + json.dumps(record(2)) + "\n",
        encoding="utf-8",
    )

    result = read_corpus_file(path)

    assert [p.id for p in result.papers] == ["p1", "p2"]
    assert [r.location for r in result.rejected] == ["line 2"]
    assert result.rejected[0].reason.startswith("not valid JSON (")

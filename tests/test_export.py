"""The reading list's export formats (digest/export.py), read back by real parsers, and
``paperboy saved``: every saved paper in each format, BibTeX keys unique, LaTeX's special
characters escaped and accents kept (a title's formulas kept as math: tests/test_latex.py)."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import bibtexparser
import pytest
from bibtexparser.middlewares import LatexDecodingMiddleware, SeparateCoAuthors
from click.testing import CliRunner

from bot.cli import main
from bot.state import state_for
from digest.export import export, to_bibtex
from tests.postgres import state_env
from tests.slack_harness import seeded_engine

TRICKY = {
    "id": "t-1",
    "title": "Costs & benefits: 100% of $5 in #tags_and {braces} ~ ^ \\ for Schrödinger",
    "authors": ["José Müller", "Zoë O'Brien-Øster", "Li Wei"],
    "venue": "ICLR",
    "year": 2024,
    "url": "https://example.org/p?a=1&b=2_c%20d#frag",
}


def parse(text: str):
    library = bibtexparser.parse_string(
        text, append_middleware=[LatexDecodingMiddleware(), SeparateCoAuthors()]
    )
    assert not library.failed_blocks, [b.error for b in library.failed_blocks]
    return library


def test_bibtex_escapes_latex_specials_keeps_accents_and_joins_authors_with_and() -> None:
    text = to_bibtex([TRICKY])
    assert "and Zoë O'Brien-Øster and" in text  # authors joined by " and ", accents kept
    [entry] = parse(text).entries
    assert entry.entry_type == "inproceedings" and entry.key == "muller2024costs"
    fields = {f.key: f.value for f in entry.fields}
    # pylatexenc reads \textasciicircum{} (LaTeX's "^") as U+02C6, the modifier letter.
    assert fields["title"].strip("{}").replace("\u02c6", "^") == TRICKY["title"]
    assert fields["author"] == TRICKY["authors"]
    assert fields["year"] == "2024" and fields["booktitle"] == "ICLR"
    # The url field is read verbatim (the url package), so it is not LaTeX-escaped.
    [raw] = bibtexparser.parse_string(text).entries
    assert raw.fields_dict["url"].value == TRICKY["url"]
    # As written: each special character escaped, so LaTeX prints it rather than obeys it.
    assert raw.fields_dict["title"].value == (
        r"{Costs \& benefits: 100\% of \$5 in \#tags\_and \{braces\} \textasciitilde{} "
        r"\textasciicircum{} \textbackslash{} for Schrödinger}"
    )


def test_bibtex_keys_are_unique_and_every_paper_is_there() -> None:
    same = {"title": "Attention is all you need", "authors": ["A. Vaswani"], "year": 2017}
    papers = [{**same, "id": f"p{n}"} for n in range(30)]
    papers.append({"id": "no-metadata", "title": ""})
    entries = parse(to_bibtex(papers)).entries
    keys = [e.key for e in entries]
    assert len(entries) == 31 and len(set(keys)) == 31
    assert keys[:3] == ["vaswani2017attention", "vaswani2017attentionb", "vaswani2017attentionc"]
    assert keys[26] == "vaswani2017attentionaa"
    assert {f.value for e in entries for f in e.fields if f.key == "note"} >= {
        "Paperboy id: p0",
        "Paperboy id: no-metadata",
    }


def test_saving_another_paper_never_changes_an_earlier_papers_key() -> None:
    """The reading list is newest first; keys are given oldest first, so the paper saved
    first keeps ``vaswani2017attention`` whatever is saved after it."""
    first = {"id": "p1", "title": "Attention is all you need", "authors": ["A. Vaswani"]}
    first |= {"year": 2017, "saved_at": "2024-03-01T00:00:00+00:00"}
    later = {**first, "id": "p2", "title": "Attention again", "saved_at": "2024-03-05T00:00:00"}
    [alone] = parse(to_bibtex([first])).entries
    newest_first = parse(to_bibtex([later, first])).entries
    assert alone.key == "vaswani2017attention"
    assert [(e.key, e.fields_dict["note"].value) for e in newest_first] == [
        ("vaswani2017attentionb", "Paperboy id: p2"),
        ("vaswani2017attention", "Paperboy id: p1"),
    ]


def test_csv_and_json_hold_every_field() -> None:
    rows = list(csv.DictReader(io.StringIO(export([TRICKY], "csv"))))
    assert rows == [
        {
            "id": "t-1",
            "title": TRICKY["title"],
            "title_derived": "False",
            "authors": "José Müller; Zoë O'Brien-Øster; Li Wei",
            "venue": "ICLR",
            "year": "2024",
            "url": TRICKY["url"],
            "saved_at": "",
        }
    ]
    [back] = json.loads(export([TRICKY], "json"))
    assert back["authors"] == TRICKY["authors"] and back["title"] == TRICKY["title"]
    with pytest.raises(ValueError):
        export([TRICKY], "ris")


def test_exports_mark_derived_titles_and_csv_cells_cannot_be_formulas() -> None:
    derived = {"id": "s-1", "title": "Flow matching for proteins", "title_derived": True}
    evil = {"id": "e-1", "title": '=HYPERLINK("http://evil","x")', "authors": ["-Anon", "@bob"]}
    rows = list(csv.DictReader(io.StringIO(export([derived, evil], "csv"))))
    assert rows[0]["title_derived"] == "True" and rows[1]["title_derived"] == "False"
    assert rows[1]["title"] == "'" + evil["title"] and rows[1]["authors"] == "'-Anon; @bob"
    assert json.loads(export([derived], "json"))[0]["title_derived"] is True
    [entry] = parse(to_bibtex([derived])).entries
    assert entry.fields_dict["annote"].value == "Title derived from the abstract by Paperboy"
    [plain] = parse(to_bibtex([evil])).entries
    assert "annote" not in plain.fields_dict


def test_paperboy_saved_prints_the_reading_list_in_each_format(
    tmp_path: Path, state_backend: str
) -> None:
    engine = seeded_engine(tmp_path / "paperboy.db")
    papers = engine.search("diffusion models", limit=4).hits
    store = state_for(engine.db_path)
    for n, hit in enumerate(papers):
        store.toggle_save("U1", hit.id, f"2024-03-04T08:0{n}:00+00:00")
    store.toggle_save("U1", "gone-from-the-corpus", "2024-03-04T07:00:00+00:00")
    store.toggle_save("U2", papers[0].id, "2024-03-04T09:00:00+00:00")
    newest_first = [h.id for h in reversed(papers)] + ["gone-from-the-corpus"]
    runner = CliRunner(env=state_env())  # the CLI's state where this test keeps it
    run = runner.invoke

    text = run(main, ["--db", str(engine.db_path), "saved", "--user", "U1"])
    assert text.exit_code == 0, text.output
    assert text.output.startswith("5 saved papers for U1, newest first")
    assert "(no longer in the corpus)" in text.output
    assert "(title derived from the abstract)" in text.output  # seed abstracts have no title
    nameless = run(main, ["--db", str(engine.db_path), "saved", "--user", " "])
    assert nameless.exit_code == 2 and "give a member's Slack user id" in nameless.output

    bib = run(main, ["--db", str(engine.db_path), "saved", "--user", "U1", "--format", "bibtex"])
    entries = parse(bib.output).entries
    notes = [next(f.value for f in e.fields if f.key == "note") for e in entries]
    assert notes == [f"Paperboy id: {i}" for i in newest_first]

    out = run(main, ["--db", str(engine.db_path), "saved", "--user", "U1", "--format", "csv"])
    assert [r["id"] for r in csv.DictReader(io.StringIO(out.output))] == newest_first
    out = run(main, ["--db", str(engine.db_path), "saved", "--user", "U1", "--format", "json"])
    assert [p["id"] for p in json.loads(out.output)] == newest_first
    nobody = run(main, ["--db", str(engine.db_path), "saved", "--user", "U9"])
    assert nobody.exit_code == 0 and nobody.output == "U9 has saved no papers.\n"

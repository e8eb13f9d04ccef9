"""Issue 8, engine side: inputs and faults that must not give wrong answers or take Paperboy down.

Everything runs through public interfaces: the ``Engine`` API on real SQLite files, the
``paperboy`` CLI (click's runner or a real subprocess), and the digest's topic matching.
"""

import json
from pathlib import Path

import pytest

from bot.engine.search import Engine
from digest.selection import match_topics


def write_jsonl(path: Path, papers: list[dict]) -> Path:
    path.write_text("".join(json.dumps(p) + "\n" for p in papers), encoding="utf-8")
    return path


def paper(pid: str, authors: list[str], **extra) -> dict:
    return {
        "id": pid,
        "title": f"Graph neural networks for molecules, part {pid}",
        "abstract": "We study message passing graph neural networks on molecular property data.",
        "authors": authors,
        "venue": "ICLR",
        "year": 2024,
        **extra,
    }


AUTHOR_PAPERS = [
    paper("li", ["Yang Li", "Ada Lovelace"]),
    paper("lin", ["Yang Lin"]),
    paper("split", ["Li Wei", "Yang Zhou"]),  # both tokens, but in two different authors
    paper("jose", ["José García-Pérez"]),
    paper("pct", ["Grace Hopper"]),
]


@pytest.fixture
def authors_engine(tmp_path):
    engine = Engine.open(tmp_path / "a.db")
    engine.ingest([write_jsonl(tmp_path / "a.jsonl", AUTHOR_PAPERS)])
    return engine


def found(engine: Engine, query: str) -> set[str]:
    result = engine.search(query, limit=50)
    assert result.error is None, result.error
    return {hit.id for hit in result.hits}


# -- author: -------------------------------------------------------------------------------


def test_author_matches_whole_tokens_of_one_author(authors_engine):
    assert found(authors_engine, 'author:"Yang Li"') == {"li"}
    assert found(authors_engine, 'author:"li yang" graph') == {"li"}  # order and case free
    assert found(authors_engine, "author:Yang") == {"li", "lin", "split"}
    assert found(authors_engine, "author:Lin") == {"lin"}


def test_author_is_accent_insensitive_both_ways(authors_engine):
    assert found(authors_engine, 'author:"jose garcia"') == {"jose"}
    assert found(authors_engine, 'author:"GARCÍA-PÉREZ"') == {"jose"}
    assert found(authors_engine, "author:perez") == {"jose"}


@pytest.mark.parametrize("query", ["author:%", "author:_", 'author:"%%"', "author:*"])
def test_author_wildcards_match_nothing_and_say_so(authors_engine, query):
    result = authors_engine.search(query)
    assert not result.hits
    assert result.error and "names nobody" in result.error


def test_author_wildcard_inside_a_name_is_just_a_separator(authors_engine):
    assert found(authors_engine, "author:Yang%Li") == {"li"}
    assert found(authors_engine, "author:Gr_ce") == set()


def test_author_topics_in_digests_match_per_author(authors_engine):
    docs_of = {}
    index = authors_engine.index
    for pid in ("li", "lin", "split"):
        docs_of[index.doc_of_rowid(authors_engine.corpus.rowid_of(pid))] = pid
    yang_li, percent = match_topics(authors_engine, ['author:"Yang Li"', "author:%"])
    assert {docs_of.get(int(d)) for d in yang_li.docs} == {"li"}
    assert percent.error and not len(percent.docs)


def test_author_filter_works_on_a_database_from_before_the_author_column(tmp_path):
    """Migration m010 fills the folded names in for papers ingested before it existed."""
    import sqlite3

    engine = Engine.open(tmp_path / "old.db")
    engine.ingest([write_jsonl(tmp_path / "a.jsonl", AUTHOR_PAPERS)])
    with sqlite3.connect(tmp_path / "old.db") as conn:
        conn.execute("update papers set author_names = null")
        conn.execute("delete from _sqlite_migrations where name = 'm010_author_names'")
        conn.execute("alter table papers drop column author_names")
    reopened = Engine.open(tmp_path / "old.db")
    assert found(reopened, 'author:"Yang Li"') == {"li"}


# -- loose query parsing ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("query", "says"),
    [
        ("year:0000", "`year:0000` is not a year I understand"),
        ("graph year:0000", "`year:0000` is not a year I understand"),
        ("venue:,", "`venue:,` names no venue"),
        ("graph venue:|", "`venue:|` names no venue"),
        ("-diffusion", "at least one word to look for besides exclusions"),
        ('-"graph neural"', "at least one word to look for besides exclusions"),
    ],
)
def test_loose_filters_and_bare_exclusions_are_named_not_dropped(authors_engine, query, says):
    result = authors_engine.search(query)
    assert not result.hits
    assert result.error and says in result.error
    assert "keywords" not in result.error and "very common words" not in result.error


def test_an_exclusion_with_a_filter_still_works(authors_engine):
    assert found(authors_engine, "-lovelace year:2024") == {"lin", "split", "jose", "pct"}

"""README promises of the lookup and of ingest, through ``paperboy`` (click's runner) on real
SQLite files. Each test was checked against a deliberate break (tests/README.md)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from bot.cli import main
from bot.engine.query import MAX_QUERY_CHARS, QueryError, parse_query
from bot.engine.search import Engine

FILLER = (
    "We report experiments on benchmark datasets with careful ablations, baselines and "
    "a discussion of limitations, compute budgets and reproducibility."
)


def paper(pid: str, title: str, abstract: str, venue: str = "ICLR", year: int = 2024) -> dict:
    return {
        "id": pid,
        "title": title,
        "abstract": abstract,
        "authors": ["Ada Lovelace"],
        "venue": venue,
        "year": year,
    }


def corpus() -> list[dict]:
    """``only-quasar`` says "quasar" over and over; ``both`` names quasar and lattice once each
    among other words, so plain TF-IDF puts ``only-quasar`` first for "quasar lattice"."""
    papers = [
        paper(
            "only-quasar",
            "Quasar Quasar Quasar",
            "Quasar quasar quasar quasar quasar quasar.",
            venue="ICML",
        ),
        paper(
            "both",
            "Notes on several topics in observational astronomy and condensed matter",
            f"We touch on a quasar and on a lattice, among many other things. {FILLER}",
            venue="NeurIPS",
        ),
        paper("lattice-only", "Lattice Models", f"A lattice study. {FILLER}", venue="ICLR"),
        paper("quasar-too", "Quasar Surveys", f"A quasar survey. {FILLER}", venue="ICLR"),
    ]
    venues = ["ICLR", "ICML", "NeurIPS", "ACL"]
    for n in range(24):
        papers.append(
            paper(
                f"filler-{n}",
                f"Unrelated Work Number {n} on Optimisers",
                f"Optimisers and learning rates, study {n}. {FILLER}",
                venue=venues[n % 4],
                year=2020 + n % 6,
            )
        )
    return papers


@pytest.fixture
def paperboy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """``paperboy ...`` over a fresh database holding :func:`corpus`."""
    monkeypatch.setenv("PAPERBOY_DB", str(tmp_path / "promises.db"))
    runner = CliRunner()

    def run(*args: str):
        return runner.invoke(main, list(args), catch_exceptions=False)

    source = tmp_path / "papers.jsonl"
    source.write_text("\n".join(json.dumps(p) for p in corpus()) + "\n")
    assert run("ingest", str(source)).exit_code == 0
    return run


def search(paperboy, query: str, limit: int = 50) -> dict:
    result = paperboy("search", query, "--json", "--limit", str(limit))
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def test_papers_with_all_the_query_words_come_first(paperboy, tmp_path: Path) -> None:
    # The premise: by plain TF-IDF the paper saying only "quasar" wins.
    plain = Engine.open(tmp_path / "promises.db").rank("quasar lattice", 4, coordinate=False)
    assert [pid for pid, _ in plain][0] == "only-quasar"
    # The promise: the one paper with both words comes first.
    found = [r["id"] for r in search(paperboy, "quasar lattice")["results"]]
    assert found[0] == "both"
    assert set(found[1:4]) == {"only-quasar", "quasar-too", "lattice-only"}


def test_batch_ranks_like_a_single_search(paperboy) -> None:
    """``--batch`` (evaluation, benchmarks) takes the fast path; its order is the lookup's."""
    result = CliRunner().invoke(
        main, ["search", "--batch", "-", "--limit", "4"], input="quasar lattice\n"
    )
    assert result.exit_code == 0, result.output
    batch = [r["id"] for r in json.loads(result.output)["results"]]
    single = [r["id"] for r in search(paperboy, "quasar lattice", limit=4)["results"]]
    assert batch == single and batch[0] == "both"


@pytest.mark.parametrize(
    "venues", ["venue:ICLR,NeurIPS", "venue:iclr|neurips", "venue:ICLR,NeurIPS,"]
)
def test_a_venue_filter_with_several_venues_keeps_each_of_them(paperboy, venues: str) -> None:
    data = search(paperboy, venues)
    got = {r["venue"] for r in data["results"]}
    assert got == {"ICLR", "NeurIPS"}
    expected = sum(p["venue"] in ("ICLR", "NeurIPS") for p in corpus())
    assert data["total"] == expected


def test_a_venue_filter_narrows_ranked_words_too(paperboy) -> None:
    found = {r["id"] for r in search(paperboy, "quasar venue:ICML,NeurIPS")["results"]}
    assert found == {"only-quasar", "both"}


# --- ingest: one broken file costs only itself --------------------------------------------------


def test_a_file_broken_part_way_saves_nothing_of_itself_and_the_rest_goes_in(
    paperboy, tmp_path: Path
) -> None:
    """A gzip cut off after thousands of records (more than one write batch): the message
    says "Nothing from this file was saved", and that is true; the good file beside it is in."""
    many = [
        paper(f"cut-{n}", f"Truncated Archive Paper {n}", f"Wombat habitat study number {n}.")
        for n in range(5000)
    ]
    whole = gzip.compress(("\n".join(json.dumps(p) for p in many) + "\n").encode())
    broken = tmp_path / "broken.jsonl.gz"
    broken.write_bytes(whole[: int(len(whole) * 0.8)])  # a download cut short
    good = tmp_path / "good.jsonl"
    good.write_text(json.dumps(paper("good-1", "Echidna Ecology", "Echidnas dig.")) + "\n")
    before = json.loads(paperboy("stats", "--json").output)["papers"]

    result = paperboy("ingest", str(broken), str(good))
    assert "Nothing from this file was saved" in result.output
    after = json.loads(paperboy("stats", "--json").output)["papers"]
    assert after == before + 1
    assert search(paperboy, "wombat")["results"] == []
    assert [r["id"] for r in search(paperboy, "echidna")["results"]] == ["good-1"]


# --- the query language, one rule each (killing mutmut's survivors in bot/engine/query.py) ------


def test_query_parsing_of_every_kind_of_term() -> None:
    q = parse_query('  diffusion "score matching" -survey -"large language" venue:ICLR,ICML  ')
    assert q.words == ["diffusion"]
    assert q.phrases == ["score matching"]
    assert q.excluded == ["survey", "large language"]
    assert q.venues == ["ICLR", "ICML"]
    assert q.ranked_text == "diffusion score matching"
    assert q.text == 'diffusion "score matching" -survey -"large language" venue:ICLR,ICML'
    assert q.without_filters() == 'diffusion "score matching" -survey -"large language"'


def test_a_query_of_exactly_the_limit_is_run_and_one_more_character_is_refused() -> None:
    words = ("diffusion " * 60)[:MAX_QUERY_CHARS]
    assert len(words) == MAX_QUERY_CHARS and parse_query(words).words
    with pytest.raises(QueryError, match=f"to {MAX_QUERY_CHARS} or fewer"):
        parse_query(words + "x")


def test_year_bounds_the_earliest_accepted_year_is_1000() -> None:
    q = parse_query("year:1000-1001")
    assert (q.year_from, q.year_to) == (1000, 1001)
    with pytest.raises(QueryError, match="year:0999"):
        parse_query("year:0999")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            'author:"!!"',
            "`author:!!` names nobody (it has no letters or digits); use a name, like "
            '`author:"Jane Doe"`.',
        ),
        (
            "venue:,",
            "`venue:,` names no venue; use `venue:ICLR` or `venue:ICLR,ICML`.",
        ),
        ("venue:", "`venue:` needs a value, like `venue:ICLR`."),
        ("-year:2020", "`-year:` is not supported; use `year:` to narrow instead."),
    ],
)
def test_each_mistake_gets_its_own_sentence(text: str, message: str) -> None:
    with pytest.raises(QueryError) as info:
        parse_query(text)
    assert str(info.value) == message


def test_a_lone_dash_is_no_word() -> None:
    q = parse_query("diffusion - models")
    assert q.words == ["diffusion", "models"] and q.excluded == []
    assert q.without_filters() == "diffusion models"


def test_all_the_words_first_also_among_many_matches(tmp_path: Path) -> None:
    """With more matches than the lookup scores one by one (a pool of the best raw scores),
    the papers with both words still come first, and a short page agrees with a long one."""
    papers = [
        paper(f"strong-{n}", f"Quasar Quasar Study {n}", f"Quasar quasar quasar, field {n}.")
        for n in range(150)
    ]
    papers += [
        paper(f"both-{n}", f"Notes {n} on the sky", f"A quasar and a lattice. {FILLER} {n}")
        for n in range(4)
    ]
    papers += [
        paper(f"other-{n}", f"Optimisers {n}", f"Learning rates {n}. {FILLER}") for n in range(40)
    ]
    source = tmp_path / "many.jsonl"
    source.write_text("\n".join(json.dumps(p) for p in papers) + "\n")
    engine = Engine.open(tmp_path / "many.db")
    engine.ingest([source])
    short = [h.id for h in engine.search("quasar lattice", limit=10).hits]
    long = [h.id for h in engine.search("quasar lattice", limit=200).hits]
    assert sorted(short[:4]) == [f"both-{n}" for n in range(4)]
    assert short == long[:10]

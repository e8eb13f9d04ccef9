"""Ranking among thousands of matches, through ``Engine.rank`` and ``Engine.search`` on a real
index: the order must be the one the README promises (TF-IDF, scaled by the squared share of
the query's words a paper has, ties by document), however many papers match.

The reference order is computed here from the plain TF-IDF scores (``coordinate=False``) and
the words each paper was written with, so the test does not depend on how the index finds it.
Written against changes to the ranking code the rest of the suite let through
(tests/README.md, mutation testing)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from bot.engine.search import Engine

WORDS = ("quasar", "lattice", "nebula")
FILLER = ("spectra", "survey", "catalogue", "redshift", "telescope", "photometry", "archive")


def paper(pid: str, words: list[str], n: int) -> dict:
    """A paper whose text holds ``words`` and some filler. No two query words stand side by
    side, so no pair of them is a term of the index (the query's terms are its words)."""
    filler = [FILLER[(n + i) % len(FILLER)] for i in range(n % 11)]
    return {
        "id": pid,
        "title": f"Report {pid}",
        "abstract": " survey ".join(words) + " " + " ".join(filler) + ".",
        "authors": ["Ada Lovelace"],
        "venue": "ICLR",
        "year": 2024,
    }


def rare_words(n: int, count: int = 40) -> list[str]:
    """Words no other paper has: they dilute a paper's score for any query."""
    return [f"zz{chr(97 + n)}{chr(97 + i // 26)}{chr(97 + i % 26)}" for i in range(count)]


@pytest.fixture(scope="module")
def crowd(tmp_path_factory: pytest.TempPathFactory) -> tuple[Engine, dict[str, set[str]]]:
    """2,400 papers saying "quasar" often, 150 with two of the words, 6 with all three (once
    each, among filler), 300 saying "galaxy" and 3 long ones with "quasar" and "galaxy": more
    matches than the ranking scores one by one."""
    papers, has = [], {}
    for n in range(2_400):
        papers.append(paper(f"one-{n}", ["quasar"] * (2 + n % 4), n))
        has[f"one-{n}"] = {"quasar"}
    for n in range(150):
        papers.append(paper(f"two-{n}", ["quasar", "nebula"] * (1 + n % 2), n))
        has[f"two-{n}"] = {"quasar", "nebula"}
    for n in range(6):
        papers.append(paper(f"all-{n}", list(WORDS) + list(FILLER) * (1 + n), n))
        has[f"all-{n}"] = set(WORDS)
    for n in range(300):
        papers.append(paper(f"galaxy-{n}", ["galaxy"] * (1 + n % 3), n))
        has[f"galaxy-{n}"] = {"galaxy"}
    for n in range(3):
        papers.append(paper(f"pair-{n}", ["quasar", "galaxy", *rare_words(n)], n))
        has[f"pair-{n}"] = {"quasar", "galaxy"}
    root = tmp_path_factory.mktemp("crowd")
    source = root / "crowd.jsonl"
    source.write_text("\n".join(json.dumps(p) for p in papers) + "\n")
    engine = Engine.open(root / "crowd.db")
    engine.ingest([source])
    return engine, has


def reference(engine: Engine, has: dict[str, set[str]], query: str) -> list[tuple[str, float]]:
    """Every match with its plain score times the squared share of the query's words."""
    wanted = set(query.split())
    plain = engine.rank(query, k=10_000, coordinate=False)
    scaled = [(pid, s * (len(wanted & has[pid]) / len(wanted)) ** 2) for pid, s in plain]
    return sorted(scaled, key=lambda item: -item[1])


def test_papers_with_every_word_come_first_among_thousands_of_matches(crowd) -> None:
    engine, has = crowd
    query = "quasar lattice nebula"
    expected = reference(engine, has, query)
    assert len(expected) == 2_559
    ranked = engine.rank(query, k=10)
    assert sorted(pid for pid, _ in ranked[:6]) == [f"all-{n}" for n in range(6)]
    np.testing.assert_allclose([s for _, s in ranked], [s for _, s in expected[:10]], rtol=1e-4)


def test_every_page_of_many_matches_follows_the_same_order(crowd) -> None:
    engine, has = crowd
    query = "nebula quasar"
    expected = reference(engine, has, query)
    pages = [engine.search(query, limit=10, offset=offset) for offset in (0, 10, 150)]
    assert [page.total for page in pages] == [len(expected)] * 3
    assert all(hit.id.startswith(("all", "two")) for page in pages[:2] for hit in page.hits)
    for page, offset in zip(pages, (0, 10, 150), strict=True):
        np.testing.assert_allclose(
            [hit.score for hit in page.hits],
            [s for _, s in expected[offset : offset + 10]],
            rtol=1e-4,
        )


def test_one_word_ranks_by_plain_score_among_thousands(crowd) -> None:
    engine, has = crowd
    expected = reference(engine, has, "quasar")
    ranked = engine.rank("quasar", k=25)
    np.testing.assert_allclose([s for _, s in ranked], [s for _, s in expected[:25]], rtol=1e-4)
    assert engine.search("quasar", limit=5).total == 2_559


def test_when_the_best_raw_scores_do_not_settle_the_page_every_match_is_scaled(crowd) -> None:
    """2,859 matches of "quasar galaxy", three of them with both words: the best raw scores
    are papers with one word, so the page is decided over every match, not a pool."""
    engine, has = crowd
    query = "quasar galaxy"
    expected = reference(engine, has, query)
    assert len(expected) == 2_859
    for limit, offset in ((10, 0), (10, 30), (5, 2_850)):
        page = engine.search(query, limit=limit, offset=offset)
        assert page.total == 2_859
        np.testing.assert_allclose(
            [hit.score for hit in page.hits],
            [s for _, s in expected[offset : offset + limit]],
            rtol=1e-4,
        )


def test_pages_of_equally_scored_papers_neither_overlap_nor_skip(tmp_path) -> None:
    """A filter-only lookup scores papers by year alone: 2,000 papers of one year tie. Paging
    through them ("Next" in Slack) must show each once (README: ties by document)."""
    papers = [
        {"id": f"p{n:04d}", "title": "Report", "abstract": "A survey.", "venue": "ICLR"}
        | {"authors": ["Ada Lovelace"], "year": 2024}
        for n in range(2_000)
    ]
    source = tmp_path / "same.jsonl"
    source.write_text("\n".join(json.dumps(p) for p in papers) + "\n")
    engine = Engine.open(tmp_path / "same.db")
    engine.ingest([source])
    seen = [
        hit.id
        for offset in range(0, 40, 10)
        for hit in engine.search("venue:ICLR", limit=10, offset=offset).hits
    ]
    assert seen == [f"p{n:04d}" for n in range(40)]

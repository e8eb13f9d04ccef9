"""The engine end to end on real SQLite files: ingest, index freshness, ranking, query language."""

import json
from pathlib import Path

import pytest

from bot.engine.search import Engine
from bot.settings import SEED_DIR
from bot.slack import render


def write_jsonl(path: Path, papers: list[dict]) -> Path:
    path.write_text("\n".join(json.dumps(p) for p in papers) + "\n")
    return path


PAPERS = [
    {
        "id": "p1",
        "title": "Denoising Diffusion Models for Protein Design",
        "abstract": "We design proteins with a denoising diffusion model trained on structures.",
        "authors": ["Ada Lovelace", "Alan Turing"],
        "venue": "ICLR",
        "year": 2024,
    },
    {
        "id": "p2",
        "title": "Graph Neural Networks Survey",
        "abstract": "A survey of graph neural networks and message passing for molecules.",
        "authors": ["Grace Hopper"],
        "venue": "NeurIPS",
        "year": 2021,
    },
    {
        "id": "p3",
        "title": "Scaling Laws for Language Models",
        "abstract": "We study how language models improve with compute; diffusion is not discussed "
        "beyond a footnote on graph neural networks.",
        "authors": ["Alan Turing"],
        "venue": "ICML",
        "year": 2025,
    },
]


@pytest.fixture
def engine(tmp_path):
    eng = Engine.open(tmp_path / "t.db")
    eng.ingest([write_jsonl(tmp_path / "papers.jsonl", PAPERS)])
    return eng


@pytest.fixture(scope="module")
def seeded(tmp_path_factory):
    return Engine.open(tmp_path_factory.mktemp("seed") / "seed.db", seed_dir=SEED_DIR)


def ids(result):
    return [h.id for h in result.hits]


def test_seed_corpus_fills_a_fresh_database(seeded):
    assert seeded.corpus.count() == 38
    assert {h.paper["venue"] for h in seeded.search("learning", limit=50).hits} == {"ICLR", "ICML"}


def test_a_paper_whose_title_is_the_query_ranks_first(seeded):
    for paper in seeded.corpus.table.rows_where():
        result = seeded.search(paper["title"], limit=3)
        assert result.hits[0].id == paper["id"], paper["title"]


def test_acronyms_and_latex_terms_are_searchable(seeded):
    assert seeded.search("QLASS").hits[0].paper["title"].startswith("QLASS")
    top = seeded.search("(L0,L1)-smoothness federated").hits[0]
    assert "smoothness" in top.paper["abstract"]


def test_snippet_marks_matched_terms_and_why_names_them(engine):
    hit = engine.search("protein diffusion").hits[0]
    assert hit.id == "p1"
    marked = {text.lower() for text, matched in hit.snippet if matched}
    assert {"proteins", "diffusion"} <= marked
    assert set(hit.why) & {"protein", "diffusion"}


def test_phrase_must_occur_and_exclusion_must_not(engine):
    assert ids(engine.search('"graph neural networks"')) == ["p2", "p3"]
    assert ids(engine.search('"graph neural networks" -survey')) == ["p3"]
    assert ids(engine.search('diffusion -"language models"')) == ["p1"]


def test_filters(engine):
    assert ids(engine.search("diffusion venue:iclr")) == ["p1"]
    assert ids(engine.search("graph year:2024-2025")) == ["p3"]
    assert ids(engine.search('author:"Alan Turing" diffusion')) == ["p1", "p3"]
    assert set(ids(engine.search("year:2021-"))) == {"p1", "p2", "p3"}


@pytest.mark.parametrize(
    "query",
    ["", "   ", "the of and", "🎉🎉", "a" * 400, "x" * 501, "venue:", "year:soon"],
)
def test_awkward_queries_get_a_clear_error(engine, query):
    result = engine.search(query)
    assert result.error and not result.hits


@pytest.mark.parametrize(
    "query", ["深度学习", "Схема обучения", "<!channel> diffusion", "QLASS: Q-guided search"]
)
def test_odd_but_valid_queries_never_crash(engine, query):
    result = engine.search(query)
    assert result.error is None


def test_no_results_suggest_dropping_a_filter_or_a_close_term(engine):
    result = engine.search("protein venue:ICML")
    assert not result.hits and "protein" in result.suggestions
    assert "diffusion" in engine.search("difusion").suggestions


def test_a_phrase_found_nowhere_suggests_its_words_only_when_they_find_papers(engine):
    """Dropping the quotes is offered as a way to find something, never as a dead end (an
    unclosed quote around a word no paper has was answered "try: unclosedzz")."""
    assert engine.search('"diffusion protein folding"').suggestions == ["diffusion protein folding"]
    assert engine.search('"zzqxunseen').suggestions == []


def test_paging_never_overlaps(engine):
    first = engine.search("graph neural diffusion", limit=2)
    second = engine.search("graph neural diffusion", limit=2, offset=2)
    assert first.total == 3 and first.has_more and not second.has_more
    assert not set(ids(first)) & set(ids(second))


def test_similar_to_no_id_says_what_to_give(engine):
    assert engine.similar("  ").error == "Give a paper's id: each result shows it (`id ...`)."
    assert engine.similar("nope").error == "There is no paper with id `nope` in the corpus."


def test_similar_papers_exclude_the_paper_itself(engine):
    result = engine.similar("p2")
    assert result.hits and "p2" not in ids(result) and ids(result)[0] == "p3"
    assert engine.similar("nope").error


def test_index_follows_the_corpus_without_a_rebuild_step(engine, tmp_path):
    assert not engine.search("quantum annealing").hits
    new = {"id": "p4", "title": "Quantum Annealing for Sampling", "abstract": "Annealing."}
    # Another process ingests: a second Engine on the same files.
    other = Engine.open(engine.db_path)
    other.ingest([write_jsonl(tmp_path / "more.jsonl", [new])])
    assert ids(engine.search("quantum annealing")) == ["p4"]


def test_reingest_is_a_no_op_and_changes_update_in_place(engine, tmp_path):
    path = write_jsonl(tmp_path / "papers.jsonl", PAPERS)
    version = engine.corpus.version
    report = engine.ingest([path])
    assert (report.counts.added, report.counts.updated, report.counts.unchanged) == (0, 0, 3)
    assert engine.corpus.version == version
    changed = [dict(PAPERS[0], title="Diffusion Models for Enzyme Design")] + PAPERS[1:]
    report = engine.ingest([write_jsonl(path, changed)])
    assert (report.counts.added, report.counts.updated) == (0, 1)
    assert engine.corpus.count() == 3
    assert ids(engine.search("enzyme")) == ["p1"]


def test_bad_records_are_reported_and_good_ones_still_go_in(engine, tmp_path):
    path = tmp_path / "mixed.jsonl"
    path.write_text('{"id": "ok1", "title": "Good Paper", "abstract": "Fine."}\n{not json\n')
    report = engine.ingest([path])
    assert report.counts.added == 1
    assert [r.location for r in report.rejected] == ["line 2"]


def test_an_unreadable_file_changes_nothing(engine, tmp_path):
    path = tmp_path / "blob.bin"
    path.write_bytes(b"\x00\x01\x02binary")
    version = engine.corpus.version
    report = engine.ingest([path])
    assert not report.ok and report.file_errors and engine.corpus.version == version


def test_top_k_selection_matches_a_full_sort():
    import numpy as np

    rng = np.random.default_rng(7)
    for total, limit, offset in [(10_000, 10, 0), (10_000, 5, 20), (300, 10, 0), (50, 100, 0)]:
        scores = rng.random(total, dtype=np.float32)
        scores[:40] = scores[40]  # ties
        candidates = np.arange(total) * 3
        ranked = Engine._top(candidates, scores, limit, offset, None, None)
        expected = sorted(range(total), key=lambda i: (-scores[i], candidates[i]))
        assert list(ranked.docs) == [candidates[i] for i in expected[offset : offset + limit]]


def test_top_k_selection_with_ties_at_the_page_end_matches_a_full_sort():
    """Every path of ``_top`` (the whole partition, a sample's bar, ``_best`` after too many
    ties) keeps the ties at the page's end in document order."""
    import numpy as np

    rng = np.random.default_rng(8)
    for total, limit, offset, tied in [
        (300, 10, 0, 30),  # partition of all the scores, ties in the pool
        (400, 20, 5, 300),  # partition, more ties than SORT_ALL: _best
        (10_000, 10, 0, 50),  # a sample's bar
        (10_000, 10, 0, 2_000),  # a sample's bar, more ties than SORT_ALL
    ]:
        scores = rng.random(total, dtype=np.float32)
        best = np.argsort(-scores)[:tied]
        scores[best] = scores[best[-1]]  # the page and beyond all tied
        candidates = rng.permutation(total) * 3
        ranked = Engine._top(candidates, scores, limit, offset, None, None)
        expected = sorted(range(total), key=lambda i: (-scores[i], candidates[i]))
        assert list(ranked.docs) == [candidates[i] for i in expected[offset : offset + limit]]
        assert ranked.scores.tobytes() == scores[expected[offset : offset + limit]].tobytes()


def test_building_in_chunks_gives_the_same_index(seeded, tmp_path, monkeypatch):
    import numpy as np

    import bot.engine.index as index_module

    whole = seeded.index
    monkeypatch.setattr(index_module, "CHUNK_DOCS", 5)
    index_module.build_index(seeded.corpus, tmp_path / "chunked")
    chunked = index_module.Index(tmp_path / "chunked")
    assert chunked.n_terms == whole.n_terms
    assert [chunked.vocab.term(i) for i in range(0, whole.n_terms, 97)] == [
        whole.vocab.term(i) for i in range(0, whole.n_terms, 97)
    ]
    (chunked_main,), (whole_main,) = chunked.segments, whole.segments
    assert np.array_equal(chunked_main.doc_sizes, whole_main.doc_sizes)
    assert np.array_equal(chunked_main.xt_indices, whole_main.xt_indices)
    assert np.array_equal(chunked_main.xt_data, whole_main.xt_data)


def test_papers_with_all_the_query_terms_come_first(engine):
    # p3 mentions diffusion once in a long abstract; p1 has both words; p2 has neither.
    assert ids(engine.search("diffusion proteins"))[0] == "p1"
    assert ids(engine.search("graph neural networks molecules"))[0] == "p2"


def test_matched_terms_agrees_both_ways(seeded):
    import numpy as np

    from bot.engine.text import analyze

    index = seeded.index
    term_ids, _ = index.vectorize(analyze("language agents reward model graph"))
    docs = np.arange(index.n_docs)
    few = index.matched_terms(term_ids, docs)
    hits = np.concatenate([index.postings(t)[0] for t in term_ids.tolist()])
    assert np.array_equal(few, np.bincount(hits, minlength=index.n_docs).astype(np.float32))


def test_words_no_paper_mentions_are_named(engine):
    result = engine.search("protein zyzzyva")
    assert ids(result) == ["p1"]
    assert any("zyzzyva" in notice for notice in result.notices)
    assert any("2021 to 2025" in n for n in engine.search("protein year:2030").notices)
    # Every word unknown: each is named (one word alone is named by "No papers match").
    assert engine.search("zyzzyva qwxjk").notices == [
        "No paper mentions any of “zyzzyva”, “qwxjk”."
    ]
    assert engine.search("zyzzyva").notices == []
    assert engine.search("zyzzyva zyzzyva protein zyzzyva").notices == [
        "No paper mentions “zyzzyva”; results match the other words."
    ]
    # Nothing found at all: no "results match the other words" under "No papers match".
    assert engine.search("protein zyzzyva year:2030").notices[0] == "No paper mentions “zyzzyva”."


def test_a_name_before_a_colon_that_is_no_filter_is_looked_up_as_words(engine):
    """Text pasted into a lookup ("cf. arXiv:2501.01234", "re: diffusion") is searched, with
    a notice, rather than refused: the message shortcut sends whatever a message says."""
    result = engine.search("re:diffusion protein")
    assert result.error is None and ids(result)[0] == "p1"
    assert result.notices[0].startswith("`re:` is not a filter, so it was looked up as words")
    # A venue no paper is from yet: nothing found, and said so (not an error).
    unknown_venue = engine.search("diffusion venue:CVPR")
    assert unknown_venue.error is None and unknown_venue.total == 0
    [notice] = unknown_venue.notices
    assert notice.startswith("No paper here is from venue `CVPR` (yet). Venues here: ")
    assert {"ICLR", "ICML", "NeurIPS"} <= set(notice.rsplit(": ", 1)[1].rstrip(".").split(", "))


def test_an_author_filter_on_a_corpus_without_authors_says_so(engine, seeded):
    """The seed papers list no authors: an empty answer says why, not only "no match"."""
    empty = seeded.search("diffusion author:smith")
    assert not empty.hits and any("lists its authors" in n for n in empty.notices)
    message = render.search_message(empty, query="diffusion author:smith")
    assert "No paper here lists its authors" in message["text"]
    # Where papers have authors, an author with no papers is just no match.
    assert not any("lists its authors" in n for n in engine.search("protein author:zzz").notices)


def test_coordination_only_reorders_and_can_be_turned_off(engine):
    coordinated = engine.rank("graph neural networks molecules", k=10)
    plain = engine.rank("graph neural networks molecules", k=10, coordinate=False)
    assert {i for i, _ in coordinated} == {i for i, _ in plain}
    assert all(
        c <= p + 1e-6 for (_, c), (_, p) in zip(sorted(coordinated), sorted(plain), strict=True)
    )

"""Format 10's inverted lists: paper numbers stored as 16-bit low halves, each list cut into
blocks of ``BLOCK`` papers whose starts ``xt_indptr`` records. At 87k papers a main segment
has two blocks; here the block is shrunk to 64 papers so a 550-paper main segment has nine,
and every reader of the lists (the exhaustive product, MaxScore's bisections, one-term
lookups, batch scoring, "similar", the writer's norms and best impacts) must answer exactly
as with a single block.
"""

import numpy as np
import pytest
import scipy.sparse as sp

import bot.engine.index as index_module
import bot.engine.search as search_module
from bot.engine.index import read_current
from bot.engine.search import Engine
from tests.test_live_index import make_papers, queries_from, write_jsonl
from tests.test_pruning import lookups


def _build(folder, papers, block: int) -> Engine:
    updated = [{**p, "abstract": p["abstract"] + " Revised with new results."} for p in papers[:40]]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(index_module, "MERGE_SHARE", 0.9)  # keep the deltas and tombstones
        patch.setattr(index_module, "BLOCK", block)
        engine = Engine.open(folder / f"b{block}.db")
        engine.ingest([write_jsonl(folder / "a.jsonl", papers[:550])])
        engine.ingest([write_jsonl(folder / "b.jsonl", papers[550:])])
        engine.ingest([write_jsonl(folder / "c.jsonl", updated)])
    assert len(read_current(engine.index_dir)["segments"]) == 3
    return engine


@pytest.fixture(scope="module")
def pair(tmp_path_factory, sentences) -> tuple[Engine, Engine, list[dict]]:
    folder = tmp_path_factory.mktemp("blocks")
    papers = make_papers(sentences, "k", 700, seed=41)
    small, whole = _build(folder, papers, 64), _build(folder, papers, 1 << 16)
    assert [s.blocks for s in small.index.segments] == [9, 3, 1]
    assert [s.blocks for s in whole.index.segments] == [1, 1, 1]
    return small, whole, papers


# ``Segment.find`` over more than FIND_BLOCKS blocks is ``find_all``'s: both ways here.
@pytest.mark.parametrize("find_blocks", [2, 10**9])
def test_the_lists_decode_to_the_same_papers_in_any_block_size(pair, monkeypatch, find_blocks):
    monkeypatch.setattr(index_module, "FIND_BLOCKS", find_blocks)
    small, whole, _ = pair
    for a, b in zip(small.index.segments, whole.index.segments, strict=True):
        assert a.xt_indices.dtype == np.uint16
        assert np.array_equal(a.docs(0, a.n_terms), b.docs(0, b.n_terms))
        assert np.array_equal(a.list_ptr, b.list_ptr)
        assert np.array_equal(a.xt_data, b.xt_data)
        terms = np.random.default_rng(3).choice(a.n_terms, 50)
        assert np.array_equal(a.gathered_docs(terms), b.gathered_docs(terms))
        for term in terms.tolist():
            wanted = np.arange(a.n_docs)
            hit_a, pos_a = a.find(term, wanted)
            hit_b, pos_b = b.find(term, wanted)
            assert np.array_equal(hit_a, hit_b) and np.array_equal(pos_a[hit_a], pos_b[hit_b])
            assert np.array_equal(wanted[hit_a], a.docs(term, term + 1))
        # One paper in many lists at once ("similar" reading a paper's terms): as ``find``.
        rng = np.random.default_rng(4)
        for segment in (a, b):
            for doc in [0, segment.n_docs - 1, *rng.choice(segment.n_docs, 12).tolist()]:
                own = segment.doc_terms(np.asarray([doc]))[1]
                terms = np.unique(np.concatenate([own, rng.choice(segment.n_terms, 300)]))
                hits, places = segment.find_terms(terms, doc)
                one = [segment.find(t, np.asarray([doc])) for t in terms.tolist()]
                assert hits.tolist() == [bool(h[0]) for h, _ in one]
                assert places[hits].tolist() == [int(p[0]) for h, p in one if h[0]]
                assert np.count_nonzero(hits) == segment.doc_sizes[doc] == len(own) > 0
    assert np.array_equal(small.index.inverse_pivot, whole.index.inverse_pivot)
    assert np.array_equal(small.index.impacts, whole.index.impacts)


def test_lookups_rank_the_same_in_any_block_size_pruned_or_not(pair, monkeypatch):
    small, whole, papers = pair
    monkeypatch.setattr(search_module, "PRUNE_MIN_POSTINGS", 0)
    live = [{**p, "abstract": p["abstract"]} for p in papers]
    for query in lookups(live)[:120] + queries_from(papers, 20, seed=42):
        want = whole.rank(query, k=10, prune=False)
        assert small.rank(query, k=10, prune=False) == want, query
        assert small.rank(query, k=10, prune=True) == want, query


def test_a_filters_only_lookup_over_deleted_papers(pair):
    """Newest first among the live papers (the deleted copies of updated ones left out)."""
    small, whole, papers = pair
    assert whole.index.n_live == len(papers) < whole.index.n_docs
    ranked = whole.rank("year:2021-", k=1000)
    ids = [paper_id for paper_id, _ in ranked]
    assert len(ids) == len(set(ids)) == sum(p["year"] >= 2021 for p in papers)
    assert small.rank("year:2021-", k=1000) == ranked


def test_batch_scoring_and_similar_agree_in_any_block_size(pair):
    small, whole, papers = pair
    queries = queries_from(papers, 30, seed=43)
    rows = [whole.index.vectorize(q.split()) for q in queries]
    matrix = sp.csr_matrix(
        (
            np.concatenate([w for _, w in rows]),
            np.concatenate([t for t, _ in rows]),
            np.cumsum([0] + [len(t) for t, _ in rows]),
        ),
        shape=(len(rows), whole.index.n_terms),
    )
    assert (small.index.score_matrix(matrix) != whole.index.score_matrix(matrix)).nnz == 0
    for paper in papers[::50]:
        got, want = small.similar(paper["id"]), whole.similar(paper["id"])
        assert [(h.id, h.score) for h in got.hits] == [(h.id, h.score) for h in want.hits]
        assert want.hits

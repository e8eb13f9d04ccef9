"""MaxScore (``Engine.rank``'s pruning) finds exactly the top 10 an exhaustive lookup finds:
the same ids, order and scores, with filters, phrases, exclusions, the "all words first"
coordination, and over a main segment plus deltas with deleted (updated) papers.

The corpus is made from the seed papers in data/ (their sentences shuffled into new papers).
"""

import random

import pytest

import bot.engine.index as index_module
import bot.engine.search as search_module
from bot.engine.index import Index, read_current
from bot.engine.search import Engine
from tests.test_live_index import make_papers, queries_from, write_jsonl

QUERIES = 150


def main_and_deltas(folder, sentences, prefix: str, seed: int, **patches) -> Engine:
    """An engine over 700 made-up papers in a main segment and two deltas, the second one
    updating 40 papers of the main segment (deleted there). ``patches``: index module
    constants set while it is built."""
    papers = make_papers(sentences, prefix, 700, seed=seed)
    updated = [{**p, "abstract": p["abstract"] + " Revised with new results."} for p in papers[:40]]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(index_module, "MERGE_SHARE", 0.9)  # keep the deltas and tombstones
        for name, value in patches.items():
            patch.setattr(index_module, name, value)
        live = Engine.open(folder / "live.db")
        live.ingest([write_jsonl(folder / "a.jsonl", papers[:550])])
        live.ingest([write_jsonl(folder / "b.jsonl", papers[550:])])
        live.ingest([write_jsonl(folder / "c.jsonl", updated)])
    current = read_current(live.index_dir)
    assert len(current["segments"]) == 3 and current["segments"][0]["deleted"]
    live.papers = updated + papers[40:]
    return live


@pytest.fixture(scope="module")
def engine(tmp_path_factory, sentences) -> Engine:
    return main_and_deltas(tmp_path_factory.mktemp("pruning"), sentences, "p", seed=21)


def lookups(papers: list[dict]) -> list[str]:
    """Free words of 2-6 terms, and the same with filters, phrases and exclusions."""
    rng = random.Random(22)
    out = []
    for base in queries_from(papers, QUERIES, seed=23):
        words = base.split()
        other = rng.choice(papers)["abstract"].split()
        extra = " ".join(rng.sample(other, min(len(other), rng.randint(1, 3))))
        out.append(f"{base} {extra}")
        kind = rng.randrange(6)
        if kind == 0:
            out.append(f"{base} {extra} year:{rng.randint(2021, 2024)}-")
        elif kind == 1:
            out.append(f"{base} {extra} venue:{rng.choice(['ICLR', 'ICML'])}")
        elif kind == 2 and len(words) >= 2:
            out.append(f'"{" ".join(words[:2])}" {extra}')
        elif kind == 3:
            out.append(f"{base} {extra} -{rng.choice(other)}")
        elif kind == 4:
            out.append(f'{base} {extra} author:"Author {rng.randint(1, 40)}"')
        else:
            out.append(f"{extra} results revised")
    return out


def test_pruned_top_10_is_the_exhaustive_top_10(engine, monkeypatch):
    scored: list[int] = []
    real = Index.top_candidates

    def counting(self, *args, **kwargs):
        found = real(self, *args, **kwargs)
        scored.append(None if found is None else len(found[0]))
        return found

    monkeypatch.setattr(Index, "top_candidates", counting)
    # This corpus is small: prune whatever the queries' posting lists add up to.
    monkeypatch.setattr(search_module, "PRUNE_MIN_POSTINGS", 0)
    monkeypatch.setattr(index_module, "ALL_LISTS", 0)
    queries = lookups(engine.papers)
    pruned_less = 0
    for query in queries:
        for coordinate in (True, False):
            want = engine.rank(query, k=10, coordinate=coordinate, prune=False)
            scored.clear()
            got = engine.rank(query, k=10, coordinate=coordinate, prune=True)
            assert got == want, query
            if scored and scored[0] is not None and scored[0] < engine.count(query):
                pruned_less += 1
    assert len(queries) >= QUERIES
    # Not vacuous: most lookups scored fewer papers than match.
    assert pruned_less > len(queries) // 2


def test_pruning_pages_and_ties(engine, monkeypatch):
    """Deeper pages and one-word queries (nothing to prune) agree too."""
    monkeypatch.setattr(search_module, "PRUNE_MIN_POSTINGS", 0)
    for query in queries_from(engine.papers, 40, seed=24):
        for k in (1, 3, 50):
            assert engine.rank(query, k=k, prune=True) == engine.rank(query, k=k, prune=False)

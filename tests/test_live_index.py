"""The live index: segments and deltas rank like a fresh build, readers never wait for a
writer (threads and processes), and a writer killed mid-build leaves the old index serving.

The corpus is made from the seed papers in data/ (their sentences shuffled into new papers),
so the tests never read the shared corpus.
"""

import contextlib
import json
import os
import random
import select
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

import bot.engine.index as index_module
from bot.cli import main as cli_main
from bot.engine.index import GENERATION_FILES, Index, read_current
from bot.engine.search import Engine

QUERIES_PER_TEST = 60


def write_jsonl(path: Path, papers: list[dict]) -> Path:
    path.write_text("\n".join(json.dumps(p) for p in papers) + "\n")
    return path


def make_papers(sentences: list[str], prefix: str, n: int, seed: int) -> list[dict]:
    """Papers of 3-6 seed sentences each; a title from the first words of another."""
    rng = random.Random(seed)
    venues = ["ICLR", "ICML", "NeurIPS"]
    return [
        {
            "id": f"{prefix}{i}",
            "title": " ".join(rng.choice(sentences).split()[: rng.randint(4, 9)]),
            "abstract": " ".join(rng.sample(sentences, rng.randint(3, 6))),
            "authors": [f"Author {rng.randint(1, 40)}"],
            "venue": rng.choice(venues),
            "year": rng.randint(2020, 2025),
        }
        for i in range(n)
    ]


def queries_from(papers: list[dict], n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        words = rng.choice(papers)["abstract"].split()
        start = rng.randrange(max(len(words) - 3, 1))
        out.append(" ".join(words[start : start + rng.randint(1, 3)]))
    return out


def same_top(live: Engine, fresh: Engine, query: str, k: int = 10) -> None:
    """Same scores position by position, same ids except among papers tied at the cut."""
    got, want = live.rank(query, k=k), fresh.rank(query, k=k)
    assert [round(s, 4) for _, s in got] == [round(s, 4) for _, s in want], query
    if want:
        last = round(want[-1][1], 4)
        assert [i for i, s in got if round(s, 4) > last] == [
            i for i, s in want if round(s, 4) > last
        ], query


def build_live_and_fresh(tmp_path, sentences):
    """The same final corpus two ways: 80% then two deltas (one updating papers), and at once."""
    papers = make_papers(sentences, "p", 500, seed=1)
    updated = [
        {**p, "abstract": p["abstract"] + " Revised with quantum annealing zyzzyvanew."}
        for p in papers[:20]
    ]
    live = Engine.open(tmp_path / "live.db")
    live.ingest([write_jsonl(tmp_path / "a.jsonl", papers[:400])])
    live.ingest([write_jsonl(tmp_path / "b.jsonl", papers[400:450])])
    live.ingest([write_jsonl(tmp_path / "c.jsonl", papers[450:] + updated)])
    final = updated + papers[20:]
    fresh = Engine.open(tmp_path / "fresh.db")
    fresh.ingest([write_jsonl(tmp_path / "all.jsonl", final)])
    return live, fresh, final


def test_deltas_rank_like_a_fresh_build(tmp_path, sentences, monkeypatch):
    """Exactly, with every bigram indexed: idf, norms and tombstones are computed over the
    segments as a single build computes them."""
    monkeypatch.setattr(index_module, "MERGE_SHARE", 0.5)  # keep the deltas: they are tested
    monkeypatch.setattr(index_module, "MIN_BIGRAM_DF", 1)
    live, fresh, final = build_live_and_fresh(tmp_path, sentences)
    current = read_current(live.index_dir)
    assert len(current["segments"]) == 3  # main + two deltas, not a rebuild
    assert current["segments"][0]["deleted"]["count"] == 20  # the updated papers' old copies
    assert len(fresh.index.segments) == 1
    assert live.index.n_live == fresh.index.n_docs == len(final)
    for query in queries_from(final, QUERIES_PER_TEST, seed=2) + ["zyzzyvanew annealing"]:
        same_top(live, fresh, query)
    # Another engine on the same database (another process) ranks the same way.
    other = Engine.open(tmp_path / "live.db")
    for query in queries_from(final, 10, seed=3):
        assert other.rank(query) == live.rank(query)


def test_batch_scoring_over_segments_matches_lookups(tmp_path, sentences, monkeypatch):
    """Digests score every topic at once through ``matrix_xt`` (or ``score_matrix``): over a
    main segment, deltas and tombstones they give each paper the score a lookup gives it."""
    import numpy as np
    import scipy.sparse as sp

    from bot.engine.text import analyze

    monkeypatch.setattr(index_module, "MERGE_SHARE", 0.5)
    live, _, final = build_live_and_fresh(tmp_path, sentences)
    index = live.index
    assert len(index.segments) == 3
    queries = [index.vectorize(analyze(q)) for q in queries_from(final, 12, seed=14)]
    queries = [(t, w) for t, w in queries if len(t)]
    q = sp.csr_matrix(
        (
            np.concatenate([w for _, w in queries]),
            np.concatenate([t for t, _ in queries]),
            np.cumsum([0] + [len(t) for t, _ in queries]),
        ),
        shape=(len(queries), index.n_terms),
    )
    for batch in ((q @ index.matrix_xt()).tocsr(), index.score_matrix(q)):
        for row, (terms, weights) in enumerate(queries):
            docs, scores = index.score(terms, weights)
            expected = dict(zip(docs.tolist(), scores.tolist(), strict=True))
            start, end = batch.indptr[row], batch.indptr[row + 1]
            got = dict(
                zip(batch.indices[start:end].tolist(), batch.data[start:end].tolist(), strict=True)
            )
            assert got.keys() == expected.keys()
            assert np.allclose([got[d] for d in expected], list(expected.values()), rtol=1e-5)
            assert index.live[list(got)].all()  # no deleted copy


def test_with_rare_bigrams_left_out_deltas_rank_almost_like_a_fresh_build(
    tmp_path, sentences, monkeypatch
):
    """By default the main segment drops bigrams seen in fewer than MIN_BIGRAM_DF papers, and
    a bigram that reaches it thanks to a delta joins at the next full build: scores move a
    little until then (bench/live_index.py measures nDCG on the dev queries)."""
    monkeypatch.setattr(index_module, "MERGE_SHARE", 0.5)
    live, fresh, final = build_live_and_fresh(tmp_path, sentences)
    assert len(read_current(live.index_dir)["segments"]) == 3
    overlap, total = 0, 0
    for query in queries_from(final, QUERIES_PER_TEST, seed=2):
        got, want = live.rank(query), fresh.rank(query)
        overlap += len({i for i, _ in got} & {i for i, _ in want})
        total += len(want)
        for (_, a), (_, b) in zip(got, want, strict=True):
            assert a == pytest.approx(b, rel=0.1), query
    assert overlap >= 0.9 * total


def test_an_updated_paper_is_never_found_by_its_old_text(tmp_path, sentences):
    papers = make_papers(sentences, "u", 200, seed=4)
    engine = Engine.open(tmp_path / "u.db")
    old = {**papers[0], "abstract": papers[0]["abstract"] + " Quokkaold marsupial."}
    engine.ingest([write_jsonl(tmp_path / "a.jsonl", [old, *papers[1:]])])
    assert [i for i, _ in engine.rank("quokkaold")] == ["u0"]
    new = {**papers[0], "abstract": papers[0]["abstract"] + " Wombatnew marsupial."}
    engine.ingest([write_jsonl(tmp_path / "b.jsonl", [new])])
    assert len(read_current(engine.index_dir)["segments"]) == 2
    assert engine.rank("quokkaold") == []
    assert engine.search("quokkaold").total == 0
    # A word only the old text had is no term at all: it does not count among the query's
    # terms (coordination would lower every score).
    assert engine.rank("quokkaold marsupial") == engine.rank("marsupial")
    assert [i for i, _ in engine.rank("wombatnew")] == ["u0"]
    assert [i for i, _ in engine.rank("marsupial")] == ["u0"]  # once, not twice
    assert engine.search("marsupial").total == 1
    assert engine.search("year:2020..2025").total == 200  # filters count live papers only


def test_deltas_are_merged_when_they_grow(tmp_path, sentences, monkeypatch):
    monkeypatch.setattr(index_module, "MAX_DELTAS", 2)
    papers = make_papers(sentences, "m", 400, seed=5)
    engine = Engine.open(tmp_path / "m.db")
    engine.ingest([write_jsonl(tmp_path / "0.jsonl", papers[:300])])
    counts = []
    for i in range(4):  # 4 deltas of 10: more than MAX_DELTAS, far below MERGE_SHARE
        batch = papers[300 + 10 * i : 310 + 10 * i]
        engine.ingest([write_jsonl(tmp_path / f"{i + 1}.jsonl", batch)])
        counts.append(len(read_current(engine.index_dir)["segments"]))
    assert counts == [2, 3, 2, 3]  # the third delta merged the deltas into one
    engine.ingest([write_jsonl(tmp_path / "big.jsonl", papers[340:])])  # 60: over 15% of main
    assert len(read_current(engine.index_dir)["segments"]) == 1  # rebuilt into one main
    fresh = Engine.open(tmp_path / "f.db")
    fresh.ingest([write_jsonl(tmp_path / "all.jsonl", papers)])
    for query in queries_from(papers, 20, seed=6):
        same_top(engine, fresh, query)
    assert set(os.listdir(engine.index_dir)) == published(engine)


class Paused:
    """Holds a writer inside its segment write (a test-only injection) until released."""

    def __init__(self, monkeypatch):
        self.inside, self.release = threading.Event(), threading.Event()
        real = index_module._write_segment

        def paused(*args):
            self.inside.set()
            assert self.release.wait(600), "the test never released the writer"
            return real(*args)

        monkeypatch.setattr(index_module, "_write_segment", paused)


def test_readers_in_threads_never_wait_for_a_writer(tmp_path, sentences, monkeypatch):
    papers = make_papers(sentences, "t", 300, seed=7)
    db = tmp_path / "t.db"
    Engine.open(db).ingest([write_jsonl(tmp_path / "a.jsonl", papers[:250])])
    reader = Engine.open(db)
    queries = queries_from(papers, 8, seed=8)
    before = {q: reader.rank(q) for q in queries}
    paused = Paused(monkeypatch)
    writer = Engine.open(db)
    ingest = threading.Thread(
        target=writer.ingest, args=([write_jsonl(tmp_path / "b.jsonl", papers[250:])],)
    )
    ingest.start()
    assert paused.inside.wait(120)
    # The writer has committed its papers and holds the build lock: lookups in other threads
    # (and in the writer's own engine) answer at once from the previous generation.
    answers: dict[str, list] = {}

    def look(engine: Engine, query: str) -> None:
        answers[f"{id(engine)} {query}"] = engine.rank(query)

    lookers = [
        threading.Thread(target=look, args=(e, q)) for q in queries for e in (reader, writer)
    ]
    for thread in lookers:
        thread.start()
    deadline = time.monotonic() + 60  # a liveness guard: the writer stays paused meanwhile
    for thread in lookers:
        thread.join(max(0.0, deadline - time.monotonic()))
    waiting = any(t.is_alive() for t in lookers)
    if waiting:
        paused.release.set()
    assert not waiting, "a lookup waited for the writer"
    assert answers == {f"{id(e)} {q}": before[q] for q in queries for e in (reader, writer)}
    paused.release.set()
    ingest.join(120)
    fresh = Engine.open(tmp_path / "f.db")
    fresh.ingest([write_jsonl(tmp_path / "all.jsonl", papers)])
    for query in queries:
        assert reader.rank(query) == fresh.rank(query)  # the next lookup sees the new papers


def test_a_reader_opens_a_new_generation_without_recomputing_the_norms_or_term_matches(
    tmp_path, sentences, monkeypatch
):
    """The writer stores each generation's pivoted norms (a pass over every posting); a
    reader noticing the new generation maps them instead of stalling a lookup on that pass,
    and ranks exactly as a fresh build does."""
    monkeypatch.setattr(index_module, "MERGE_SHARE", 0.5)  # a delta, not a rebuild
    monkeypatch.setattr(index_module, "MIN_BIGRAM_DF", 1)
    papers = make_papers(sentences, "n", 300, seed=11)
    db = tmp_path / "n.db"
    Engine.open(db).ingest([write_jsonl(tmp_path / "a.jsonl", papers[:250])])
    reader = Engine.open(db)
    queries = queries_from(papers, 8, seed=12)
    before = [reader.rank(q) for q in queries]
    Engine.open(db).ingest([write_jsonl(tmp_path / "b.jsonl", papers[250:])])
    fresh = Engine.open(tmp_path / "f.db")
    fresh.ingest([write_jsonl(tmp_path / "all.jsonl", papers)])
    assert [fresh.rank(q) for q in queries] != before

    def recomputed(*args):
        raise AssertionError("a reader recomputed the norms")

    monkeypatch.setattr(index_module, "_row_norms", recomputed)

    # Nor does it match the delta's terms against the main segment's vocabulary: the delta's
    # writer stored where they are in the main segment.
    def matched(*args):
        raise AssertionError("a reader matched the delta's terms in the main vocabulary")

    monkeypatch.setattr(index_module.Vocabulary, "ids_of", matched)
    # Nor does it decode the delta's vocabulary for its new unigrams (0.2 s for a day's feed
    # at 87k papers): the generation's writer stored their global ids and the new terms.
    monkeypatch.setattr(index_module.Index, "_match_terms", matched)
    for query in queries:
        same_top(reader, fresh, query)
    assert len(read_current(reader.index_dir)["segments"]) == 2  # the delta was opened
    delta = reader.index.segments[1]
    assert delta.main_name == reader.index.segments[0].name
    assert (delta.directory / "main_terms.npy").exists()
    assert reader.index.vocab.extra_terms  # (the delta brought new terms: the case tested)


def test_stored_delta_terms_are_what_a_reader_would_match(tmp_path, sentences, monkeypatch):
    """The deltas' term ids a generation's writer stores are the ones a reader matching the
    vocabularies itself finds (bigrams the main segment lacks left out), over two deltas
    that share new terms; a file that does not fit its segments is damage, never read."""
    monkeypatch.setattr(index_module, "MERGE_SHARE", 0.5)  # keep the deltas
    papers = make_papers(sentences, "d", 300, seed=21)
    extra = [
        {**p, "id": f"x{i}", "abstract": p["abstract"] + f" zyzzyvanew qwertyterm{i % 3}"}
        for i, p in enumerate(papers[:30])
    ]
    engine = Engine.open(tmp_path / "d.db")
    engine.ingest([write_jsonl(tmp_path / "a.jsonl", papers[:250])])
    engine.ingest([write_jsonl(tmp_path / "b.jsonl", papers[250:] + extra[:15])])
    engine.ingest([write_jsonl(tmp_path / "c.jsonl", extra[15:])])
    current = read_current(engine.index_dir)
    assert len(current["segments"]) == 3
    stored = Index.load(engine.index_dir)
    monkeypatch.delitem(current, "delta_terms")
    matched = Index(engine.index_dir, current=current)  # matches the terms itself
    assert matched.vocab.extra_terms == stored.vocab.extra_terms
    assert {"zyzzyvanew", "qwertyterm0", "qwertyterm2"} <= set(stored.vocab.extra_terms)
    assert len(stored.vocab.extra_terms) == len(set(stored.vocab.extra_terms))  # shared once
    for mine, theirs in zip(stored._to_global[1:], matched._to_global[1:], strict=True):
        assert np.array_equal(mine, theirs)
    assert (stored.idf == matched.idf).all()

    info = read_current(engine.index_dir)["delta_terms"]
    ids = np.load(engine.index_dir / info["file"])
    current = read_current(engine.index_dir)
    current["delta_terms"] = {
        "file": info["file"],
        **index_module._write_file(engine.index_dir / info["file"], ids[:-1]),
    }
    (engine.index_dir / "CURRENT").write_text(json.dumps(current))
    assert Index.load(engine.index_dir, quiet=True) is None


def test_stats_counts_each_updated_paper_once(tmp_path, sentences, monkeypatch):
    """An updated paper's old copy stays in its segment (deleted) until the next merge;
    ``paperboy stats`` counts the papers a lookup can find."""
    monkeypatch.setattr(index_module, "MERGE_SHARE", 0.5)  # keep the tombstones
    papers = make_papers(sentences, "s", 60, seed=14)
    db = tmp_path / "s.db"
    Engine.open(db).ingest([write_jsonl(tmp_path / "a.jsonl", papers)])
    revised = [{**p, "abstract": p["abstract"] + " Revised."} for p in papers[:5]]
    Engine.open(db).ingest([write_jsonl(tmp_path / "b.jsonl", revised)])
    assert Engine.open(db).index.n_docs == 65  # the 5 old copies, deleted, still there
    result = CliRunner().invoke(cli_main, ["--db", str(db), "stats", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["index"]["documents"] == 60
    text = CliRunner().invoke(cli_main, ["--db", str(db), "stats"]).stdout
    assert "over 60 papers" in text


def test_a_lookups_total_and_why_over_deltas_and_tombstones(tmp_path, sentences, monkeypatch):
    """``search`` ranks with MaxScore and counts the matching papers apart (``count_matching``):
    over a main segment, deltas and deleted old copies, the total is every live paper with a
    query term that passes the filters, as built at once; and each hit's "why" is its own
    vector's terms (``doc_vector``) times the query's weights, largest first, to the bit."""
    from bot.engine.query import parse_query
    from bot.engine.text import analyze

    monkeypatch.setattr(index_module, "MERGE_SHARE", 0.5)  # keep the deltas and tombstones
    live, fresh, final = build_live_and_fresh(tmp_path, sentences)
    index = live.index
    assert len(index.segments) == 3 and index.n_live < index.n_docs
    counted = []
    monkeypatch.setattr(
        Index,
        "count_matching",
        lambda self, *a, f=Index.count_matching: counted.append(1) or f(self, *a),
    )
    plain = queries_from(final, 40, seed=21) + ["zyzzyvanew annealing", "revised quantum"]
    filtered = [f"{q} year:2022..2024" for q in plain[:10]] + [
        f"{q} venue:ICLR" for q in plain[10:20]
    ]
    filtered += [f"{q} -{q.split()[0]}" for q in plain[20:25] if len(q.split()) > 1]
    for query in plain + filtered:
        got, want = live.search(query), fresh.search(query)
        assert got.total == want.total and got.error == want.error, query
        if got.error:  # (a few words, all stop words)
            continue
        assert live.count(query) == got.total, query
        ranked = live._rank(parse_query(query), 5, 0)  # exhaustive: every match scored
        assert got.total == ranked.total, query
        if query in plain:  # every live paper sharing a term
            terms, weights = index.vectorize(analyze(parse_query(query).ranked_text))
            assert got.total == len(index.score(terms, weights)[0]), query
        for doc, hit in zip(ranked.docs.tolist(), got.hits, strict=True):
            vector = dict(zip(*(part.tolist() for part in index.doc_vector(doc)), strict=True))
            expected = sorted(
                (
                    (index.vocab.term(t), float(np.float32(w) * np.float32(vector[t])))
                    for t, w in zip(ranked.term_ids.tolist(), ranked.weights.tolist(), strict=True)
                    if t in vector
                ),
                key=lambda item: -item[1],
            )
            assert hit.why == [name for name, _ in expected][: len(hit.why)], query
            assert index.contributions([doc], ranked.term_ids, ranked.weights)[0] == expected
    assert len(counted) >= len(plain)  # the pruned lookups' totals were counted so


READER_SCRIPT = """
import json, sys
from bot.engine.search import Engine
engine = Engine.open(sys.argv[1])
for line in sys.stdin:
    print(json.dumps(engine.rank(line.strip())), flush=True)
"""


def test_a_reader_process_never_waits_for_a_writer(tmp_path, sentences, monkeypatch):
    papers = make_papers(sentences, "r", 300, seed=9)
    db = tmp_path / "r.db"
    Engine.open(db).ingest([write_jsonl(tmp_path / "a.jsonl", papers[:250])])
    query = queries_from(papers[250:], 1, seed=10)[0]
    reader = subprocess.Popen(
        [sys.executable, "-c", READER_SCRIPT, str(db)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )

    def ask() -> list:
        reader.stdin.write(query + "\n")
        reader.stdin.flush()
        # A liveness guard, not a timing: the writer stays paused until the reader answered.
        ready, _, _ = select.select([reader.stdout], [], [], 60)
        if not ready:
            paused.release.set()
            reader.kill()
            pytest.fail("the reader process waited for the writer")
        return [tuple(hit) for hit in json.loads(reader.stdout.readline())]

    paused = Paused(monkeypatch)
    try:
        paused.release.set()  # not paused yet: no writer
        before = ask()
        paused.release.clear()
        writer = Engine.open(db)
        ingest = threading.Thread(
            target=writer.ingest, args=([write_jsonl(tmp_path / "b.jsonl", papers[250:])],)
        )
        ingest.start()
        assert paused.inside.wait(120)
        assert ask() == before  # answered while the writer holds the lock, from the old index
        paused.release.set()
        ingest.join(120)
        after = ask()
    finally:
        with contextlib.suppress(BrokenPipeError):
            reader.stdin.close()
        reader.wait(60)
    fresh = Engine.open(tmp_path / "f.db")
    fresh.ingest([write_jsonl(tmp_path / "all.jsonl", papers)])
    assert after == fresh.rank(query) != before


def published(engine: Engine) -> set[str]:
    """The files and folders the published generation names."""
    current = read_current(engine.index_dir)
    names = {"CURRENT", *(current[key]["file"] for key in GENERATION_FILES)}
    for entry in current["segments"]:
        names.add(entry["name"])
        if entry["deleted"]:
            names.add(entry["deleted"]["file"])
    return names


# A writer that kills itself (SIGKILL) while writing a segment file: the injection lives here.
KILLED_WRITER = """
import os, signal, sys
import bot.engine.index as index_module
from bot.engine.search import Engine

real = index_module._write_file
def dying(path, data):
    if path.name == sys.argv[3]:
        os.kill(os.getpid(), signal.SIGKILL)
    return real(path, data)
index_module._write_file = dying
Engine.open(sys.argv[1]).ingest([sys.argv[2]])
"""


@pytest.mark.parametrize("dies_at", ["xt_data.npy", "meta.json", "CURRENT.tmp-"])
def test_a_writer_killed_mid_build_leaves_the_old_index_serving(tmp_path, sentences, dies_at):
    papers = make_papers(sentences, "k", 300, seed=11)
    db = tmp_path / "k.db"
    engine = Engine.open(db)
    engine.ingest([write_jsonl(tmp_path / "a.jsonl", papers[:250])])
    query = queries_from(papers[250:], 1, seed=12)[0]
    before = engine.rank(query)
    generation = read_current(engine.index_dir)["generation"]
    name = dies_at if dies_at != "CURRENT.tmp-" else "CURRENT.tmp-{pid}"
    script = KILLED_WRITER.replace("sys.argv[3]", f"{name!r}.format(pid=os.getpid())")
    run = subprocess.run(
        [
            sys.executable,
            "-c",
            script,
            str(db),
            str(write_jsonl(tmp_path / "b.jsonl", papers[250:])),
        ],
        capture_output=True,
        timeout=300,
    )
    assert run.returncode == -9, run.stderr.decode()[-1500:]
    # The papers were committed, the new generation never published: the old one is whole.
    assert read_current(engine.index_dir)["generation"] == generation
    assert set(os.listdir(engine.index_dir)) - published(engine)  # the dead writer's
    old = Index.load(engine.index_dir)
    assert old is not None and old.n_live == 250
    # The next start (or lookup) sees the index behind with no writer at work and catches up.
    restarted = Engine.open(db)
    fresh = Engine.open(tmp_path / "f.db")
    fresh.ingest([write_jsonl(tmp_path / "all.jsonl", papers)])
    assert restarted.rank(query) == fresh.rank(query) != before
    assert set(os.listdir(engine.index_dir)) == published(engine)  # and its leftovers gone
    assert engine.rank(query) == fresh.rank(query)  # a running process moves on too


def test_an_index_of_the_previous_format_is_rebuilt_once(tmp_path, sentences):
    papers = make_papers(sentences, "o", 50, seed=13)
    db = tmp_path / "o.db"
    engine = Engine.open(db)
    engine.ingest([write_jsonl(tmp_path / "a.jsonl", papers)])
    # What format 3 left: the files straight in the folder, no CURRENT.
    for path in list(engine.index_dir.iterdir()):
        if path.is_dir():
            for inner in path.iterdir():
                inner.rename(engine.index_dir / inner.name)
            path.rmdir()
        else:
            path.unlink()
    (engine.index_dir / "meta.json").write_text(json.dumps({"format": 3, "corpus_version": 1}))
    upgraded = Engine.open(db)
    assert upgraded.rank("learning")
    names = {p.name for p in engine.index_dir.iterdir()}
    assert names == published(engine)
    assert os.path.isdir(engine.index_dir / read_current(engine.index_dir)["segments"][0]["name"])

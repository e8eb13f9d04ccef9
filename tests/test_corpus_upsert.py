"""``Corpus.upsert`` writes new and changed papers with one statement: a changed paper keeps its
``added_at`` (its place in digests) even in a batch that also adds new papers."""

from bot.engine import corpus as corpus_module
from bot.engine.corpus import Corpus, open_database
from bot.engine.paper import Paper


def test_a_changed_paper_keeps_when_it_was_added_beside_new_papers(tmp_path, monkeypatch):
    corpus = Corpus(open_database(tmp_path / "c.db"))
    monkeypatch.setattr(corpus_module, "utcnow", lambda: "2026-01-01T00:00:00+00:00")
    corpus.upsert([Paper("a", "First title", "An abstract."), Paper("z", "Z", "Zed.")])
    monkeypatch.setattr(corpus_module, "utcnow", lambda: "2026-02-02T00:00:00+00:00")
    counts = corpus.upsert(
        [
            Paper("b", "New paper", "Another abstract."),
            Paper("a", "First title, revised", "An abstract."),
            Paper("z", "Z", "Zed."),
            Paper("b", "New paper, again", "Another abstract."),  # a duplicate, changed
        ]
    )
    assert (counts.added, counts.updated, counts.unchanged) == (1, 2, 1)
    rows = {
        row[0]: row[1:]
        for row in corpus.db.execute(
            "select id, title, added_at, updated_at, changed_at_version from papers"
        )
    }
    assert rows["a"] == (
        "First title, revised",
        "2026-01-01T00:00:00+00:00",
        "2026-02-02T00:00:00+00:00",
        2,
    )
    assert rows["b"] == (
        "New paper, again",
        "2026-02-02T00:00:00+00:00",
        "2026-02-02T00:00:00+00:00",
        2,
    )
    assert rows["z"] == ("Z", "2026-01-01T00:00:00+00:00", "2026-01-01T00:00:00+00:00", 1)
    assert corpus.version == 2


def test_added_at_from_another_store_is_kept_for_new_papers_only(tmp_path, monkeypatch):
    corpus = Corpus(open_database(tmp_path / "c.db"))
    monkeypatch.setattr(corpus_module, "utcnow", lambda: "2026-03-03T00:00:00+00:00")
    corpus.upsert([Paper("a", "A", "Text.")])
    stored = {"a": "2025-01-01T00:00:00+00:00", "b": "2025-02-02T00:00:00+00:00"}
    corpus.upsert([Paper("a", "A changed", "Text."), Paper("b", "B", "Text.")], added_at=stored)
    rows = dict(corpus.db.execute("select id, added_at from papers"))
    assert rows == {"a": "2026-03-03T00:00:00+00:00", "b": "2025-02-02T00:00:00+00:00"}


def test_an_id_repeated_in_a_later_batch_of_a_first_ingest_is_found(tmp_path):
    """Into an empty table, upsert asks SQLite about a batch only when it wrote one of its
    ids before: a repeat in a later batch is still an update (or unchanged), never a second
    paper added."""
    corpus = Corpus(open_database(tmp_path / "c.db"))
    papers = [
        Paper("a", "A", "First."),
        Paper("b", "B", "Second."),
        Paper("c", "C", "Third."),
        Paper("a", "A, revised", "First."),  # a later batch, changed
        Paper("b", "B", "Second."),  # a later batch, the same
    ]
    counts = corpus.upsert(papers, batch_size=2)
    assert (counts.added, counts.updated, counts.unchanged) == (3, 1, 1)
    rows = corpus.db.execute("select id, title from papers order by rowid").fetchall()
    assert rows == [("a", "A, revised"), ("b", "B"), ("c", "C")]
    assert corpus.upsert(papers[:2], batch_size=1).unchanged == 1  # not empty now: asks


def test_has_at_least_counts_up_to_what_it_is_asked():
    corpus = Corpus(open_database(":memory:"))
    assert corpus.has_at_least(0) and not corpus.has_at_least(1)
    corpus.upsert([Paper(f"p{k}", f"Title {k}", "An abstract.") for k in range(5)])
    assert [corpus.has_at_least(n) for n in (1, 4, 5, 6, 50)] == [True, True, True, False, False]

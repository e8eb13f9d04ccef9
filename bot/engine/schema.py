"""The whole SQLite schema, in one place, as numbered migrations.

A fresh database and an upgraded one end up identical because both are built only by
running these migrations in order (sqlite-utils records which ones ran in
``_sqlite_migrations``). Never edit a migration that has shipped; add the next number.
"""

from __future__ import annotations

from sqlite_utils import Database, Migrations

migrations = Migrations("paperboy")


@migrations()
def m001_papers(db: Database) -> None:
    """The corpus: one row per paper, ``content_hash`` tells changed from unchanged on re-ingest."""
    db["papers"].create(
        {
            "id": str,
            "venue": str,
            "year": int,
            "title": str,
            "title_derived": int,  # 1 when the source had no title and we made one up
            "abstract": str,
            "authors": str,  # JSON list
            "keywords": str,  # JSON list
            "url": str,
            "content_hash": str,
            "added_at": str,  # ISO 8601 UTC; digests put papers added since the last one first
            "updated_at": str,
        },
        pk="id",
        not_null={"id", "title"},
    )
    db["papers"].create_index(["added_at"])
    # corpus_version goes up on every change, so an index built from an older corpus is never served.
    db["meta"].create({"key": str, "value": str}, pk="key")
    db["meta"].insert({"key": "corpus_version", "value": "0"})


@migrations()
def m002_subscriptions(db: Database) -> None:
    """Members, their topics and digest preferences (see digest/)."""
    db["members"].create(
        {
            "user_id": str,
            "team_id": str,
            "tz": str,  # IANA name from users.info, e.g. "Europe/Berlin"
            "tz_checked_at": str,
            "digest_enabled": int,
            "digest_time": str,  # "HH:MM" local time
            "digest_days": str,  # "mon,tue,wed,thu,fri"
            "digest_channel": str,  # None: DM
            "created_at": str,
        },
        pk="user_id",
    )
    db["topics"].create(
        {"id": int, "user_id": str, "query": str, "normalized": str, "created_at": str},
        pk="id",
        foreign_keys=[("user_id", "members", "user_id")],
    )
    db["topics"].create_index(["user_id", "normalized"], unique=True)


@migrations()
def m003_digests(db: Database) -> None:
    """Digest deliveries (claimed -> posted -> sent) and every paper ever sent to each member.

    A digest row is claimed before it is posted, so a crash or a second scheduler never sends
    the same digest twice; ``sent_papers`` is why the same paper never comes again.
    """
    db["digests"].create(
        {
            "id": str,  # "U1:2025-03-04" (scheduled) or "U1:2025-03-04T08:30#2" (digest now)
            "user_id": str,
            "local_date": str,
            "status": str,  # claimed | posted | sent | skipped | failed
            "claimed_by": str,
            "claimed_at": str,
            "channel": str,
            "ts": str,
            "paper_ids": str,  # JSON list
            "error": str,
            "finished_at": str,
        },
        pk="id",
    )
    db["digests"].create_index(["user_id", "local_date"], unique=True)
    db["sent_papers"].create(
        {"user_id": str, "paper_id": str, "digest_id": str, "sent_at": str},
        pk=("user_id", "paper_id"),
    )


def migrate(db: Database) -> None:
    """Bring ``db`` up to the latest schema (a no-op when it already is)."""
    migrations.apply(db)


@migrations()
def m004_digest_content(db: Database) -> None:
    """The digest as claimed (topics, papers, why), so a retry after a crash posts the same one."""
    db["digests"].add_column("content", str)  # JSON, see digest/plan.py DigestPlan
    db["digests"].create_index(["status", "claimed_at"])


@migrations()
def m005_clock_heartbeat(db: Database) -> None:
    """The scheduler's last tick, so ``/healthz`` can tell a dead clock from a quiet one."""
    db["clock_heartbeat"].create(
        {"name": str, "last_tick": str, "tick_seconds": int, "worker": str}, pk="name"
    )


@migrations()
def m006_member_dm_channel(db: Database) -> None:
    """Each member's direct-message channel with the bot, remembered so a digest needs no
    ``conversations.open`` (rate-limited to about 50 a minute) once the first one went out."""
    db["members"].add_column("dm_channel", str)


@migrations()
def m010_author_names(db: Database) -> None:
    """Folded author names for ``author:`` (case, accents, whole tokens; see text.authors_key)."""
    import json

    from .text import authors_key

    db["papers"].add_column("author_names", str)
    last = -1
    while True:  # in batches: a large corpus need not fit in memory twice
        rows = db.execute(
            "select rowid, authors from papers where rowid > ? order by rowid limit 20000", [last]
        ).fetchall()
        if not rows:
            break
        db.conn.executemany(
            "update papers set author_names = ? where rowid = ?",
            [(authors_key(json.loads(authors or "[]")), rowid) for rowid, authors in rows],
        )
        last = rows[-1][0]


@migrations()
def m029_feedback(db: Database) -> None:
    """Members' 👍/👎 and saved papers (issue 11), the shape of ``bot.state`` revision s002, so
    a SQLite file stays a complete Paperboy database (the state store adopts it as it is)."""
    db["feedback"].create(
        {"user_id": str, "paper_id": str, "team_id": str, "kind": str, "created_at": str},
        pk=("user_id", "paper_id"),
        not_null={"kind"},
    )
    db["feedback"].create_index(["paper_id"], index_name="idx_feedback_paper_id")
    db["saves"].create(
        {"user_id": str, "paper_id": str, "team_id": str, "saved_at": str},
        pk=("user_id", "paper_id"),
    )
    db["saves"].create_index(["user_id", "saved_at"], index_name="idx_saves_user_id_saved_at")
    db["saves"].create_index(["paper_id"], index_name="idx_saves_paper_id")


@migrations()
def m030_papers_changed_at_version(db: Database) -> None:
    """The corpus version each paper was last added or changed in, so the index can add only
    what changed since the version it covers (a delta segment), not rebuild everything.

    Existing papers get 0: any index built before this migration already holds them."""
    db["papers"].add_column("changed_at_version", int, not_null_default=0)
    db["papers"].create_index(["changed_at_version"])


@migrations()
def m050_shared_corpus(db: Database) -> None:
    """The shared corpus's table (``bot.state`` revision s030_corpus), so a SQLite file stays
    a complete Paperboy database that the state store adopts as it is. In a corpus file it
    stays empty: with the state in that file, the file is the corpus (issue 10)."""
    db["corpus_papers"].create(
        {
            "id": str,
            "seq": int,
            "venue": str,
            "year": int,
            "title": str,
            "title_derived": int,
            "abstract": str,
            "authors": str,
            "keywords": str,
            "url": str,
            "content_hash": str,
            "added_at": str,
            "updated_at": str,
        },
        pk="id",
        not_null={"seq", "title"},
    )
    db["corpus_papers"].create_index(["seq"], index_name="idx_corpus_papers_seq", unique=True)


@migrations()
def m040_feed_state(db: Database) -> None:
    """Each PAPERBOY_FEEDS feed's last run: where the next run resumes (the newest paper seen,
    the server's Last-Modified) and what an operator sees in ``paperboy stats`` (the last
    success, the last error and how many runs failed in a row)."""
    db["feed_state"].create(
        {
            "feed": str,
            "newest": str,
            "last_modified": str,
            "last_run": str,
            "last_success": str,
            "papers": int,
            "error": str,
            "failures": int,
            "retry_after": int,  # seconds the server asked to wait (Retry-After), if it did
        },
        pk="feed",
    )


@migrations()
def m070_member_taste(db: Database) -> None:
    """Members' choices about the taste features (issue 11: the teammates-saved line), the
    shape of ``bot.state`` revision s010_taste, so a SQLite file stays a complete Paperboy
    database that the state store adopts without running Alembic. (A file Alembic already
    brought to s010_taste has the table: then there is nothing to do.)"""
    if "member_taste" in db.table_names():
        return
    db["member_taste"].create(
        {"user_id": str, "team_id": str, "team_saves": int, "updated_at": str},
        pk="user_id",
    )


@migrations()
def m080_papers_arxiv_version(db: Database) -> None:
    """The arXiv version each paper was last stored from (``arxiv_version``: 3 for
    2501.01234v3, 0 when unknown) and that entry's ``<updated>`` (UTC), so an ingest of an
    older version (a static dump beside a live ``arxiv:`` feed) never overwrites a newer one
    (``Corpus.upsert``). Null for papers that are not from arXiv or were read without one."""
    db["papers"].add_column("arxiv_version", int)
    db["papers"].add_column("arxiv_updated", str)


@migrations()
def m090_corpus_papers_arxiv_version(db: Database) -> None:
    """The shared corpus's table gets the arXiv version of each paper (``bot.state`` revision
    s050_corpus_arxiv_version), as ``papers`` did in m080, so a SQLite state file keeps the
    shape PostgreSQL has (empty in a corpus file, as m050 says)."""
    db["corpus_papers"].add_column("arxiv_version", int)
    db["corpus_papers"].add_column("arxiv_updated", str)

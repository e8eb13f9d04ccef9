"""``_IdTable``: a serving process's paper ids by rowid, with and without gaps in the rowids."""

import sqlite3

import pytest

from bot.engine.search import _IdTable


def papers_table(rowids: list[int]) -> sqlite3.Connection:
    conn = sqlite3.connect(":memory:")
    conn.execute("create table papers (id text primary key)")
    conn.executemany(
        "insert into papers (rowid, id) values (?, ?)", [(r, f"p{r}-é") for r in rowids]
    )
    return conn


@pytest.mark.parametrize(
    "rowids", [[1, 2, 3, 4, 5], [3, 4, 5, 6], [1, 2, 5, 9, 10]], ids=["dense", "from 3", "gaps"]
)
def test_ids_by_rowid_in_the_order_asked(rowids):
    conn = papers_table(rowids)
    table = _IdTable.read(conn)
    asked = rowids[::-1] + rowids[:2]
    assert table.ids(asked, conn) == [f"p{r}-é" for r in asked]
    for r in rowids:  # one at a time too (within the rows' span, gaps or not)
        assert table.ids([r], conn) == [f"p{r}-é"]
    assert table.ids([], conn) == []
    assert table.ids([rowids[0] - 1], conn) is None  # below every row: SQL's to answer
    assert table.ids([rowids[-1] + 1], conn) is None


def test_rows_added_since_are_read_then_found_with_or_without_gaps():
    conn = papers_table([1, 2, 3])
    table = _IdTable.read(conn)
    conn.execute("insert into papers (rowid, id) values (4, 'p4')")
    assert table.ids([4, 1], conn) == ["p4", "p1-é"]  # dense still
    conn.execute("insert into papers (rowid, id) values (8, 'p8')")
    assert table.ids([8, 3, 4], conn) == ["p8", "p3-é", "p4"]  # a gap now
    assert table.ids([5], conn) is None


def test_a_warmed_up_engine_ranks_with_ids_from_memory_from_its_first_lookup(tmp_path):
    from bot.engine.search import Engine
    from tests.test_engine_hardening import many_papers, write_jsonl

    sql = Engine.open(tmp_path / "ids.db")
    sql.ingest([write_jsonl(tmp_path / "a.jsonl", many_papers("x", 120))])
    served = Engine(sql.db_path)
    assert served.warm_up() is served.index
    assert served._id_table is not None and sql._id_table is None
    assert served.rank("graph")
    for query in ["graph", "neural networks", "zzz"]:
        assert served.rank(query, k=50) == sql.rank(query, k=50)


def test_a_serving_process_reads_the_corpus_version_again_only_after_a_commit(tmp_path):
    """The version from the WAL index's header: no SQL while nothing was committed, and
    every commit since (another process's: another connection here) seen."""
    import sqlite3

    from bot.engine.search import Engine
    from tests.test_engine_hardening import many_papers, write_jsonl

    writer = Engine.open(tmp_path / "v.db")
    writer.ingest([write_jsonl(tmp_path / "a.jsonl", many_papers("x", 50))])
    served = Engine(writer.db_path)
    served.warm_up()
    assert served._wal_index is not None
    version = served._version()  # (read once by SQL with the header)
    statements = []
    served.db.conn.set_trace_callback(statements.append)
    assert served._version() == version and served.rank("graph")
    assert not [s for s in statements if "corpus_version" in s]

    other = sqlite3.connect(writer.db_path)
    for bump in (1, 2):
        with other:
            other.execute("update meta set value = value + 1 where key = 'corpus_version'")
        assert served._version() == version + bump
    other.close()

    writer.ingest(
        [write_jsonl(tmp_path / "b.jsonl", [{**many_papers("y", 1)[0], "abstract": "Quokkanew."}])]
    )
    assert [i for i, _ in served.rank("quokkanew")] == [many_papers("y", 1)[0]["id"]]

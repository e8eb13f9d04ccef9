"""Reading as a stream (``open_corpus_file``): memory stays flat, problems part-way come after
the records before them (``bot/engine/formats/detect.py``, ``source.py``)."""

from __future__ import annotations

import gzip
import hashlib
import json
import re
from pathlib import Path

import pytest

from bot.engine.formats import (
    HEAD_BYTES,
    CorpusFileError,
    CorpusStream,
    open_corpus_file,
    read_corpus_file,
)
from bot.engine.paper import Paper, Rejected
from tests.formats_support import DATA, FIXTURES, error_for, read


def record(number: int) -> dict[str, object]:
    """A distinct paper whose text does not compress away (so gzip streams are long)."""
    words = " ".join(hashlib.sha1(f"{number}-{i}".encode()).hexdigest()[:9] for i in range(20))
    return {
        "id": f"p{number}",
        "venue": "ICML",
        "year": 2024,
        "title": f"Paper number {number}",
        "abstract": f"We study {words}.",
        "authors": ["Ada Lovelace", "Alan Turing"],
    }


def jsonl_bytes(count: int) -> bytes:
    return "".join(json.dumps(record(n)) + "\n" for n in range(1, count + 1)).encode()


def drain(stream: CorpusStream) -> tuple[list[Paper | Rejected], CorpusFileError | None]:
    """Every item until the end or a CorpusFileError, and that error."""
    items: list[Paper | Rejected] = []
    try:
        for item in stream.items:
            items.append(item)
    except CorpusFileError as error:
        return items, error
    return items, None


def test_open_corpus_file_streams_the_records_lazily() -> None:
    stream = open_corpus_file(FIXTURES / "paperlists_sample.jsonl")

    assert isinstance(stream, CorpusStream)
    assert (stream.path, stream.format) == (str(FIXTURES / "paperlists_sample.jsonl"), "jsonl")
    assert iter(stream.items) is stream.items  # an iterator, not a list
    first = next(stream.items)
    assert isinstance(first, Paper) and first.id == "3dv2025-05T81ScPFb"
    assert [p.id for p in stream.items] == [p.id for p in read("paperlists_sample.jsonl").papers][
        1:
    ]


def stream_or_error(path: Path) -> tuple[str, str, list[Paper | Rejected]] | str:
    try:
        stream = open_corpus_file(path)
        return stream.path, stream.format, list(stream.items)
    except CorpusFileError as error:
        return str(error)


def read_or_error(path: Path) -> tuple[str, str, list[Paper | Rejected]] | str:
    try:
        result = read_corpus_file(path)
    except CorpusFileError as error:
        return str(error)
    return result.path, result.format, [*result.papers, *result.rejected]


@pytest.mark.parametrize(
    "path",
    [*sorted(FIXTURES.iterdir()), DATA / "icml2025.txt", DATA / "iclr2025.txt"],
    ids=lambda p: p.name,
)
def test_stream_and_read_corpus_file_agree(path: Path) -> None:
    streamed = stream_or_error(path)
    read_whole = read_or_error(path)

    if isinstance(streamed, str):  # the same whole-file error either way
        assert streamed == read_whole
        return
    assert not isinstance(read_whole, str)
    assert streamed[:2] == read_whole[:2]
    papers = [item for item in streamed[2] if isinstance(item, Paper)]
    rejected = [item for item in streamed[2] if isinstance(item, Rejected)]
    assert [*papers, *rejected] == read_whole[2]  # same records, same exact locations


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("notes.pdf", "notes.pdf is not a corpus file: it looks binary."),
        ("empty.jsonl", "empty.jsonl is empty."),
        ("wrong_columns.csv", "wrong_columns.csv has no 'title' or 'abstract' column"),
        ("seed_no_year.txt", "seed_no_year.txt looks like a seed file"),
        ("memo.dat", "memo.dat is not a corpus file"),
    ],
)
def test_whole_file_problems_are_raised_by_open_not_by_the_items(name: str, message: str) -> None:
    with pytest.raises(CorpusFileError) as caught:
        open_corpus_file(FIXTURES / name)

    assert str(caught.value).startswith(f"{FIXTURES}/{message}")  # the path as given


def test_undecodable_line_late_in_a_file_is_rejected_in_its_place(tmp_path: Path) -> None:
    path = tmp_path / "late.jsonl"
    others = "".join(json.dumps(record(n)) + "\n" for n in range(200, 203)).encode()
    path.write_bytes(jsonl_bytes(100) + b'{"id": "bad", "title": "Caf\xe9"}\n' + others)
    assert path.stat().st_size > 4 * HEAD_BYTES

    items, error = drain(open_corpus_file(path))

    assert error is None
    assert [i.id for i in items[:100]] == [f"p{n}" for n in range(1, 101)]
    assert items[100] == Rejected(
        str(path), "line 101", "not UTF-8 text (byte 0xe9 at column 28); save the file as UTF-8"
    )
    assert [i.id for i in items[101:]] == ["p200", "p201", "p202"]


@pytest.mark.parametrize("fmt", ["jsonl", "csv", "seed"])
def test_a_few_latin1_lines_among_utf8_ones_reject_only_their_records(
    tmp_path: Path, fmt: str
) -> None:
    """Gzipped or not, in the head or far past it: each record decided on its own."""
    good = [record(n) | {"abstract": f"Über {n}: " + "résumé of the method. " * 8} for n in (1, 2)]
    bad = record(3) | {"abstract": "Caf" + "\xe9 " * 40}
    ordered = [good[0], bad, good[1]]
    if fmt == "jsonl":
        lines = [json.dumps(r, ensure_ascii=False) for r in ordered]
        text = "\n".join(lines) + "\n"
    elif fmt == "csv":
        rows = [f'{r["id"]},{r["title"]},"{r["abstract"]}"' for r in ordered]
        text = "id,title,abstract\n" + "\n".join(rows) + "\n"
    else:
        text = "ICML 2025 Papers\n\n" + "\n\n".join(r["abstract"] for r in ordered) + "\n"
    data = text.encode("utf-8")
    latin = bad["abstract"].encode("utf-8")
    data = data.replace(latin, bad["abstract"].encode("latin-1"))
    for name, payload in ((f"mixed.{fmt}", data), (f"mixed.{fmt}.gz", gzip.compress(data))):
        path = tmp_path / name
        path.write_bytes(payload)
        result = read_corpus_file(path)
        assert len(result.papers) == 2, name
        assert all("Über" in p.abstract for p in result.papers)
        (rejected,) = result.rejected
        line = {"jsonl": 2, "csv": 3, "seed": 5}[fmt]
        assert rejected.location == f"line {line}"
        assert rejected.reason.startswith("not UTF-8 text (byte 0xe9 at column")


def test_truncated_gzip_yields_what_it_has_then_names_the_last_good_line(tmp_path: Path) -> None:
    packed = gzip.compress(jsonl_bytes(2000))
    path = tmp_path / "cut.jsonl.gz"
    path.write_bytes(packed[: len(packed) // 2])

    stream = open_corpus_file(path)
    assert stream.format == "jsonl"
    assert isinstance(next(stream.items), Paper)
    items, error = drain(stream)

    assert error is not None
    match = re.fullmatch(
        re.escape(str(path)) + r" is a damaged gzip file: it breaks off after line (\d+) \(.+\)\.",
        str(error),
    )
    assert match, str(error)
    assert 100 < int(match[1]) < 2000
    assert len(items) + 1 == int(match[1])  # every complete line came through, in order
    assert [p.id for p in items][-1] == f"p{match[1]}"
    assert error_for(path) == str(error).replace(f"{path.parent}/", "")  # read from its folder


def test_nul_byte_late_in_a_file_is_binary_with_its_line(tmp_path: Path) -> None:
    path = tmp_path / "nul.jsonl"
    path.write_bytes(jsonl_bytes(60) + b"\x00\x00\x00\n")

    items, error = drain(open_corpus_file(path))

    assert len(items) == 60
    assert str(error) == f"{path} is not a corpus file: it looks binary (line 61 has a NUL byte)."


@pytest.mark.parametrize("fmt", ["jsonl", "csv", "seed"])
def test_big_gzipped_files_stream_the_same_as_plain(tmp_path: Path, fmt: str) -> None:
    records = [record(n) for n in range(1, 400)]
    if fmt == "jsonl":
        text = "".join(json.dumps(r) + "\n" for r in records)
    elif fmt == "csv":
        text = "id,title,abstract,authors\n" + "".join(
            f'{r["id"]},{r["title"]},"{r["abstract"]}",Ada Lovelace; Alan Turing\n' for r in records
        )
    else:
        text = "NeurIPS 2024 Papers\n\n" + "".join(f"{r['abstract']}\n\n" for r in records)
    plain = tmp_path / f"big.{fmt}.txt"
    plain.write_text(text, encoding="utf-8")
    packed = tmp_path / f"big.{fmt}.txt.gz"
    packed.write_bytes(gzip.compress(text.encode()))
    assert len(text) > 10 * HEAD_BYTES

    streamed = open_corpus_file(packed)
    items = list(streamed.items)

    assert streamed.format == fmt
    assert items == list(open_corpus_file(plain).items)
    assert len(items) == 399 and all(isinstance(item, Paper) for item in items)


def test_stream_context_manager_closes_the_file(tmp_path: Path) -> None:
    path = tmp_path / "papers.jsonl.gz"
    path.write_bytes(gzip.compress(jsonl_bytes(50)))

    with open_corpus_file(path) as stream:
        assert isinstance(next(stream.items), Paper)

    assert list(stream.items) == []  # closed: nothing more comes


def test_first_line_longer_than_the_head_is_still_detected(tmp_path: Path) -> None:
    long = record(1) | {"abstract": "word " * (2 * HEAD_BYTES)}
    path = tmp_path / "long.jsonl"
    path.write_text(json.dumps(long) + "\n" + json.dumps(record(2)) + "\n", encoding="utf-8")

    result = read_corpus_file(path)

    assert result.format == "jsonl"
    assert [p.id for p in result.papers] == ["p1", "p2"]


def test_big_jsonl_with_broken_first_line_still_streams(tmp_path: Path) -> None:
    path = tmp_path / "broken-start.jsonl"
    path.write_bytes(b'{"id": "x", "title": \n' + jsonl_bytes(300))

    result = read_corpus_file(path)

    assert result.format == "jsonl"
    assert len(result.papers) == 300
    assert [r.location for r in result.rejected] == ["line 1"]


def test_big_pretty_printed_json_named_jsonl_is_still_json(tmp_path: Path) -> None:
    path = tmp_path / "pretty.jsonl"
    path.write_text(json.dumps({"papers": [record(n) for n in range(300)]}, indent=2))
    assert path.stat().st_size > 10 * HEAD_BYTES

    result = read_corpus_file(path)

    assert result.format == "json"
    assert len(result.papers) == 300 and result.rejected == []


def test_big_csv_without_title_column_is_refused_before_streaming(tmp_path: Path) -> None:
    path = tmp_path / "wide.csv"
    path.write_text("name,summary\n" + "x,y\n" * 10_000, encoding="utf-8")

    with pytest.raises(
        CorpusFileError, match=rf"^{re.escape(str(path))} has no 'title' or 'abstract' column"
    ):
        open_corpus_file(path)


@pytest.mark.parametrize("newline", ["\r", "\r\n"])
def test_old_mac_and_windows_line_ends_number_lines_the_same(tmp_path: Path, newline: str) -> None:
    lines = [json.dumps(record(1)), "not json", "", json.dumps(record(2)), "[1]"]
    path = tmp_path / "ends.jsonl"
    path.write_bytes(newline.join(lines).encode())

    result = read_corpus_file(path)

    assert [p.id for p in result.papers] == ["p1", "p2"]
    assert [r.location for r in result.rejected] == ["line 2", "line 5"]


def test_utf16_tab_separated_export_streams(tmp_path: Path) -> None:
    path = tmp_path / "excel.txt"
    text = "title\tabstract\r\n" + "".join(
        f"Paper {n}\tAbstract with ümlauts {n}\r\n" for n in range(2000)
    )
    path.write_bytes(text.encode("utf-16"))
    assert path.stat().st_size > 10 * HEAD_BYTES

    result = read_corpus_file(path)

    assert result.format == "csv"
    assert len(result.papers) == 2000 and result.rejected == []
    assert result.papers[-1].abstract == "Abstract with ümlauts 1999"


def test_jsonl_line_with_an_integer_too_long_is_rejected_not_fatal(tmp_path: Path) -> None:
    path = tmp_path / "huge-int.jsonl"
    path.write_text(
        json.dumps(record(1)) + '\n{"id": ' + "9" * 5000 + "}\n" + json.dumps(record(2)) + "\n",
        encoding="utf-8",
    )

    result = read_corpus_file(path)

    assert [p.id for p in result.papers] == ["p1", "p2"]
    assert [r.location for r in result.rejected] == ["line 2"]
    assert result.rejected[0].reason.startswith("not valid JSON (")

"""CSV and TSV files with a header row that has a ``title`` or ``abstract`` column, streamed."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Iterator

from bot.engine.paper import Paper, Rejected

from .common import CorpusFileError
from .records import RecordBuilder


def csv_header(line: str, ext: str) -> tuple[str, list[str]]:
    """The delimiter (comma, tab or semicolon) the header line uses, and its column names."""
    counts = {d: line.count(d) for d in (",", "\t", ";")}
    delimiter = max(counts, key=lambda d: counts[d])
    if not counts[delimiter]:
        delimiter = "\t" if ext == ".tsv" else ","
    columns = next(csv.reader([line], delimiter=delimiter), [])
    return delimiter, [c.strip() for c in columns]


def _csv_columns(row: list[str], name: str) -> list[str]:
    """The header row's column names; raises unless there is a title or abstract column."""
    header = [cell.strip() for cell in row]
    lowered = [c.lower() for c in header]
    if "title" not in lowered and "abstract" not in lowered:
        raise CorpusFileError(
            f"{name} has no 'title' or 'abstract' column (columns: {', '.join(header)})."
        )
    return header


def check_csv_head(head: str, complete: bool, name: str, delimiter: str) -> None:
    """Raise now if the header row, read from the head, has no title or abstract column."""
    if not complete:
        head = head[: head.rfind("\n") + 1]  # whole lines only
    reader = csv.reader(io.StringIO(head, newline=""), delimiter=delimiter)
    try:
        for row in reader:
            if any(cell.strip() for cell in row):
                # A header row reaching the head's last line might go on after it.
                if complete or reader.line_num < head.count("\n"):
                    _csv_columns(row, name)
                return
    except csv.Error:
        return  # the stream reports it, at its line


def csv_items(
    lines: Iterable[str],
    shown: str,
    name: str,
    delimiter: str,
    bad: dict[int, str],
) -> Iterator[Paper | Rejected]:
    """One paper per row after the header; a row over a line in ``bad`` (``Source.bad_lines``,
    filled in as ``lines`` is read) is rejected with its reason."""
    reader = csv.reader(lines, delimiter=delimiter)
    header: list[str] | None = None
    builder = RecordBuilder(shown, "line")
    previous_end = 0
    while True:
        start = previous_end + 1
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            yield builder.reject(reader.line_num, f"not valid CSV ({exc})")
            return
        previous_end = reader.line_num
        if not any(cell.strip() for cell in row):
            continue
        if header is None:
            header = _csv_columns(row, name)
            continue
        broken = [n for n in range(start, previous_end + 1) if n in bad] if bad else []
        if broken:
            yield builder.reject(broken[0], bad[broken[0]])
            continue
        if len(row) != len(header):
            yield builder.reject(start, f"has {len(row)} fields but the header has {len(header)}")
            continue
        yield builder.build(start, dict(zip(header, row, strict=True)))

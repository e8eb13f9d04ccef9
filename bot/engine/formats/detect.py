"""Which reader a corpus file needs, from its content (not its name), and the stream of papers
it gives; ``read_corpus_file`` collects a stream whole."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from bot.engine.paper import Paper, Rejected

from .arxiv_atom import atom_items
from .common import CorpusFileError
from .csv_rows import check_csv_head, csv_header, csv_items
from .json_lines import is_jsonl, json_items, json_records, jsonl_items
from .seed_text import parse_seed_header, seed_items
from .source import Source

FORMATS = ("seed", "json", "jsonl", "csv", "arxiv-atom")


ACCEPTED_FORMATS = (
    "Paperboy reads JSON, JSON Lines, CSV with a title or abstract column, arXiv Atom feeds, "
    'and seed text files whose first line names a venue and year (like "ICML 2025 Papers")'
)


_HTML = re.compile(r"<(?:!doctype\s+html|html)\b", re.IGNORECASE)


@dataclass
class ReadResult:
    """What one corpus file yielded: its format, the papers read and the records rejected."""

    path: str
    format: str  # one of FORMATS
    papers: list[Paper] = field(default_factory=list)
    rejected: list[Rejected] = field(default_factory=list)


@dataclass
class CorpusStream:
    """A corpus file being read: its format and its records, parsed one at a time.

    ``items`` yields each ``Paper`` or ``Rejected`` (in file order) as it is read, so only the
    current record is in memory. It opens the file when first advanced and closes it when
    exhausted or closed; a problem found part-way (a gzip file that breaks off, bytes that are
    not UTF-8 at line N) raises ``CorpusFileError`` from the iteration, after the items before
    it. Use it as a context manager, or call ``close()``, to release the file early.
    """

    path: str
    format: str  # one of FORMATS
    items: Iterator[Paper | Rejected]

    def __iter__(self) -> Iterator[Paper | Rejected]:
        return self.items

    def close(self) -> None:
        close = getattr(self.items, "close", None)
        if close is not None:
            close()

    def __enter__(self) -> CorpusStream:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def read_corpus_file(path: str | Path) -> ReadResult:
    """Read any supported corpus file whole, choosing the reader from the content.

    Raises ``CorpusFileError`` when the file is missing, binary, empty, of no known format, or
    broken as a whole (malformed JSON document or XML, a CSV without title/abstract columns,
    a seed file whose header has no year, a damaged gzip stream, bytes that are not text).
    """
    stream = open_corpus_file(path)
    result = ReadResult(stream.path, stream.format)
    papers, rejected = result.papers, result.rejected
    for item in stream.items:
        if isinstance(item, Paper):
            papers.append(item)
        else:
            rejected.append(item)
    return result


def open_corpus_file(path: str | Path) -> CorpusStream:
    """Open any supported corpus file as a stream of papers, choosing the reader from the content.

    Only the first few KB are read here, to pick the format; whole-file problems visible
    there raise ``CorpusFileError`` at once: a missing, binary, empty or unknown file, HTML,
    a CSV without title/abstract columns, a seed file whose header has no year. JSON documents
    and Atom feeds are read and parsed here in full, so all their whole-file errors come now too.
    Problems further into a streamed file are raised by ``items`` when it gets there.
    """
    path = Path(path)
    name = path.name
    shown = str(path)
    source = Source(path)
    head, complete = source.head()
    if not head.strip():  # the head runs on until something that is not blank, or the end
        raise CorpusFileError(f"{name} is empty.")

    suffixes = [s.lower() for s in path.suffixes if s.lower() != ".gz"]
    ext = suffixes[-1] if suffixes else ""
    start = head.lstrip()

    if start[0] in "[{":
        text = None
        if start[0] == "{":
            jsonl, text = is_jsonl(start, complete, ext, source)
            if jsonl:
                return CorpusStream(
                    shown, "jsonl", jsonl_items(source.lines(), shown, source.bad_lines)
                )
        records = json_records(text if text is not None else source.whole_text(), name)
        return CorpusStream(shown, "json", json_items(records, shown))
    if start.startswith("<"):
        if _HTML.match(start[:200]):
            raise CorpusFileError(f"{name} is an HTML page, not a corpus file.")
        items = atom_items(source.whole_text(), shown, name)
        return CorpusStream(shown, "arxiv-atom", iter(items))

    lines = head.split("\n")
    first_index = next(i for i, line in enumerate(lines) if line.strip())
    header = lines[first_index]  # whole: the head goes on past the first non-blank line
    delimiter, columns = csv_header(header, ext)
    if {"title", "abstract"} & {c.lower() for c in columns}:
        return CorpusStream(
            shown, "csv", csv_items(source.lines(), shown, name, delimiter, source.bad_lines)
        )
    venue_year = parse_seed_header(header)
    if venue_year:
        return CorpusStream(
            shown, "seed", seed_items(source.lines(), venue_year, shown, source.bad_lines)
        )
    if ext in (".csv", ".tsv"):  # reports the columns it does have
        check_csv_head(head, complete, name, delimiter)
        return CorpusStream(
            shown, "csv", csv_items(source.lines(), shown, name, delimiter, source.bad_lines)
        )
    if ext in (".txt", ".text", ".md", "") and len(lines) > first_index + 1:
        shown_header = header.strip()
        if len(shown_header) > 60:
            shown_header = shown_header[:57] + "..."
        raise CorpusFileError(
            f"{name} looks like a seed file but its first line {shown_header!r} has no year: "
            'it should name the venue and year, like "ICML 2025 Papers".'
        )
    raise CorpusFileError(f"{name} is not a corpus file: {ACCEPTED_FORMATS}.")

"""Readers for every corpus file Paperboy accepts, turning each into ``Paper`` records.

``open_corpus_file`` looks at the start of a file (gzip is undone first) and picks the reader:

* seed text: a "ICML 2025 Papers" header line, then one abstract per paragraph, no titles;
* JSON (a list, or an object with a ``papers`` list) and JSON Lines, e.g. paperlists dumps;
* CSV/TSV with a header row that has a ``title`` or ``abstract`` column;
* an arXiv API Atom feed, as saved from ``export.arxiv.org/api/query``.

It returns a ``CorpusStream`` whose ``items`` yield each ``Paper`` or ``Rejected`` as it is read.
JSON Lines, CSV and seed files are streamed line by line, so memory stays flat however big the
file is; JSON documents and Atom feeds (small in practice) are read whole. ``read_corpus_file``
collects a stream into a ``ReadResult``.

A record that cannot be read becomes a ``Rejected`` with its line, record or entry number and the
valid ones still come through; only a file that is unusable as a whole raises
``CorpusFileError``, whose message is one sentence naming the file. Standard library only.
"""

from __future__ import annotations

import codecs
import csv
import gzip
import hashlib
import io
import json
import re
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any
from xml.etree import ElementTree

from bot.engine.paper import Paper, Rejected

FORMATS = ("seed", "json", "jsonl", "csv", "arxiv-atom")

MIN_ABSTRACT_CHARS = 80
MAX_TITLE_CHARS = 100  # of a title derived from the abstract
# Records over these sizes are rejected: no real paper comes close (the longest abstracts
# are a few thousand characters), and a 50 MB "abstract" would make every lookup showing it
# and every digest carrying it slow.
LONGEST_TITLE = 1_000
LONGEST_ABSTRACT = 100_000
LONGEST_NAMES = 100_000  # authors and keywords together (papers with 3,000 authors fit)
LONGEST_FIELD = 2_000  # id, venue, url

# Detection reads this many bytes from the start of the file, and more only when the first
# non-blank line is longer (it needs that line whole, and a sign of what follows it).
HEAD_BYTES = 8192

ACCEPTED_FORMATS = (
    "Paperboy reads JSON, JSON Lines, CSV with a title or abstract column, arXiv Atom feeds, "
    'and seed text files whose first line names a venue and year (like "ICML 2025 Papers")'
)

ATOM = "{http://www.w3.org/2005/Atom}"

_UTF8_BOM = b"\xef\xbb\xbf"
_UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")
_GZIP_MAGIC = b"\x1f\x8b"
_GZIP_ERRORS = (OSError, EOFError, zlib.error)
_JSON = json.JSONDecoder(
    strict=False
)  # one decoder: json.loads(..., strict=False) makes one per call
_HTML = re.compile(r"<(?:!doctype\s+html|html)\b", re.IGNORECASE)
_DOCTYPE = re.compile(r"<!(?:DOCTYPE|ENTITY)")


class CorpusFileError(Exception):
    """The whole file is unusable; the message is one sentence naming the file."""


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


# --------------------------------------------------------------------------------------------
# Opening and detection


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
    source = _Source(path)
    head, complete = source.head()
    if not head.strip():  # the head runs on until something that is not blank, or the end
        raise CorpusFileError(f"{name} is empty.")

    suffixes = [s.lower() for s in path.suffixes if s.lower() != ".gz"]
    ext = suffixes[-1] if suffixes else ""
    start = head.lstrip()

    if start[0] in "[{":
        text = None
        if start[0] == "{":
            jsonl, text = _is_jsonl(start, complete, ext, source)
            if jsonl:
                return CorpusStream(
                    shown, "jsonl", _jsonl_items(source.lines(), shown, source.bad_lines)
                )
        records = _json_records(text if text is not None else source.whole_text(), name)
        return CorpusStream(shown, "json", _json_items(records, shown))
    if start.startswith("<"):
        if _HTML.match(start[:200]):
            raise CorpusFileError(f"{name} is an HTML page, not a corpus file.")
        items = _atom_items(source.whole_text(), shown, name)
        return CorpusStream(shown, "arxiv-atom", iter(items))

    lines = head.split("\n")
    first_index = next(i for i, line in enumerate(lines) if line.strip())
    header = lines[first_index]  # whole: the head goes on past the first non-blank line
    delimiter, columns = _csv_header(header, ext)
    if {"title", "abstract"} & {c.lower() for c in columns}:
        return CorpusStream(
            shown, "csv", _csv_items(source.lines(), shown, name, delimiter, source.bad_lines)
        )
    venue_year = parse_seed_header(header)
    if venue_year:
        return CorpusStream(
            shown, "seed", _seed_items(source.lines(), venue_year, shown, source.bad_lines)
        )
    if ext in (".csv", ".tsv"):  # reports the columns it does have
        _check_csv_head(head, complete, name, delimiter)
        return CorpusStream(
            shown, "csv", _csv_items(source.lines(), shown, name, delimiter, source.bad_lines)
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


class _Source:
    """A corpus file's text: its head for detection, its lines one by one, or all of it.

    Gzip is undone on the fly (found by its magic bytes, not the name). Text is UTF-8, with or
    without a BOM, or UTF-16 with a BOM (Excel's "Unicode text"); line ends are normalised to
    "\\n" ("\\r\\n" and a lone "\\r" both end a line), so line numbers are the same whichever
    way a file is read.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.name = path.name
        self.utf16 = False
        self.gzipped = False
        # Line number -> why it is not UTF-8: filled in by ``lines()`` as it reads, for the
        # line-based readers to reject the record on that line (and keep the others).
        self.bad_lines: dict[int, str] = {}
        with self._open(gunzip=False) as raw:
            self.gzipped = raw.read(2) == _GZIP_MAGIC

    def _open(self, gunzip: bool = True) -> IO[bytes]:
        try:
            if gunzip and self.gzipped:
                return gzip.open(self.path, "rb")
            return open(self.path, "rb")
        except FileNotFoundError as exc:
            raise CorpusFileError(f"{self.name} does not exist.") from exc
        except IsADirectoryError as exc:
            raise CorpusFileError(f"{self.name} is a directory, not a corpus file.") from exc
        except OSError as exc:
            raise CorpusFileError(f"{self.name} could not be read ({exc.strerror}).") from exc

    def _read_error(self, exc: BaseException, after_line: int = 0) -> CorpusFileError:
        """The error for a file that fails part-way, naming the last line read whole."""
        if self.gzipped and isinstance(exc, _GZIP_ERRORS):
            if not after_line:
                return CorpusFileError(f"{self.name} is a damaged gzip file ({exc}).")
            return CorpusFileError(
                f"{self.name} is a damaged gzip file: it breaks off after line {after_line} ({exc})."
            )
        reason = getattr(exc, "strerror", None) or exc
        where = f" after line {after_line}" if after_line else ""
        return CorpusFileError(f"{self.name} could not be read{where} ({reason}).")

    def head(self) -> tuple[str, bool]:
        """The start of the text, at least ``HEAD_BYTES`` long, and whether it is all of it.

        It runs on until the first non-blank line is complete and something that is not blank
        follows it, so detection always sees one whole line and what comes after.
        """
        data = b""
        complete = False
        try:
            with self._open() as reader:
                while True:
                    chunk = reader.read(max(HEAD_BYTES, len(data)))
                    if not chunk:
                        complete = True
                        break
                    data += chunk
                    if len(data) >= HEAD_BYTES and _head_ready(_peek(data)):
                        break
        except _GZIP_ERRORS as exc:
            raise self._read_error(exc) from exc
        text = self._decode_head(data, complete)
        if not complete and text.endswith("\r"):
            text = text[:-1]  # maybe half of a "\r\n"
        return _newlines(text), complete

    def _decode_head(self, data: bytes, complete: bool) -> str:
        if data[:2] in _UTF16_BOMS:
            try:
                text = codecs.getincrementaldecoder("utf-16")().decode(data, final=complete)
            except UnicodeDecodeError:
                pass
            else:
                self.utf16 = True
                return text
        if b"\x00" in data:
            raise CorpusFileError(f"{self.name} is not a corpus file: it looks binary.")
        data = data.removeprefix(_UTF8_BOM)
        try:
            return codecs.getincrementaldecoder("utf-8")().decode(data, final=complete)
        except UnicodeDecodeError as exc:
            # Bytes that are not UTF-8 after the first line are one bad record in a line-based
            # file (``lines()`` reports it); in the first line they leave nothing to go by.
            first = len(data) - len(data.lstrip())
            first_end = _newlines_bytes(data).find(b"\n", first)
            if first_end < 0 or exc.start < first_end:
                raise self._not_utf8(data, exc, 0) from exc
            return codecs.getincrementaldecoder("utf-8")("replace").decode(data, final=complete)

    def _not_utf8(self, data: bytes, exc: UnicodeDecodeError, lines_before: int) -> CorpusFileError:
        before = _newlines_bytes(data[: exc.start])
        line = lines_before + before.count(b"\n") + 1
        return CorpusFileError(
            f"{self.name} is not a corpus file: it looks binary "
            f"(byte 0x{data[exc.start]:02x} on line {line} is not UTF-8 text)."
        )

    def lines(self) -> Iterator[str]:
        """The text's lines, each ending in "\\n" but perhaps the last, read lazily."""
        if self.utf16:
            yield from self._utf16_lines()
            return
        number = 0  # lines yielded so far
        try:
            with self._open() as reader:
                for raw in reader:
                    if number == 0:
                        raw = raw.removeprefix(_UTF8_BOM)
                    if b"\x00" in raw:
                        raise CorpusFileError(
                            f"{self.name} is not a corpus file: it looks binary "
                            f"(line {number + 1} has a NUL byte)."
                        )
                    try:
                        line = raw.decode("utf-8")
                    except UnicodeDecodeError as exc:
                        line = raw.decode("utf-8", "replace")
                        self.bad_lines[number + 1] = (
                            f"not UTF-8 text (byte 0x{raw[exc.start]:02x} at column "
                            f"{exc.start + 1}); save the file as UTF-8"
                        )
                    if "\r" in line:
                        parts = _newlines(line).split("\n")
                        last = parts.pop()
                        for part in parts:
                            number += 1
                            yield part + "\n"
                        if last:
                            number += 1
                            yield last
                    else:
                        number += 1
                        yield line
        except _GZIP_ERRORS as exc:
            raise self._read_error(exc, number) from exc

    def _utf16_lines(self) -> Iterator[str]:
        number = 0
        try:
            with io.TextIOWrapper(self._open(), encoding="utf-16", newline=None) as text:
                for line in text:
                    number += 1
                    yield line
        except UnicodeDecodeError as exc:
            raise CorpusFileError(
                f"{self.name} is not a corpus file: it looks binary "
                f"(the UTF-16 text breaks down after line {number})."
            ) from exc
        except _GZIP_ERRORS as exc:
            raise self._read_error(exc, number) from exc

    def whole_text(self) -> str:
        """All the text at once, for the formats that are parsed whole (JSON documents, Atom)."""
        try:
            with self._open(gunzip=False) as raw:
                data = raw.read()
        except OSError as exc:
            raise self._read_error(exc) from exc
        if self.gzipped:
            try:
                data = gzip.decompress(data)
            except _GZIP_ERRORS as exc:
                raise self._read_error(exc) from exc
        text = _newlines(_decode(data, self.name))
        if not text.strip():
            raise CorpusFileError(f"{self.name} is empty.")
        return text


def _peek(data: bytes) -> str:
    """The head decoded leniently, with normalised line ends, to see whether it is enough."""
    if data[:2] in _UTF16_BOMS:
        text = data.decode("utf-16", "replace")
    else:
        text = data.removeprefix(_UTF8_BOM).decode("utf-8", "replace")
    return _newlines(text)


def _head_ready(text: str) -> bool:
    start = text.lstrip()
    if not start:
        return False
    if start[0] in "[<":  # a JSON list or XML: read whole anyway, the head only names them
        return True
    _, newline, rest = start.partition("\n")
    return bool(newline) and bool(rest) and not rest.isspace()


def _newlines(text: str) -> str:
    if "\r" not in text:
        return text
    return text.replace("\r\n", "\n").replace("\r", "\n")


def _newlines_bytes(data: bytes) -> bytes:
    return data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")


def _decode(data: bytes, name: str) -> str:
    # Excel's "Unicode text" export is UTF-16 with a BOM; everything else must be UTF-8.
    if data[:2] in _UTF16_BOMS:
        try:
            return data.decode("utf-16")
        except UnicodeDecodeError:
            pass
    if b"\x00" in data:
        raise CorpusFileError(f"{name} is not a corpus file: it looks binary.")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = _newlines_bytes(data[: exc.start]).count(b"\n") + 1
        raise CorpusFileError(
            f"{name} is not a corpus file: it looks binary "
            f"(byte 0x{data[exc.start]:02x} on line {line} is not UTF-8 text)."
        ) from exc


def _is_jsonl(start: str, complete: bool, ext: str, source: _Source) -> tuple[bool, str | None]:
    """JSON Lines when the first line is a whole object and more lines follow.

    ``start`` is the head from its first non-blank character. Also returns the whole text when
    it had to be read to decide (a .jsonl file whose first line is broken), for reuse.
    """
    first, _, rest = start.partition("\n")
    if not rest.strip():
        return False, None
    try:
        return isinstance(_JSON.decode(first), dict), None
    except ValueError:
        pass
    if ext not in (".jsonl", ".ndjson"):
        return False, None
    # A .jsonl file whose first line is broken: JSON Lines (reporting that line) unless the
    # whole file is in fact one pretty-printed JSON document. An error well before the end of
    # the head, not one of running out of text, settles it without reading the whole file.
    try:
        _JSON.decode(start)
    except ValueError as exc:
        if complete:
            return True, None
        if (
            isinstance(exc, json.JSONDecodeError)
            and not exc.msg.startswith("Unterminated string")
            and exc.pos < len(start) - 16
        ):
            return True, None
    else:
        if complete:
            return False, None
    text = source.whole_text()
    try:
        _JSON.decode(text)
    except ValueError:
        return True, None
    return False, text


# --------------------------------------------------------------------------------------------
# Seed text


_SEED_HEADER = re.compile(
    r"^\s*(?P<venue>[A-Za-z][\w&.+/-]*(?:\s+[A-Za-z][\w&.+/-]*){0,3})"
    r"[\s'’-]*(?P<year>(?:19|20)\d\d)\b(?P<rest>[^\n]{0,50})$"
)
_FOUR_DIGITS = re.compile(r"\d{4}")


def parse_seed_header(line: str) -> tuple[str, int] | None:
    """``("ICML", 2025)`` from a seed header like "ICML 2025 Papers", or None."""
    match = _SEED_HEADER.match(line)
    if not match or _FOUR_DIGITS.search(match["rest"]):
        return None
    return match["venue"], int(match["year"])


def _seed_items(
    lines: Iterable[str],
    venue_year: tuple[str, int],
    shown: str,
    bad: dict[int, str] | None = None,
) -> Iterator[Paper | Rejected]:
    """One paper per paragraph after the header line, yielded as each paragraph ends."""
    venue, year = venue_year
    prefix = f"{_slug(venue)}{year}"
    seen: dict[str, int] = {}
    bad = {} if bad is None else bad

    def paragraph(line_no: int, chunk: list[str]) -> Paper | Rejected:
        broken = [n for n in range(line_no, line_no + len(chunk)) if n in bad] if bad else []
        if broken:
            return Rejected(shown, f"line {broken[0]}", bad[broken[0]])
        abstract = _collapse(" ".join(chunk))
        if len(abstract) > LONGEST_ABSTRACT:
            return Rejected(shown, f"line {line_no}", check_sizes(Paper("", "", abstract)) or "")
        if len(abstract) < MIN_ABSTRACT_CHARS:
            return Rejected(
                shown,
                f"line {line_no}",
                f"too short to be an abstract ({len(abstract)} characters)",
            )
        paper_id = f"{prefix}-{_sha1(abstract)[:12]}"
        if paper_id in seen:
            return Rejected(
                shown, f"line {line_no}", f"same abstract as line {seen[paper_id]} (skipped)"
            )
        seen[paper_id] = line_no
        # The id hashes the abstract as written (ids stay what they were before emphasis
        # was stripped), and the title is derived from it too: "**Cognac**" marks a name.
        return Paper(
            id=paper_id,
            title=derive_title(abstract),
            abstract=strip_emphasis(abstract),
            venue=venue,
            year=year,
            title_derived=True,
        )

    header_seen = False
    start, chunk = 0, []
    for number, line in enumerate(lines, start=1):
        if line.strip():
            if not header_seen:
                header_seen = True
                continue
            if not chunk:
                start = number
            chunk.append(line)
        elif chunk:
            yield paragraph(start, chunk)
            chunk = []
    if chunk:
        yield paragraph(start, chunk)


# --------------------------------------------------------------------------------------------
# Titles made up from abstracts

_INTRO = re.compile(
    r"\b(?:[Ww]e|[Tt]his\s+(?:paper|work|study|article))\s+"
    r"(?:(?:also|further|then|first|here|now|therefore|thus)\s+)?"
    r"(?:propose|introduce|present|develop|design|devise|build|create|release)[sd]?\b\s*"
)
_ARTICLE = re.compile(r"^(?:the|a|an)\s+", re.IGNORECASE)
_WRAPPED_NAME = re.compile(
    r'\*\*(?P<b>[^*\n]{1,60}?)\*\*|\*(?P<i>[^*\s][^*\n]{0,58}?)\*|"(?P<q>[^"\n]{1,60}?)"'
    r"|“(?P<q2>[^”\n]{1,60}?)”"
)
_PLAIN_NAME = re.compile(r"[A-Za-z0-9][\w+'.-]*[\w+](?:\s+[A-Z][\w+'-]*[\w+]){0,3}|[A-Z]")
_ABSTRACT_LABEL = re.compile(r"^abstract\s*[:.\-–—]\s*", re.IGNORECASE)
_EXPANSION = re.compile(r"\s*\(([^()]{2,120})\)")
_SEPARATOR = re.compile(r"\s*(?:,|:|—|–|\s-\s|---|--)\s*")
_WHICH_IS = re.compile(r"^(?:which|that)\s+(?:is|are)\s+")
_PAREN_ACRONYM = re.compile(r"\(([^()\s]{2,24})\)")
_APPOSITIVE = re.compile(
    r"(?P<desc>(?:a|an|the)\s[^,()]{3,80}?)\s*,\s*(?:(?:called|named|dubbed|termed|coined)\s+)?"
)
_APPOSITIVE_END = re.compile(r"\s*[,.;:(]")
_LEADING_THE = re.compile(r"^the\s+", re.IGNORECASE)
_NAME_WORD = re.compile(r"[A-Za-z][\w+.'-]*")
_NOT_EXPANSION = re.compile(r"(?:see|e\.g\.|i\.e\.|cf\.|resp\.)", re.IGNORECASE)
_CITATION_YEAR = re.compile(r"[\d\s,;.a-z-]*\d{4}[a-z]?")
_SENTENCE_END = re.compile(r"[.!?][\"')\]”’]*(?=\s+\S)")
_INITIALS = re.compile(r"(?:[a-z]\.)+")
_LATEX_EMPHASIS = re.compile(r"\\(?:emph|textit|textbf|textsc|texttt)\{([^{}]*)\}")
# Markdown emphasis, only where it clearly is emphasis: markers at word boundaries around
# text that starts and ends with a non-space, all on one line, and never across LaTeX math
# (no "$" inside; not after "^", "\\" or "{"), so "$x^*$ and $y^*$" and "$(L_0,L_1)$" stay.
_BOLD = re.compile(r"(?<![\w*^\\{])\*\*(?=[^\s*])([^*$\n]{1,200}?)(?<=\S)\*\*(?![\w*])")
_ITALIC = re.compile(r"(?<![\w*^\\{])\*(?=[^\s*])([^*$\n]{1,200}?)(?<=\S)\*(?![\w*])")
_UNDERLINE = re.compile(  # not a dunder: "__init__" is code
    r"(?<![\w^\\{])__(?=[^\s_])(?![a-z0-9]+__)([^_$\n]{1,200}?)(?<=\S)__(?![\w{])"
)
# A single "_" pair only around words ("_not_", "_in situ_"): underscores are common in
# identifiers and math (snake_case, x_i), so the text must start and end with a letter.
_UNDERSCORE_ITALIC = re.compile(r"(?<![\w^\\{$])_(?=[^\W\d_])([^_$\n{}]{0,200}?[^\W\d_])_(?![\w{])")
_NOT_NAMES = {"a", "an", "the", "this", "that", "these", "our", "it", "its", "we", "in", "to"}
_PREPOSITIONS = {
    "for", "of", "in", "on", "with", "to", "by", "from", "using", "via", "over", "across",
    "between", "under", "into", "that", "which", "and", "or",
}  # fmt: skip
_CONNECTIVES = {"of", "for", "and", "in", "with", "to", "on", "via", "the", "&"}
_ABBREVIATIONS = {
    "e.g.", "i.e.", "al.", "etc.", "vs.", "cf.", "fig.", "figs.", "eq.", "eqs.", "sec.",
    "resp.", "approx.", "no.", "dr.", "prof.", "st.", "inc.", "ltd.", "viz.", "ca.",
}  # fmt: skip


def derive_title(abstract: str) -> str:
    """A short stand-in title for a paper known only by its abstract (at most 100 characters).

    Prefers the named method the abstract introduces ("we propose QLASS (Q-guided Language
    Agent Stepwise Search)" gives "QLASS: Q-guided Language Agent Stepwise Search"), else the
    first sentence, cut at a word boundary with "…" when long.
    """
    text = _collapse(abstract)
    text = _ABSTRACT_LABEL.sub("", text)
    if not text:
        return "Untitled"
    sentences = _sentences(text)
    for sentence in sentences:
        for intro in _INTRO.finditer(sentence):
            title = _named_title(sentence[intro.end() :])
            if title:
                return _shorten(_clean_title(title))
    title = _shorten(_clean_title(sentences[0]))
    return title or "Untitled"


def _named_title(rest: str) -> str | None:
    """A "NAME: description" title from the words after "we propose", or None if unnamed."""
    rest = rest.rstrip(" .!?")
    # "QLASS (Q-guided Language Agent Stepwise Search)" / "the Joint ... Transformer (JEPT)"
    body = _strip_the(rest)
    named = _name_at(body)
    if named:
        name, end = named
        after = body[end:]
        paren = _EXPANSION.match(after)
        if paren and _looks_like_expansion(paren[1]):
            expansion = paren[1].strip()
            if " " in name and " " not in expansion and _is_name_word(expansion):
                return f"{expansion}: {name}"
            return f"{name}: {expansion}"
        sep = _SEPARATOR.match(after)
        if sep:
            desc = after[sep.end() :]
            desc = _WHICH_IS.sub("", desc)
            if desc:
                return f"{name}: {desc}"
    # "a novel framework, Discriminator-Guided Action Optimization (DGAP), for ..."
    paren = _PAREN_ACRONYM.search(rest)
    if paren and _is_name_word(paren[1]) and len(rest[: paren.start()].split()) <= 14:
        title = _acronym_title(paren[1], rest[: paren.start()].rstrip(), rest[paren.end() :])
        if title:
            return title
    # "a new graph unlearning method, **Cognac**, which ..."
    appositive = _APPOSITIVE.match(rest)
    if appositive:
        named = _name_at(rest[appositive.end() :])
        if named:
            name, end = named
            tail = rest[appositive.end() + end :]
            if not tail or _APPOSITIVE_END.match(tail):
                return f"{name}: {appositive['desc']}"
    return None


def _acronym_title(acronym: str, before: str, after: str) -> str | None:
    words = before.split()
    phrase: list[str] = []
    index = len(words) - 1
    while index >= 0:
        word = words[index].strip("*\"'“”")
        if word and (word[0].isupper() or (word.lower() in _CONNECTIVES and phrase)):
            phrase.insert(0, word)
            index -= 1
        else:
            break
    while phrase and phrase[0].lower() in _CONNECTIVES:
        phrase.pop(0)
        index += 1  # the dropped connective now precedes the phrase
    capitalised = [w for w in phrase if w[0].isupper()]
    preceding = words[index].strip(",").lower() if index >= 0 else ""
    if len(capitalised) >= 2:
        if preceding in _PREPOSITIONS:
            return None
        return f"{acronym}: {' '.join(phrase)}"
    lowered = {w.strip(",").lower() for w in words}
    if _ARTICLE.match(before) and not lowered & _PREPOSITIONS:
        if after.lstrip().startswith(","):  # "the ... autoencoder (VSAE), a framework for ..."
            return f"{acronym}: {_strip_the(before)}"
        return f"{acronym}: {before} {after.strip()}".strip()
    return None


def _name_at(text: str) -> tuple[str, int] | None:
    """A method name at the start of ``text`` (emphasised, quoted or name-like) and its end."""
    wrapped = _WRAPPED_NAME.match(text)
    if wrapped:
        name = next(g for g in wrapped.groups() if g is not None).strip()
        if any(c.isupper() for c in name):
            return name, wrapped.end()
        return None
    plain = _PLAIN_NAME.match(text)
    if not plain:
        return None
    name = plain[0]
    words = name.split()
    if words[0].lower() in _NOT_NAMES or not any(c.isupper() for c in words[0]):
        return None
    return name, plain.end()


def _strip_the(text: str) -> str:
    return _LEADING_THE.sub("", text)


def _is_name_word(word: str) -> bool:
    """True for "QLASS", "TreeLoRA", "ReQFlow", "GPT-4": a token carrying capitals or digits."""
    if not _NAME_WORD.fullmatch(word):
        return False
    return any(c.isupper() for c in word[1:]) or (word[0].isupper() and len(word) <= 3)


def _looks_like_expansion(text: str) -> bool:
    text = text.strip()
    if _NOT_EXPANSION.match(text):
        return False
    if _CITATION_YEAR.fullmatch(text):  # a citation year
        return False
    return any(c.isalpha() for c in text)


def _sentences(text: str) -> list[str]:
    """Split at sentence ends, not at "e.g.", "et al.", initials like "A." or "i.i.d."."""
    sentences, start = [], 0
    for match in _SENTENCE_END.finditer(text):
        word = text[start : match.start() + 1].split()[-1].lstrip("(\"'“").lower()
        if word in _ABBREVIATIONS or _INITIALS.fullmatch(word):
            continue
        following = text[match.end() :].lstrip()[:1]
        if following.islower():
            continue
        sentences.append(text[start : match.end()].strip())
        start = match.end()
    tail = text[start:].strip()
    if tail:
        sentences.append(tail)
    return sentences or [text]


def strip_emphasis(text: str) -> str:
    """``text`` without markdown emphasis markers (``**x**``, ``*x*``, ``__x__``, ``_x_``).

    Seed abstracts carry some (``*EngageNet*``, ``**cross capabilities**``); shown in Slack,
    where ``*`` means bold, they would look like matched terms. Only markers that clearly
    mean emphasis go: math, identifiers and lone stars stay as written.
    """
    text = _BOLD.sub(r"\1", text)
    text = _ITALIC.sub(r"\1", text)
    text = _UNDERLINE.sub(r"\1", text)
    return _UNDERSCORE_ITALIC.sub(r"\1", text)


def _clean_title(text: str) -> str:
    text = _LATEX_EMPHASIS.sub(r"\1", text)
    text = strip_emphasis(text)
    text = _collapse(text)
    return text.rstrip(" .,;:").strip()


def _shorten(text: str, limit: int = MAX_TITLE_CHARS) -> str:
    if len(text) <= limit:
        return text
    cut = text[: limit - 1]
    if not text[limit - 1].isspace() and " " in cut:
        space = cut.rfind(" ")
        if space > limit // 2:
            cut = cut[:space]
    if cut.count("$") % 2 and cut.rfind("$") > limit // 2:  # never leave LaTeX math half open
        cut = cut[: cut.rfind("$")]
    return cut.rstrip(" ,;:-–—(/") + "…"


# --------------------------------------------------------------------------------------------
# JSON and JSON Lines


def _json_records(text: str, name: str) -> list[Any]:
    """The records of a whole JSON document: a list, a ``papers`` list or a single paper."""
    try:
        document = json.loads(text, strict=False)
    except json.JSONDecodeError as exc:
        raise CorpusFileError(
            f"{name} is not valid JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}."
        ) from exc
    if isinstance(document, dict):
        lowered = {str(k).lower(): v for k, v in document.items()}
        if "papers" in lowered:
            document = lowered["papers"]
            if not isinstance(document, list):
                raise CorpusFileError(f"{name} has a 'papers' field that is not a list.")
        elif "title" in lowered or "abstract" in lowered:
            document = [document]  # a single paper
        else:
            keys = ", ".join(map(str, list(document)[:10])) or "none"
            raise CorpusFileError(
                f"{name} is a JSON object without a 'papers' list (keys: {keys})."
            )
    if not isinstance(document, list):
        raise CorpusFileError(f"{name} holds a JSON {_kind(document)}, not a list of papers.")
    return document


def _json_items(records: list[Any], shown: str) -> Iterator[Paper | Rejected]:
    builder = _RecordBuilder(shown, "record")
    for number, record in enumerate(records, start=1):
        yield builder.build(number, record)


def _jsonl_items(
    lines: Iterable[str], shown: str, bad: dict[int, str] | None = None
) -> Iterator[Paper | Rejected]:
    builder = _RecordBuilder(shown, "line")
    decode = _JSON.decode
    bad = {} if bad is None else bad
    for number, line in enumerate(lines, start=1):
        if line.isspace():  # every line has at least its "\n" but perhaps the last
            continue
        if bad and number in bad:
            yield builder.reject(number, bad[number])
            continue
        try:
            record = decode(line)  # the "\n" left on the end is whitespace to JSON
        except (ValueError, RecursionError) as exc:
            yield builder.reject(number, _jsonl_error(line, exc))
            continue
        yield builder.build(number, record)


def _jsonl_error(line: str, exc: Exception) -> str:
    """Why a line is not JSON, with the column, exactly as ``json.loads`` puts it."""
    try:
        json.loads(line.removesuffix("\n"), strict=False)
    except json.JSONDecodeError as error:
        return f"not valid JSON ({error.msg} at column {error.colno})"
    except ValueError as error:  # e.g. an integer too long to convert
        return f"not valid JSON ({error})"
    except RecursionError:
        pass
    if isinstance(exc, RecursionError):
        return "not valid JSON (nested too deeply)"
    return f"not valid JSON ({exc})"


class _RecordBuilder:
    """Turns JSON objects or CSV rows into papers, rejecting bad ones and duplicate ids."""

    def __init__(self, path: str, unit: str) -> None:
        self.path = path
        self.unit = unit
        self.seen: dict[str, int] = {}  # id -> the line or record it was first read from
        self._plain_keys: dict[tuple[Any, ...], bool] = {}  # key tuple -> all lower & stripped

    def reject(self, number: int, reason: str) -> Rejected:
        return Rejected(self.path, f"{self.unit} {number}", reason)

    def build(self, number: int, record: Any) -> Paper | Rejected:
        if not isinstance(record, dict):
            return self.reject(number, f"not a JSON object (got {_kind(record)})")
        try:
            paper = _paper_from_record(self._fields(record))
        except ValueError as exc:
            return self.reject(number, str(exc))
        first = self.seen.setdefault(paper.id, number)
        if first != number:
            return self.reject(number, f"duplicate id {paper.id!r} (first at {self.unit} {first})")
        return paper

    def _fields(self, record: dict[Any, Any]) -> dict[str, Any]:
        """The record keyed by lower-case, stripped names; itself when they already are."""
        keys = tuple(record)
        plain = self._plain_keys.get(keys)
        if plain is None:
            plain = all(isinstance(k, str) and k == k.strip().lower() for k in keys)
            if len(self._plain_keys) < 64:  # a file has few shapes; don't grow without bound
                self._plain_keys[keys] = plain
        if plain:
            return record
        return {str(k).strip().lower(): v for k, v in record.items()}


def _paper_from_record(fields: dict[str, Any]) -> Paper:
    """Map one JSON object or CSV row (paperlists schema and friends) to a Paper.

    ``fields`` is keyed by lower-case names. Raises ValueError with the reason shown to the user.
    """
    get = fields.get
    title = _text(get("title"), "title")
    abstract = _text(get("abstract"), "abstract")
    if not title and not abstract:
        raise ValueError("no title and no abstract")
    if len(abstract) > LONGEST_ABSTRACT:  # before a title is derived from it
        raise ValueError(check_sizes(Paper("", "", abstract=abstract)))
    venue = _text(get("venue"), "venue")
    year = _year(get("year"))
    authors = _names(get("authors", get("author")), "authors")
    keywords = _names(get("keywords"), "keywords")
    url = ""
    for key in ("url", "site", "pdf"):
        url = _text(get(key), key)
        if url:
            break

    title_derived = not title
    if title_derived:
        title = derive_title(abstract)
    raw_id = get("id")
    paper_id = _collapse(str(raw_id)) if isinstance(raw_id, str | int) else ""
    if not paper_id:
        slug = _slug(venue)
        prefix = f"{slug}{year or ''}" if slug else "paper"
        basis = title if not title_derived else abstract
        digest = _sha1(f"{basis.lower()}|{year if year is not None else ''}")
        paper_id = f"{prefix}-{digest[:12]}"
    paper = Paper(
        id=paper_id,
        title=title,
        abstract=abstract,
        venue=venue,
        year=year,
        authors=authors,
        keywords=keywords,
        url=url,
        title_derived=title_derived,
    )
    too_big = check_sizes(paper)
    if too_big:
        raise ValueError(too_big)
    return paper


def check_sizes(paper: Paper) -> str | None:
    """Why the paper is too big to store (see ``LONGEST_ABSTRACT``), or None."""
    limits = (
        ("title", len(paper.title), LONGEST_TITLE),
        ("abstract", len(paper.abstract), LONGEST_ABSTRACT),
        ("authors and keywords", sum(map(len, paper.authors + paper.keywords)), LONGEST_NAMES),
        ("id", len(paper.id), LONGEST_FIELD),
        ("venue", len(paper.venue), LONGEST_FIELD),
        ("url", len(paper.url), LONGEST_FIELD),
    )
    for what, size, limit in limits:
        if size > limit:
            return f"{what} is {size:,} characters long, over the limit of {limit:,}"
    return None


def _text(value: Any, what: str) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return _collapse(value)
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    raise ValueError(f"{what} is a {_kind(value)}, not text")


def _year(value: Any) -> int | None:
    if value is None or value == "":
        return None
    if isinstance(value, bool):
        raise ValueError(f"year is not a number ({value!r})")
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and value.strip().isdigit():
        return int(value.strip())
    raise ValueError(f"year is not a number ({value!r})")


_NAME_SEPARATORS = re.compile(r",\s+|\s+and\s+")


def _names(value: Any, what: str) -> list[str]:
    """Authors or keywords from a list or a separated string ("A; B", "A, B and C")."""
    if value is None:
        return []
    if isinstance(value, list):
        names = []
        for item in value:
            if type(item) is not str:
                if isinstance(item, dict):  # [{"name": "..."}] as in Semantic Scholar dumps
                    item = item.get("name", "")
                if isinstance(item, str | int | float):
                    item = str(item)
                elif item is None:
                    continue
                else:
                    raise ValueError(f"{what} contains a {_kind(item)}, not text")
            name = _collapse(item)
            if name:
                names.append(name)
        return names
    if isinstance(value, str):
        if ";" in value or what == "keywords":
            parts = value.split(";")
        else:
            parts = _NAME_SEPARATORS.split(value)
        return [name for name in map(_collapse, parts) if name]
    raise ValueError(f"{what} is a {_kind(value)}, not a list or text")


# --------------------------------------------------------------------------------------------
# CSV


def _csv_header(line: str, ext: str) -> tuple[str, list[str]]:
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


def _check_csv_head(head: str, complete: bool, name: str, delimiter: str) -> None:
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


def _csv_items(
    lines: Iterable[str],
    shown: str,
    name: str,
    delimiter: str,
    bad: dict[int, str] | None = None,
) -> Iterator[Paper | Rejected]:
    bad = {} if bad is None else bad
    reader = csv.reader(lines, delimiter=delimiter)
    header: list[str] | None = None
    builder = _RecordBuilder(shown, "line")
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


# --------------------------------------------------------------------------------------------
# arXiv Atom feed

_ARXIV_ID = re.compile(
    r"^(?:https?://(?:export\.)?arxiv\.org/abs/)?"
    r"(?P<base>\d{4}\.\d{4,5}|[a-z][a-z-]*(?:\.[A-Z]{2})?/\d{7})(?:v(?P<version>\d+))?$"
)


def parse_arxiv_id(raw: str) -> tuple[str, int] | None:
    """``("2501.01234", 2)`` from "http://arxiv.org/abs/2501.01234v2" (version 0 if none)."""
    match = _ARXIV_ID.match(raw.strip())
    if not match:
        return None
    return match["base"], int(match["version"] or 0)


def _atom_items(text: str, shown: str, name: str) -> list[Paper | Rejected]:
    """A feed's entries in order; an id seen again keeps its first place, highest version."""
    # arXiv feeds never declare entities; refusing them keeps entity-expansion tricks out.
    if _DOCTYPE.search(text[:5000]):
        raise CorpusFileError(
            f"{name} declares a DOCTYPE or entities, which arXiv Atom feeds never do."
        )
    try:
        root = ElementTree.fromstring(text)
    except ElementTree.ParseError as exc:
        line, column = exc.position
        reason = str(exc).split(":")[0]
        raise CorpusFileError(
            f"{name} is not well-formed XML: {reason} at line {line}, column {column + 1}."
        ) from exc
    if root.tag != f"{ATOM}feed":
        local = root.tag.rsplit("}", 1)[-1]
        raise CorpusFileError(f"{name} is XML but not an Atom feed (its root is <{local}>).")

    items: list[Paper | Rejected] = []
    best: dict[str, tuple[int, int]] = {}  # base id -> (version, index in items)
    for number, entry in enumerate(root.iter(f"{ATOM}entry"), start=1):
        location = f"entry {number}"
        raw_id = _collapse(entry.findtext(f"{ATOM}id") or "")
        title = _collapse(entry.findtext(f"{ATOM}title") or "")
        summary = _collapse(entry.findtext(f"{ATOM}summary") or "")
        if "/api/errors" in raw_id:
            items.append(Rejected(shown, location, f"arXiv API error: {summary}"))
            continue
        if not raw_id:
            items.append(Rejected(shown, location, "no <id>"))
            continue
        parsed = parse_arxiv_id(raw_id)
        if not parsed:
            items.append(Rejected(shown, location, f"id {raw_id!r} is not an arXiv abstract URL"))
            continue
        if not title:
            items.append(Rejected(shown, location, "no <title>"))
            continue
        base, version = parsed
        authors = [
            _collapse(author.findtext(f"{ATOM}name") or "")
            for author in entry.findall(f"{ATOM}author")
        ]
        keywords: list[str] = []
        for category in entry.findall(f"{ATOM}category"):
            term = _collapse(category.get("term") or "")
            if term and term not in keywords:
                keywords.append(term)
        published = entry.findtext(f"{ATOM}published") or entry.findtext(f"{ATOM}updated") or ""
        published = published.strip()
        paper = Paper(
            id=f"arxiv:{base}",
            title=title,
            abstract=summary,
            venue="arXiv",
            year=int(published[:4]) if published[:4].isdigit() else None,
            authors=[a for a in authors if a],
            keywords=keywords,
            url=f"https://arxiv.org/abs/{base}",
        )
        too_big = check_sizes(paper)
        if too_big:
            items.append(Rejected(shown, location, too_big))
            continue
        if base in best:
            kept_version, index = best[base]
            if version > kept_version:  # a newer version replaces the older in place
                items[index] = paper
                best[base] = (version, index)
            continue
        best[base] = (version, len(items))
        items.append(paper)
    return items


# --------------------------------------------------------------------------------------------
# Small shared helpers


# Terminal control: CSI (ESC [ ... final), string commands (OSC, DCS, SOS, PM, APC) with
# their payload when terminated (BEL or ST), other escapes, then any C0/C1 control that is not
# whitespace and the bidi embeddings, overrides and isolates. They would drive the terminal
# of whoever runs ``paperboy search`` (OSC 8 links, title changes, clearing the screen) and
# reorder text in Slack; nothing in a paper's metadata needs them.
_CONTROL_SEQUENCE = re.compile(
    r"(?:\x1b\[|\x9b)[\x30-\x3f]*[\x20-\x2f]*[\x40-\x7e]?"
    r"|(?:\x1b[\]PX^_]|[\x90\x98\x9d\x9e\x9f])(?:[^\x00-\x1f\x7f-\x9f]*(?:\x07|\x1b\\|\x9c))?"
    r"|\x1b[\x20-\x2f]*[\x30-\x7e]?"
)
_CONTROL = re.compile(r"[\x00-\x08\x0e-\x1b\x7f-\x84\x86-\x9f\u202a-\u202e\u2066-\u2069]")


def strip_controls(text: str) -> str:
    """``text`` without terminal control sequences, control characters and bidi overrides."""
    if _CONTROL.search(text) is None:
        return text
    return _CONTROL.sub("", _CONTROL_SEQUENCE.sub("", text))


def _collapse(text: str) -> str:
    """Runs of whitespace as one space, none at the ends, controls gone (see ``strip_controls``).

    Every text field of every format passes through here, so this is where control
    characters are dropped at ingest.
    """
    # Every whitespace and control character but the space is unprintable, so printable text
    # with no double space and no space at either end has nothing to do: two quick C scans
    # instead of a split and join.
    if text.isprintable() and "  " not in text and text[:1] != " " and text[-1:] != " ":
        return text
    return " ".join(strip_controls(text).split())


def _sha1(text: str) -> str:
    return hashlib.sha1(text.encode("utf-8")).hexdigest()


_NOT_SLUG = re.compile(r"[^a-z0-9]+")


def _slug(venue: str) -> str:
    return _NOT_SLUG.sub("", venue.lower())


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if value is None:
        return "null"
    return {dict: "object", list: "list", str: "string", int: "number", float: "number"}.get(
        type(value), type(value).__name__
    )

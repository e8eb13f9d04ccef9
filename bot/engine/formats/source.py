"""A corpus file's text, however it is stored: gzip undone on the fly (found by its magic bytes,
not its name), UTF-8 with or without a BOM or UTF-16 with one, line ends normalised; read as a
head for detection, line by line for the streamed formats, or whole."""

from __future__ import annotations

import codecs
import gzip
import io
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from .common import CorpusFileError

# Detection reads this many bytes from the start of the file, and more only when the first
# non-blank line is longer (it needs that line whole, and a sign of what follows it).
HEAD_BYTES = 8192


_UTF8_BOM = b"\xef\xbb\xbf"
_UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")
_GZIP_MAGIC = b"\x1f\x8b"
_GZIP_ERRORS = (OSError, EOFError, zlib.error)


class Source:
    """A corpus file's text: its head for detection, its lines one by one, or all of it.

    Gzip is undone on the fly (found by its magic bytes, not the name). Text is UTF-8, with or
    without a BOM, or UTF-16 with a BOM (Excel's "Unicode text"); line ends are normalised to
    "\\n" ("\\r\\n" and a lone "\\r" both end a line), so line numbers are the same whichever
    way a file is read.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.name = str(path)  # as given: 2024/papers.jsonl and 2025/papers.jsonl differ
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

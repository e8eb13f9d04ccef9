"""JSON documents (a list of papers, an object with a ``papers`` list such as a paperlists dump,
or one paper) and JSON Lines, one paper per line, streamed."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any

from bot.engine.paper import Paper, Rejected

from .common import CorpusFileError, kind
from .records import RecordBuilder
from .source import Source

_JSON = json.JSONDecoder(
    strict=False
)  # one decoder: json.loads(..., strict=False) makes one per call
_SCAN = _JSON.scan_once


def json_records(text: str, name: str) -> list[Any]:
    """The records of a whole JSON document: a list, a ``papers`` list or a single paper."""
    try:
        document = json.loads(text, strict=False)
    except json.JSONDecodeError as exc:
        raise CorpusFileError(
            f"{name} is not valid JSON: {_said(exc)} at line {exc.lineno}, column {exc.colno}."
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
        raise CorpusFileError(f"{name} holds a JSON {kind(document)}, not a list of papers.")
    return document


def json_items(records: list[Any], shown: str) -> Iterator[Paper | Rejected]:
    builder = RecordBuilder(shown, "record")
    for number, record in enumerate(records, start=1):
        yield builder.build(number, record)


def jsonl_items(
    lines: Iterable[str], shown: str, bad: dict[int, str]
) -> Iterator[Paper | Rejected]:
    """One paper per line; a line in ``bad`` (``Source.bad_lines``, filled in as ``lines`` is
    read) is rejected with its reason."""
    builder = RecordBuilder(shown, "line")
    for number, line in enumerate(lines, start=1):
        if line.isspace():  # every line has at least its "\n" but perhaps the last
            continue
        if bad and number in bad:
            yield builder.reject(number, bad[number])
            continue
        try:
            record = _line_record(line)
        except (ValueError, RecursionError) as exc:
            yield builder.reject(number, _jsonl_error(line, exc))
            continue
        yield builder.build(number, record)


def _line_record(line: str) -> Any:
    """``_JSON.decode(line)``: its scanner alone when the line is one value and its "\\n"
    (every good line), half the time ``decode`` takes with the checks around it; ``decode``
    otherwise, which then raises its own error or reads the whitespace around the value."""
    try:
        record, end = _SCAN(line, 0)
    except (StopIteration, ValueError, RecursionError):
        return _JSON.decode(line)
    if end == len(line) or line[end:] == "\n":
        return record
    return _JSON.decode(line)  # the "\n" left on the end is whitespace to JSON


def _said(error: json.JSONDecodeError) -> str:
    """json's message, to be followed by "at <where>": some end in "at" already
    ("Unterminated string starting at"), which would say "at at"."""
    return error.msg.removesuffix(" at")


def _jsonl_error(line: str, exc: Exception) -> str:
    """Why a line is not JSON, with the column, exactly as ``json.loads`` puts it."""
    try:
        json.loads(line.removesuffix("\n"), strict=False)
    except json.JSONDecodeError as error:
        return f"not valid JSON ({_said(error)} at column {error.colno})"
    except ValueError as error:  # e.g. an integer too long to convert
        return f"not valid JSON ({error})"
    except RecursionError:
        pass
    if isinstance(exc, RecursionError):
        return "not valid JSON (nested too deeply)"
    return f"not valid JSON ({exc})"


def is_jsonl(start: str, complete: bool, ext: str, source: Source) -> tuple[bool, str | None]:
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

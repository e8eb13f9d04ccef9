"""Readers for every corpus file Paperboy accepts, turning each into ``Paper`` records.

``read_corpus_file`` looks at a file's content (gzip is undone first) and picks the reader:

* seed text: a "ICML 2025 Papers" header line, then one abstract per paragraph, no titles;
* JSON (a list, or an object with a ``papers`` list) and JSON Lines, e.g. paperlists dumps;
* CSV/TSV with a header row that has a ``title`` or ``abstract`` column;
* an arXiv API Atom feed, as saved from ``export.arxiv.org/api/query``.

A record that cannot be read becomes a ``Rejected`` with its line, record or entry number and the
valid ones still come through; only a file that is unusable as a whole raises
``CorpusFileError``, whose message is one sentence naming the file. Standard library only.
"""

from __future__ import annotations

import csv
import gzip
import hashlib
import io
import json
import re
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

from bot.engine.paper import Paper, Rejected

FORMATS = ("seed", "json", "jsonl", "csv", "arxiv-atom")

MIN_ABSTRACT_CHARS = 80
MAX_TITLE_CHARS = 100

ACCEPTED_FORMATS = (
    "Paperboy reads JSON, JSON Lines, CSV with a title or abstract column, arXiv Atom feeds, "
    'and seed text files whose first line names a venue and year (like "ICML 2025 Papers")'
)

ATOM = "{http://www.w3.org/2005/Atom}"


class CorpusFileError(Exception):
    """The whole file is unusable; the message is one sentence naming the file."""


@dataclass
class ReadResult:
    """What one corpus file yielded: its format, the papers read and the records rejected."""

    path: str
    format: str  # one of FORMATS
    papers: list[Paper] = field(default_factory=list)
    rejected: list[Rejected] = field(default_factory=list)


# --------------------------------------------------------------------------------------------
# Detection


def read_corpus_file(path: str | Path) -> ReadResult:
    """Read any supported corpus file, choosing the reader from the content.

    Raises ``CorpusFileError`` when the file is missing, binary, empty, of no known format, or
    broken as a whole (malformed JSON document or XML, a CSV without title/abstract columns,
    a seed file whose header has no year).
    """
    path = Path(path)
    name = path.name
    shown = str(path)
    data = _read_bytes(path)

    if data[:2] == b"\x1f\x8b":
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError, zlib.error) as exc:
            raise CorpusFileError(f"{name} is a damaged gzip file ({exc}).") from exc
    text = _decode(data, name)
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    if not text.strip():
        raise CorpusFileError(f"{name} is empty.")

    suffixes = [s.lower() for s in path.suffixes if s.lower() != ".gz"]
    ext = suffixes[-1] if suffixes else ""
    head = text.lstrip()

    if head[0] in "[{":
        if _is_jsonl(head, ext):
            return _read_jsonl(text, shown)
        return _read_json(text, shown, name)
    if head.startswith("<"):
        if re.match(r"<(?:!doctype\s+html|html)\b", head[:200], re.IGNORECASE):
            raise CorpusFileError(f"{name} is an HTML page, not a corpus file.")
        return _read_atom(text, shown, name)

    lines = text.split("\n")
    first_index = next(i for i, line in enumerate(lines) if line.strip())
    header = lines[first_index]
    delimiter, columns = _csv_header(header, ext)
    if {"title", "abstract"} & {c.lower() for c in columns}:
        return _read_csv(text, shown, name, delimiter)
    venue_year = parse_seed_header(header)
    if venue_year:
        return _read_seed(lines, first_index, venue_year, shown)
    if ext in (".csv", ".tsv"):  # reports the columns it does have
        return _read_csv(text, shown, name, delimiter)
    if ext in (".txt", ".text", ".md", "") and len(lines) > first_index + 1:
        shown_header = header.strip()
        if len(shown_header) > 60:
            shown_header = shown_header[:57] + "..."
        raise CorpusFileError(
            f"{name} looks like a seed file but its first line {shown_header!r} has no year: "
            'it should name the venue and year, like "ICML 2025 Papers".'
        )
    raise CorpusFileError(f"{name} is not a corpus file: {ACCEPTED_FORMATS}.")


def _read_bytes(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except FileNotFoundError as exc:
        raise CorpusFileError(f"{path.name} does not exist.") from exc
    except IsADirectoryError as exc:
        raise CorpusFileError(f"{path.name} is a directory, not a corpus file.") from exc
    except OSError as exc:
        raise CorpusFileError(f"{path.name} could not be read ({exc.strerror}).") from exc


def _decode(data: bytes, name: str) -> str:
    # Excel's "Unicode text" export is UTF-16 with a BOM; everything else must be UTF-8.
    if data[:2] in (b"\xff\xfe", b"\xfe\xff"):
        try:
            return data.decode("utf-16")
        except UnicodeDecodeError:
            pass
    if b"\x00" in data:
        raise CorpusFileError(f"{name} is not a corpus file: it looks binary.")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise CorpusFileError(
            f"{name} is not a corpus file: it looks binary "
            f"(byte 0x{data[exc.start]:02x} on line {line} is not UTF-8 text)."
        ) from exc


def _is_jsonl(head: str, ext: str) -> bool:
    """JSON Lines when the first line is a whole object and more lines follow."""
    if not head.startswith("{"):
        return False
    first, _, rest = head.partition("\n")
    if not rest.strip():
        return False
    try:
        return isinstance(json.loads(first, strict=False), dict)
    except ValueError:
        pass
    if ext not in (".jsonl", ".ndjson"):
        return False
    # A .jsonl file whose first line is broken: JSON Lines (reporting that line) unless the
    # whole file is in fact one pretty-printed JSON document.
    try:
        json.loads(head, strict=False)
    except ValueError:
        return True
    return False


# --------------------------------------------------------------------------------------------
# Seed text


_SEED_HEADER = re.compile(
    r"^\s*(?P<venue>[A-Za-z][\w&.+/-]*(?:\s+[A-Za-z][\w&.+/-]*){0,3})"
    r"[\s'’-]*(?P<year>(?:19|20)\d\d)\b(?P<rest>[^\n]{0,50})$"
)


def parse_seed_header(line: str) -> tuple[str, int] | None:
    """``("ICML", 2025)`` from a seed header like "ICML 2025 Papers", or None."""
    match = _SEED_HEADER.match(line)
    if not match or re.search(r"\d{4}", match["rest"]):
        return None
    return match["venue"], int(match["year"])


def _read_seed(
    lines: list[str], header_index: int, venue_year: tuple[str, int], shown: str
) -> ReadResult:
    venue, year = venue_year
    prefix = f"{_slug(venue)}{year}"
    result = ReadResult(shown, "seed")
    seen: dict[str, int] = {}

    paragraphs: list[tuple[int, str]] = []
    start, chunk = 0, []
    for index in range(header_index + 1, len(lines) + 1):
        line = lines[index] if index < len(lines) else ""
        if line.strip():
            if not chunk:
                start = index + 1
            chunk.append(line)
        elif chunk:
            paragraphs.append((start, " ".join(chunk)))
            chunk = []

    for line_no, raw in paragraphs:
        abstract = _collapse(raw)
        if len(abstract) < MIN_ABSTRACT_CHARS:
            result.rejected.append(
                Rejected(
                    shown,
                    f"line {line_no}",
                    f"too short to be an abstract ({len(abstract)} characters)",
                )
            )
            continue
        paper_id = f"{prefix}-{_sha1(abstract)[:12]}"
        if paper_id in seen:
            result.rejected.append(
                Rejected(
                    shown, f"line {line_no}", f"same abstract as line {seen[paper_id]} (skipped)"
                )
            )
            continue
        seen[paper_id] = line_no
        result.papers.append(
            Paper(
                id=paper_id,
                title=derive_title(abstract),
                abstract=abstract,
                venue=venue,
                year=year,
                title_derived=True,
            )
        )
    return result


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
    text = re.sub(r"^abstract\s*[:.\-–—]\s*", "", text, flags=re.IGNORECASE)
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
        paren = re.match(r"\s*\(([^()]{2,120})\)", after)
        if paren and _looks_like_expansion(paren[1]):
            expansion = paren[1].strip()
            if " " in name and " " not in expansion and _is_name_word(expansion):
                return f"{expansion}: {name}"
            return f"{name}: {expansion}"
        sep = re.match(r"\s*(?:,|:|—|–|\s-\s|---|--)\s*", after)
        if sep:
            desc = after[sep.end() :]
            desc = re.sub(r"^(?:which|that)\s+(?:is|are)\s+", "", desc)
            if desc:
                return f"{name}: {desc}"
    # "a novel framework, Discriminator-Guided Action Optimization (DGAP), for ..."
    paren = re.search(r"\(([^()\s]{2,24})\)", rest)
    if paren and _is_name_word(paren[1]) and len(rest[: paren.start()].split()) <= 14:
        title = _acronym_title(paren[1], rest[: paren.start()].rstrip(), rest[paren.end() :])
        if title:
            return title
    # "a new graph unlearning method, **Cognac**, which ..."
    appositive = re.match(
        r"(?P<desc>(?:a|an|the)\s[^,()]{3,80}?)\s*,\s*(?:(?:called|named|dubbed|termed|coined)\s+)?",
        rest,
    )
    if appositive:
        named = _name_at(rest[appositive.end() :])
        if named:
            name, end = named
            tail = rest[appositive.end() + end :]
            if not tail or re.match(r"\s*[,.;:(]", tail):
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
    return re.sub(r"^the\s+", "", text, flags=re.IGNORECASE)


def _is_name_word(word: str) -> bool:
    """True for "QLASS", "TreeLoRA", "ReQFlow", "GPT-4": a token carrying capitals or digits."""
    if not re.fullmatch(r"[A-Za-z][\w+.'-]*", word):
        return False
    return any(c.isupper() for c in word[1:]) or (word[0].isupper() and len(word) <= 3)


def _looks_like_expansion(text: str) -> bool:
    text = text.strip()
    if re.match(r"(?:see|e\.g\.|i\.e\.|cf\.|resp\.)", text, re.IGNORECASE):
        return False
    if re.fullmatch(r"[\d\s,;.a-z-]*\d{4}[a-z]?", text):  # a citation year
        return False
    return any(c.isalpha() for c in text)


def _sentences(text: str) -> list[str]:
    """Split at sentence ends, not at "e.g.", "et al.", initials like "A." or "i.i.d."."""
    sentences, start = [], 0
    for match in re.finditer(r"[.!?][\"')\]”’]*(?=\s+\S)", text):
        word = text[start : match.start() + 1].split()[-1].lstrip("(\"'“").lower()
        if word in _ABBREVIATIONS or re.fullmatch(r"(?:[a-z]\.)+", word):
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


def _clean_title(text: str) -> str:
    text = re.sub(r"\\(?:emph|textit|textbf|textsc|texttt)\{([^{}]*)\}", r"\1", text)
    text = re.sub(r"\*\*(.+?)\*\*", r"\1", text)
    text = re.sub(r"(?<![\w*])\*(\S(?:[^*]*?\S)?)\*(?![\w*])", r"\1", text)
    text = re.sub(r"(?<!\w)__(\S(?:.*?\S)?)__(?!\w)", r"\1", text)
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


def _read_json(text: str, shown: str, name: str) -> ReadResult:
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

    result = ReadResult(shown, "json")
    builder = _RecordBuilder(result, "record")
    for number, record in enumerate(document, start=1):
        builder.add(number, record)
    return result


def _read_jsonl(text: str, shown: str) -> ReadResult:
    result = ReadResult(shown, "jsonl")
    builder = _RecordBuilder(result, "line")
    for number, line in enumerate(text.split("\n"), start=1):
        if not line or line.isspace():  # cheaper than strip() on long lines
            continue
        try:
            record = json.loads(line, strict=False)
        except json.JSONDecodeError as exc:
            builder.reject(number, f"not valid JSON ({exc.msg} at column {exc.colno})")
            continue
        builder.add(number, record)
    return result


class _RecordBuilder:
    """Turns JSON objects or CSV rows into papers, rejecting bad ones and duplicate ids."""

    def __init__(self, result: ReadResult, unit: str) -> None:
        self.result = result
        self.unit = unit
        self.seen: dict[str, int] = {}

    def reject(self, number: int, reason: str) -> None:
        self.result.rejected.append(Rejected(self.result.path, f"{self.unit} {number}", reason))

    def add(self, number: int, record: Any) -> None:
        if not isinstance(record, dict):
            self.reject(number, f"not a JSON object (got {_kind(record)})")
            return
        try:
            paper = _paper_from_record(record)
        except ValueError as exc:
            self.reject(number, str(exc))
            return
        if paper.id in self.seen:
            self.reject(
                number,
                f"duplicate id {paper.id!r} (first at {self.unit} {self.seen[paper.id]})",
            )
            return
        self.seen[paper.id] = number
        self.result.papers.append(paper)


def _paper_from_record(record: dict[str, Any]) -> Paper:
    """Map one JSON object or CSV row (paperlists schema and friends) to a Paper.

    Raises ValueError with the reason shown to the user.
    """
    fields = {str(k).strip().lower(): v for k, v in record.items()}
    title = _text(fields.get("title"), "title")
    abstract = _text(fields.get("abstract"), "abstract")
    if not title and not abstract:
        raise ValueError("no title and no abstract")
    venue = _text(fields.get("venue"), "venue")
    year = _year(fields.get("year"))
    authors = _names(fields.get("authors", fields.get("author")), "authors")
    keywords = _names(fields.get("keywords"), "keywords")
    url = ""
    for key in ("url", "site", "pdf"):
        url = _text(fields.get(key), key)
        if url:
            break

    title_derived = not title
    if title_derived:
        title = derive_title(abstract)
    raw_id = fields.get("id")
    paper_id = _collapse(str(raw_id)) if isinstance(raw_id, str | int) else ""
    if not paper_id:
        prefix = f"{_slug(venue)}{year or ''}" if _slug(venue) else "paper"
        basis = title if not title_derived else abstract
        digest = _sha1(f"{basis.lower()}|{year if year is not None else ''}")
        paper_id = f"{prefix}-{digest[:12]}"
    return Paper(
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


def _names(value: Any, what: str) -> list[str]:
    """Authors or keywords from a list or a separated string ("A; B", "A, B and C")."""
    if value is None:
        return []
    if isinstance(value, str):
        if ";" in value or what == "keywords":
            parts = value.split(";")
        else:
            parts = re.split(r",\s+|\s+and\s+", value)
    elif isinstance(value, list):
        parts = []
        for item in value:
            if isinstance(item, dict):  # [{"name": "..."}] as in Semantic Scholar dumps
                item = item.get("name", "")
            if isinstance(item, str | int | float):
                parts.append(str(item))
            elif item is not None:
                raise ValueError(f"{what} contains a {_kind(item)}, not text")
    else:
        raise ValueError(f"{what} is a {_kind(value)}, not a list or text")
    return [name for name in (_collapse(part) for part in parts) if name]


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


def _read_csv(text: str, shown: str, name: str, delimiter: str) -> ReadResult:
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter)
    result = ReadResult(shown, "csv")
    header: list[str] | None = None
    builder = _RecordBuilder(result, "line")
    previous_end = 0
    while True:
        start = previous_end + 1
        try:
            row = next(reader)
        except StopIteration:
            break
        except csv.Error as exc:
            builder.reject(reader.line_num, f"not valid CSV ({exc})")
            break
        previous_end = reader.line_num
        if not any(cell.strip() for cell in row):
            continue
        if header is None:
            header = [cell.strip() for cell in row]
            lowered = [c.lower() for c in header]
            if "title" not in lowered and "abstract" not in lowered:
                raise CorpusFileError(
                    f"{name} has no 'title' or 'abstract' column (columns: {', '.join(header)})."
                )
            continue
        if len(row) != len(header):
            builder.reject(start, f"has {len(row)} fields but the header has {len(header)}")
            continue
        builder.add(start, dict(zip(header, row, strict=True)))
    return result


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


def _read_atom(text: str, shown: str, name: str) -> ReadResult:
    # arXiv feeds never declare entities; refusing them keeps entity-expansion tricks out.
    if re.search(r"<!(?:DOCTYPE|ENTITY)", text[:5000]):
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

    result = ReadResult(shown, "arxiv-atom")
    best: dict[str, tuple[int, int]] = {}  # base id -> (version, index in result.papers)
    for number, entry in enumerate(root.iter(f"{ATOM}entry"), start=1):
        location = f"entry {number}"
        raw_id = _collapse(entry.findtext(f"{ATOM}id") or "")
        title = _collapse(entry.findtext(f"{ATOM}title") or "")
        summary = _collapse(entry.findtext(f"{ATOM}summary") or "")
        if "/api/errors" in raw_id:
            result.rejected.append(Rejected(shown, location, f"arXiv API error: {summary}"))
            continue
        if not raw_id:
            result.rejected.append(Rejected(shown, location, "no <id>"))
            continue
        parsed = parse_arxiv_id(raw_id)
        if not parsed:
            result.rejected.append(
                Rejected(shown, location, f"id {raw_id!r} is not an arXiv abstract URL")
            )
            continue
        if not title:
            result.rejected.append(Rejected(shown, location, "no <title>"))
            continue
        base, version = parsed
        authors = [
            _collapse(author.findtext(f"{ATOM}name") or "")
            for author in entry.findall(f"{ATOM}author")
        ]
        keywords: list[str] = []
        for category in entry.findall(f"{ATOM}category"):
            term = (category.get("term") or "").strip()
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
        if base in best:
            kept_version, index = best[base]
            if version > kept_version:  # a newer version replaces the older in place
                result.papers[index] = paper
                best[base] = (version, index)
            continue
        best[base] = (version, len(result.papers))
        result.papers.append(paper)
    return result


# --------------------------------------------------------------------------------------------
# Small shared helpers


def _collapse(text: str) -> str:
    return " ".join(text.split())


def _sha1(text: str) -> str:
    return hashlib.sha1(text.encode("utf-8")).hexdigest()


def _slug(venue: str) -> str:
    return re.sub(r"[^a-z0-9]+", "", venue.lower())


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if value is None:
        return "null"
    return {dict: "object", list: "list", str: "string", int: "number", float: "number"}.get(
        type(value), type(value).__name__
    )

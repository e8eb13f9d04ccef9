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

One module per job: ``detect`` (which reader, the stream), ``source`` (gzip, encodings, line
ends), one per format (``seed_text``, ``json_lines``, ``csv_rows``, ``arxiv_atom``), ``records``
(a JSON object or CSV row as a paper), ``titles`` (titles made up from abstracts) and ``common``.
"""

from .arxiv_atom import ATOM, parse_arxiv_id
from .common import (
    LONGEST_ABSTRACT,
    LONGEST_FIELD,
    LONGEST_NAMES,
    LONGEST_TITLE,
    MIN_ABSTRACT_CHARS,
    CorpusFileError,
    check_sizes,
    strip_controls,
)
from .detect import (
    ACCEPTED_FORMATS,
    FORMATS,
    CorpusStream,
    ReadResult,
    open_corpus_file,
    read_corpus_file,
)
from .seed_text import parse_seed_header
from .source import HEAD_BYTES
from .titles import MAX_TITLE_CHARS, derive_title, strip_emphasis

__all__ = [
    "ACCEPTED_FORMATS",
    "ATOM",
    "FORMATS",
    "HEAD_BYTES",
    "LONGEST_ABSTRACT",
    "LONGEST_FIELD",
    "LONGEST_NAMES",
    "LONGEST_TITLE",
    "MAX_TITLE_CHARS",
    "MIN_ABSTRACT_CHARS",
    "CorpusFileError",
    "CorpusStream",
    "ReadResult",
    "check_sizes",
    "derive_title",
    "open_corpus_file",
    "parse_arxiv_id",
    "parse_seed_header",
    "read_corpus_file",
    "strip_controls",
    "strip_emphasis",
]

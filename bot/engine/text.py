"""Text analysis shared by indexing, querying, snippets and "why it matched".

One function turns text into terms for all of them, so a query is always analysed exactly
like the papers it is matched against. Choices (measured with ``python -m bench.quality``):
accents stripped, LaTeX markup dropped (``$(L_0,L_1)$-smoothness`` -> ``l0 l1 smoothness``),
hyphenated words split into their parts (the bigram keeps ``self attention`` together),
English stop words removed, a light plural folding (``networks`` -> ``network``), and
unigrams plus bigrams.
"""

from __future__ import annotations

import importlib.util
import itertools
import re
import threading
import unicodedata
from pathlib import Path


def _english_stop_words() -> frozenset[str]:
    """scikit-learn's English stop-word list, read without importing scikit-learn.

    ``import sklearn`` takes over a second, which a one-query ``paperboy search`` process
    (and every lookup before the index is warm) would pay for a list of 318 words; the
    vectorizers are still imported where the index is built.
    """
    spec = importlib.util.find_spec("sklearn")
    locations = list(spec.submodule_search_locations or []) if spec else []
    path = Path(locations[0], "feature_extraction", "_stop_words.py") if locations else None
    if path and path.is_file():
        namespace: dict = {}
        exec(compile(path.read_text(), str(path), "exec"), namespace)
        if isinstance(namespace.get("ENGLISH_STOP_WORDS"), frozenset):
            return namespace["ENGLISH_STOP_WORDS"]
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

    return ENGLISH_STOP_WORDS


ENGLISH_STOP_WORDS = _english_stop_words()

# LaTeX layout commands are noise; the names of symbols (``\\alpha``) are kept as words.
_LATEX_LAYOUT = {
    "mathcal",
    "mathbb",
    "mathbf",
    "mathrm",
    "text",
    "textbf",
    "emph",
    "frac",
    "left",
    "right",
}
STOP_WORDS = frozenset(ENGLISH_STOP_WORDS) | {"et", "al", "eg", "ie", "vs", "via"} | _LATEX_LAYOUT
MAX_TERM_CHARS = 32  # longer "words" are URLs, hashes, formula soup: never useful to search

_LATEX = re.compile(r"\\([a-zA-Z]+)|[$\\{}^_~]")
# Letters that Unicode does not decompose into a base letter plus an accent.
_UNDECOMPOSABLE = str.maketrans(
    {"ł": "l", "Ł": "L", "ø": "o", "Ø": "O", "ß": "ss", "æ": "ae", "œ": "oe", "đ": "d", "ı": "i"}
)
_UNDECOMPOSABLE_CHARS = re.compile(f"[{''.join(map(chr, _UNDECOMPOSABLE))}]")
_WORD = re.compile(r"[^\W_]+", re.UNICODE)


def _undecomposed(match: re.Match) -> str:
    return _UNDECOMPOSABLE[ord(match.group())]


_checked_chars: set[str] = set()  # characters known to be (or not be) combining marks
_combining_chars: set[str] = set()
_combining: re.Pattern | None = None
_combining_lock = threading.Lock()


def _strip_combining(text: str) -> str:
    """``text`` without its combining marks: one regex over the marks met so far, instead of
    ``unicodedata.combining`` per character (a quarter of a full build's time)."""
    global _combining
    unseen = set(text).difference(_checked_chars)
    if unseen:
        with _combining_lock:
            marks = {c for c in unseen if unicodedata.combining(c)} - _combining_chars
            if marks:
                _combining_chars.update(marks)
                _combining = re.compile(f"[{''.join(map(re.escape, sorted(_combining_chars)))}]")
            _checked_chars.update(unseen)
    return _combining.sub("", text) if _combining is not None else text


def fold(text: str) -> str:
    """Lowercase, strip accents and LaTeX markup; keeps word boundaries where they were."""
    text = _LATEX.sub(lambda m: f" {m.group(1)} " if m.group(1) else "", text)
    if not text.isascii():
        # ``str.translate`` would look every character up in a dict: slow on long texts.
        text = _UNDECOMPOSABLE_CHARS.sub(_undecomposed, text)
        text = _strip_combining(unicodedata.normalize("NFKD", text))
    return text.lower()


def normalize_word(word: str) -> str:
    """Fold plurals so ``network``/``networks``, ``study``/``studies`` meet. Deliberately light:
    a full stemmer merges too much for technical vocabulary (``policy``/``police``)."""
    if len(word) <= 3 or not word.isalpha():
        return word
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"
    if word.endswith(("sses", "shes", "ches", "xes")):
        return word[:-2]
    if word.endswith("s") and not word.endswith(("ss", "us", "is", "ous")):
        return word[:-1]
    return word


_TOKEN_NORMS: dict[str, str] = {}
_SURFACE_NORMS: dict[str, str] = {}  # a word as written -> its index form (surface_words)


def _norm_token(token: str) -> str:
    """The token's index form, or "" when it is not indexed (cached: the vocabulary is small)."""
    norm = _TOKEN_NORMS.get(token)
    if norm is None:
        keep = 2 <= len(token) <= MAX_TERM_CHARS and token not in STOP_WORDS
        norm = normalize_word(token) if keep else ""
        if len(_TOKEN_NORMS) < 2_000_000:
            _TOKEN_NORMS[token] = norm
    return norm


def words(text: str) -> list[str]:
    """The normalized content words of ``text``, in order (stop words and 1-char tokens dropped)."""
    tokens = _WORD.findall(fold(text))
    norms = list(map(_TOKEN_NORMS.get, tokens))  # cached forms, in C; new tokens below
    if None in norms:
        norms = [_norm_token(t) if n is None else n for t, n in zip(tokens, norms, strict=True)]
    return list(filter(None, norms))


#: Between two texts of a batch (``joined_tokens``), spaces around it: a token of its own,
#: not a word character, untouched by ``fold``, and never in a stored text (ingest drops
#: control characters; a batch holding one anyway is not taken).
SEPARATOR = "\x00"
_BYTES_SEPARATOR = SEPARATOR.encode()
_JOIN = f" {SEPARATOR} "
_WORD_OR_SEPARATOR = re.compile(r"[^\W_]+|\x00", re.UNICODE)
_LATEX_COMMAND = re.compile(rb"\\([a-zA-Z]+)")
_LATEX_MARKS = b"$\\{}^_~"
# ASCII bytes -> their folded form: letters lowercased, letters, digits and the separator
# kept, everything else a space, so ``bytes.split`` gives ``_WORD``'s tokens.
_ASCII_WORDS = bytes(
    c + 32 if 65 <= c <= 90 else c if c == 0 or 97 <= c <= 122 or 48 <= c <= 57 else 32
    for c in range(256)
)


def joined_tokens(texts: list[str]) -> bytes | None:
    """The raw tokens of every text (before ``norm_token``), as UTF-8 bytes between spaces
    (one or more; no other byte is between two tokens, so a build finds them with numpy,
    no object a token), ``SEPARATOR`` between two texts.

    Each text's tokens are exactly ``_WORD.findall(fold(text))``, found for a batch at once
    (a full build tokenises 260,000 texts at 87k papers): the texts joined, as UTF-8 bytes,
    mapped by one ``bytes.translate`` (5x faster than the regex), bytes above ASCII kept as
    word bytes; then each run of them and the word bytes around it (a word with a letter
    that is not ASCII, a few per text) is folded on its own (``_folded_runs``). Folding and
    splitting act on a character with its neighbours within a word only, so neither a
    text's tokens nor a word's depend on what sits beside them, except for lowercasing a
    capital sigma, which looks past the next non-letter: a text holding one is folded whole
    (``_folded_whole``). None when a text holds the separator itself.
    """
    joined = _JOIN.join(texts)
    if joined.count(SEPARATOR) != max(len(texts) - 1, 0):
        return None
    return _folded_whole(texts) if _CAPITAL_SIGMA in joined else _word_bytes(joined)


def _word_bytes(joined: str) -> bytes:
    """``joined_tokens`` of joined texts without a capital sigma."""
    data = _translated(joined.encode())
    return data if joined.isascii() else _folded_runs(data)


def _translated(data: bytes) -> bytes:
    """UTF-8 text mapped by ``_WORD_BYTES``, LaTeX marks dropped, a command's name kept."""
    if b"\\" in data:  # commands first: a backslash before letters is one (see _LATEX)
        data = _LATEX_COMMAND.sub(rb" \1 ", data)
    return data.translate(_WORD_BYTES, _LATEX_MARKS)


_CAPITAL_SIGMA = "\u03a3"
# ``_ASCII_WORDS`` with the bytes of characters beyond ASCII kept (``_folded_runs`` folds them).
_WORD_BYTES = _ASCII_WORDS[:128] + bytes(range(128, 256))
_FOLDED_RUNS: dict[bytes, bytes] = {}


def _folded_runs(data: bytes) -> bytes:
    """Translated ``data`` with each word holding bytes beyond ASCII replaced by its folded
    tokens (``_WORD.findall(fold(word))``, as UTF-8, between spaces). Words are between
    spaces, the only separator left, whose bytes no multi-byte character holds; the bytes
    beyond ASCII are found by numpy (a regex scan took as long as the rest of the batch)."""
    import numpy as np  # here: text is imported where numpy is not needed

    high = np.flatnonzero(np.frombuffer(data, dtype=np.uint8) >= 0x80)
    pieces = []
    done = 0
    for start in high[np.diff(high, prepend=-2) > 1].tolist():  # each run's first byte
        if start < done:  # in the word just folded
            continue
        end = data.find(b" ", start)
        start = data.rfind(b" ", done, start) + 1
        end = len(data) if end < 0 else end
        word = data[start:end]
        folded = _FOLDED_RUNS.get(word)
        if folded is None:
            folded = " ".join(_WORD.findall(fold(word.decode()))).encode()
            if len(_FOLDED_RUNS) < 200_000:
                _FOLDED_RUNS[word] = folded
        pieces += (data[done:start], folded)
        done = end
    pieces.append(data[done:])
    return b"".join(pieces)


def _folded_whole(texts: list[str]) -> bytes:
    """``joined_tokens`` of a batch holding a capital sigma: the texts holding one joined,
    folded and split by one regex pass, the others as any batch's; each text's tokens then
    put back in its place (spaces around each separator: a text's first or last token
    stays apart)."""
    whole = [_CAPITAL_SIGMA in text for text in texts]
    sigma = _JOIN.join(text for text, w in zip(texts, whole, strict=True) if w)
    others = _JOIN.join(text for text, w in zip(texts, whole, strict=True) if not w)
    per_text = [
        iter(_word_bytes(others).split(_BYTES_SEPARATOR)),
        iter(" ".join(_WORD_OR_SEPARATOR.findall(fold(sigma))).encode().split(_BYTES_SEPARATOR)),
    ]
    return _JOIN.encode().join(next(per_text[w]) for w in whole)


def norm_token(token: str) -> str:
    """A raw token's index form, or "" when it is not indexed (a stop word, too short or long)."""
    norm = _TOKEN_NORMS.get(token)
    return _norm_token(token) if norm is None else norm


def analyze(text: str) -> list[str]:
    """Unigrams and bigrams of the content words: the index's and the query's terms."""
    unigrams = words(text)
    return unigrams + [f"{a} {b}" for a, b in zip(unigrams, unigrams[1:], strict=False)]


def surface_words(text: str) -> list[tuple[int, int, str]]:
    """(start, end, normalized) for each word of the original text, for marking snippets.

    Works on the original string (not the folded one) so offsets stay valid; a word whose
    normalized form is a stop word comes back with an empty normalized form. One ``split``
    gives the words and the gaps between them, whose lengths summed give the offsets; the
    words' forms are looked up in one ``map`` (an ASCII text, most abstracts, is split by a
    plain ``[A-Za-z0-9]`` pattern: the same words, in two thirds of the time).
    """
    pieces = (_ASCII_WORD_SPLIT if text.isascii() else _WORD_SPLIT).split(text)
    offsets = list(itertools.accumulate(map(len, pieces)))
    found = pieces[1::2]
    norms = list(map(_SURFACE_NORMS.get, found))
    if None in norms:  # folding one word depends on that word only: cached like _TOKEN_NORMS
        for k, (word, norm) in enumerate(zip(found, norms, strict=True)):
            if norm is None:
                norm = norms[k] = _norm_token(fold(word))
                if len(_SURFACE_NORMS) < 2_000_000:
                    _SURFACE_NORMS[word] = norm
    return list(zip(offsets[0::2], offsets[1::2], norms, strict=False))  # (one gap more)


#: ``_WORD`` kept as pieces by ``split`` (words at odd positions); for an ASCII text the same
#: words are its runs of ASCII letters and digits.
_WORD_SPLIT = re.compile(r"([^\W_]+)", re.UNICODE)
_ASCII_WORD_SPLIT = re.compile(r"([A-Za-z0-9]+)")


def name_tokens(name: str) -> list[str]:
    """An author name as whole, folded tokens: ``"José  O'Brien"`` -> ``["jose", "o", "brien"]``.

    Case and accents folded (NFKD, combining marks dropped), every run of letters and digits
    a token, everything else (punctuation, ``%``, ``_``) a separator: what ``author:`` compares.
    """
    text = name
    if not text.isascii():  # (``translate`` only changes letters that are not ASCII)
        text = _UNDECOMPOSABLE_CHARS.sub(_undecomposed, text)
        text = "".join(
            c for c in unicodedata.normalize("NFKD", text) if not unicodedata.combining(c)
        )
    return _WORD.findall(text.casefold())


#: ``_ASCII_WORDS`` with the names' separator (NUL) turned into a bar, itself a word byte.
_AUTHOR_BYTES = _ASCII_WORDS.replace(b"\x00", b"|")


def authors_key(authors: list[str]) -> str:
    """The authors as stored for ``author:``: ``"| ada lovelace | jose garcia |"``.

    Each name's tokens between spaces, names between bars, so ``LIKE '% li %'`` finds a whole
    token in SQL (tokens never hold ``%``, ``_``, a space or a bar) and a split on ``|``
    gives the names back for the per-author check.
    """
    joined = "\x00".join(authors)
    if joined.isascii() and joined.count("\x00") == len(authors) - 1:
        # All the names at once, in a few C passes: ASCII folds by ``_AUTHOR_BYTES``
        # (lowercase, letters and digits kept, the names' NULs bars, the rest a space), each
        # bar made a word and the words joined by single spaces; the bars of empty names
        # (two in a row) are merged and those at the ends dropped.
        names = joined.encode().translate(_AUTHOR_BYTES).replace(b"|", b" | ")
        names = b" ".join(names.split())
        while b"| |" in names:
            names = names.replace(b"| |", b"|")
        names = names.strip(b"| ").decode()
        return f"| {names} |" if names else "||"
    names = (" ".join(name_tokens(name)) for name in authors)
    return "|" + "|".join(f" {name} " for name in names if name) + "|"


def author_matches(tokens: list[str], key: str) -> bool:
    """Whether one author in ``key`` (see ``authors_key``) has every one of ``tokens``."""
    wanted = set(tokens)
    return any(wanted <= set(name.split()) for name in key.split("|"))

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
_WORD = re.compile(r"[^\W_]+", re.UNICODE)


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
        text = _strip_combining(unicodedata.normalize("NFKD", text.translate(_UNDECOMPOSABLE)))
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


def analyze(text: str) -> list[str]:
    """Unigrams and bigrams of the content words: the index's and the query's terms."""
    unigrams = words(text)
    return unigrams + [f"{a} {b}" for a, b in zip(unigrams, unigrams[1:], strict=False)]


def surface_words(text: str) -> list[tuple[int, int, str]]:
    """(start, end, normalized) for each word of the original text, for marking snippets.

    Works on the original string (not the folded one) so offsets stay valid; a word whose
    normalized form is a stop word comes back with an empty normalized form.
    """
    out = []
    get = _SURFACE_NORMS.get
    for match in _WORD.finditer(text):
        word = match.group()
        norm = get(word)
        if norm is None:  # folding one word depends on that word only: cached like _TOKEN_NORMS
            norm = _norm_token(fold(word))
            if len(_SURFACE_NORMS) < 2_000_000:
                _SURFACE_NORMS[word] = norm
        out.append((match.start(), match.end(), norm))
    return out


def name_tokens(name: str) -> list[str]:
    """An author name as whole, folded tokens: ``"José  O'Brien"`` -> ``["jose", "o", "brien"]``.

    Case and accents folded (NFKD, combining marks dropped), every run of letters and digits
    a token, everything else (punctuation, ``%``, ``_``) a separator: what ``author:`` compares.
    """
    text = name.translate(_UNDECOMPOSABLE)
    if not text.isascii():
        text = "".join(
            c for c in unicodedata.normalize("NFKD", text) if not unicodedata.combining(c)
        )
    return _WORD.findall(text.casefold())


def authors_key(authors: list[str]) -> str:
    """The authors as stored for ``author:``: ``"| ada lovelace | jose garcia |"``.

    Each name's tokens between spaces, names between bars, so ``LIKE '% li %'`` finds a whole
    token in SQL (tokens never hold ``%``, ``_``, a space or a bar) and a split on ``|``
    gives the names back for the per-author check.
    """
    names = (" ".join(name_tokens(name)) for name in authors)
    return "|" + "|".join(f" {name} " for name in names if name) + "|"


def author_matches(tokens: list[str], key: str) -> bool:
    """Whether one author in ``key`` (see ``authors_key``) has every one of ``tokens``."""
    wanted = set(tokens)
    return any(wanted <= set(name.split()) for name in key.split("|"))

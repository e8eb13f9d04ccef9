"""A full build tokenises its texts in batches (``joined_tokens``: joined as bytes, the words
that are not ASCII folded one by one, a text with a capital sigma folded whole); every text
must get exactly the terms ``words`` gives it alone, whatever texts sit beside it."""

import itertools

import numpy as np

from bot.engine import index as index_module
from bot.engine.text import _WORD, SEPARATOR, fold, joined_tokens, norm_token, words

TRICKY = [
    "generalized $(L_0,L_1)$-smoothness of \\alpha-divergences",
    "Polyak-Łojasiewicz condition, Straße, Ørsted, Đorđe",
    "ΟΔΟΣ ΣΑΣ Σ",  # Greek capital sigma: lowercased to a final sigma at a word's end only
    "İstanbul İ",
    "naïve café, Schrödinger",
    "e\u0301t\u0301e\u0301",  # combining marks written apart
    "\u0301starts with a combining mark",
    "ends with a backslash \\",
    "\\\\double backslash\\beta and \\frac{a}{b} x_i^2 ~ y",
    "fullwidth ＄money＄ and ｆｕｌｌ letters",
    "",
    "   ",
    "CJK 中文 text and Ελληνικά",
    "tabs\tand\nnewlines\r\nand\x0bvertical",
    "under_score snake_case_name",
    "It’s “quoted” — dashes – and … ellipses",
    "ALL CAPS TITLE: A STUDY OF NETWORKS",
    "x" * 40 + " long tokens " + "y" * 33,
    "the of and a an",  # stop words only
]


def tokens_of_many(texts: list[str]) -> list[bytes] | None:
    """The batch's raw tokens as one list (``joined_tokens`` split, as a build reads them)."""
    data = joined_tokens(texts)
    return None if data is None else data.split()


def _per_text(tokens: list) -> list[list[str]]:
    """``tokens_of_many``'s flat list cut back into each text's raw tokens (as str)."""
    out: list[list[str]] = [[]]
    for token in tokens:
        token = token if isinstance(token, str) else token.decode()
        if token == SEPARATOR:
            out.append([])
        else:
            out[-1].append(token)
    return out


def test_each_text_gets_the_tokens_it_gets_alone_whatever_its_neighbours():
    for size in (1, 2, 3, len(TRICKY)):
        for start in range(len(TRICKY)):
            texts = (TRICKY[start:] + TRICKY[:start])[:size]
            got = _per_text(tokens_of_many(texts))
            assert got == [_WORD.findall(fold(text)) for text in texts], texts
    for texts in itertools.permutations(TRICKY[:5]):
        got = _per_text(tokens_of_many(list(texts)))
        assert [[norm_token(t) for t in g if norm_token(t)] for g in got] == [
            words(t) for t in texts
        ]


def test_only_ascii_and_only_other_texts():
    ascii_only = [t for t in TRICKY if t.isascii()]
    others = [t for t in TRICKY if not t.isascii()]
    assert _per_text(tokens_of_many(ascii_only)) == [_WORD.findall(fold(t)) for t in ascii_only]
    assert _per_text(tokens_of_many(others)) == [_WORD.findall(fold(t)) for t in others]
    accents = ["café", "naïve"]  # ASCII once folded
    assert _per_text(tokens_of_many(accents)) == [["cafe"], ["naive"]]


def test_a_text_holding_the_separator_is_not_batched():
    assert tokens_of_many(["fine", f"a{SEPARATOR}b"]) is None


def test_the_build_tokeniser_gives_each_field_the_words_of_its_text(monkeypatch):
    docs = []
    for k, text in enumerate(TRICKY * 3):
        docs.append(
            (
                k + 1,
                {
                    "title": TRICKY[(k * 7) % len(TRICKY)],
                    "abstract": text,
                    "authors": ["José García", "Ada Lovelace"] if k % 2 else [],
                    "keywords": ["Ørsted", "self-attention"] if k % 3 else [],
                    "venue": "V",
                    "year": 2024,
                    "added_at": None,
                },
            )
        )
    docs.append((len(docs) + 1, {**docs[0][1], "abstract": f"null{SEPARATOR}byte"}))
    monkeypatch.setattr(index_module, "TOKENISE_BATCH", 7)
    for remembered in (index_module._KNOWN_TOKENS, 0):  # 0: every token looked up again
        monkeypatch.setattr(index_module, "_KNOWN_TOKENS", remembered)
        _check_fields(index_module._tokenise(docs), docs)


def _check_fields(tokens, docs):
    vocabulary = list(tokens.unigram_ids)
    texts = [
        lambda d: d["title"],
        lambda d: " ; ".join(d["keywords"]),
        lambda d: f"{d['abstract']}\n{' ; '.join(d['authors'])}",
    ]
    for text_field, text_of in zip(tokens.fields, texts, strict=True):
        offsets = np.frombuffer(text_field.offsets, dtype=np.int64)
        ids = np.frombuffer(text_field.ids, dtype=np.int32)
        assert len(offsets) == len(docs) + 1
        for i, (_, doc) in enumerate(docs):
            got = [vocabulary[j] for j in ids[offsets[i] : offsets[i + 1]]]
            assert got == words(text_of(doc)), (i, text_of(doc))


def test_only_a_batch_with_a_capital_sigma_is_folded_whole(monkeypatch):
    """Other batches fold only their words that are not ASCII, each on its own, and still
    get every text's own tokens (the same words repeated: the folded words' cache)."""
    import bot.engine.text as text_module

    def whole(texts):
        raise AssertionError("folded whole")

    without_sigma = [t for t in TRICKY if "\u03a3" not in t]
    monkeypatch.setattr(text_module, "_folded_whole", whole)
    for size in (1, 2, len(without_sigma)):
        for start in range(len(without_sigma)):
            texts = (without_sigma[start:] + without_sigma[:start])[:size] * 2
            got = _per_text(tokens_of_many(texts))
            assert got == [_WORD.findall(fold(text)) for text in texts], texts
    monkeypatch.undo()
    sigma = ["ΑΣ'Β", "ΟΔΟΣ."]
    assert _per_text(tokens_of_many(sigma)) == [_WORD.findall(fold(t)) for t in sigma]


def test_tokens_are_known_by_all_their_bytes_whatever_their_slot(monkeypatch):
    """The build's cache of raw tokens (``index._KnownTokens``) keys a token by its first 16
    bytes: tokens sharing 8 or 16 of them, one longer than 16 and ones ending where a
    second 8 bytes start get their own terms, also when every key lands in one slot (each
    found by looking further) and as the table grows."""
    stems = ["abcdefgh", "abcdefghijklmnop"]
    texts = [
        " ".join(f"{stem}{tail}" for stem in stems for tail in ("", "q", "qr", "s" * 9))
        + " abcdefg abcdefghijklmno x y é",
        "abcdefghijklmnopq abcdefghijklmnop abcdefgh abcdefghq",
        " ".join(f"word{k}" for k in range(300)),
    ]
    docs = [
        (
            k,
            {
                "title": t,
                "abstract": t[::-1],
                "authors": [],
                "keywords": [t],
                "venue": "",
                "year": 1,
            },
        )
        for k, t in enumerate(texts * 3)
    ]
    monkeypatch.setattr(index_module, "TOKENISE_BATCH", 2)
    _check_fields(index_module._tokenise(docs), docs)
    monkeypatch.setattr(index_module._KnownTokens, "FIRST_SLOTS", 2)  # grows from 2 slots
    _check_fields(index_module._tokenise(docs), docs)
    one_slot = lambda self, keys: np.zeros(keys.shape[1], dtype=np.intp)  # noqa: E731
    monkeypatch.setattr(index_module._KnownTokens, "_slots", one_slot)
    _check_fields(index_module._tokenise(docs), docs)


def test_the_token_cache_finds_every_key_it_holds(monkeypatch):
    """``_KnownTokens.ids``: a held key's id wherever linear probing put it (all keys in one
    slot; grown from 2 slots), ``_NEW`` for a key not held."""
    monkeypatch.setattr(index_module._KnownTokens, "FIRST_SLOTS", 2)
    for slots in (None, lambda self, keys: np.zeros(keys.shape[1], dtype=np.intp)):
        if slots is not None:
            monkeypatch.setattr(index_module._KnownTokens, "_slots", slots)
        known = index_module._known_tokens()
        keys = np.array([[k % 7 + 1 for k in range(50)], [k // 7 for k in range(50)]], np.uint64)
        known.add(keys[:, :20], np.arange(20, dtype=np.int32))
        known.add(keys[:, 20:40], np.arange(20, 40, dtype=np.int32))
        got = known.ids(keys)
        assert got.tolist() == list(range(40)) + [index_module._NEW] * 10
        assert known.ids(np.zeros((2, 1), np.uint64)).tolist() == [index_module._SEPARATED]
